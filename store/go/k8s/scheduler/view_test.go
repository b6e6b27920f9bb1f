package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"claimstore.dev/claimstore"
	"claimstore.dev/claimstore/k8s"
)

// informerClaims is the scheduler's own tracker as the view uses it: Get.
type informerClaims struct {
	fwk.ResourceClaimTracker
	claims map[string]*resourcev1.ResourceClaim
}

func (i informerClaims) Get(namespace, name string) (*resourcev1.ResourceClaim, error) {
	if c := i.claims[namespace+"/"+name]; c != nil {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
}

func claimAt(name, rv string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv}}
}

// TestViewAnswersWithTheNewerClaim: Get finds a claim only the scheduler's
// informer has yet, and of two versions answers with the newer one,
// whichever holds it.
func TestViewAnswersWithTheNewerClaim(t *testing.T) {
	store, err := claimstore.Open(context.Background(), t.TempDir(), claimstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tracker := k8s.NewTracker(store, k8s.TrackerOptions{})
	tracker.OnAdd(claimAt("older-in-tracker", "5"))
	tracker.OnAdd(claimAt("newer-in-tracker", "9"))
	view := claimsView{Tracker: tracker, informer: informerClaims{claims: map[string]*resourcev1.ResourceClaim{
		"ns/only-in-informer": claimAt("only-in-informer", "3"),
		"ns/older-in-tracker": claimAt("older-in-tracker", "7"),
		"ns/newer-in-tracker": claimAt("newer-in-tracker", "8"),
	}}}
	for name, rv := range map[string]string{"only-in-informer": "3", "older-in-tracker": "7", "newer-in-tracker": "9"} {
		c, err := view.Get("ns", name)
		if err != nil || c.ResourceVersion != rv {
			t.Errorf("Get(%s): %v, %v; want resourceVersion %s", name, c, err, rv)
		}
	}
	if _, err := view.Get("ns", "nowhere"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a claim neither has: %v, want NotFound", err)
	}
}

// TestCatchUpWaitsForTheTracker: PreFilter's wait returns once the tracker
// has applied what the informer delivered, not before; and at once when
// the scheduler stops.
func TestCatchUpWaitsForTheTracker(t *testing.T) {
	var applied atomic.Uint64
	s := &started{applied: applied.Load}
	s.inform(claimAt("a", "42"))
	s.inform(claimAt("b", "17")) // older: the newest stays
	if got := s.informed.Load(); got != 42 {
		t.Fatalf("informed %d, want 42", got)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		applied.Store(41)
		time.Sleep(20 * time.Millisecond)
		applied.Store(42)
	}()
	s.catchUp(context.Background())
	if got := applied.Load(); got < 42 {
		t.Errorf("catchUp returned with the tracker at %d, before 42", got)
	}
	s.inform(claimAt("c", "50"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() { s.catchUp(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(catchUpTimeout / 2):
		t.Errorf("catchUp waited on after its context ended")
	}
}
