// A scheduler plugin's ResourceClaims through claimstore: the Tracker keeps
// the cluster's claims in a store, answers kube-scheduler's questions, and
// resumes from the store when the scheduler restarts.
package main

import (
	"context"
	"fmt"
	"os"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"

	"claimstore.dev/claimstore"
	"claimstore.dev/claimstore/k8s"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := claimstore.Open(ctx, os.Args[1], claimstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	tracker := k8s.NewTracker(store, k8s.TrackerOptions{ConsumableCapacity: true})

	// A scheduler passes kubernetes.NewForConfig(config); here, a fake
	// cluster holding one claim allocated gpu-0 and one not yet allocated.
	client := fake.NewClientset(claim("trainer", "gpu-0"), claim("inference", ""))
	go tracker.Run(ctx, client)
	if !cache.WaitForCacheSync(ctx.Done(), tracker.HasSynced) {
		panic("not synced")
	}

	// PreFilter: what is allocated, once per pod (the same maps while
	// nothing changes).
	state, _ := tracker.GatherAllocatedState()
	gpu := func(name string) structured.DeviceID {
		return structured.MakeDeviceID("gpu.example.com", "node-1", name)
	}
	fmt.Println("gpu-0 taken:", state.AllocatedDevices.Has(gpu("gpu-0")),
		"gpu-1 taken:", state.AllocatedDevices.Has(gpu("gpu-1")))

	// Reserve: the allocator picked gpu-1 for "inference"; until PreBind
	// writes it, it is pending, and the next pod sees gpu-1 taken.
	inference, _ := tracker.Get("default", "inference")
	allocated := claim("inference", "gpu-1")
	if err := tracker.SignalClaimPendingAllocation(inference.UID, allocated); err != nil {
		panic(err)
	}
	state, _ = tracker.GatherAllocatedState()
	fmt.Println("after Reserve, gpu-1 taken:", state.AllocatedDevices.Has(gpu("gpu-1")))

	// Unreserve (the pod did not bind after all): gpu-1 is free again.
	tracker.MaybeRemoveClaimPendingAllocation(inference.UID, true)
	state, _ = tracker.GatherAllocatedState()
	fmt.Println("after Unreserve, gpu-1 taken:", state.AllocatedDevices.Has(gpu("gpu-1")))

	// claimstore's own questions, on the same store.
	holders, _ := store.ClaimsUsingDevice(claimstore.DeviceQuery{
		Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"})
	fmt.Println("gpu-0 is held by", holders.Holdings[0].Claim)
}

// claim is a ResourceClaim with one request, allocated device (when not
// "") on node-1.
func claim(name, device string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			ResourceVersion: "1"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}},
	}
	if device != "" {
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: device}}}}
	}
	return c
}
