package k8s_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"claimstore.dev/claimstore"
	"claimstore.dev/claimstore/k8s"
)

// The Tracker fed by a shared informer, as kube-scheduler feeds its own
// (a fake clientset in place of kubernetes.NewForConfig).
func ExampleTracker_Handler() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "claimstore-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store, err := claimstore.Open(ctx, filepath.Join(dir, "db"), claimstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	tracker := k8s.NewTracker(store, k8s.TrackerOptions{})

	client := fake.NewClientset(&resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: "team-a", UID: "uid-gpus", ResourceVersion: "1"}})
	factory := informers.NewSharedInformerFactory(client, 0)
	registration, err := factory.Resource().V1().ResourceClaims().Informer().AddEventHandler(tracker.Handler())
	if err != nil {
		panic(err)
	}
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), registration.HasSynced)

	claim, err := tracker.Get("team-a", "gpus")
	if err != nil {
		panic(err)
	}
	stored, err := store.Get(claimstore.Key{Namespace: "team-a", Name: "gpus"})
	if err != nil {
		panic(err)
	}
	fmt.Println(claim.UID, "is in the tracker and in the store:", stored.UID())
	cancel()
	factory.Shutdown()
	// Output: uid-gpus is in the tracker and in the store: uid-gpus
}
