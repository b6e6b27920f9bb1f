package upstreamtest

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// classes is a DeviceClassLister of one class: every device of the
// stream's driver.
type classes struct{ class *resourcev1.DeviceClass }

func (c classes) List() ([]*resourcev1.DeviceClass, error) {
	return []*resourcev1.DeviceClass{c.class}, nil
}
func (c classes) Get(name string) (*resourcev1.DeviceClass, error) {
	if name != c.class.Name {
		return nil, fmt.Errorf("no class %s", name)
	}
	return c.class, nil
}

var theClass = classes{&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "class"},
	Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
		CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "driver.example.com"`}}}}}}

// slicesOf is the cluster's devices: the model's pools, every device in
// each; with consumable capacity, even devices take several allocations and
// have 8Gi of memory to share.
func slicesOf(m *model, consumable bool) []*resourcev1.ResourceSlice {
	var out []*resourcev1.ResourceSlice
	for p := 0; p < 2; p++ {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "pool-" + strconv.Itoa(p)},
			Spec: resourcev1.ResourceSliceSpec{Driver: "driver.example.com", AllNodes: ptr.To(true),
				Pool: resourcev1.ResourcePool{Name: "pool-" + strconv.Itoa(p), ResourceSliceCount: 1}}}
		for d := 0; d < m.devices; d++ {
			dev := resourcev1.Device{Name: "dev-" + strconv.Itoa(d)}
			if consumable && d%2 == 0 {
				dev.AllowMultipleAllocations = ptr.To(true)
				dev.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
					"memory": {Value: resource.MustParse("8Gi")}}
			}
			s.Spec.Devices = append(s.Spec.Devices, dev)
		}
		out = append(out, s)
	}
	return out
}

// allocateOnBoth runs kube-scheduler's structured allocator
// (structured.NewAllocator) for one random claim on the state each tracker
// gathers, and compares what it allocates.
func (p *pair) allocateOnBoth(m *model, consumable bool) {
	p.t.Helper()
	ctx := context.Background()
	claim := m.newClaim()
	req := &claim.Spec.Devices.Requests[0]
	req.Exactly.AllocationMode = resourcev1.DeviceAllocationModeExactCount
	req.Exactly.Count = int64(1 + m.rng.Intn(4))
	if m.rng.Intn(6) == 0 {
		req.Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
		req.Exactly.Count = 0
	}
	if consumable && m.rng.Intn(2) == 0 {
		req.Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{
			"memory": *resource.NewQuantity(int64(1+m.rng.Intn(4))<<30, resource.BinarySI)}}
	}
	claim.UID = types.UID(fmt.Sprintf("%08x-0000-4000-8000-00000000000a", m.next))
	features := structured.Features{AdminAccess: true, ConsumableCapacity: consumable}
	slices := slicesOf(m, consumable)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	run := func(tr interface {
		GatherAllocatedState() (*structured.AllocatedState, error)
	}) ([]resourcev1.AllocationResult, error) {
		state, err := tr.GatherAllocatedState()
		if err != nil {
			p.fail("GatherAllocatedState: %v", err)
		}
		a, err := structured.NewAllocator(ctx, features, *state, theClass, slices,
			cel.NewCache(10, cel.Features{EnableConsumableCapacity: consumable}))
		if err != nil {
			p.fail("NewAllocator: %v", err)
		}
		return a.Allocate(ctx, node, []*resourcev1.ResourceClaim{claim})
	}
	upState, _ := p.upstream.Claims().GatherAllocatedState()
	ourState, _ := p.ours.GatherAllocatedState()
	up, uerr := run(p.upstream.Claims())
	ours, oerr := run(p.ours)
	// The allocator chooses among equal devices in map order (two runs on
	// one state may differ), so the two are compared by what must hold:
	// both succeed or both fail, with as many devices, each allocation
	// valid against the other tracker's state too.
	if (uerr == nil) != (oerr == nil) || len(up) != len(ours) {
		p.fail("the allocator on upstream's state: %v %v; on claimstore's: %v %v", up, uerr, ours, oerr)
	}
	for i := range up {
		if len(up[i].Devices.Results) != len(ours[i].Devices.Results) {
			p.fail("the allocator placed %d devices on upstream's state, %d on claimstore's",
				len(up[i].Devices.Results), len(ours[i].Devices.Results))
		}
		p.validAgainst(up[i], ourState, "upstream's allocation on claimstore's state")
		p.validAgainst(ours[i], upState, "claimstore's allocation on upstream's state")
	}
	if uerr == nil && len(up) > 0 {
		p.allocations++
	}
}

// validAgainst checks that allocation takes nothing state has allocated:
// no device held whole, no share beyond the device's 8Gi of memory.
func (p *pair) validAgainst(a resourcev1.AllocationResult, state *structured.AllocatedState, what string) {
	p.t.Helper()
	for _, r := range a.Devices.Results {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if state.AllocatedDevices.Has(id) {
			p.fail("%s: %s is allocated there", what, id)
		}
		if r.ShareID == nil {
			for shared := range state.AllocatedSharedDeviceIDs {
				if shared.GetDeviceID() == id {
					p.fail("%s: %s is taken whole but shared there", what, id)
				}
			}
			continue
		}
		used := resource.Quantity{}
		if c := state.AggregatedCapacity[id]; c != nil && c["memory"] != nil {
			used = c["memory"].DeepCopy()
		}
		if q, ok := r.ConsumedCapacity["memory"]; ok {
			used.Add(q)
		}
		if used.Cmp(resource.MustParse("8Gi")) > 0 {
			p.fail("%s: %s's memory is over-committed there (%s)", what, id, used.String())
		}
	}
}
