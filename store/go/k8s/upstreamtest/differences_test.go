package upstreamtest

import (
	"context"
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"claimstore.dev/claimstore"
	csk8s "claimstore.dev/claimstore/k8s"
)

// Where docs/kubernetes.md says the Tracker and kube-scheduler's tracker
// differ, each difference shown on both.

type both struct {
	up   *Upstream
	ours *csk8s.Tracker
}

func newBoth(t *testing.T) *both {
	store, err := claimstore.Open(ctx, t.TempDir(), claimstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return &both{up: NewUpstream(context.Background()), ours: csk8s.NewTracker(store, csk8s.TrackerOptions{})}
}

func (b *both) add(c *resourcev1.ResourceClaim) { b.up.Informer.Add(c); b.ours.OnAdd(c) }
func (b *both) del(c *resourcev1.ResourceClaim) { b.up.Informer.Delete(c); b.ours.OnDelete(c) }

func holding(name, rv string, devices ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			UID: types.UID(fmt.Sprintf("uid-%s", name)), ResourceVersion: rv},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "req", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "class"}}}}},
	}
	if len(devices) > 0 {
		c.Status.Allocation = &resourcev1.AllocationResult{}
		for _, d := range devices {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourcev1.DeviceRequestAllocationResult{Request: "req", Driver: "d.example.com", Pool: "p", Device: d})
		}
	}
	return c
}

func taken(t *testing.T, tr fwk.ResourceClaimTracker, device string) bool {
	t.Helper()
	s, err := tr.GatherAllocatedState()
	if err != nil {
		t.Fatal(err)
	}
	return s.AllocatedDevices.Has(structured.MakeDeviceID("d.example.com", "p", device))
}

func TestWhereTheTrackersDiffer(t *testing.T) {
	t.Run("a device two claims hold whole", func(t *testing.T) {
		b := newBoth(t)
		// The API server checks each claim alone: two schedulers (#128980)
		// or a race (#133602) can leave two claims holding gpu-0.
		first, second := holding("a", "1", "gpu-0"), holding("b", "2", "gpu-0")
		b.add(first)
		b.add(second)
		b.del(first)
		if taken(t, b.up.Claims(), "gpu-0") {
			t.Fatal("kube-scheduler's tracker keeps gpu-0 allocated: the documented difference is gone")
		}
		if !taken(t, b.ours, "gpu-0") {
			t.Fatal("claimstore's Tracker freed gpu-0 while claim b holds it")
		}
	})
	t.Run("an allocation that changes under an assumed version", func(t *testing.T) {
		b := newBoth(t)
		c := holding("a", "1")
		b.add(c)
		assumed := holding("a", "2", "gpu-0")
		if err := b.up.Claims().AssumeClaimAfterAPICall(assumed); err != nil {
			t.Fatal(err)
		}
		if err := b.ours.AssumeClaimAfterAPICall(assumed); err != nil {
			t.Fatal(err)
		}
		// The informer's next version holds gpu-1 (the claim was
		// deallocated and allocated again meanwhile), then the claim goes.
		b.add(holding("a", "3", "gpu-1"))
		if taken(t, b.ours, "gpu-0") || !taken(t, b.ours, "gpu-1") {
			t.Fatal("claimstore's Tracker does not count the allocation in effect")
		}
		b.del(holding("a", "3", "gpu-1"))
		if !taken(t, b.up.Claims(), "gpu-0") {
			t.Fatal("kube-scheduler's tracker freed gpu-0: the documented difference is gone")
		}
		if taken(t, b.ours, "gpu-0") || taken(t, b.ours, "gpu-1") {
			t.Fatal("claimstore's Tracker keeps a deleted claim's devices")
		}
	})
	t.Run("Get of a missing claim", func(t *testing.T) {
		b := newBoth(t)
		_, uerr := b.up.Claims().Get("default", "missing")
		_, oerr := b.ours.Get("default", "missing")
		if uerr == nil || apierrors.IsNotFound(uerr) {
			t.Fatalf("kube-scheduler's tracker: %v (the documented difference is gone)", uerr)
		}
		if !apierrors.IsNotFound(oerr) {
			t.Fatalf("claimstore's Tracker: %v, want a Kubernetes NotFound", oerr)
		}
	})
	t.Run("an unchanged state", func(t *testing.T) {
		b := newBoth(t)
		b.add(holding("a", "1", "gpu-0"))
		u1, _ := b.up.Claims().GatherAllocatedState()
		u2, _ := b.up.Claims().GatherAllocatedState()
		o1, _ := b.ours.GatherAllocatedState()
		o2, _ := b.ours.GatherAllocatedState()
		if u1 == u2 {
			t.Fatal("kube-scheduler's tracker returned the same state twice: the documented difference is gone")
		}
		if o1 != o2 {
			t.Fatal("claimstore's Tracker built a new state with nothing changed")
		}
	})
}
