package k8s

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"claimstore.dev/claimstore"
)

const (
	claimUID      = types.UID("claim-uid-1")
	otherClaimUID = types.UID("claim-uid-2")
)

func openStore(t testing.TB) *claimstore.Store {
	t.Helper()
	s, err := claimstore.Open(ctx, t.TempDir(), claimstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newTracker(t testing.TB, consumable bool) *Tracker {
	t.Helper()
	return NewTracker(openStore(t), TrackerOptions{ConsumableCapacity: consumable})
}

// pendingClaim is a claim with one request and no status, as a pod's
// template makes it.
func pendingClaim(name string, uid types.UID, rv string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid, ResourceVersion: rv},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "req-1", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "class"}}}}},
	}
}

type dev struct {
	device  string
	shareID string // "" : held whole
	admin   bool
	memory  string // consumed capacity "memory", when shared
}

// allocated returns claim allocated the devices, at resourceVersion rv.
func allocated(claim *resourcev1.ResourceClaim, rv string, devs ...dev) *resourcev1.ResourceClaim {
	c := claim.DeepCopy()
	c.ResourceVersion = rv
	a := &resourcev1.AllocationResult{}
	for _, d := range devs {
		r := resourcev1.DeviceRequestAllocationResult{Request: "req-1", Driver: "driver.example.com", Pool: "pool", Device: d.device}
		if d.admin {
			r.AdminAccess = ptr.To(true)
		}
		if d.shareID != "" {
			r.ShareID = ptr.To(types.UID(shareUID(d.shareID)))
			if d.memory != "" {
				r.ConsumedCapacity = map[resourcev1.QualifiedName]resourceQuantity{"memory": mustQuantity(d.memory)}
			}
		}
		a.Devices.Results = append(a.Devices.Results, r)
	}
	c.Status.Allocation = a
	return c
}

// shareUID makes a share ID (a UID in RFC 4122 form) from a short name.
func shareUID(name string) string {
	return fmt.Sprintf("%08x-0000-4000-8000-000000000000", crc32.ChecksumIEEE([]byte(name)))
}

func deviceID(device string) structured.DeviceID {
	return structured.MakeDeviceID("driver.example.com", "pool", device)
}

func devicesOf(t *testing.T, tr *Tracker) []string {
	t.Helper()
	s, err := tr.GatherAllocatedState()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for id := range s.AllocatedDevices {
		out = append(out, id.Device.String())
	}
	return sortStrings(out)
}

// Ported from kube-scheduler's dra_manager_test.go (v1.37.2),
// TestSignalClaimPendingAllocation, as black-box cases.
func TestSignalClaimPendingAllocation(t *testing.T) {
	pending := pendingClaim("my-pod-my-resource", claimUID, "1")
	alloc := allocated(pending, "2", dev{device: "instance-1"})
	alloc2 := allocated(pendingClaim("my-pod-my-resource-2", otherClaimUID, "1"), "2", dev{device: "instance-2"})
	special := alloc.DeepCopy()
	special.Name = extendedResourceClaimName

	t.Run("empty", func(t *testing.T) {
		tr := newTracker(t, false)
		tr.OnAdd(pending)
		if err := tr.SignalClaimPendingAllocation(claimUID, alloc); err != nil {
			t.Fatal(err)
		}
		if got := tr.GetPendingAllocation(claimUID); got != alloc.Status.Allocation {
			t.Fatalf("pending allocation %v, want the signalled one", got)
		}
		// One sharer: the first remove takes it away.
		if !tr.MaybeRemoveClaimPendingAllocation(claimUID, false) {
			t.Fatal("the only sharer's remove kept the allocation")
		}
	})
	t.Run("claim-already-allocated", func(t *testing.T) {
		tr := newTracker(t, false)
		tr.OnAdd(alloc)
		if err := tr.SignalClaimPendingAllocation(claimUID, alloc); err != nil {
			t.Fatal(err)
		}
		if got := tr.GetPendingAllocation(claimUID); got != nil {
			t.Fatalf("an allocated claim became pending: %v", got)
		}
	})
	t.Run("extended-resource-claim-not-in-cache", func(t *testing.T) {
		tr := newTracker(t, false)
		if err := tr.SignalClaimPendingAllocation(claimUID, special); err != nil {
			t.Fatal(err)
		}
		if tr.GetPendingAllocation(claimUID) == nil {
			t.Fatal("the extended-resource claim is not pending")
		}
	})
	t.Run("already-exists", func(t *testing.T) {
		tr := newTracker(t, false)
		tr.OnAdd(pending)
		for _, c := range []*resourcev1.ResourceClaim{alloc, alloc} {
			if err := tr.SignalClaimPendingAllocation(claimUID, c); err != nil {
				t.Fatal(err)
			}
		}
		// Two sharers: the first remove keeps it, the second takes it.
		if tr.MaybeRemoveClaimPendingAllocation(claimUID, false) {
			t.Fatal("removed with a sharer left")
		}
		if !tr.MaybeRemoveClaimPendingAllocation(claimUID, false) {
			t.Fatal("kept after the last sharer")
		}
	})
	t.Run("already-exists-ignores-different-claim-argument", func(t *testing.T) {
		tr := newTracker(t, false)
		tr.OnAdd(pending)
		if err := tr.SignalClaimPendingAllocation(claimUID, alloc); err != nil {
			t.Fatal(err)
		}
		if err := tr.SignalClaimPendingAllocation(claimUID, alloc2); err != nil {
			t.Fatal(err)
		}
		if got := tr.GetPendingAllocation(claimUID); got != alloc.Status.Allocation {
			t.Fatal("the second signal replaced the pending allocation")
		}
	})
	t.Run("unknown-claim", func(t *testing.T) {
		tr := newTracker(t, false)
		err := tr.SignalClaimPendingAllocation(claimUID, alloc)
		if !apierrors.IsNotFound(err) {
			t.Fatalf("signal for a claim the tracker does not have: %v, want NotFound", err)
		}
	})
}

// Ported from TestGetPendingAllocation and
// TestMaybeRemoveClaimPendingAllocation.
func TestPendingAllocationSharers(t *testing.T) {
	pending := pendingClaim("a", claimUID, "1")
	alloc := allocated(pending, "2", dev{device: "instance-1"})
	other := pendingClaim("b", otherClaimUID, "1")
	alloc2 := allocated(other, "2", dev{device: "instance-2"})
	setup := func(t *testing.T, sharers int) *Tracker {
		tr := newTracker(t, false)
		tr.OnAdd(pending)
		tr.OnAdd(other)
		for i := 0; i < sharers; i++ {
			if err := tr.SignalClaimPendingAllocation(claimUID, alloc); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 10; i++ {
			if err := tr.SignalClaimPendingAllocation(otherClaimUID, alloc2); err != nil {
				t.Fatal(err)
			}
		}
		return tr
	}
	t.Run("get-empty", func(t *testing.T) {
		if got := newTracker(t, false).GetPendingAllocation(claimUID); got != nil {
			t.Fatal(got)
		}
	})
	t.Run("remove-empty", func(t *testing.T) {
		if newTracker(t, false).MaybeRemoveClaimPendingAllocation(claimUID, true) {
			t.Fatal("removed an allocation that was not there")
		}
	})
	for _, tc := range []struct {
		name        string
		sharers     int
		force, gone bool
	}{
		{"delete-last-sharer", 1, false, true},
		{"force-delete-last-sharer", 1, true, true},
		{"decrement-remaining-sharers", 2, false, false},
		{"force-delete-remaining-sharers", 2, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := setup(t, tc.sharers)
			if got := tr.MaybeRemoveClaimPendingAllocation(claimUID, tc.force); got != tc.gone {
				t.Fatalf("deleted = %v, want %v", got, tc.gone)
			}
			if got := tr.GetPendingAllocation(claimUID) == nil; got != tc.gone {
				t.Fatalf("pending allocation gone = %v, want %v", got, tc.gone)
			}
			if tr.GetPendingAllocation(otherClaimUID) != alloc2.Status.Allocation {
				t.Fatal("the other claim's pending allocation changed")
			}
			want := []string{"instance-1", "instance-2"}
			if tc.gone {
				want = []string{"instance-2"}
			}
			if got := devicesOf(t, tr); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("allocated devices %v, want %v", got, want)
			}
		})
	}
}

// Assumed versions are in effect until the informer catches up or the
// scheduler restores; the allocated state follows at once.
func TestAssumeAndRestore(t *testing.T) {
	tr := newTracker(t, false)
	pending := pendingClaim("a", claimUID, "5")
	tr.OnAdd(pending)
	alloc := allocated(pending, "6", dev{device: "gpu-0"})
	if err := tr.AssumeClaimAfterAPICall(alloc); err != nil {
		t.Fatal(err)
	}
	if got, _ := tr.Get("default", "a"); got != alloc {
		t.Fatal("Get does not return the assumed claim")
	}
	if got := devicesOf(t, tr); len(got) != 1 || got[0] != "gpu-0" {
		t.Fatalf("allocated %v after assume", got)
	}
	// An informer version that is not newer leaves the assumed one.
	tr.OnAdd(pending)
	if got, _ := tr.Get("default", "a"); got != alloc {
		t.Fatal("an older informer version replaced the assumed claim")
	}
	tr.AssumedClaimRestore("default", "a")
	if got, _ := tr.Get("default", "a"); got != pending {
		t.Fatal("restore did not bring back the informer's version")
	}
	if got := devicesOf(t, tr); len(got) != 0 {
		t.Fatalf("allocated %v after restore", got)
	}
	// Assuming an older version than the one in effect is refused.
	old := allocated(pending, "4", dev{device: "gpu-0"})
	if err := tr.AssumeClaimAfterAPICall(old); err == nil || !strings.Contains(err.Error(), "out of sync") {
		t.Fatalf("assume of an older version: %v", err)
	}
	if err := tr.AssumeClaimAfterAPICall(pendingClaim("missing", "u", "1")); !apierrors.IsNotFound(err) {
		t.Fatalf("assume of a missing claim: %v", err)
	}
	if _, err := tr.Get("default", "missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing claim: %v", err)
	}
}

// Shares with consumed capacity (DRAConsumableCapacity on), admin access
// (never allocated), and the gate off (shares count as whole devices).
func TestSharedDevicesAndCapacity(t *testing.T) {
	a := allocated(pendingClaim("a", "uid-a", "1"), "2",
		dev{device: "nic-0", shareID: "s1", memory: "1Gi"}, dev{device: "gpu-0", admin: true})
	b := allocated(pendingClaim("b", "uid-b", "1"), "2", dev{device: "nic-0", shareID: "s2", memory: "2Gi"})

	tr := newTracker(t, true)
	tr.OnAdd(a)
	tr.OnAdd(b)
	s, _ := tr.GatherAllocatedState()
	if len(s.AllocatedDevices) != 0 {
		t.Fatalf("shares or admin access counted as whole devices: %v", s.AllocatedDevices)
	}
	if len(s.AllocatedSharedDeviceIDs) != 2 {
		t.Fatalf("shared IDs %v, want two", s.AllocatedSharedDeviceIDs)
	}
	if got := s.AggregatedCapacity[deviceID("nic-0")]["memory"]; got == nil || got.String() != "3Gi" {
		t.Fatalf("nic-0 consumed memory %v, want 3Gi", got)
	}
	tr.OnDelete(a)
	s2, _ := tr.GatherAllocatedState()
	if got := s2.AggregatedCapacity[deviceID("nic-0")]["memory"]; got == nil || got.String() != "2Gi" {
		t.Fatalf("nic-0 consumed memory %v after a's delete, want 2Gi", got)
	}
	if got := s.AggregatedCapacity[deviceID("nic-0")]["memory"]; got.String() != "3Gi" {
		t.Fatalf("a state handed out earlier changed to %v", got)
	}

	off := newTracker(t, false)
	off.OnAdd(a)
	off.OnAdd(b)
	if got := devicesOf(t, off); strings.Join(got, ",") != "nic-0" {
		t.Fatalf("gate off: allocated %v, want nic-0 whole", got)
	}
}

// The maps handed out are the same while nothing changed, and a new set
// after a change, without touching the old one.
func TestGatherAllocatedStateIsConstantWhileNothingChanged(t *testing.T) {
	tr := newTracker(t, false)
	tr.OnAdd(allocated(pendingClaim("a", "uid-a", "1"), "2", dev{device: "gpu-0"}))
	s1, _ := tr.GatherAllocatedState()
	s2, _ := tr.GatherAllocatedState()
	if s1 != s2 {
		t.Fatal("two calls with no change in between built two states")
	}
	l1, _ := tr.ListAllAllocatedDevices()
	l2, _ := tr.ListAllAllocatedDevices()
	if len(l1) != 1 || !sameSet(l1, l2) {
		t.Fatal("ListAllAllocatedDevices changed with nothing changed")
	}
	// A claim without an allocation changes nothing allocated.
	tr.OnAdd(pendingClaim("b", "uid-b", "3"))
	if s3, _ := tr.GatherAllocatedState(); s3 != s1 {
		t.Fatal("an unallocated claim rebuilt the state")
	}
	tr.OnAdd(allocated(pendingClaim("b", "uid-b", "3"), "4", dev{device: "gpu-1"}))
	s4, _ := tr.GatherAllocatedState()
	if s4 == s1 || len(s4.AllocatedDevices) != 2 || len(s1.AllocatedDevices) != 1 {
		t.Fatalf("after an allocation: new %v, old %v", s4.AllocatedDevices, s1.AllocatedDevices)
	}
}

// The informer's claims land in the store; one the store's validation
// refuses is reported with its field path and changes neither the store
// nor the tracker.
func TestInformerClaimsAreStoredAndBadOnesRefused(t *testing.T) {
	store := openStore(t)
	var refused []error
	tr := NewTracker(store, TrackerOptions{OnRefused: func(_ *resourcev1.ResourceClaim, err error) {
		refused = append(refused, err)
	}})
	good := allocated(pendingClaim("a", "uid-a", "1"), "2", dev{device: "gpu-0"})
	tr.OnAdd(good)
	rec, err := store.Get(claimstore.Key{Namespace: "default", Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if back.ResourceVersion != "2" || back.Status.Allocation == nil ||
		back.Status.Allocation.Devices.Results[0].Device != "gpu-0" {
		t.Fatalf("the store holds %+v", back.Status)
	}

	bad := good.DeepCopy()
	bad.ResourceVersion = "3"
	bad.Status.Allocation.Devices.Results[0].Request = "no-such-request"
	tr.OnAdd(bad)
	if len(refused) != 1 || !strings.Contains(refused[0].Error(), "status.allocation.devices.results[0].request") {
		t.Fatalf("refusals %v, want one naming status.allocation.devices.results[0].request", refused)
	}
	if !errors.Is(refused[0], claimstore.ErrInvalid) {
		t.Fatalf("refusal %v is not ErrInvalid", refused[0])
	}
	if tr.Refused() != 1 {
		t.Fatalf("Refused() = %d", tr.Refused())
	}
	if got, _ := tr.Get("default", "a"); got != good {
		t.Fatal("the refused version replaced the good one in the tracker")
	}
	rec2, _ := store.Get(claimstore.Key{Namespace: "default", Name: "a"})
	if rec2.ResourceVersion() != "2" {
		t.Fatalf("the store holds resourceVersion %s after a refused update", rec2.ResourceVersion())
	}

	// A second claim holding gpu-0 whole: a double allocation in the
	// cluster. Reported (naming the holder), counted, not stored.
	twin := allocated(pendingClaim("twin", "uid-twin", "1"), "5", dev{device: "gpu-0"})
	tr.OnAdd(twin)
	if len(refused) != 2 || !errors.Is(refused[1], claimstore.ErrConflict) ||
		!strings.Contains(refused[1].Error(), "default/a") {
		t.Fatalf("refusals %v, want a conflict naming default/a", refused)
	}
	if got, err := tr.Get("default", "twin"); err != nil || got != twin {
		t.Fatalf("the tracker left out a claim the cluster has: %v", err)
	}
	if _, err := store.Get(claimstore.Key{Namespace: "default", Name: "twin"}); !errors.Is(err, claimstore.ErrNotFound) {
		t.Fatalf("the store took a claim its device rule refuses: %v", err)
	}

	tr.OnDelete(good)
	if _, err := store.Get(claimstore.Key{Namespace: "default", Name: "a"}); !errors.Is(err, claimstore.ErrNotFound) {
		t.Fatalf("the store kept a deleted claim: %v", err)
	}
	if got := devicesOf(t, tr); len(got) != 1 || got[0] != "gpu-0" {
		t.Fatalf("after a's delete, allocated %v; twin still holds gpu-0", got)
	}
}

// Readers and writers at once (go test -race): every state handed out is
// one some moment had.
func TestTrackerConcurrentUse(t *testing.T) {
	tr := newTracker(t, true)
	const n = 200
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			name := "c" + itoa(i)
			c := allocated(pendingClaim(name, types.UID("uid-"+name), "1"), "2", dev{device: "d" + itoa(i)})
			tr.OnAdd(c)
			if i%3 == 0 {
				tr.OnDelete(c)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			uid := types.UID("pending-" + itoa(i%5))
			special := allocated(pendingClaim(extendedResourceClaimName, uid, "1"), "2", dev{device: "p" + itoa(i%5)})
			_ = tr.SignalClaimPendingAllocation(uid, special)
			tr.MaybeRemoveClaimPendingAllocation(uid, i%2 == 0)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			s, _ := tr.GatherAllocatedState()
			for range s.AllocatedDevices {
			}
			l, _ := tr.ListAllAllocatedDevices()
			_ = len(l)
			_, _ = tr.List()
		}
	}()
	wg.Wait()
	s, _ := tr.GatherAllocatedState()
	want := 0
	for i := 0; i < n; i++ {
		if i%3 != 0 {
			want++
		}
	}
	if len(s.AllocatedDevices) != want {
		t.Fatalf("%d devices allocated at the end, want %d", len(s.AllocatedDevices), want)
	}
}

// TestStatsAndObservers: what the tracker counts and reports for metrics
// follows the calls it gets: writes by operation with their errors,
// pending allocations signalled, assumed claims, refusals and conflicts.
func TestStatsAndObservers(t *testing.T) {
	var mu sync.Mutex
	writes := map[string]int{}
	failed := map[string]int{}
	tr := NewTracker(openStore(t), TrackerOptions{ObserveWrite: func(op string, took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if took <= 0 {
			t.Errorf("%s took %v", op, took)
		}
		writes[op]++
		if err != nil {
			failed[op]++
		}
	}})
	a := pendingClaim("a", claimUID, "1")
	tr.OnAdd(a)
	if err := tr.SignalClaimPendingAllocation(claimUID, allocated(a, "1", dev{device: "d1"})); err != nil {
		t.Fatal(err)
	}
	if st := tr.Stats(); st.Claims != 1 || st.PendingAllocations != 1 || st.Signalled != 1 {
		t.Errorf("after a signalled allocation: %+v", st)
	}
	if err := tr.AssumeClaimAfterAPICall(allocated(a, "2", dev{device: "d1"})); err != nil {
		t.Fatal(err)
	}
	tr.MaybeRemoveClaimPendingAllocation(claimUID, false)
	tr.OnAdd(allocated(a, "2", dev{device: "d1"}))
	// Another claim holding d1 whole: a conflict, counted as refused.
	tr.OnAdd(allocated(pendingClaim("b", otherClaimUID, "3"), "3", dev{device: "d1"}))
	tr.OnDelete(a)
	st := tr.Stats()
	if st.Assumed != 1 || st.PendingAllocations != 0 || st.Refused != 1 || st.Conflicts != 1 || st.Claims != 1 {
		t.Errorf("stats: %+v, want 1 assumed, 0 pending, 1 refused (a conflict), 1 claim", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if writes["apply"] != 3 || failed["apply"] != 1 || writes["delete"] != 1 || failed["delete"] != 0 {
		t.Errorf("writes observed %v, failed %v: want 3 applies (1 failed), 1 delete", writes, failed)
	}
}

// TestConflictNamesTheField: a claim refused for a device another claim
// holds is reported with the path of the result that holds it.
func TestConflictNamesTheField(t *testing.T) {
	var got error
	tr := NewTracker(openStore(t), TrackerOptions{OnRefused: func(_ *resourcev1.ResourceClaim, err error) { got = err }})
	tr.OnAdd(allocated(pendingClaim("a", claimUID, "1"), "1", dev{device: "d2"}))
	b := allocated(pendingClaim("b", otherClaimUID, "2"), "2", dev{device: "d1"}, dev{device: "d2"})
	tr.OnAdd(b)
	if !errors.Is(got, claimstore.ErrConflict) {
		t.Fatalf("b refused with %v, want a conflict", got)
	}
	if f := tr.heldElsewhere(b, got); f != "status.allocation.devices.results[1]" {
		t.Errorf("field %q, want status.allocation.devices.results[1] (d2, which a holds)", f)
	}
	if f := tr.heldElsewhere(b, errors.New("other")); f != "status.allocation" {
		t.Errorf("field %q for an error without holders, want status.allocation", f)
	}
}
