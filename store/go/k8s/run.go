package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"claimstore.dev/claimstore"
)

// Run keeps the tracker in step with the cluster's ResourceClaims until ctx
// is done, through its own list and watch (instead of Handler on a shared
// informer), so that a restarted scheduler resumes from its store:
//
//   - at start, the claims the store keeps (each with its object, as Run
//     and Handler write them) are loaded, and the watch resumes from the
//     resourceVersion the store recorded: no list of the cluster while the
//     API server still has that version;
//   - with nothing to resume from, or when the API server answers 410
//     (the version is compacted away), Run lists every claim and applies
//     the list to the store in one atomic write, claims the list no longer
//     has deleted, and watches from the list's resourceVersion;
//   - every watch event is written to the store with its resourceVersion
//     as the position before the tracker shows it; except while the store
//     lacks a claim the tracker counts (a double allocation the store's
//     device rule refuses, TrackerOptions.OnRefused): then the store's
//     position stays before that claim's event, so that a restart resumes
//     from there and gets it again (or lists, if that is compacted away),
//     until the claim is written (its device free again) or deleted.
//
// HasSynced reports when the first load or list is in. Run returns ctx's
// error; other errors (an unreachable API server) are retried with
// backoff and logged.
//
// With a ledger (TrackerOptions.Ledger), Run also follows the ledger, and
// once the claims are in, takes out the ledger's entries of claims the
// API server no longer has.
func (t *Tracker) Run(ctx context.Context, client kubernetes.Interface) error {
	if t.ledger != nil {
		t.mu.Lock()
		t.client = client
		t.mu.Unlock()
		go t.followLedger(ctx)
		go t.ledgerWorker(ctx)
		if t.reapAfter > 0 {
			go t.reapLedger(ctx, client, t.reapAfter, min(max(t.reapAfter/10, time.Second), time.Minute))
		}
	}
	rv, err := t.load()
	if err != nil {
		t.logger.Error(err, "claimstore tracker: the store's claims cannot be resumed from; listing the cluster")
	}
	needList := err != nil || rv == 0
	swept := false
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if needList {
			if rv, err = t.relist(ctx, client); err != nil {
				if ctx.Err() != nil {
					break
				}
				t.logger.Error(err, "claimstore tracker: list of ResourceClaims failed; retrying", "backoff", backoff)
				sleep(ctx, &backoff)
				continue
			}
			needList = false
		}
		if t.ledger != nil && !swept {
			t.sweepLedger(ctx, client)
			swept = true
		}
		next, err := t.watch(ctx, client, rv)
		switch {
		case ctx.Err() != nil:
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			t.logger.V(2).Info("claimstore tracker: the watch's resourceVersion is gone; listing again", "resourceVersion", rv)
			needList = true
			swept = false // the ledger is brought in line with the new list
		case err != nil:
			t.logger.Error(err, "claimstore tracker: watch of ResourceClaims failed; watching again", "backoff", backoff)
			rv = next
			sleep(ctx, &backoff)
		default:
			rv = next
			backoff = 100 * time.Millisecond
		}
	}
	return ctx.Err()
}

func sleep(ctx context.Context, backoff *time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(*backoff):
	}
	if *backoff < 10*time.Second {
		*backoff *= 2
	}
}

// HasSynced reports whether the tracker holds the cluster's claims: Run has
// loaded them from the store or listed them (for cache.WaitForCacheSync),
// and, with a ledger, read the ledger's claims.
func (t *Tracker) HasSynced() bool {
	return t.synced.Load() && (t.ledger == nil || t.ledgerSynced.Load())
}

// load fills the tracker from the store and returns the position to
// resume the watch from: 0 (list) when the store has no position or a
// claim without its object.
func (t *Tracker) load() (uint64, error) {
	st, err := t.store.Stats()
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	t.position = st.FollowResourceVersion
	t.mu.Unlock()
	if st.FollowResourceVersion == 0 {
		return 0, nil
	}
	page, err := t.store.List(claimstore.ListOptions{})
	if err != nil {
		return 0, err
	}
	claims := make([]*resourcev1.ResourceClaim, 0, len(page.Claims))
	for _, rec := range page.Claims {
		if rec.Object() == nil {
			return 0, fmt.Errorf("claim %s/%s is stored without its object (not written by the tracker)", rec.Namespace(), rec.Name())
		}
		c, err := FromRecord(rec)
		if err != nil {
			return 0, err
		}
		c.TypeMeta = metav1.TypeMeta{}
		claims = append(claims, c)
	}
	t.mu.Lock()
	for _, c := range claims {
		t.applyLocked(c, holdingsOf(c, t.consumable))
	}
	t.mu.Unlock()
	t.synced.Store(true)
	t.logger.Info("claimstore tracker: resuming the watch of ResourceClaims from the store",
		"claims", len(claims), "resourceVersion", st.FollowResourceVersion)
	return st.FollowResourceVersion, nil
}

// relist lists every claim (in pages), applies them to the store in one
// write with the claims the list no longer has deleted, then to the
// tracker, and returns the list's resourceVersion.
func (t *Tracker) relist(ctx context.Context, client kubernetes.Interface) (uint64, error) {
	var items []resourcev1.ResourceClaim
	opts := metav1.ListOptions{Limit: 500}
	var listRV string
	var err error
	for {
		list, err := client.ResourceV1().ResourceClaims("").List(ctx, opts)
		if err != nil {
			return 0, err
		}
		items = append(items, list.Items...)
		listRV = list.ResourceVersion
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	// An API server's list always has a resourceVersion; without one (a
	// fake clientset) there is no position to record or resume from.
	var rv uint64
	if listRV != "" {
		if rv, err = strconv.ParseUint(listRV, 10, 64); err != nil {
			return 0, fmt.Errorf("the list's resourceVersion %q: %w", listRV, err)
		}
	}
	listed := make(map[types.NamespacedName]bool, len(items))
	for i := range items {
		listed[types.NamespacedName{Namespace: items[i].Namespace, Name: items[i].Name}] = true
	}
	// Claims the store has that the list does not: deleted in the same
	// write, first (a listed claim may hold a device a deleted one held),
	// the store read a page at a time and only those kept.
	var input []byte
	objects := make([][]byte, 0, len(items))
	var gone []*claimstore.Claim
	for rec, err := range t.store.All(ctx, claimstore.ListOptions{}) {
		if err != nil {
			return 0, err
		}
		if listed[types.NamespacedName{Namespace: rec.Namespace(), Name: rec.Name()}] {
			continue
		}
		event, err := deletedEvent(rec, rv)
		if err != nil {
			return 0, err
		}
		input = append(append(input, event...), '\n')
		objects = append(objects, nil)
		gone = append(gone, rec)
	}
	for i := range items {
		b, o, err := encode(&items[i])
		if err != nil {
			return 0, err
		}
		input = append(append(input, b...), '\n')
		objects = append(objects, o)
	}
	// The list is the whole truth: what was held before it is not.
	t.mu.Lock()
	clear(t.held)
	t.mu.Unlock()
	start := time.Now()
	_, err = t.store.ApplyClusterEventsJSON(context.Background(), input, objects, rv)
	t.observed("list", start, err)
	if err != nil {
		var conflict *claimstore.ConflictError
		if errors.As(err, &conflict) || errors.Is(err, claimstore.ErrInvalid) {
			// One claim the store refuses: apply the rest one by one, so
			// that only it is left out (and reported).
			return rv, t.applyEach(items, listed, gone, rv)
		}
		return 0, err
	}
	t.mu.Lock()
	t.recordedLocked(rv)
	for i := range items {
		t.applyLocked(&items[i], holdingsOf(&items[i], t.consumable))
	}
	for key := range t.claims {
		if !listed[key] {
			t.deleteLocked(key)
		}
	}
	t.mu.Unlock()
	t.synced.Store(true)
	t.logger.Info("claimstore tracker: listed the cluster's ResourceClaims", "claims", len(items),
		"deleted", len(gone), "resourceVersion", rv)
	return rv, nil
}

// applyEach is relist's way when the list as a whole is refused: the
// stored claims the list does not have (gone) deleted first, then each
// listed claim on its own, again while a pass writes some (one may hold a
// device another held before the list); those still refused are reported
// and, unless invalid, counted and held out of the store.
func (t *Tracker) applyEach(items []resourcev1.ResourceClaim, listed map[types.NamespacedName]bool,
	gone []*claimstore.Claim, rv uint64) error {
	for _, rec := range gone {
		if c, err := FromRecord(rec); err == nil {
			t.remove(c, 0)
		}
	}
	t.mu.Lock()
	for key := range t.claims {
		if !listed[key] {
			t.deleteLocked(key)
		}
	}
	t.mu.Unlock()
	pending := make([]int, len(items))
	for i := range pending {
		pending[i] = i
	}
	for progress := true; progress && len(pending) > 0; {
		progress = false
		rest := pending[:0]
		for _, i := range pending {
			c := &items[i]
			if err := t.write(c, 0); err != nil {
				rest = append(rest, i)
				continue
			}
			progress = true
			h := holdingsOf(c, t.consumable)
			t.mu.Lock()
			t.applyLocked(c, h)
			t.mu.Unlock()
		}
		pending = rest
	}
	for _, i := range pending {
		c := &items[i]
		if err := t.add(c, 0); err != nil && !errors.Is(err, claimstore.ErrInvalid) {
			// Counted, not stored: the store's position stays where it
			// was before this list.
			t.mu.Lock()
			t.held[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = t.position
			t.mu.Unlock()
		}
	}
	if err := t.recordPosition(rv); err != nil {
		return err
	}
	t.synced.Store(true)
	return nil
}

// deletedEvent is a DELETED watch event for a stored claim, at rv.
func deletedEvent(rec *claimstore.Claim, rv uint64) ([]byte, error) {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: rec.Name(), Namespace: rec.Namespace(),
		UID: types.UID(rec.UID()), ResourceVersion: strconv.FormatUint(rv, 10)}}
	return json.Marshal(struct {
		Type   watch.EventType           `json:"type"`
		Object *resourcev1.ResourceClaim `json:"object"`
	}{watch.Deleted, c})
}

// watch applies the events of one watch from rv and returns the position
// it reached, with the error that ended it (nil: the server closed it).
func (t *Tracker) watch(ctx context.Context, client kubernetes.Interface, rv uint64) (uint64, error) {
	from := ""
	if rv > 0 {
		from = strconv.FormatUint(rv, 10)
	}
	w, err := client.ResourceV1().ResourceClaims("").Watch(ctx, metav1.ListOptions{
		ResourceVersion: from, AllowWatchBookmarks: true})
	if err != nil {
		return rv, err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, nil
			}
			switch ev.Type {
			case watch.Error:
				return rv, apierrors.FromObject(ev.Object)
			case watch.Bookmark:
				if meta, ok := ev.Object.(metav1.Object); ok {
					if n, err := strconv.ParseUint(meta.GetResourceVersion(), 10, 64); err == nil && n > rv {
						if err := t.recordPosition(n); err != nil {
							return rv, err
						}
						rv = n
					}
				}
				continue
			}
			claim, ok := ev.Object.(*resourcev1.ResourceClaim)
			if !ok {
				t.logger.Error(nil, "claimstore tracker: watch event without a ResourceClaim", "type", fmt.Sprintf("%T", ev.Object))
				continue
			}
			n, err := strconv.ParseUint(claim.ResourceVersion, 10, 64)
			if err != nil {
				t.logger.Error(err, "claimstore tracker: watch event without a numeric resourceVersion", "claim", klog.KObj(claim))
				n = 0
			}
			if ev.Type == watch.Deleted {
				t.remove(claim, n)
			} else {
				// Refusals are reported; the lag is of claims applied.
				if err := t.add(claim, n); err == nil && t.observeLag != nil {
					t.observeLag(time.Since(lastWritten(claim)))
				}
			}
			if n > rv {
				rv = n
			}
		}
	}
}

// lastWritten is when the API server last wrote claim, as far as its
// object says: its newest managedFields time, or its creation.
func lastWritten(claim *resourcev1.ResourceClaim) time.Time {
	last := claim.CreationTimestamp.Time
	for _, f := range claim.ManagedFields {
		if f.Time != nil && f.Time.After(last) {
			last = f.Time.Time
		}
	}
	return last
}
