package k8s

import (
	"context"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/utils/ptr"
)

// The Manager answers for claims with the Tracker, for slices and classes
// with upstream's listers fed by the informer factory, and resolves
// extended resource names to classes.
func TestManagerPairsTheTrackerWithUpstreamsListers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
		Spec: resourcev1.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}}
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpus"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To("node-1"),
			Pool:    resourcev1.ResourcePool{Name: "node-1", ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}}}}
	client := fake.NewClientset(class, slice)
	factory := informers.NewSharedInformerFactory(client, 0)
	slices, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{
		SliceInformer: factory.Resource().V1().ResourceSlices(), KubeClient: client})
	if err != nil {
		t.Fatal(err)
	}
	tracker := newTracker(t, false)
	m := NewManager(tracker, slices, factory, ManagerOptions{ExtendedResources: true})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), slices.HasSynced)

	if m.ResourceClaims() != tracker || m.Tracker() != tracker {
		t.Fatal("the manager's claims are not the tracker")
	}
	got, err := m.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil || len(got) != 1 || got[0].Name != "node-1-gpus" {
		t.Fatalf("slices %v %v", got, err)
	}
	if c, err := m.DeviceClasses().Get("gpu.example.com"); err != nil || c.Name != "gpu.example.com" {
		t.Fatalf("class %v %v", c, err)
	}
	if cs, err := m.DeviceClasses().List(); err != nil || len(cs) != 1 {
		t.Fatalf("classes %v %v", cs, err)
	}
	eventually(t, "the extended resource resolves", func() bool {
		c := m.DeviceClassResolver().GetDeviceClass("example.com/gpu")
		return c != nil && c.Name == "gpu.example.com"
	})

	off := NewManager(tracker, slices, factory, ManagerOptions{})
	if c := off.DeviceClassResolver().GetDeviceClass("example.com/gpu"); c != nil {
		t.Fatalf("without ExtendedResources a class resolved: %v", c.Name)
	}
}
