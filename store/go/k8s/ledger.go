package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"claimstore.dev/claimstore"
)

// The ledger (TrackerOptions.Ledger) is what lets several schedulers
// allocate from one pool: the API server checks each claim alone, so two
// schedulers that each see a device free can both write it into a claim
// (#128980). Every scheduler sharing the pool records an allocation in the
// ledger, a claimstore store in the shared mode on one etcd, before it
// writes the allocation to the API server; the store's device rule,
// checked in etcd's transaction, lets exactly one claim hold a device. So:
//
//   - SignalClaimPendingAllocation (the scheduler's Reserve) writes the
//     allocated claim to the ledger first; a device another claim holds
//     there is ErrHeldInLedger, and Reserve fails (claimstore-scheduler's
//     plugin counts the holder, LearnHolders, and allocates again);
//   - MaybeRemoveClaimPendingAllocation after a failed binding takes the
//     entry out again, unless the claim in effect is allocated or the API
//     server, asked, has the allocation; after a successful one it stays;
//   - an entry is never replaced; one whose scheduler died before its API
//     write is reaped after LedgerReapAfter;
//   - a claim the cluster has allocated is written to the ledger when the
//     ledger lacks it (allocations made before, or by another scheduler);
//     a claim the cluster deallocates or deletes is taken out;
//   - the allocated state the scheduler filters with counts what the
//     ledger holds for claims the tracker does not count yet (another
//     scheduler's pending allocations), from a watch of the ledger.

// LearnHolders makes the allocated state count, at once, the ledger
// entries that err (SignalClaimPendingAllocation's ErrHeldInLedger) names
// as holders, read from the ledger's mirror once it caught up with etcd:
// the next GatherAllocatedState leaves their devices out, without waiting
// for the ledger's watch. A no-op without a ledger or holders.
func (t *Tracker) LearnHolders(err error) error {
	var conflict *claimstore.ConflictError
	if t.ledger == nil || !errors.As(err, &conflict) || len(conflict.Holders) == 0 {
		return nil
	}
	if err := t.ledger.Refresh(); err != nil {
		return err
	}
	for _, key := range conflict.Holders {
		rec, err := t.ledger.Get(key)
		if err != nil {
			continue // gone meanwhile
		}
		if e := t.ledgerEntryOf(rec); e != nil {
			k := types.NamespacedName{Namespace: key.Namespace, Name: key.Name}
			t.mu.Lock()
			// Only what the watch has not brought yet: an entry it
			// brought and then deleted must not come back.
			if old := t.elsewhere[k]; e.modRevision > t.ledgerApplied && (old == nil || old.modRevision < e.modRevision) {
				t.elsewhere[k] = e
				t.changes++
			}
			t.mu.Unlock()
		}
	}
	return nil
}

// ledgerEntry is a claim the ledger holds, as its watch shows it.
type ledgerEntry struct {
	uid         types.UID
	holdings    *holdings
	modRevision uint64
	since       time.Time // when this tracker first saw this version of the entry
}

// ErrHeldInLedger is returned (wrapped, with the claimstore.ConflictError
// naming the holder) by SignalClaimPendingAllocation when a device of the
// allocation is held in the ledger by another claim: another scheduler
// allocated it first.
var ErrHeldInLedger = errors.New("a device of the allocation is held in the ledger by another claim")

// ErrClaimHeldInLedger is returned (wrapped, with ErrHeldInLedger) when the
// ledger holds the claim itself with other devices: another scheduler is
// allocating the same claim (pods of both share it), or the cluster has
// not given up an earlier allocation of it yet.
var ErrClaimHeldInLedger = errors.New("the claim is held in the ledger with other devices")

// reserveInLedger writes claim (allocated, about to be written to the API
// server) to the ledger and returns the entry's mod revision: the entry is
// this reservation's to release. An entry of the same claim with the same
// devices (another scheduler's reservation of a claim pods share, or the
// cluster's allocation) is taken as it is, and 0 returned: not ours to
// release. Any other entry of the claim's name is refused as a device held
// elsewhere: an entry is only ever taken out by whoever made it, or once
// the cluster deallocated or deleted its claim, never replaced.
//
// The ledger is read from its mirror, which may trail etcd: a write whose
// precondition the mirror got wrong is tried once more after the mirror
// caught up (Refresh).
func (t *Tracker) reserveInLedger(claim *resourcev1.ResourceClaim) (uint64, error) {
	rev, err := t.tryReserveInLedger(claim)
	var conflict *claimstore.ConflictError
	if errors.As(err, &conflict) && len(conflict.Holders) == 0 {
		if rerr := t.ledger.Refresh(); rerr != nil {
			return 0, fmt.Errorf("%w (the ledger's mirror did not catch up: %v)", err, rerr)
		}
		rev, err = t.tryReserveInLedger(claim)
	}
	return rev, err
}

func (t *Tracker) tryReserveInLedger(claim *resourcev1.ResourceClaim) (uint64, error) {
	key := claimstore.Key{Namespace: claim.Namespace, Name: claim.Name}
	cur, err := t.ledger.Get(key)
	switch {
	case errors.Is(err, claimstore.ErrNotFound):
	case err != nil:
		return 0, fmt.Errorf("claim %s/%s: the ledger: %w", claim.Namespace, claim.Name, err)
	default:
		c, cerr := FromRecord(cur)
		if cerr != nil {
			return 0, cerr
		}
		if c.UID == claim.UID && sameHoldings(holdingsOf(c, t.consumable), holdingsOf(claim, t.consumable)) {
			return 0, nil
		}
		return 0, fmt.Errorf("claim %s/%s: %w: %w: %w", claim.Namespace, claim.Name, ErrHeldInLedger, ErrClaimHeldInLedger, &claimstore.ConflictError{
			Message: fmt.Sprintf("the ledger holds claim %s/%s (uid %s, resourceVersion %s) with other devices: being allocated by another scheduler, or an allocation the cluster has not given up yet",
				claim.Namespace, claim.Name, c.UID, c.ResourceVersion),
			Holders: []claimstore.Key{key}})
	}
	b, err := json.Marshal(claim)
	if err != nil {
		return 0, err
	}
	create := uint64(0)
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	res, err := t.ledger.PutJSON(ctx, b, claimstore.Preconditions{ModRevision: &create})
	if err != nil {
		var conflict *claimstore.ConflictError
		if errors.As(err, &conflict) && len(conflict.Holders) > 0 {
			return 0, fmt.Errorf("claim %s/%s: %w: %w", claim.Namespace, claim.Name, ErrHeldInLedger, err)
		}
		return 0, fmt.Errorf("claim %s/%s: the ledger: %w", claim.Namespace, claim.Name, err)
	}
	return res.Revision, nil
}

// ledgerTimeout bounds one write to the ledger (the scheduling cycle
// waits for Reserve's).
const ledgerTimeout = 5 * time.Second

// releaseInLedger takes key's entry out of the ledger when it is of uid and
// (with below > 0) of a resourceVersion older than below, or (with rev > 0)
// written at mod revision rev. An entry the mirror does not show is looked
// for again once the mirror caught up with etcd.
func (t *Tracker) releaseInLedger(key types.NamespacedName, uid types.UID, below, rev uint64) {
	k := claimstore.Key{Namespace: key.Namespace, Name: key.Name}
	cur, err := t.ledger.Get(k)
	if errors.Is(err, claimstore.ErrNotFound) && rev == 0 {
		// Another scheduler's entry may not be mirrored yet (this
		// scheduler's own writes are, when they return).
		if err = t.ledger.Refresh(); err == nil {
			cur, err = t.ledger.Get(k)
		}
	}
	if err != nil {
		return // nothing held
	}
	if cur.UID() != string(uid) || (rev > 0 && cur.ModRevision() != rev) {
		return
	}
	if below > 0 {
		if n, err := strconv.ParseUint(cur.ResourceVersion(), 10, 64); err != nil || n >= below {
			return
		}
	}
	at := cur.ModRevision()
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	if _, err := t.ledger.Delete(ctx, k, claimstore.Preconditions{ModRevision: &at}); err != nil &&
		!errors.Is(err, claimstore.ErrNotFound) && !errors.Is(err, claimstore.ErrConflict) {
		t.logger.Error(err, "claimstore tracker: the ledger's entry not released", "claim", key)
	}
}

// syncLedger queues what brings the ledger in line with the cluster's
// claim (prev: the tracker's version before it, or nil): an allocation the
// ledger lacks is written; an entry of a claim the cluster deallocated is
// taken out (only one from before the deallocation: a later one is another
// scheduler's new allocation). The ledger's round trips are made off the
// watch's path, by ledgerWorker.
func (t *Tracker) syncLedger(claim, prev *resourcev1.ResourceClaim) {
	key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	if claim.Status.Allocation == nil {
		if prev != nil && prev.UID == claim.UID && prev.Status.Allocation != nil {
			t.queueLedgerWork(key, ledgerWork{uid: claim.UID, release: true, below: rvOf(claim)})
		}
		return
	}
	if holdingsOf(claim, t.consumable) == nil {
		return // admin access only: holds nothing
	}
	if _, err := t.ledger.Get(claimstore.Key{Namespace: key.Namespace, Name: key.Name}); !errors.Is(err, claimstore.ErrNotFound) {
		// Held (by this allocation, or by a later one of a tracker that is
		// ahead of this one), or the mirror cannot say: nothing to write.
		return
	}
	t.queueLedgerWork(key, ledgerWork{uid: claim.UID, claim: claim})
}

// ledgerWork is a write to the ledger that the cluster's claims call for:
// claim's allocation written (ensure), or the entry of uid taken out
// (release; below as releaseInLedger's).
type ledgerWork struct {
	uid     types.UID
	claim   *resourcev1.ResourceClaim // ensure
	release bool
	below   uint64
	at      time.Time
}

// ledgerWorkAge is how long queued work waits, so that another scheduler's
// entry the mirror does not show yet reaches it first.
const ledgerWorkAge = 200 * time.Millisecond

func (t *Tracker) queueLedgerWork(key types.NamespacedName, w ledgerWork) {
	w.at = time.Now()
	t.mu.Lock()
	t.ledgerQueue[key] = w // the newest event's work replaces older work
	t.mu.Unlock()
}

// ledgerWorker does the queued ledger work until ctx is done.
func (t *Tracker) ledgerWorker(ctx context.Context) {
	every(ctx, ledgerWorkAge/2, func() { t.doLedgerWork(ledgerWorkAge) })
}

// every calls f every interval until ctx is done.
func every(ctx context.Context, interval time.Duration, f func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f()
	}
}

// doLedgerWork does the queued work at least age old: one Refresh of the
// mirror for all of it, then each write.
func (t *Tracker) doLedgerWork(age time.Duration) {
	due := map[types.NamespacedName]ledgerWork{}
	t.mu.Lock()
	for key, w := range t.ledgerQueue {
		if time.Since(w.at) >= age {
			due[key] = w
			delete(t.ledgerQueue, key)
		}
	}
	t.mu.Unlock()
	if len(due) == 0 {
		return
	}
	if err := t.ledger.Refresh(); err != nil {
		if !t.ledgerWorkFailing {
			t.logger.Error(err, "claimstore tracker: the ledger's mirror does not catch up with etcd; its work waits")
		}
		t.ledgerWorkFailing = true
		t.mu.Lock()
		for key, w := range due {
			if _, newer := t.ledgerQueue[key]; !newer {
				t.ledgerQueue[key] = w
			}
		}
		t.mu.Unlock()
		return
	}
	t.ledgerWorkFailing = false
	for key, w := range due {
		if w.release {
			t.releaseInLedger(key, w.uid, w.below, 0)
			continue
		}
		if _, err := t.ledger.Get(claimstore.Key{Namespace: key.Namespace, Name: key.Name}); !errors.Is(err, claimstore.ErrNotFound) {
			continue
		}
		t.ensureInLedger(w.claim)
	}
}

// ensureInLedger writes the cluster's allocated claim to the ledger; one
// the ledger refuses for a device another claim holds there is a double
// allocation, counted.
func (t *Tracker) ensureInLedger(claim *resourcev1.ResourceClaim) {
	key := claimstore.Key{Namespace: claim.Namespace, Name: claim.Name}
	_, err := t.reserveInLedger(claim)
	var conflict *claimstore.ConflictError
	switch {
	case err == nil:
	case errors.As(err, &conflict) && len(conflict.Holders) > 0 && !slices.Contains(conflict.Holders, key):
		t.mu.Lock()
		t.ledgerConflicts++
		t.mu.Unlock()
		t.logger.Error(err, "claimstore tracker: a claim the cluster has allocated holds a device another claim holds in the ledger (a double allocation)",
			"claim", klog.KObj(claim))
	default:
		t.logger.V(2).Info("claimstore tracker: a claim the cluster has allocated not written to the ledger", "claim", klog.KObj(claim), "err", err)
	}
}

// followLedger keeps t.elsewhere in step with the ledger until ctx is
// done: its claims at one revision, then its watch from there (again
// after a compaction).
func (t *Tracker) followLedger(ctx context.Context) {
	for ctx.Err() == nil {
		err := t.followLedgerOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		t.logger.Error(err, "claimstore tracker: the ledger's watch ended; listing it again")
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (t *Tracker) followLedgerOnce(ctx context.Context) error {
	page, err := t.ledger.List(claimstore.ListOptions{})
	if err != nil {
		return err
	}
	entries := make(map[types.NamespacedName]*ledgerEntry, len(page.Claims))
	for _, rec := range page.Claims {
		if e := t.ledgerEntryOf(rec); e != nil {
			entries[types.NamespacedName{Namespace: rec.Namespace(), Name: rec.Name()}] = e
		}
	}
	t.mu.Lock()
	t.ledgerApplied = page.Revision
	for key, e := range entries {
		if old := t.elsewhere[key]; old != nil && old.modRevision == e.modRevision {
			e.since = old.since // listed again: as old as before
		}
	}
	t.elsewhere = entries
	t.changes++
	t.mu.Unlock()
	t.ledgerSynced.Store(true)
	w, err := t.ledger.Watch(ctx, page.Revision+1, claimstore.WatchOptions{})
	if err != nil {
		return err
	}
	defer w.Close()
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			return err
		}
		key := types.NamespacedName{Namespace: ev.Key.Namespace, Name: ev.Key.Name}
		var e *ledgerEntry
		if ev.Type != claimstore.EventDeleted {
			e = t.ledgerEntryOf(ev.Claim)
		}
		t.mu.Lock()
		t.ledgerApplied = max(t.ledgerApplied, ev.Revision)
		// LearnHolders may have put a newer version already.
		if old := t.elsewhere[key]; old == nil || old.modRevision <= ev.Revision {
			if e == nil {
				delete(t.elsewhere, key)
			} else {
				t.elsewhere[key] = e
			}
			t.changes++
		}
		t.mu.Unlock()
	}
}

func (t *Tracker) ledgerEntryOf(rec *claimstore.Claim) *ledgerEntry {
	c, err := FromRecord(rec)
	if err != nil {
		t.logger.Error(err, "claimstore tracker: a ledger entry not understood", "claim", rec.Key().String())
		return nil
	}
	h := holdingsOf(c, t.consumable)
	if h == nil {
		return nil
	}
	return &ledgerEntry{uid: c.UID, holdings: h, modRevision: rec.ModRevision(), since: time.Now()}
}

// reapLedger takes out, every interval until ctx is done, the ledger's
// entries older than after (as this tracker saw them) whose claim the API
// server, asked, has not allocated: a reservation whose scheduler was
// killed before it wrote the allocation, or whose release failed. (A
// scheduler's live reservation reaches the API server within a binding
// cycle: after must be longer than the longest a pod waits in Permit.)
// An entry of a claim the API server no longer has is taken out too.
func (t *Tracker) reapLedger(ctx context.Context, client kubernetes.Interface, after, interval time.Duration) {
	every(ctx, interval, func() { t.reapOnce(ctx, client, after) })
}

func (t *Tracker) reapOnce(ctx context.Context, client kubernetes.Interface, after time.Duration) {
	type candidate struct {
		key   types.NamespacedName
		entry ledgerEntry
	}
	var old []candidate
	t.mu.RLock()
	for key, e := range t.elsewhere {
		if time.Since(e.since) < after || t.pending[e.uid] != nil {
			continue
		}
		if c := t.claims[key]; c != nil && c.latest.UID == e.uid && c.latest.Status.Allocation != nil {
			continue // the cluster's allocation
		}
		old = append(old, candidate{key, *e})
	}
	t.mu.RUnlock()
	for _, o := range old {
		c, err := client.ResourceV1().ResourceClaims(o.key.Namespace).Get(ctx, o.key.Name, metav1.GetOptions{})
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			continue
		case err == nil && c.UID == o.entry.uid && c.Status.Allocation != nil:
			continue
		}
		rev := o.entry.modRevision
		dctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		_, err = t.ledger.Delete(dctx, claimstore.Key{Namespace: o.key.Namespace, Name: o.key.Name}, claimstore.Preconditions{ModRevision: &rev})
		cancel()
		if err == nil {
			t.mu.Lock()
			t.ledgerReaped++
			t.mu.Unlock()
			t.logger.Info("claimstore tracker: the ledger's entry of a claim the cluster has not allocated taken out",
				"claim", o.key, "uid", o.entry.uid, "age", time.Since(o.entry.since).Round(time.Second))
		}
	}
}

// sweepLedger brings the ledger in line with the claims Run loaded or
// listed: each allocated one the ledger lacks is written, and the ledger's
// entries of claims the cluster no longer has (deleted while no scheduler
// watched) are taken out, asking the API server about each the tracker
// does not know.
func (t *Tracker) sweepLedger(ctx context.Context, client kubernetes.Interface) {
	t.mu.RLock()
	allocated := make([]*resourcev1.ResourceClaim, 0, len(t.claims))
	for _, e := range t.claims {
		if e.api.Status.Allocation != nil {
			allocated = append(allocated, e.api)
		}
	}
	t.mu.RUnlock()
	for _, c := range allocated {
		t.syncLedger(c, nil)
	}
	for rec, err := range t.ledger.All(ctx, claimstore.ListOptions{}) {
		if err != nil {
			return
		}
		key := types.NamespacedName{Namespace: rec.Namespace(), Name: rec.Name()}
		t.mu.RLock()
		e := t.claims[key]
		known := e != nil && string(e.api.UID) == rec.UID()
		t.mu.RUnlock()
		if known {
			continue
		}
		c, err := client.ResourceV1().ResourceClaims(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if (err == nil && string(c.UID) == rec.UID()) || (err != nil && !apierrors.IsNotFound(err)) {
			continue
		}
		uid := rec.UID()
		if _, err := t.ledger.Delete(ctx, rec.Key(), claimstore.Preconditions{UID: &uid}); err == nil {
			t.logger.Info("claimstore tracker: the ledger's entry of a claim the cluster no longer has taken out", "claim", key)
		}
	}
}

// rvOf is claim's resourceVersion as a number (0 when it is none).
func rvOf(claim *resourcev1.ResourceClaim) uint64 {
	n, _ := strconv.ParseUint(claim.ResourceVersion, 10, 64)
	return n
}
