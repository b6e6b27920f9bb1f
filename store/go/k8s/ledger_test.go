package k8s

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"claimstore.dev/claimstore"
	"claimstore.dev/claimstore/internal/etcdtest"
)

// ledgerTracker is a tracker with a store of its own and a ledger on
// etcdURL (its own mirror), following the ledger until the test ends.
func ledgerTracker(t *testing.T, etcdURL string) (*Tracker, *claimstore.Store) {
	t.Helper()
	ledger, err := claimstore.Open(ctx, t.TempDir(), claimstore.Options{EtcdEndpoints: []string{etcdURL}, EtcdPrefix: "/ledgertest/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ledger.Close() })
	tr := NewTracker(openStore(t), TrackerOptions{Ledger: ledger})
	c, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go tr.followLedger(c)
	waitUntil(t, "the ledger is read", tr.ledgerSynced.Load)
	return tr, ledger
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func inLedger(t *testing.T, ledger *claimstore.Store, name string) bool {
	t.Helper()
	if err := ledger.Refresh(); err != nil {
		t.Fatal(err)
	}
	_, err := ledger.Get(claimstore.Key{Namespace: "default", Name: name})
	if err != nil && !errors.Is(err, claimstore.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// Two trackers, as two schedulers, on one ledger: a device goes to one
// claim only, whichever scheduler asks first; a failed binding gives it
// back, a successful one keeps it until the cluster deallocates or deletes
// the claim; the allocated state of one scheduler counts the other's
// pending allocations.
func TestLedgerSharesDevicesBetweenSchedulers(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	a, ledger := ledgerTracker(t, etcd.URL)
	b, _ := ledgerTracker(t, etcd.URL)
	x, y := pendingClaim("x", claimUID, "10"), pendingClaim("y", otherClaimUID, "11")
	for _, tr := range []*Tracker{a, b} {
		tr.OnAdd(x)
		tr.OnAdd(y)
	}

	// A reserves dev-0 for x; B's reservation of dev-0 for y is refused,
	// naming x, and B's allocated state shows dev-0 as A's.
	if err := a.SignalClaimPendingAllocation(claimUID, allocated(x, "10", dev{device: "dev-0"})); err != nil {
		t.Fatal(err)
	}
	err := b.SignalClaimPendingAllocation(otherClaimUID, allocated(y, "11", dev{device: "dev-0"}))
	var conflict *claimstore.ConflictError
	if !errors.Is(err, ErrHeldInLedger) || !errors.As(err, &conflict) ||
		!slices.Contains(conflict.Holders, claimstore.Key{Namespace: "default", Name: "x"}) {
		t.Fatalf("B's reservation of A's device: %v, want ErrHeldInLedger naming default/x", err)
	}
	if b.GetPendingAllocation(otherClaimUID) != nil {
		t.Fatal("B recorded a pending allocation the ledger refused")
	}
	waitUntil(t, "B counts A's pending allocation", func() bool { return slices.Equal(devicesOf(t, b), []string{"dev-0"}) })
	if st := b.Stats(); st.Elsewhere != 1 || st.LedgerRefused != 1 {
		t.Fatalf("B's stats %+v, want Elsewhere 1, LedgerRefused 1", st)
	}
	if st := a.Stats(); st.Elsewhere != 0 {
		t.Fatalf("A counts its own allocation as elsewhere: %+v", st)
	}

	// A's binding fails (Unreserve): dev-0 is free again, and B takes it.
	if !a.MaybeRemoveClaimPendingAllocation(claimUID, false) {
		t.Fatal("A's pending allocation was not removed")
	}
	if inLedger(t, ledger, "x") {
		t.Fatal("x is still in the ledger after A's Unreserve")
	}
	waitUntil(t, "B sees dev-0 free", func() bool { return len(devicesOf(t, b)) == 0 })
	if err := b.SignalClaimPendingAllocation(otherClaimUID, allocated(y, "11", dev{device: "dev-0"})); err != nil {
		t.Fatal(err)
	}

	// B's binding succeeds: the entry stays, A cannot have dev-0.
	yAllocated := allocated(y, "12", dev{device: "dev-0"})
	if err := b.AssumeClaimAfterAPICall(yAllocated); err != nil {
		t.Fatal(err)
	}
	if !b.MaybeRemoveClaimPendingAllocation(otherClaimUID, true) {
		t.Fatal("B's pending allocation was not removed")
	}
	if !inLedger(t, ledger, "y") {
		t.Fatal("y left the ledger after its binding succeeded")
	}
	if err := a.SignalClaimPendingAllocation(claimUID, allocated(x, "10", dev{device: "dev-0"})); !errors.Is(err, ErrHeldInLedger) {
		t.Fatalf("A's reservation of y's device: %v, want ErrHeldInLedger", err)
	}
	// The cluster's version of y reaches both: nothing changes.
	a.OnAdd(yAllocated)
	b.OnAdd(yAllocated)
	a.doLedgerWork(0)
	b.doLedgerWork(0)
	if !inLedger(t, ledger, "y") {
		t.Fatal("y left the ledger when the cluster's allocation arrived")
	}

	// The cluster deallocates y: the entry goes, A takes dev-0.
	a.OnAdd(pendingClaim("y", otherClaimUID, "13"))
	a.doLedgerWork(0)
	if inLedger(t, ledger, "y") {
		t.Fatal("y is still in the ledger after the cluster deallocated it")
	}
	if err := a.SignalClaimPendingAllocation(claimUID, allocated(x, "10", dev{device: "dev-0"})); err != nil {
		t.Fatal(err)
	}
	// An update of x that is no deallocation (a finalizer added before the
	// allocation is written) leaves A's pending allocation in the ledger.
	b.OnAdd(pendingClaim("x", claimUID, "14"))
	b.doLedgerWork(0)
	if !inLedger(t, ledger, "x") {
		t.Fatal("an update of an unallocated claim took its pending allocation out of the ledger")
	}
	// The cluster deletes x: its entry goes.
	b.OnDelete(pendingClaim("x", claimUID, "15"))
	b.doLedgerWork(0)
	if inLedger(t, ledger, "x") {
		t.Fatal("x is still in the ledger after the cluster deleted it")
	}

	// A claim the cluster has allocated (before, or by a scheduler without
	// the ledger) is written to the ledger; a second claim on its device
	// (a double allocation in the cluster) is counted.
	z := allocated(pendingClaim("z", "uid-z", "20"), "20", dev{device: "dev-1"})
	a.OnAdd(z)
	a.doLedgerWork(0)
	if !inLedger(t, ledger, "z") {
		t.Fatal("a claim the cluster allocated is not in the ledger")
	}
	b.OnAdd(allocated(pendingClaim("z2", types.UID("uid-z2"), "21"), "21", dev{device: "dev-1"}))
	b.doLedgerWork(0)
	if st := b.Stats(); st.LedgerConflicts != 1 {
		t.Fatalf("B's stats %+v, want LedgerConflicts 1 (z2 holds z's device)", st)
	}

	// A claim two pods share, reserved by both schedulers with the same
	// devices: the second takes the first's entry and does not own it (its
	// failed binding leaves it); other devices for it are refused.
	s := pendingClaim("s", "uid-s", "30")
	a.OnAdd(s)
	b.OnAdd(s)
	if err := a.SignalClaimPendingAllocation("uid-s", allocated(s, "30", dev{device: "dev-2"})); err != nil {
		t.Fatal(err)
	}
	if err := b.SignalClaimPendingAllocation("uid-s", allocated(s, "30", dev{device: "dev-3"})); !errors.Is(err, ErrHeldInLedger) ||
		!errors.Is(err, ErrClaimHeldInLedger) {
		t.Fatalf("B's reservation of s with other devices: %v, want ErrHeldInLedger and ErrClaimHeldInLedger", err)
	}
	if err := b.SignalClaimPendingAllocation("uid-s", allocated(s, "30", dev{device: "dev-2"})); err != nil {
		t.Fatal(err)
	}
	b.MaybeRemoveClaimPendingAllocation("uid-s", false)
	if !inLedger(t, ledger, "s") {
		t.Fatal("B's failed binding took out the entry A made")
	}

	// A binding that failed after the API server took the allocation (a
	// write that timed out after it committed): the API server says so,
	// and the entry stays.
	w := pendingClaim("w", "uid-w", "40")
	a.OnAdd(w)
	a.mu.Lock()
	a.client = fake.NewClientset(allocated(w, "41", dev{device: "dev-4"}))
	a.mu.Unlock()
	if err := a.SignalClaimPendingAllocation("uid-w", allocated(w, "40", dev{device: "dev-4"})); err != nil {
		t.Fatal(err)
	}
	a.MaybeRemoveClaimPendingAllocation("uid-w", false)
	if !inLedger(t, ledger, "w") {
		t.Fatal("a failed binding whose allocation the API server has took its entry out of the ledger")
	}
}

// An entry whose scheduler was killed between Reserve and its API write
// (the claim stays unallocated in the cluster) is taken out once it is
// older than the reap age; a young one, one of a claim the cluster has
// allocated, and the tracker's own pending reservation are not.
func TestLedgerReapsReservationsNoSchedulerWrote(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	a, ledger := ledgerTracker(t, etcd.URL)
	killed, _ := ledgerTracker(t, etcd.URL)
	lost, kept, own := pendingClaim("lost", "uid-lost", "10"), pendingClaim("kept", "uid-kept", "11"), pendingClaim("own", "uid-own", "12")
	keptAllocated := allocated(kept, "13", dev{device: "dev-1"})
	for _, tr := range []*Tracker{a, killed} {
		tr.OnAdd(lost)
		tr.OnAdd(kept)
		tr.OnAdd(own)
	}
	for _, r := range []struct {
		tr    *Tracker
		claim *resourcev1.ResourceClaim
		dev   string
	}{{killed, lost, "dev-0"}, {killed, kept, "dev-1"}, {a, own, "dev-2"}} {
		if err := r.tr.SignalClaimPendingAllocation(r.claim.UID, allocated(r.claim, r.claim.ResourceVersion, dev{device: r.dev})); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset(lost, keptAllocated, own)
	waitUntil(t, "A sees the three entries", func() bool {
		a.mu.RLock()
		defer a.mu.RUnlock()
		return len(a.elsewhere) == 3
	})
	a.reapOnce(ctx, client, time.Hour)
	for _, name := range []string{"lost", "kept", "own"} {
		if !inLedger(t, ledger, name) {
			t.Fatalf("%s was reaped before it was an hour old", name)
		}
	}
	a.reapOnce(ctx, client, 0)
	if inLedger(t, ledger, "lost") {
		t.Fatal("the entry of a claim the cluster never allocated was not reaped")
	}
	if !inLedger(t, ledger, "kept") || !inLedger(t, ledger, "own") {
		t.Fatal("the cluster's allocation or the tracker's own reservation was reaped")
	}
	if st := a.Stats(); st.LedgerReaped != 1 {
		t.Fatalf("LedgerReaped %d, want 1", st.LedgerReaped)
	}
}

// LearnHolders counts the holder a refusal names at once, but never an
// entry older than what the ledger's watch has applied (which may have
// deleted it since).
func TestLearnHolders(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	a, _ := ledgerTracker(t, etcd.URL)
	b, _ := ledgerTracker(t, etcd.URL)
	x, y := pendingClaim("x", claimUID, "10"), pendingClaim("y", otherClaimUID, "11")
	for _, tr := range []*Tracker{a, b} {
		tr.OnAdd(x)
		tr.OnAdd(y)
	}
	if err := a.SignalClaimPendingAllocation(claimUID, allocated(x, "10", dev{device: "dev-0"})); err != nil {
		t.Fatal(err)
	}
	refusal := b.SignalClaimPendingAllocation(otherClaimUID, allocated(y, "11", dev{device: "dev-0"}))
	if !errors.Is(refusal, ErrHeldInLedger) || errors.Is(refusal, ErrClaimHeldInLedger) {
		t.Fatalf("%v, want ErrHeldInLedger for another claim's device", refusal)
	}
	// The watch has brought A's entry: nothing more comes meanwhile.
	waitUntil(t, "B counts A's reservation", func() bool { return slices.Equal(devicesOf(t, b), []string{"dev-0"}) })
	learn := func(applied uint64) []string {
		b.mu.Lock()
		b.elsewhere = map[types.NamespacedName]*ledgerEntry{}
		b.ledgerApplied = applied
		b.changes++
		b.mu.Unlock()
		if err := b.LearnHolders(refusal); err != nil {
			t.Fatal(err)
		}
		return devicesOf(t, b)
	}
	if got := learn(0); !slices.Equal(got, []string{"dev-0"}) {
		t.Fatalf("after LearnHolders: %v, want dev-0 counted", got)
	}
	if got := learn(1 << 62); len(got) != 0 {
		t.Fatalf("LearnHolders put back an entry the watch is past: %v", got)
	}
	if err := b.LearnHolders(errors.New("not a conflict")); err != nil {
		t.Fatal(err)
	}
}
