package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
)

type stubSlices struct{ slices []*resourcev1.ResourceSlice }

func (s *stubSlices) ListWithDeviceTaintRules() ([]*resourcev1.ResourceSlice, error) {
	return s.slices, nil
}

func sliceOf(name string, devices int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("d%d", i)})
	}
	return s
}

func deviceNames(s *resourcev1.ResourceSlice) string {
	var names []string
	for _, d := range s.Spec.Devices {
		names = append(names, d.Name)
	}
	return strings.Join(names, ",")
}

// Each shard lists a slice's devices from its part on, wrapping around;
// the informer's slice is not changed, and a slice's copy is made once.
func TestRotatedSlices(t *testing.T) {
	src := &stubSlices{slices: []*resourcev1.ResourceSlice{sliceOf("a", 4), sliceOf("b", 1)}}
	for shard, want := range []string{"d0,d1,d2,d3", "d2,d3,d0,d1"} {
		r := &rotatedSlices{ResourceSliceLister: src, shard: shard, shards: 2, copies: map[*resourcev1.ResourceSlice]*resourcev1.ResourceSlice{}}
		var lister fwk.ResourceSliceLister = r
		first, err := lister.ListWithDeviceTaintRules()
		if err != nil {
			t.Fatal(err)
		}
		if got := deviceNames(first[0]); got != want {
			t.Errorf("shard %d of 2: %s, want %s", shard, got, want)
		}
		if got := deviceNames(first[1]); got != "d0" {
			t.Errorf("shard %d of 2, one device: %s", shard, got)
		}
		again, _ := lister.ListWithDeviceTaintRules()
		if !slices.Equal(first, again) {
			t.Errorf("shard %d: a second list made new copies", shard)
		}
	}
	if got := deviceNames(src.slices[0]); got != "d0,d1,d2,d3" {
		t.Fatalf("the informer's slice changed: %s", got)
	}
}

// ledgerShard must be within ledgerShards.
func TestLedgerShardArgs(t *testing.T) {
	for _, raw := range []string{`{"directory":"x","ledgerShard":2,"ledgerShards":2}`, `{"directory":"x","ledgerShard":1}`,
		`{"directory":"x","ledgerShards":-1}`} {
		if _, err := decodeArgs(&runtime.Unknown{Raw: []byte(raw)}); err == nil || !strings.Contains(err.Error(), "args.ledgerShard") {
			t.Errorf("%s: %v, want an error naming args.ledgerShard", raw, err)
		}
	}
	if _, err := decodeArgs(&runtime.Unknown{Raw: []byte(`{"directory":"x","ledgerShard":1,"ledgerShards":2}`)}); err != nil {
		t.Fatal(err)
	}
}
