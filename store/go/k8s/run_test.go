package k8s

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"claimstore.dev/claimstore"
)

// cluster is an API server's ResourceClaims as a fake clientset serves
// them: the list Run gets, and one fake watcher per watch, recording the
// resourceVersions asked for.
type cluster struct {
	client   *fake.Clientset
	mu       sync.Mutex
	list     *resourcev1.ResourceClaimList
	lists    atomic.Int32
	watches  chan *watch.FakeWatcher
	watchRVs chan string
}

func newCluster(list *resourcev1.ResourceClaimList) *cluster {
	c := &cluster{client: fake.NewClientset(), list: list,
		watches: make(chan *watch.FakeWatcher, 4), watchRVs: make(chan string, 4)}
	c.client.PrependReactor("list", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		c.lists.Add(1)
		c.mu.Lock()
		defer c.mu.Unlock()
		return true, c.list.DeepCopy(), nil
	})
	c.client.PrependWatchReactor("resourceclaims", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFakeWithChanSize(16, false)
		c.watchRVs <- a.(k8stesting.WatchActionImpl).GetWatchRestrictions().ResourceVersion
		c.watches <- w
		return true, w, nil
	})
	return c
}

func (c *cluster) nextWatch(t *testing.T) (*watch.FakeWatcher, string) {
	t.Helper()
	select {
	case w := <-c.watches:
		return w, <-c.watchRVs
	case <-time.After(10 * time.Second):
		t.Fatal("the tracker did not watch")
		return nil, ""
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reopen closes store and opens the database at dir again, as a restarted
// scheduler does (closed at the test's end).
func reopen(t *testing.T, store *claimstore.Store, dir string) *claimstore.Store {
	t.Helper()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func runTracker(t *testing.T, tr *Tracker, c *cluster) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, c.client) }()
	return func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	}
}

// A scheduler restarted on its store resumes the watch where it stopped,
// without listing the cluster, with the claims whole (spec included); when
// the API server has compacted that version away (410), it lists again and
// the list replaces what the store had.
func TestRunResumesFromTheStoreAndRelistsOnGone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	a := pendingClaim("a", "uid-a", "10")
	b := pendingClaim("b", "uid-b", "11")
	c1 := newCluster(&resourcev1.ResourceClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "20"},
		Items: []resourcev1.ResourceClaim{*a, *b}})

	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(store, TrackerOptions{})
	stop := runTracker(t, tr, c1)
	w, rv := c1.nextWatch(t)
	if rv != "20" || c1.lists.Load() != 1 || !tr.HasSynced() {
		t.Fatalf("first start: watch from %q after %d lists (synced %v); want 20 after 1", rv, c1.lists.Load(), tr.HasSynced())
	}
	w.Modify(allocated(a, "21", dev{device: "gpu-0"}))
	gone := b.DeepCopy()
	gone.ResourceVersion = "22"
	w.Delete(gone)
	w.Action(watch.Bookmark, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "25"}})
	eventually(t, "the store's position reaches the bookmark", func() bool {
		st, err := store.Stats()
		return err == nil && st.FollowResourceVersion == 25
	})
	if got := devicesOf(t, tr); len(got) != 1 || got[0] != "gpu-0" {
		t.Fatalf("allocated %v", got)
	}
	stop()

	// The restart: no list, the watch from 25, the claims from the store.
	store = reopen(t, store, dir)
	c2 := newCluster(&resourcev1.ResourceClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "40"},
		Items: []resourcev1.ResourceClaim{*pendingClaim("c", "uid-c", "30")}})
	tr2 := NewTracker(store, TrackerOptions{})
	stop2 := runTracker(t, tr2, c2)
	defer stop2()
	w2, rv2 := c2.nextWatch(t)
	if rv2 != "25" || c2.lists.Load() != 0 || !tr2.HasSynced() {
		t.Fatalf("restart: watch from %q after %d lists (synced %v); want 25 after none", rv2, c2.lists.Load(), tr2.HasSynced())
	}
	got, err := tr2.Get("default", "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "21" || got.Spec.Devices.Requests[0].Exactly == nil ||
		got.Spec.Devices.Requests[0].Exactly.DeviceClassName != "class" || got.Status.Allocation == nil {
		t.Fatalf("claim a after the restart: %+v", got)
	}
	if _, err := tr2.Get("default", "b"); !apierrors.IsNotFound(err) {
		t.Fatalf("deleted claim b after the restart: %v", err)
	}
	if devs := devicesOf(t, tr2); len(devs) != 1 || devs[0] != "gpu-0" {
		t.Fatalf("allocated after the restart: %v", devs)
	}

	// 410: the list replaces the store's claims.
	w2.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired,
		Message: "too old resource version: 25 (35)"})
	_, rv3 := c2.nextWatch(t)
	if rv3 != "40" || c2.lists.Load() != 1 {
		t.Fatalf("after 410: watch from %q after %d lists; want 40 after 1", rv3, c2.lists.Load())
	}
	if _, err := tr2.Get("default", "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("claim a is gone from the cluster, the tracker has it: %v", err)
	}
	if _, err := tr2.Get("default", "c"); err != nil {
		t.Fatalf("claim c: %v", err)
	}
	if _, err := store.Get(claimstore.Key{Namespace: "default", Name: "a"}); err == nil {
		t.Fatal("the store kept claim a, which the list no longer has")
	}
	st, _ := store.Stats()
	if st.FollowResourceVersion != 40 || st.Claims != 1 {
		t.Fatalf("the store after the relist: position %d, %d claims", st.FollowResourceVersion, st.Claims)
	}
	if devs := devicesOf(t, tr2); len(devs) != 0 {
		t.Fatalf("allocated after the relist: %v", devs)
	}
}

// A claim that holds a device another claim holds (a double allocation
// the API server let through) is counted but not stored: the store's
// watch position stays before its event, so that a restart resumes from
// there, gets it again and counts it; once its device is free it is
// written, and the position moves on.
func TestRunKeepsItsPositionBeforeAClaimTheStoreLacks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	a := pendingClaim("a", "uid-a", "10")
	b := pendingClaim("b", "uid-b", "11")
	c := pendingClaim("c", "uid-c", "12")
	aHolds := allocated(a, "10", dev{device: "gpu-0"})
	bHolds := allocated(b, "21", dev{device: "gpu-0"}) // the same device
	c1 := newCluster(&resourcev1.ResourceClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "20"},
		Items: []resourcev1.ResourceClaim{*aHolds, *b, *c}})
	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int32
	tr := NewTracker(store, TrackerOptions{OnRefused: func(*resourcev1.ResourceClaim, error) { refused.Add(1) }})
	stop := runTracker(t, tr, c1)
	w, _ := c1.nextWatch(t)
	w.Modify(bHolds)
	w.Action(watch.Bookmark, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "25"}})
	w.Modify(allocated(c, "26", dev{device: "gpu-1"})) // after the bookmark: its mark
	eventually(t, "claim c in the store", func() bool {
		got, err := store.Get(claimstore.Key{Namespace: "default", Name: "c"})
		return err == nil && got.Allocated()
	})
	if refused.Load() != 1 {
		t.Fatalf("%d refusals, want 1 (claim b)", refused.Load())
	}
	if got, err := store.Get(claimstore.Key{Namespace: "default", Name: "b"}); err != nil || got.Allocated() {
		t.Fatalf("the store's claim b: %v (allocated: %v); want it unallocated", err, err == nil && got.Allocated())
	}
	if st, _ := store.Stats(); st.FollowResourceVersion != 20 {
		t.Fatalf("the store's position %d with claim b missing; want 20, before b's event", st.FollowResourceVersion)
	}
	stop()

	// The restart resumes from 20 and gets b's event again: counted.
	store = reopen(t, store, dir)
	c2 := newCluster(&resourcev1.ResourceClaimList{})
	tr2 := NewTracker(store, TrackerOptions{})
	stop2 := runTracker(t, tr2, c2)
	defer stop2()
	w2, rv2 := c2.nextWatch(t)
	if rv2 != "20" || c2.lists.Load() != 0 {
		t.Fatalf("restart: watch from %q after %d lists; want 20 after none", rv2, c2.lists.Load())
	}
	w2.Modify(bHolds)
	w2.Modify(allocated(c, "26", dev{device: "gpu-1"}))
	eventually(t, "b counted again", func() bool {
		got, err := tr2.Get("default", "b")
		return err == nil && got.Status.Allocation != nil
	})
	if st, _ := store.Stats(); st.FollowResourceVersion != 20 {
		t.Fatalf("the store's position %d while it lacks b; want 20", st.FollowResourceVersion)
	}
	// a's delete frees gpu-0: b is written, the position moves on to 27.
	gone := aHolds.DeepCopy()
	gone.ResourceVersion = "27"
	w2.Delete(gone)
	eventually(t, "b in the store, the position at a's delete", func() bool {
		got, err := store.Get(claimstore.Key{Namespace: "default", Name: "b"})
		st, _ := store.Stats()
		return err == nil && got.Allocated() && got.ResultAt(0).Device == "gpu-0" && st.FollowResourceVersion == 27
	})
	if devs := devicesOf(t, tr2); len(devs) != 2 || devs[0] != "gpu-0" || devs[1] != "gpu-1" {
		t.Fatalf("allocated after a's delete: %v; want gpu-0 (b's) and gpu-1", devs)
	}
	w2.Action(watch.Bookmark, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "30"}})
	eventually(t, "the store's position reaches the bookmark", func() bool {
		st, err := store.Stats()
		return err == nil && st.FollowResourceVersion == 30
	})
}

// A relist after a 410 in which a claim the store still has is gone and a
// new one holds its device: the delete goes first, nothing is refused, and
// the position is the list's.
func TestRelistDeletesBeforeItAdds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	x := allocated(pendingClaim("x", "uid-x", "10"), "10", dev{device: "gpu-0"})
	c1 := newCluster(&resourcev1.ResourceClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "20"},
		Items: []resourcev1.ResourceClaim{*x}})
	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var refused atomic.Int32
	tr := NewTracker(store, TrackerOptions{OnRefused: func(*resourcev1.ResourceClaim, error) { refused.Add(1) }})
	stop := runTracker(t, tr, c1)
	defer stop()
	w, _ := c1.nextWatch(t)
	// Meanwhile x is deleted and y takes gpu-0; the watch sees neither.
	y := allocated(pendingClaim("y", "uid-y", "30"), "31", dev{device: "gpu-0"})
	c1.mu.Lock()
	c1.list = &resourcev1.ResourceClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "40"},
		Items: []resourcev1.ResourceClaim{*y}}
	c1.mu.Unlock()
	w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
	_, rv := c1.nextWatch(t)
	if rv != "40" || refused.Load() != 0 {
		t.Fatalf("after the relist: watch from %q, %d refusals; want 40, none", rv, refused.Load())
	}
	if got, err := store.Get(claimstore.Key{Namespace: "default", Name: "y"}); err != nil || got.ResultAt(0).Device != "gpu-0" {
		t.Fatalf("the store's claim y: %v", err)
	}
	if st, _ := store.Stats(); st.FollowResourceVersion != 40 || st.Claims != 1 {
		t.Fatalf("the store after the relist: position %d, %d claims", st.FollowResourceVersion, st.Claims)
	}
}

// A delete of an earlier claim of a name (another uid), as a watch resumed
// from a held position replays it, leaves the claim of that name alone.
func TestRunDeletesOnlyTheClaimOfTheUID(t *testing.T) {
	store, err := claimstore.Open(ctx, filepath.Join(t.TempDir(), "db"), claimstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d := allocated(pendingClaim("d", "uid-d2", "15"), "15", dev{device: "gpu-0"})
	c1 := newCluster(&resourcev1.ResourceClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "20"},
		Items: []resourcev1.ResourceClaim{*d}})
	tr := NewTracker(store, TrackerOptions{})
	stop := runTracker(t, tr, c1)
	defer stop()
	w, _ := c1.nextWatch(t)
	old := pendingClaim("d", "uid-d1", "21") // the name's earlier claim
	w.Delete(old)
	w.Action(watch.Bookmark, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "25"}})
	eventually(t, "the bookmark", func() bool {
		st, err := store.Stats()
		return err == nil && st.FollowResourceVersion == 25
	})
	if got, err := tr.Get("default", "d"); err != nil || got.UID != "uid-d2" {
		t.Fatalf("the tracker's claim d after another uid's delete: %v", err)
	}
	if got, err := store.Get(claimstore.Key{Namespace: "default", Name: "d"}); err != nil || got.UID() != "uid-d2" {
		t.Fatalf("the store's claim d after another uid's delete: %v", err)
	}
}
