package k8s

import (
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// holdings is what one claim's allocation contributes to the allocated
// state, computed once when the claim arrives (interning the IDs costs).
type holdings struct {
	// Devices held whole: every result without a shareID, and with
	// consumable capacity off every result.
	dedicated []structured.DeviceID
	// Shares of shared devices (consumable capacity on only).
	shared []structured.SharedDeviceID
	// The capacity each share consumes (consumable capacity on only).
	capacity []structured.DeviceConsumedCapacity
	// Every device of the allocation, whole or shared, as a DeviceID: what
	// ListAllAllocatedDevices counts of a pending allocation.
	all []structured.DeviceID
}

// holdingsOf returns what claim's allocation holds; results with admin
// access hold nothing, as the scheduler counts them.
func holdingsOf(claim *resourcev1.ResourceClaim, consumableCapacity bool) *holdings {
	if claim == nil || claim.Status.Allocation == nil {
		return nil
	}
	h := &holdings{}
	for i := range claim.Status.Allocation.Devices.Results {
		r := &claim.Status.Allocation.Devices.Results[i]
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		h.all = append(h.all, id)
		if consumableCapacity && r.ShareID != nil {
			h.shared = append(h.shared, structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				h.capacity = append(h.capacity, structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			continue
		}
		h.dedicated = append(h.dedicated, id)
	}
	if len(h.all) == 0 {
		return nil
	}
	return h
}

// sameHoldings reports whether a and b hold the same devices, shares and
// capacities, in the same order.
func sameHoldings(a, b *holdings) bool {
	if a == nil || b == nil {
		return a == b
	}
	if !slices.Equal(a.all, b.all) || !slices.Equal(a.dedicated, b.dedicated) ||
		!slices.Equal(a.shared, b.shared) || len(a.capacity) != len(b.capacity) {
		return false
	}
	for i := range a.capacity {
		ca, cb := a.capacity[i], b.capacity[i]
		if ca.DeviceID != cb.DeviceID || len(ca.ConsumedCapacity) != len(cb.ConsumedCapacity) {
			return false
		}
		for name, q := range ca.ConsumedCapacity {
			if r, ok := cb.ConsumedCapacity[name]; !ok || q.Cmp(*r) != 0 {
				return false
			}
		}
	}
	return true
}

// allocatedCounts is the allocated state of the claims the tracker holds
// (assumed versions where there are), kept as counts so that a device two
// claims list stays allocated until both let it go.
type allocatedCounts struct {
	dedicated map[structured.DeviceID]int
	shared    map[structured.SharedDeviceID]int
	capacity  structured.ConsumedCapacityCollection
}

func newAllocatedCounts() allocatedCounts {
	return allocatedCounts{
		dedicated: map[structured.DeviceID]int{},
		shared:    map[structured.SharedDeviceID]int{},
		capacity:  structured.NewConsumedCapacityCollection(),
	}
}

func (a *allocatedCounts) add(h *holdings) {
	if h == nil {
		return
	}
	for _, id := range h.dedicated {
		a.dedicated[id]++
	}
	for _, id := range h.shared {
		a.shared[id]++
	}
	for _, c := range h.capacity {
		a.capacity.Insert(c)
	}
}

func (a *allocatedCounts) remove(h *holdings) {
	if h == nil {
		return
	}
	for _, id := range h.dedicated {
		if a.dedicated[id]--; a.dedicated[id] <= 0 {
			delete(a.dedicated, id)
		}
	}
	for _, id := range h.shared {
		if a.shared[id]--; a.shared[id] <= 0 {
			delete(a.shared, id)
		}
	}
	for _, c := range h.capacity {
		a.capacity.Remove(c)
	}
}

// gather builds a new AllocatedState: the claims' state plus what the
// pending allocations hold, as kube-scheduler's own tracker computes it.
func (a *allocatedCounts) gather(pending map[types.UID]*pendingAllocation, consumableCapacity bool) *structured.AllocatedState {
	devices := make(sets.Set[structured.DeviceID], len(a.dedicated)+len(pending))
	for id := range a.dedicated {
		devices.Insert(id)
	}
	shared := make(sets.Set[structured.SharedDeviceID], len(a.shared))
	capacity := structured.NewConsumedCapacityCollection()
	if consumableCapacity {
		for id := range a.shared {
			shared.Insert(id)
		}
		if len(a.capacity) > 0 {
			capacity = a.capacity.Clone()
		}
	}
	for _, p := range pending {
		if p.holdings == nil {
			continue
		}
		for _, id := range p.holdings.dedicated {
			devices.Insert(id)
		}
		for _, id := range p.holdings.shared {
			shared.Insert(id)
		}
		for _, c := range p.holdings.capacity {
			capacity.Insert(c)
		}
	}
	return &structured.AllocatedState{
		AllocatedDevices:         devices,
		AllocatedSharedDeviceIDs: shared,
		AggregatedCapacity:       capacity,
	}
}

// listAll builds ListAllAllocatedDevices' set: the devices the claims
// hold whole, and every device of a pending allocation.
func (a *allocatedCounts) listAll(pending map[types.UID]*pendingAllocation) sets.Set[structured.DeviceID] {
	devices := make(sets.Set[structured.DeviceID], len(a.dedicated)+len(pending))
	for id := range a.dedicated {
		devices.Insert(id)
	}
	for _, p := range pending {
		if p.holdings == nil {
			continue
		}
		for _, id := range p.holdings.all {
			devices.Insert(id)
		}
	}
	return devices
}
