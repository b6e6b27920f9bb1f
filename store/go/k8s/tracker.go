package k8s

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"claimstore.dev/claimstore"
)

var _ fwk.ResourceClaimTracker = (*Tracker)(nil)

// TrackerOptions configure a Tracker.
type TrackerOptions struct {
	// ConsumableCapacity is kube-scheduler's DRAConsumableCapacity feature
	// gate: shares of shared devices and their consumed capacity are
	// tracked apart from devices held whole. Off, every allocated device
	// counts as held whole (as kube-scheduler does with the gate off).
	ConsumableCapacity bool
	// Logger receives what the tracker refuses (claims whose status
	// claimstore's validation refuses, with the field path). Default:
	// klog's background logger.
	Logger *klog.Logger
	// OnRefused, when set, is called (from the informer's goroutine) with
	// every claim the store refused and why. A claim the store's
	// validation refuses (ErrInvalid) is left out of the tracker and the
	// store as it was. A claim holding a device another claim holds whole
	// (ErrConflict, naming both) is a double allocation in the cluster: the
	// tracker counts it all the same, the store goes without it (Run keeps
	// the store's watch position before it: Tracker.Run). So does a claim
	// the store cannot write (ErrNoSpace: a full disk).
	OnRefused func(claim *resourcev1.ResourceClaim, err error)
	// ObserveWrite, when set, is called after each write to the store
	// with its operation ("apply": a claim as the cluster has it;
	// "delete"; "list": a whole list in one write), how long it took and
	// its error. For metrics: it must be quick and safe for concurrent use.
	ObserveWrite func(operation string, took time.Duration, err error)
	// ObserveWatchLag, when set, is called for each claim a watch of Run
	// brings (added or modified) and the store takes, with the time since
	// the API server wrote it: its newest managedFields time (whole
	// seconds: the API's resolution; the API server's clock), or its
	// creation. A watch resumed after a restart counts the time it was
	// down. For metrics, as ObserveWrite.
	ObserveWatchLag func(lag time.Duration)
	// Ledger, when set, is a store in the shared mode (opened with
	// claimstore.Options.EtcdEndpoints, a mirror directory of its own) that
	// every scheduler allocating from the same pools shares: an
	// allocation is recorded there, where one device goes to one claim
	// only, before the scheduler writes it to the API server (ledger.go).
	// SignalClaimPendingAllocation then fails with ErrHeldInLedger when
	// another scheduler holds a device of the allocation. Run follows the
	// ledger (HasSynced waits for it too).
	Ledger *claimstore.Store
	// LedgerReapAfter is how old (as this tracker saw it) a ledger entry
	// of a claim the API server has not allocated gets before the tracker
	// takes it out: a reservation whose scheduler was killed before it
	// wrote the allocation. It must be longer than the longest a pod
	// waits between Reserve and PreBind (in Permit). Default 5 minutes;
	// negative: never.
	LedgerReapAfter time.Duration
}

// TrackerStats are a Tracker's figures at one moment.
type TrackerStats struct {
	Claims             int    // claims tracked
	PendingAllocations int    // allocations signalled and not yet removed
	Held               int    // claims counted that the store lacks (double allocations)
	Position           uint64 // the watch position (resourceVersion) recorded in the store
	Seen               uint64 // the newest watch position applied
	Refused            uint64 // claims the store refused, since NewTracker
	Conflicts          uint64 // of those, for a device another claim holds (ErrConflict)
	Signalled          uint64 // SignalClaimPendingAllocation calls
	Assumed            uint64 // AssumeClaimAfterAPICall calls that took the claim
	// With a ledger (TrackerOptions.Ledger):
	Elsewhere       int    // claims the ledger holds that the tracker does not count (being allocated elsewhere)
	LedgerRefused   uint64 // allocations the ledger refused (a device another claim holds there)
	LedgerConflicts uint64 // claims allocated in the cluster that the ledger refused (double allocations)
	LedgerReaped    uint64 // entries of claims the cluster did not allocate, taken out after LedgerReapAfter
}

// A Tracker is kube-scheduler's ResourceClaimTracker over a claimstore
// Store: the claims an informer delivers (Handler) are written to the store
// and kept for the scheduler's questions, together with what the scheduler
// assumes (AssumeClaimAfterAPICall) and what it is about to allocate
// (SignalClaimPendingAllocation), all under one lock: every answer is
// consistent, with no retry as kube-scheduler's own tracker needs.
//
// It follows kube-scheduler's DefaultDRAManager (k8s.io/kubernetes
// v1.37.2) call for call; the differential test in store/go/k8s/upstreamtest
// holds the two equal. Where they differ, on purpose:
//   - Get of a missing claim is a Kubernetes NotFound (apierrors.IsNotFound);
//   - a device two claims both list stays allocated until both let it go;
//   - an informer object claimstore's validation refuses is left out and
//     reported (TrackerOptions.OnRefused), never half applied; one that
//     holds a device another claim holds is reported and counted;
//   - GatherAllocatedState and ListAllAllocatedDevices return the same maps
//     while nothing changed (constant time); the maps are never changed
//     after they are returned, and callers must not change them either.
//
// A Tracker is safe for concurrent use by any number of goroutines.
type Tracker struct {
	store      *claimstore.Store
	consumable bool
	logger     klog.Logger
	onRefused  func(*resourcev1.ResourceClaim, error)

	mu      sync.RWMutex
	claims  map[types.NamespacedName]*entry
	pending map[types.UID]*pendingAllocation
	counts  allocatedCounts
	// changes counts every change of what the allocated state depends on;
	// gathered and listed are built from it at one count.
	changes      uint64
	gathered     cached[*structured.AllocatedState]
	listed       cached[sets.Set[structured.DeviceID]]
	refusedCount uint64
	conflicts    uint64
	signalled    uint64
	assumed      uint64
	observeWrite func(string, time.Duration, error)
	observeLag   func(time.Duration)
	// position is the watch position last recorded in the store (Run).
	// held are the claims the store refused for a device another claim
	// holds, though the tracker counts them (double allocations), each
	// with the position the store's may not pass while it lacks them: a
	// restart resumes the watch from before them, and they come again.
	position uint64
	held     map[types.NamespacedName]uint64
	seen     uint64 // the last watch position applied

	// ledger (TrackerOptions.Ledger) and what its watch shows it holds.
	ledger        *claimstore.Store
	elsewhere     map[types.NamespacedName]*ledgerEntry
	ledgerQueue   map[types.NamespacedName]ledgerWork
	ledgerApplied uint64 // the ledger revision elsewhere reflects (its watch)
	// ledgerWorkFailing: the worker's last Refresh failed (logged once).
	// Only the worker's goroutine uses it.
	ledgerWorkFailing bool
	ledgerRefused     uint64
	ledgerConflicts   uint64
	ledgerReaped      uint64
	reapAfter         time.Duration
	ledgerSynced      atomic.Bool
	client            kubernetes.Interface // Run's, to confirm a release

	synced atomic.Bool // Run has loaded or listed the claims
}

// entry is one claim: the informer's version, and the one the scheduler
// assumed after its API call, if any (latest is the one in effect).
type entry struct {
	api, latest *resourcev1.ResourceClaim
	holdings    *holdings // of latest
}

type pendingAllocation struct {
	claim    *resourcev1.ResourceClaim
	holdings *holdings
	sharers  int
	// ledgerRevision is the mod revision of the allocation's entry in the
	// ledger (0: none).
	ledgerRevision uint64
}

// NewTracker returns a tracker that keeps its claims in store. The store's
// claims are not read: the informer's initial list fills the tracker (and
// rewrites the store).
func NewTracker(store *claimstore.Store, opts TrackerOptions) *Tracker {
	return &Tracker{
		store:        store,
		consumable:   opts.ConsumableCapacity,
		logger:       loggerOr(opts.Logger),
		onRefused:    opts.OnRefused,
		observeWrite: opts.ObserveWrite,
		observeLag:   opts.ObserveWatchLag,
		claims:       map[types.NamespacedName]*entry{},
		pending:      map[types.UID]*pendingAllocation{},
		counts:       newAllocatedCounts(),
		held:         map[types.NamespacedName]uint64{},
		ledger:       opts.Ledger,
		reapAfter:    cmp.Or(opts.LedgerReapAfter, 5*time.Minute),
		elsewhere:    map[types.NamespacedName]*ledgerEntry{},
		ledgerQueue:  map[types.NamespacedName]ledgerWork{},
	}
}

// Store returns the store the tracker writes to, for claimstore's own
// questions (ClaimsUsingDevice, ClaimsReservedFor, Watch, ...).
func (t *Tracker) Store() *claimstore.Store { return t.store }

// Refused returns how many informer objects the store refused so far.
func (t *Tracker) Refused() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.refusedCount
}

// Applied returns the newest watch position (a resourceVersion of
// ResourceClaims) whose event the tracker's answers reflect: Run's load or
// list, and each watch event or bookmark after it.
func (t *Tracker) Applied() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return max(t.seen, t.position)
}

// Stats returns the tracker's figures (for metrics).
func (t *Tracker) Stats() TrackerStats {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return TrackerStats{Claims: len(t.claims), PendingAllocations: len(t.pending), Held: len(t.held),
		Position: t.position, Seen: t.seen, Refused: t.refusedCount, Conflicts: t.conflicts,
		Signalled: t.signalled, Assumed: t.assumed,
		Elsewhere: t.elsewhereLocked(nil), LedgerRefused: t.ledgerRefused, LedgerConflicts: t.ledgerConflicts,
		LedgerReaped: t.ledgerReaped}
}

// observed reports a store write that started at start to ObserveWrite.
func (t *Tracker) observed(operation string, start time.Time, err error) {
	if t.observeWrite != nil {
		t.observeWrite(operation, time.Since(start), err)
	}
}

// Handler returns the event handler to register with a ResourceClaim
// informer (resource.k8s.io/v1): informer.AddEventHandler(t.Handler()).
func (t *Tracker) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.OnAdd(obj) },
		UpdateFunc: func(_, obj any) { t.OnAdd(obj) },
		DeleteFunc: t.OnDelete,
	}
}

// OnAdd applies an informer's add or update: the claim is written to the
// store, and replaces the tracker's version unless that one (an assumed
// one, typically) has a resourceVersion at least as new. (The store's
// position to resume a watch from does not move: a shared informer's
// events are not in resourceVersion order while it lists. Run moves it.)
func (t *Tracker) OnAdd(obj any) {
	if claim := t.claimOf(obj); claim != nil {
		_ = t.add(claim, 0) // refusals are reported
	}
}

// claimOf is the informer's object as a claim (unwrapping a
// cache.DeletedFinalStateUnknown), or nil, logged.
func (t *Tracker) claimOf(obj any) *resourcev1.ResourceClaim {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		t.logger.Error(nil, "claimstore tracker: not a ResourceClaim", "type", fmt.Sprintf("%T", obj))
		return nil
	}
	return claim
}

// add writes claim to the store (position: the watch position to record,
// 0 for none) and applies it to the tracker, unless the store's validation
// refused it (ErrInvalid: left out of both). The error is the store's.
//
// A claim the store refuses otherwise is the cluster's truth all the same
// and is counted: one whose device another claim holds whole
// (ErrConflict: a double allocation the API server let through, as it
// checks each claim alone; #133602, #128980), or one the store could not
// write (a full disk). Until the store has it, the store's watch position
// stays before this event (held): a restart resumes from there and the
// watch brings the claim again. A held claim is written again after each
// change that may have freed its device (retryHeld).
func (t *Tracker) add(claim *resourcev1.ResourceClaim, position uint64) error {
	key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	t.mu.Lock()
	record := t.recordableLocked(position, key)
	t.mu.Unlock()
	err := t.write(claim, record)
	if err != nil {
		t.refused(claim, err)
		if errors.Is(err, claimstore.ErrInvalid) {
			t.mu.Lock()
			t.seen = max(t.seen, position)
			t.mu.Unlock()
			return err
		}
	}
	h := holdingsOf(claim, t.consumable)
	t.mu.Lock()
	var prev *resourcev1.ResourceClaim
	if e := t.claims[key]; e != nil {
		prev = e.api
	}
	// Applied only once the tracker answers with it (Applied).
	t.seen = max(t.seen, position)
	switch {
	case err == nil:
		delete(t.held, key)
		t.recordedLocked(record)
	case position > 0:
		if _, ok := t.held[key]; !ok {
			t.held[key] = position - 1
		}
	}
	t.applyLocked(claim, h)
	retry := err == nil && len(t.held) > 0
	t.mu.Unlock()
	if t.ledger != nil {
		t.syncLedger(claim, prev)
	}
	if retry {
		t.retryHeld()
	}
	return err
}

// recordableLocked is the watch position to record with a write at
// position n: n, unless a held claim (other than except, the one being
// written) keeps the store's position before it; 0 (record nothing) when
// that is not past the one recorded.
func (t *Tracker) recordableLocked(n uint64, except types.NamespacedName) uint64 {
	for key, h := range t.held {
		if key != except {
			n = min(n, h)
		}
	}
	if n <= t.position {
		return 0
	}
	return n
}

// recordedLocked notes that position n (0: none) was recorded.
func (t *Tracker) recordedLocked(n uint64) {
	if n > 0 {
		t.position = n
	}
}

// recordPosition records watch position n in the store, as far as the
// held claims let it. The store is written outside the tracker's lock
// (only Run's goroutine records positions).
func (t *Tracker) recordPosition(n uint64) error {
	t.mu.Lock()
	t.seen = max(t.seen, n)
	record := t.recordableLocked(n, types.NamespacedName{})
	t.mu.Unlock()
	if record == 0 {
		return nil
	}
	if _, err := t.store.ApplyClusterEventsJSON(context.Background(), nil, nil, record); err != nil {
		return err
	}
	t.mu.Lock()
	t.recordedLocked(record)
	t.mu.Unlock()
	return nil
}

// retryHeld writes the informer's version of each held claim again (a
// change may have freed its device); once some are written, the store's
// position moves on to the last one seen, as far as the rest let it.
func (t *Tracker) retryHeld() {
	t.mu.Lock()
	claims := make([]*resourcev1.ResourceClaim, 0, len(t.held))
	for key := range t.held {
		if e := t.claims[key]; e != nil {
			claims = append(claims, e.api)
		} else {
			delete(t.held, key)
		}
	}
	t.mu.Unlock()
	wrote := false
	for _, c := range claims {
		if t.write(c, 0) == nil {
			t.mu.Lock()
			delete(t.held, types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
			t.mu.Unlock()
			wrote = true
		}
	}
	if wrote {
		t.mu.Lock()
		seen := t.seen
		t.mu.Unlock()
		if err := t.recordPosition(seen); err != nil {
			t.logger.Error(err, "claimstore tracker: watch position not recorded", "resourceVersion", seen)
		}
	}
}

// applyLocked makes claim (h: what it holds) the informer's version, and
// the version in effect unless the one in effect is at least as new.
func (t *Tracker) applyLocked(claim *resourcev1.ResourceClaim, h *holdings) {
	key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	if e := t.claims[key]; e != nil {
		newer, err := newerVersion(claim, e.latest)
		if err != nil {
			t.logger.Error(err, "claimstore tracker: update not applied", "claim", klog.KObj(claim))
			return
		}
		if !newer {
			return
		}
		t.setLatestLocked(e, claim, h)
		e.api = claim
		return
	}
	t.claims[key] = &entry{api: claim, latest: claim, holdings: h}
	t.counts.add(h)
	if h != nil {
		t.changes++
	}
}

// OnDelete applies an informer's delete (a claim or a
// cache.DeletedFinalStateUnknown holding one).
func (t *Tracker) OnDelete(obj any) {
	if claim := t.claimOf(obj); claim != nil {
		t.remove(claim, 0)
	}
}

// remove deletes claim from the store and the tracker. The delete is
// final whatever resourceVersion its object carries (a
// DeletedFinalStateUnknown's may be old): by key, as an informer drops it.
// With a position, a watch's DELETED event records it, and deletes only
// the claim of that uid: a watch resumed from a position held back
// replays deletes of earlier claims of a name that a later one now has.
// Held claims are written again after it (their device may be free).
func (t *Tracker) remove(claim *resourcev1.ResourceClaim, position uint64) {
	key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	var pre claimstore.Preconditions
	if position > 0 && claim.UID != "" {
		uid := string(claim.UID)
		pre.UID = &uid
	}
	start := time.Now()
	_, err := t.store.Delete(context.Background(), claimstore.Key{Namespace: key.Namespace, Name: key.Name}, pre)
	t.observed("delete", start, err)
	if err != nil && !errors.Is(err, claimstore.ErrNotFound) && !(pre.UID != nil && errors.Is(err, claimstore.ErrConflict)) {
		t.logger.Error(err, "claimstore tracker: delete not written to the store", "claim", klog.KObj(claim))
	}
	t.mu.Lock()
	if e := t.claims[key]; e == nil || pre.UID == nil || e.api.UID == claim.UID {
		delete(t.held, key)
		t.deleteLocked(key)
	}
	t.mu.Unlock()
	if t.ledger != nil && claim.UID != "" {
		t.queueLedgerWork(key, ledgerWork{uid: claim.UID, release: true})
	}
	if err := t.recordPosition(position); err != nil {
		t.logger.Error(err, "claimstore tracker: watch position not recorded", "resourceVersion", position)
	}
	t.retryHeld()
}

func (t *Tracker) deleteLocked(key types.NamespacedName) {
	e := t.claims[key]
	if e == nil {
		return
	}
	delete(t.claims, key)
	t.counts.remove(e.holdings)
	if e.holdings != nil {
		t.changes++
	}
}

// write applies the informer's claim to the store as the cluster has it
// (Store.ApplyClusterEventsJSON: validated whole, no rule about a change,
// skipped when the store has it as new), with its object (ObjectOf) so
// that Run can resume from the store, and position as the watch position
// (0: unchanged).
func (t *Tracker) write(claim *resourcev1.ResourceClaim, position uint64) error {
	b, object, err := encode(claim)
	if err != nil {
		return err
	}
	start := time.Now()
	_, err = t.store.ApplyClusterEventsJSON(context.Background(), b, [][]byte{object}, position)
	t.observed("apply", start, err)
	return err
}

// encode is what the store takes of a claim from the cluster: the claim
// as JSON and the rest of its object (ObjectOf).
func encode(claim *resourcev1.ResourceClaim) (claimJSON, object []byte, err error) {
	if claimJSON, err = json.Marshal(claim); err != nil {
		return nil, nil, err
	}
	if object, err = ObjectOf(claim); err != nil {
		return nil, nil, err
	}
	return claimJSON, object, nil
}

func (t *Tracker) refused(claim *resourcev1.ResourceClaim, err error) {
	t.mu.Lock()
	t.refusedCount++
	if errors.Is(err, claimstore.ErrConflict) {
		t.conflicts++
	}
	t.mu.Unlock()
	switch {
	case errors.Is(err, claimstore.ErrInvalid):
		t.logger.Error(err, "claimstore tracker: claim refused, left out", "claim", klog.KObj(claim))
	case errors.Is(err, claimstore.ErrConflict):
		t.logger.Error(err, "claimstore tracker: claim holds a device another claim holds; counted all the same, not stored",
			"claim", klog.KObj(claim), "field", t.heldElsewhere(claim, err))
	default:
		t.logger.Error(err, "claimstore tracker: claim not stored, counted all the same", "claim", klog.KObj(claim))
	}
	if t.onRefused != nil {
		t.onRefused(claim, err)
	}
}

// heldElsewhere is the field path of claim's first allocation result
// whose device a claim that err names as its holder holds
// ("status.allocation.devices.results[2]"), or "status.allocation" when
// none is found.
func (t *Tracker) heldElsewhere(claim *resourcev1.ResourceClaim, err error) string {
	var conflict *claimstore.ConflictError
	if claim.Status.Allocation == nil || !errors.As(err, &conflict) {
		return "status.allocation"
	}
	for i, r := range claim.Status.Allocation.Devices.Results {
		held, qerr := t.store.ClaimsUsingDevice(claimstore.DeviceQuery{Driver: r.Driver, Pool: r.Pool, Device: r.Device})
		if qerr != nil {
			continue
		}
		for _, h := range held.Holdings {
			if slices.Contains(conflict.Holders, h.Claim) {
				return fmt.Sprintf("status.allocation.devices.results[%d]", i)
			}
		}
	}
	return "status.allocation"
}

// setLatestLocked makes claim the version in effect for e.
func (t *Tracker) setLatestLocked(e *entry, claim *resourcev1.ResourceClaim, h *holdings) {
	if e.latest == claim {
		return
	}
	e.latest = claim
	if sameHoldings(e.holdings, h) {
		// Most updates (reservations, device status) leave the allocation
		// as it was: nothing allocated changed.
		return
	}
	t.counts.remove(e.holdings)
	e.holdings = h
	t.counts.add(h)
	t.changes++
}

// loggerOr is *l, or klog's background logger when l is nil.
func loggerOr(l *klog.Logger) klog.Logger {
	if l != nil {
		return *l
	}
	return klog.Background()
}

// newerVersion reports whether claim's resourceVersion is newer than
// stored's; both must be integers, as the API server's are.
func newerVersion(claim, stored *resourcev1.ResourceClaim) (bool, error) {
	n, err := strconv.ParseInt(claim.ResourceVersion, 10, 64)
	if err != nil {
		return false, fmt.Errorf("resourceVersion %q of %s/%s: %w", claim.ResourceVersion, claim.Namespace, claim.Name, err)
	}
	s, err := strconv.ParseInt(stored.ResourceVersion, 10, 64)
	if err != nil {
		return false, fmt.Errorf("resourceVersion %q of %s/%s: %w", stored.ResourceVersion, stored.Namespace, stored.Name, err)
	}
	return n > s, nil
}

func notFound(namespace, name string) error {
	return apierrors.NewNotFound(resourcev1.Resource("resourceclaims"), namespace+"/"+name)
}

// Get returns the claim in effect (the assumed version, else the
// informer's). A missing claim is a Kubernetes NotFound.
func (t *Tracker) Get(namespace, claimName string) (*resourcev1.ResourceClaim, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e := t.claims[types.NamespacedName{Namespace: namespace, Name: claimName}]
	if e == nil {
		return nil, notFound(namespace, claimName)
	}
	return e.latest, nil
}

// List returns every claim in effect, in no particular order.
func (t *Tracker) List() ([]*resourcev1.ResourceClaim, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]*resourcev1.ResourceClaim, 0, len(t.claims))
	for _, e := range t.claims {
		out = append(out, e.latest)
	}
	return out, nil
}

// ListAllAllocatedDevices returns the devices the claims hold whole and
// every device of a pending allocation. The same set while nothing
// changed; it is never changed after it is returned.
func (t *Tracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	return cachedGet(t, &t.listed, func() sets.Set[structured.DeviceID] { return t.counts.listAll(t.extraLocked()) }), nil
}

// GatherAllocatedState returns what is allocated: the claims' allocations
// and the pending ones. The same maps while nothing changed (constant
// time); they are never changed after they are returned.
func (t *Tracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	return cachedGet(t, &t.gathered, func() *structured.AllocatedState {
		return t.counts.gather(t.extraLocked(), t.consumable)
	}), nil
}

// extraLocked is what the allocated state counts beyond the claims' own
// allocations: the pending allocations' holdings, and the ledger's claims
// the tracker does not count.
func (t *Tracker) extraLocked() []*holdings {
	var out []*holdings
	for _, p := range t.pending {
		if p.holdings != nil {
			out = append(out, p.holdings)
		}
	}
	t.elsewhereLocked(&out)
	return out
}

// elsewhereLocked appends to *out (when out is not nil) what the ledger
// holds for claims the tracker does not count (neither pending here nor
// allocated in the version in effect: allocations of another scheduler
// whose API write the tracker has not seen yet) and returns how many.
func (t *Tracker) elsewhereLocked(out *[]*holdings) int {
	n := 0
	for key, le := range t.elsewhere {
		if t.pending[le.uid] != nil {
			continue
		}
		if e := t.claims[key]; e != nil && e.latest.UID == le.uid && e.latest.Status.Allocation != nil {
			continue
		}
		n++
		if out != nil {
			*out = append(*out, le.holdings)
		}
	}
	return n
}

// cached is a value built from the tracker's state at one count of its
// changes.
type cached[T any] struct {
	value T
	at    uint64
	built bool
}

// cachedGet returns c's value while t.changes is the count it was built
// at (under the read lock: constant time), else builds it anew under the
// write lock.
func cachedGet[T any](t *Tracker, c *cached[T], build func() T) T {
	t.mu.RLock()
	if c.built && c.at == t.changes {
		v := c.value
		t.mu.RUnlock()
		return v
	}
	t.mu.RUnlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.built || c.at != t.changes {
		c.value, c.at, c.built = build(), t.changes, true
	}
	return c.value
}

// SignalClaimPendingAllocation records that the scheduler is about to
// write allocatedClaim's allocation; a second signal for the same uid adds
// a sharer. Nothing is recorded when the claim in effect already is that
// allocated claim.
//
// With a ledger (TrackerOptions.Ledger), the allocation is first written
// there (an etcd round trip, outside the tracker's lock): an error
// wrapping ErrHeldInLedger and the claimstore.ConflictError naming the
// holder when another claim holds one of its devices, and nothing is
// recorded.
func (t *Tracker) SignalClaimPendingAllocation(claimUID types.UID, allocatedClaim *resourcev1.ResourceClaim) error {
	t.mu.Lock()
	t.signalled++
	done, err := t.signalLocked(claimUID, allocatedClaim)
	h := holdingsOf(allocatedClaim, t.consumable)
	ledger := !done && t.ledger != nil && h != nil && allocatedClaim.Name != extendedResourceClaimName
	if done || !ledger {
		if !done {
			t.pendLocked(claimUID, allocatedClaim, h, 0)
		}
		t.mu.Unlock()
		return err
	}
	t.mu.Unlock()
	rev, err := t.reserveInLedger(allocatedClaim)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.ledgerRefused++
		return err
	}
	// Signalled again meanwhile (a claim pods share): one entry.
	if p := t.pending[claimUID]; p != nil {
		p.sharers++
		if p.ledgerRevision == 0 {
			p.ledgerRevision = rev
		}
		return nil
	}
	t.pendLocked(claimUID, allocatedClaim, h, rev)
	return nil
}

// signalLocked is SignalClaimPendingAllocation's part before anything is
// recorded: done when it is finished (a sharer added, the claim missing
// or already allocated), with its error.
func (t *Tracker) signalLocked(claimUID types.UID, allocatedClaim *resourcev1.ResourceClaim) (bool, error) {
	if p := t.pending[claimUID]; p != nil {
		p.sharers++
		return true, nil
	}
	if allocatedClaim.Name != extendedResourceClaimName {
		e := t.claims[types.NamespacedName{Namespace: allocatedClaim.Namespace, Name: allocatedClaim.Name}]
		if e == nil {
			return true, fmt.Errorf("look up assumed claim %s/%s, UID=%s: %w", allocatedClaim.Namespace,
				allocatedClaim.Name, claimUID, notFound(allocatedClaim.Namespace, allocatedClaim.Name))
		}
		if e.latest.UID == claimUID && e.latest.Status.Allocation != nil {
			return true, nil
		}
	}
	return false, nil
}

func (t *Tracker) pendLocked(claimUID types.UID, allocatedClaim *resourcev1.ResourceClaim, h *holdings, ledgerRevision uint64) {
	t.pending[claimUID] = &pendingAllocation{claim: allocatedClaim, holdings: h, sharers: 1, ledgerRevision: ledgerRevision}
	if h != nil {
		t.changes++
	}
}

// extendedResourceClaimName is the name kube-scheduler gives the claim it
// makes in memory for a pod's extended resources; it is never in the
// tracker.
const extendedResourceClaimName = "<extended-resources>"

// GetPendingAllocation returns the pending allocation of claimUID, or nil.
func (t *Tracker) GetPendingAllocation(claimUID types.UID) *resourcev1.AllocationResult {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if p := t.pending[claimUID]; p != nil && p.claim != nil {
		return p.claim.Status.Allocation
	}
	return nil
}

// MaybeRemoveClaimPendingAllocation removes one sharer of claimUID's
// pending allocation, and the allocation with its last sharer (or at once
// with forceRemove). It reports whether the allocation went away.
//
// With a ledger, an allocation removed without forceRemove (kube-scheduler's
// Unreserve: the binding failed) is taken out of the ledger too, unless the
// claim in effect is allocated (the API server took the allocation); with
// forceRemove (the binding succeeded) it stays, as the cluster's.
func (t *Tracker) MaybeRemoveClaimPendingAllocation(claimUID types.UID, forceRemove bool) bool {
	t.mu.Lock()
	p := t.pending[claimUID]
	if p == nil {
		t.mu.Unlock()
		return false
	}
	if !forceRemove && p.sharers > 1 {
		p.sharers--
		t.mu.Unlock()
		return false
	}
	delete(t.pending, claimUID)
	if p.holdings != nil {
		t.changes++
	}
	key := types.NamespacedName{Namespace: p.claim.Namespace, Name: p.claim.Name}
	release := t.ledger != nil && p.ledgerRevision > 0 && !forceRemove
	if e := t.claims[key]; release && e != nil && e.latest.UID == claimUID && e.latest.Status.Allocation != nil {
		release = false
	}
	client := t.client
	t.mu.Unlock()
	if release && !allocatedInCluster(client, key, claimUID, t.logger) {
		t.releaseInLedger(key, claimUID, 0, p.ledgerRevision)
	}
	return true
}

// allocatedInCluster asks the API server (with client; without one, the
// answer is no) whether the claim of uid is allocated: a binding that
// failed may have written the allocation all the same (a write that timed
// out after it committed), and then its ledger entry must stay. When the
// API server cannot say, the entry stays too (it is taken out once the
// cluster deallocates or deletes the claim).
func allocatedInCluster(client kubernetes.Interface, key types.NamespacedName, uid types.UID, logger klog.Logger) bool {
	if client == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	c, err := client.ResourceV1().ResourceClaims(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		logger.Error(err, "claimstore tracker: the API server cannot say whether the claim is allocated; its ledger entry stays", "claim", key)
		return true
	}
	return c.UID == uid && c.Status.Allocation != nil
}

// AssumeClaimAfterAPICall makes claim, as the API server returned it from
// the scheduler's write, the version in effect until the informer delivers
// it or a newer one. An error when the tracker has no such claim, or a
// newer version of it.
func (t *Tracker) AssumeClaimAfterAPICall(claim *resourcev1.ResourceClaim) error {
	h := holdingsOf(claim, t.consumable)
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.claims[types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}]
	if e == nil {
		return notFound(claim.Namespace, claim.Name)
	}
	n, err := strconv.ParseInt(claim.ResourceVersion, 10, 64)
	if err != nil {
		return fmt.Errorf("resourceVersion %q of %s/%s: %w", claim.ResourceVersion, claim.Namespace, claim.Name, err)
	}
	s, err := strconv.ParseInt(e.latest.ResourceVersion, 10, 64)
	if err != nil {
		return fmt.Errorf("resourceVersion %q of %s/%s: %w", e.latest.ResourceVersion, claim.Namespace, claim.Name, err)
	}
	if n < s {
		return fmt.Errorf("ResourceClaim %s/%s is out of sync (stored: %d, assume: %d)", claim.Namespace, claim.Name, s, n)
	}
	t.assumed++
	t.setLatestLocked(e, claim, h)
	return nil
}

// AssumedClaimRestore drops the assumed version of the claim: the
// informer's is in effect again.
func (t *Tracker) AssumedClaimRestore(namespace, claimName string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.claims[types.NamespacedName{Namespace: namespace, Name: claimName}]
	if e == nil || e.latest == e.api {
		return
	}
	t.setLatestLocked(e, e.api, holdingsOf(e.api, t.consumable))
}
