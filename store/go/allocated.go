package claimstore

/*
#cgo CFLAGS: -I${SRCDIR}
#include "claimstore/c.h"
#include "calls.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// DeviceShare is the claim that shares ShareID of a device, and what the
// share consumes.
type DeviceShare struct {
	ShareID          string
	Claim            Key
	ConsumedCapacity map[string]string
}

// AllocatedDevice is one held device: who holds it, and how.
type AllocatedDevice struct {
	Driver, Pool, Device string
	// Exclusive is the claim holding it exclusively, or nil.
	Exclusive *Key
	// Shares by shareID.
	Shares []DeviceShare
	// AdminAccess: the claims with admin access (which never conflicts).
	AdminAccess []Key
	// ConsumedCapacity: per capacity name, the exact sum over the shares,
	// as a canonical quantity.
	ConsumedCapacity map[string]string
}

// handle is the snapshot's handle as calls.h takes it.
func (a *AllocatedState) handle() C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(a.h))) }

// Taken reports whether a new exclusive holding would be refused: held
// exclusively or shared (admin access does not count).
func (d *AllocatedDevice) Taken() bool { return d.Exclusive != nil || len(d.Shares) > 0 }

// AllocatedState is what is allocated at one store revision: an immutable
// snapshot, taken in constant time whatever the number of claims, safe to
// read from any number of goroutines and to keep while writes go on (and
// after the Store is closed). Close it when done (it holds the devices of
// its revision in C memory; a finalizer frees it otherwise, late).
type AllocatedState struct {
	mu       sync.RWMutex // shared by lookups, exclusive by Close
	h        *C.claimstore_allocated_t
	revision uint64
	size     int
	out      C.cs_snapshot_t // AllocatedDevices' call
}

// AllocatedDevices returns what is allocated now. The first call after
// Open (or a repair, or a bulk load) builds the state from every record
// (seconds per million claims); later calls cost a lock and a reference.
func (s *Store) AllocatedDevices() (*AllocatedState, error) {
	if !s.lock() {
		return nil, ErrClosed
	}
	defer s.mu.RUnlock()
	// One call into C, its outcome in the state's own field (no allocation
	// of its own).
	a := &AllocatedState{}
	if code := C.cs_allocated_devices(s.handle(), &a.out); code != 0 {
		return nil, fromC(code, C.cs_error(a.out.error))
	}
	a.h = a.out.snapshot
	a.revision, a.size = uint64(a.out.revision), int(a.out.size)
	runtime.SetFinalizer(a, (*AllocatedState).Close)
	return a, nil
}

// Revision is the store revision the state is of.
func (a *AllocatedState) Revision() uint64 { return a.revision }

// Len is how many devices are held.
func (a *AllocatedState) Len() int { return a.size }

// Close frees the snapshot; lookups after it find nothing.
func (a *AllocatedState) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.h != nil {
		C.claimstore_allocated_destroy(a.h)
		a.h = nil
		runtime.SetFinalizer(a, nil)
	}
}

// Taken reports whether a new exclusive holding of the device would be
// refused (one call into C, no allocation).
func (a *AllocatedState) Taken(driver, pool, device string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.h == nil {
		return false
	}
	return C.cs_allocated_taken(a.handle(), str(driver), str(pool), str(device)) != 0
}

// TakenMany answers Taken for many devices of one pool (a pod's candidates
// on a node) in one call into C: taken[i] for devices[i], appended to
// taken[:0] (pass the previous result to reuse it).
func (a *AllocatedState) TakenMany(driver, pool string, devices []string, taken []bool) []bool {
	taken = append(taken[:0], make([]bool, len(devices))...)
	if len(devices) == 0 {
		return taken
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.h == nil {
		return taken
	}
	// The names back to back and their lengths: Go memory without Go
	// pointers, which C may read during the call; reused from call to call.
	sc := scratchPool.Get().(*takenScratch)
	names, lengths := sc.names[:0], sc.lengths[:0]
	for _, d := range devices {
		names = append(names, d...)
		lengths = append(lengths, uint32(len(d)))
	}
	names = append(names, 0)
	C.cs_allocated_taken_many(a.handle(), str(driver), str(pool), (*C.char)(unsafe.Pointer(&names[0])),
		(*C.uint32_t)(unsafe.Pointer(&lengths[0])), C.size_t(len(devices)), (*C.uint8_t)(unsafe.Pointer(&taken[0])))
	if cap(names) <= scratchMax && cap(lengths) <= scratchMax/4 {
		sc.names, sc.lengths = names, lengths
		scratchPool.Put(sc)
	}
	return taken
}

// takenScratch is TakenMany's buffers, kept between calls (scratchPool)
// up to scratchMax bytes of names and as many of lengths.
type takenScratch struct {
	names   []byte
	lengths []uint32
}

var scratchPool = sync.Pool{New: func() any { return new(takenScratch) }}

const scratchMax = 64 << 10

// Find returns the device, or false when no claim holds it.
func (a *AllocatedState) Find(driver, pool, device string) (AllocatedDevice, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.h == nil {
		return AllocatedDevice{}, false
	}
	var d C.claimstore_device_t
	if C.cs_allocated_find(a.handle(), str(driver), str(pool), str(device), &d) == 0 {
		return AllocatedDevice{}, false
	}
	return deviceOf(&d, driver, pool, device), true
}

func capacitiesOf(n int, at func(i int) C.claimstore_capacity_t) map[string]string {
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		c := at(i)
		m[goString(c.name)] = goString(c.quantity)
	}
	return m
}

// deviceOf copies a device view into Go memory (driver, pool and device
// are the caller's when it has them).
func deviceOf(d *C.claimstore_device_t, driver, pool, device string) AllocatedDevice {
	out := AllocatedDevice{Driver: driver, Pool: pool, Device: device}
	if out.Driver == "" {
		out.Driver, out.Pool, out.Device = goString(d.driver), goString(d.pool), goString(d.device)
	}
	if d.has_exclusive != 0 {
		k := goKey(d.exclusive)
		out.Exclusive = &k
	}
	if n := int(d.share_count); n > 0 {
		out.Shares = make([]DeviceShare, n)
		for i := range out.Shares {
			s := C.claimstore_device_share(d, C.size_t(i))
			out.Shares[i] = DeviceShare{ShareID: goString(s.share_id), Claim: goKey(s.claim),
				ConsumedCapacity: capacitiesOf(int(s.consumed_capacity_count), func(j int) C.claimstore_capacity_t {
					return C.claimstore_device_share_consumed_capacity(d, C.size_t(i), C.size_t(j))
				})}
		}
	}
	if n := int(d.admin_access_count); n > 0 {
		out.AdminAccess = make([]Key, n)
		for i := range out.AdminAccess {
			out.AdminAccess[i] = goKey(C.claimstore_device_admin_access(d, C.size_t(i)))
		}
	}
	out.ConsumedCapacity = capacitiesOf(int(d.consumed_capacity_count), func(i int) C.claimstore_capacity_t {
		return C.claimstore_device_consumed_capacity(d, C.size_t(i))
	})
	return out
}

// Devices returns the held devices in driver/pool/device order: all of
// them (driver empty), a driver's, or one pool's (pool not empty).
func (a *AllocatedState) Devices(driver, pool string) []AllocatedDevice {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.h == nil {
		return nil
	}
	p := C.claimstore_slice_t{}
	if pool != "" {
		p = str(pool)
	}
	list := C.claimstore_allocated_list(a.h, str(driver), p)
	if list == nil {
		panic("claimstore: out of C memory")
	}
	defer C.claimstore_devices_destroy(list)
	var n C.size_t
	items := C.claimstore_devices_items(list, &n)
	if n == 0 {
		return nil
	}
	views := unsafe.Slice(items, int(n))
	out := make([]AllocatedDevice, len(views))
	for i := range views {
		out[i] = deviceOf(&views[i], "", "", "")
	}
	return out
}
