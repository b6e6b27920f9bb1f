package claimstore_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"claimstore.dev/claimstore"
)

// sameClaim fails unless a and b read the same claim, field by field.
func sameClaim(t *testing.T, what string, a, b *claimstore.Claim) {
	t.Helper()
	if !reflect.DeepEqual(a.Bytes(), b.Bytes()) {
		t.Errorf("%s: record bytes differ", what)
	}
	if a.Key() != b.Key() || a.UID() != b.UID() || a.ModRevision() != b.ModRevision() ||
		!reflect.DeepEqual(a.Allocation(), b.Allocation()) || !reflect.DeepEqual(a.ReservedFor(), b.ReservedFor()) ||
		!reflect.DeepEqual(a.DeviceStatuses(), b.DeviceStatuses()) || !reflect.DeepEqual(a.SpecRequests(), b.SpecRequests()) {
		t.Errorf("%s: %v and %v read differently", what, a.Key(), b.Key())
	}
}

// GetView reads what Get reads, byte for byte (the accessors are Claim's),
// for claims larger than any buffer the views had (each read into a
// buffer of its size) and smaller ones after them.
func TestGetViewReadsWhatGetReads(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	var keys []claimstore.Key
	// About 0.4, 4, 70 (over what a released view keeps) and 0.4 KiB.
	for i, pods := range []int{1, 40, 256, 2} {
		prefix := "pod-"
		if pods == 256 {
			prefix = strings.Repeat("p", 220) + "-"
		}
		var rs []string
		for p := 0; p < pods; p++ {
			rs = append(rs, `{"resource":"pods","name":"`+prefix+strconv.Itoa(p)+`","uid":"uid-`+strconv.Itoa(i)+`-`+strconv.Itoa(p)+`"}`)
		}
		name := "c" + strconv.Itoa(i)
		put(t, s, "ns", name, `{"allocation":{"devices":{"results":[{"request":"req","driver":"`+driver+
			`","pool":"`+pool+`","device":"`+name+`"}]}},"reservedFor":[`+strings.Join(rs, ",")+`]}`)
		keys = append(keys, claimstore.Key{Namespace: "ns", Name: name})
	}
	for round := 0; round < 2; round++ {
		for _, k := range keys {
			c, err := s.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			v, err := s.GetView(k)
			if err != nil {
				t.Fatalf("GetView(%v): %v", k, err)
			}
			sameClaim(t, "GetView "+k.Name, &v.Claim, c)
			if round == 0 {
				t.Logf("%s: %d bytes", k.Name, len(v.Bytes()))
			}
			kept := v.Clone()
			v.Release()
			sameClaim(t, "Clone "+k.Name, kept, c)
		}
	}
}

// What a view read stays its own until Release, whatever other views read
// meanwhile; a clone stays valid after it.
func TestClaimViewIsItsOwnUntilRelease(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	put(t, s, "ns", "a", allocatedJSON("gpu-a"))
	put(t, s, "ns", "b", allocatedJSON("gpu-b"))
	a, err := s.GetView(claimstore.Key{Namespace: "ns", Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	device := a.ResultAt(0).Device
	kept := a.Clone()
	for i := 0; i < 100; i++ { // views taken and released while a is held
		b, err := s.GetView(claimstore.Key{Namespace: "ns", Name: "b"})
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	if device != "gpu-a" || a.Name() != "a" {
		t.Fatalf("a view held reads %s %s, want a gpu-a", a.Name(), device)
	}
	a.Release()
	for i := 0; i < 100; i++ {
		b, _ := s.GetView(claimstore.Key{Namespace: "ns", Name: "b"})
		b.Release()
	}
	if kept.Name() != "a" || kept.ResultAt(0).Device != "gpu-a" {
		t.Fatalf("the clone reads %s %s after Release, want a gpu-a", kept.Name(), kept.ResultAt(0).Device)
	}
}

func TestGetViewErrors(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	if _, err := s.GetView(claimstore.Key{Namespace: "ns", Name: "none"}); !errors.Is(err, claimstore.ErrNotFound) {
		t.Fatalf("GetView of a missing claim: %v, want ErrNotFound", err)
	}
	put(t, s, "ns", "a", "{}")
	v, err := s.GetView(claimstore.Key{Namespace: "ns", Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	v.Release()
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "released twice") {
				t.Errorf("a second Release: recovered %v, want a panic saying released twice", r)
			}
		}()
		v.Release()
	}()
	s.Close()
	if _, err := s.GetView(claimstore.Key{Namespace: "ns", Name: "a"}); !errors.Is(err, claimstore.ErrClosed) {
		t.Fatalf("GetView on a closed store: %v, want ErrClosed", err)
	}
}

// Once views have been released, GetView and Release allocate nothing.
func TestGetViewDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	s, _ := open(t, claimstore.Options{})
	put(t, s, "ns", "a", allocatedJSON("gpu-a"))
	k := claimstore.Key{Namespace: "ns", Name: "a"}
	n := 0
	allocs := testing.AllocsPerRun(1000, func() {
		v, err := s.GetView(k)
		if err != nil {
			t.Fatal(err)
		}
		n += len(v.ResultAt(0).Device) + len(v.Name())
		v.Release()
	})
	if allocs != 0 {
		t.Fatalf("GetView + Release: %v allocations, want 0", allocs)
	}
	if n != 1001*len("gpu-a"+"a") {
		t.Fatalf("read %d bytes of names, want %d", n, 1001*len("gpu-a"+"a"))
	}
}

// Views read by goroutines at once, while the claims are rewritten, each
// read a whole claim of the key asked for.
func TestGetViewConcurrentWithWrites(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	const claims = 8
	for i := 0; i < claims; i++ {
		put(t, s, "ns", "c"+strconv.Itoa(i), allocatedJSON("gpu-"+strconv.Itoa(i)))
	}
	errs := make(chan string, 8)
	stop := make(chan struct{})
	var writer, readers sync.WaitGroup
	writer.Go(func() {
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			i := round % claims
			status := `{"allocation":{"devices":{"results":[{"request":"req","driver":"` + driver + `","pool":"` + pool +
				`","device":"gpu-` + strconv.Itoa(i) + `"}]}},"reservedFor":[{"resource":"pods","name":"p","uid":"u-` +
				strconv.Itoa(round) + `"}]}`
			if _, err := s.PutJSON(ctx, claimJSON("ns", "c"+strconv.Itoa(i), status), claimstore.Preconditions{}); err != nil {
				errs <- err.Error()
				return
			}
		}
	})
	for g := 0; g < 4; g++ {
		readers.Go(func() {
			for r := 0; r < 2000; r++ {
				i := (r + g) % claims
				v, err := s.GetView(claimstore.Key{Namespace: "ns", Name: "c" + strconv.Itoa(i)})
				if err != nil {
					errs <- err.Error()
					return
				}
				if v.Name() != "c"+strconv.Itoa(i) || v.ResultAt(0).Device != "gpu-"+strconv.Itoa(i) {
					errs <- "view of c" + strconv.Itoa(i) + " reads " + v.Name() + " " + v.ResultAt(0).Device
				}
				v.Release()
			}
		})
	}
	readers.Wait()
	close(stop)
	writer.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
