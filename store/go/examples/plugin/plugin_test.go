package plugin_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"claimstore.dev/claimstore"
	"claimstore.dev/claimstore/examples/plugin"
)

func claimJSON(name string) []byte {
	return []byte(`{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"` + name +
		`","namespace":"ns","uid":"uid-` + name + `"},"status":{}}`)
}

func device(name string) claimstore.DeviceResult {
	return claimstore.DeviceResult{Request: "req", Driver: "gpu.example.com", Pool: "node-1", Device: name}
}

// Eight schedulers schedule eight pods, each with its own claim, onto a node
// with four GPUs, all preferring gpu-0. Their first cycles all read the
// state before any binds (a barrier before PreBind), so all pick gpu-0 and
// exactly one wins it; the seven others are requeued. Every cycle either binds or is
// requeued, no device is allocated twice, a requeued cycle leaves nothing
// behind, and after retries four pods hold the four GPUs and the other four
// are unschedulable.
func TestSchedulersRaceThroughThePlugin(t *testing.T) {
	store, err := claimstore.Open(ctx, filepath.Join(t.TempDir(), "db"), claimstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p := &plugin.Plugin{Store: store, NodeName: "node-1"}
	const pods = 8
	for i := 0; i < pods; i++ {
		if _, err := store.PutJSON(ctx, claimJSON("claim-"+strconv.Itoa(i)), claimstore.Preconditions{}); err != nil {
			t.Fatal(err)
		}
	}
	gpus := []claimstore.DeviceResult{device("gpu-0"), device("gpu-1"), device("gpu-2"), device("gpu-3")}

	var wg sync.WaitGroup
	var filtered sync.WaitGroup // the first cycles' barrier before PreBind
	filtered.Add(pods)
	var mu sync.Mutex
	bound, unschedulable, requeues := 0, 0, 0
	for i := 0; i < pods; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			pod := claimstore.Consumer{Resource: "pods", Name: "pod-" + strconv.Itoa(i), UID: "pod-uid-" + strconv.Itoa(i)}
			key := claimstore.Key{Namespace: "ns", Name: "claim-" + strconv.Itoa(i)}
			var passed sync.Once // the barrier, once, however the first cycle ends
			defer passed.Do(filtered.Done)
			for attempt := 0; ; attempt++ {
				st, err := p.PreFilter(pod, []claimstore.Key{key})
				if err != nil {
					t.Error(err)
					return
				}
				if err := p.Filter(st, map[claimstore.Key][]claimstore.DeviceResult{key: gpus}); err != nil {
					if attempt == 0 || !errors.Is(err, plugin.ErrUnschedulable) {
						t.Error(err)
					}
					p.Unreserve(ctx, st)
					mu.Lock()
					unschedulable++
					mu.Unlock()
					return
				}
				if attempt == 0 {
					passed.Do(filtered.Done)
					filtered.Wait()
				}
				err = p.PreBind(ctx, st)
				if err == nil {
					mu.Lock()
					bound++
					mu.Unlock()
					return
				}
				if !errors.Is(err, plugin.ErrRequeue) || !errors.Is(err, claimstore.ErrConflict) {
					t.Errorf("PreBind: %v", err)
					return
				}
				// The requeued cycle left the claim as it was.
				c, _ := store.Get(key)
				if c.Allocation() != nil || len(c.ReservedFor()) != 0 {
					t.Errorf("a requeued cycle left %v allocated or reserved", key)
				}
				mu.Lock()
				requeues++
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	if bound != 4 || unschedulable != 4 || requeues < pods-1 {
		t.Fatalf("bound %d, unschedulable %d (requeues %d)", bound, unschedulable, requeues)
	}
	state, err := store.AllocatedDevices()
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	for _, g := range gpus {
		d, ok := state.Find(g.Driver, g.Pool, g.Device)
		if !ok || d.Exclusive == nil {
			t.Errorf("%s is not held", g.Device)
			continue
		}
		c, _ := store.Get(*d.Exclusive)
		if rs := c.ReservedFor(); len(rs) != 1 || rs[0].UID == "" {
			t.Errorf("%s's claim %v is reserved for %v", g.Device, *d.Exclusive, rs)
		}
	}
	if report, err := store.Verify(false); err != nil || len(report.Problems) != 0 {
		t.Errorf("Verify: %+v %v", report, err)
	}
	t.Logf("4 bound, 4 unschedulable, %d requeues", requeues)
}
