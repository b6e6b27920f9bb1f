package k8s

import (
	"maps"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
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
// claims list stays allocated until both let it go, and as the sets the
// scheduler is handed. A set once handed out is never changed: the next
// change copies it first (maps.Clone, a copy of the map's memory, where
// kube-scheduler inserts every element anew on every call).
type allocatedCounts struct {
	dedicated map[structured.DeviceID]int
	shared    map[structured.SharedDeviceID]int
	capacity  structured.ConsumedCapacityCollection

	devices       sets.Set[structured.DeviceID]       // keys of dedicated
	shares        sets.Set[structured.SharedDeviceID] // keys of shared
	devicesShared bool                                // devices was handed out
	sharesShared  bool                                // shares was handed out
}

func newAllocatedCounts() allocatedCounts {
	return allocatedCounts{
		dedicated: map[structured.DeviceID]int{},
		shared:    map[structured.SharedDeviceID]int{},
		capacity:  structured.NewConsumedCapacityCollection(),
		devices:   sets.New[structured.DeviceID](),
		shares:    sets.New[structured.SharedDeviceID](),
	}
}

// ownDevices and ownShares make the sets the tracker's own to change.
func (a *allocatedCounts) ownDevices() {
	if a.devicesShared {
		a.devices, a.devicesShared = maps.Clone(a.devices), false
	}
}

func (a *allocatedCounts) ownShares() {
	if a.sharesShared {
		a.shares, a.sharesShared = maps.Clone(a.shares), false
	}
}

func (a *allocatedCounts) add(h *holdings) {
	if h == nil {
		return
	}
	for _, id := range h.dedicated {
		if a.dedicated[id]++; a.dedicated[id] == 1 {
			a.ownDevices()
			a.devices.Insert(id)
		}
	}
	for _, id := range h.shared {
		if a.shared[id]++; a.shared[id] == 1 {
			a.ownShares()
			a.shares.Insert(id)
		}
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
			a.ownDevices()
			a.devices.Delete(id)
		}
	}
	for _, id := range h.shared {
		if a.shared[id]--; a.shared[id] <= 0 {
			delete(a.shared, id)
			a.ownShares()
			a.shares.Delete(id)
		}
	}
	for _, c := range h.capacity {
		a.capacity.Remove(c)
	}
}

// gather builds the AllocatedState: the claims' state plus what pend (the
// pending allocations, and the ledger's claims the tracker does not count)
// hold, as kube-scheduler's own tracker computes it. Without pend the
// claims' sets are handed out as they are.
func (a *allocatedCounts) gather(pend []*holdings, consumableCapacity bool) *structured.AllocatedState {
	devices := a.devices
	if len(pend) > 0 {
		devices = maps.Clone(a.devices)
		for _, h := range pend {
			devices.Insert(h.dedicated...)
		}
	} else {
		a.devicesShared = true
	}
	shares := sets.New[structured.SharedDeviceID]()
	capacity := structured.NewConsumedCapacityCollection()
	if consumableCapacity {
		shares = a.shares
		if len(pend) > 0 {
			shares = maps.Clone(a.shares)
		} else {
			a.sharesShared = true
		}
		if len(a.capacity) > 0 {
			capacity = a.capacity.Clone()
		}
		for _, h := range pend {
			shares.Insert(h.shared...)
			for _, c := range h.capacity {
				capacity.Insert(c)
			}
		}
	}
	return &structured.AllocatedState{
		AllocatedDevices:         devices,
		AllocatedSharedDeviceIDs: shares,
		AggregatedCapacity:       capacity,
	}
}

// listAll builds ListAllAllocatedDevices' set: the devices the claims
// hold whole, and every device of pend (as gather's).
func (a *allocatedCounts) listAll(pend []*holdings) sets.Set[structured.DeviceID] {
	devices := a.devices
	cloned := false
	for _, h := range pend {
		if !cloned {
			devices, cloned = maps.Clone(a.devices), true
		}
		devices.Insert(h.all...)
	}
	if !cloned {
		a.devicesShared = true
	}
	return devices
}
