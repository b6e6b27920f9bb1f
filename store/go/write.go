package claimstore

/*
#cgo CFLAGS: -I${SRCDIR}
#include <stdlib.h>
#include "claimstore/c.h"
#include "calls.h"
*/
import "C"

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unsafe"
)

// writeFunc makes one write through calls.h: the store's handle as an
// integer, the outcome in w.
type writeFunc func(db C.uintptr_t, w *C.cs_write_t) C.int

func (s *Store) write(ctx context.Context, f writeFunc) (WriteResult, error) {
	return s.writeThen(ctx, f, nil)
}

// writeThen runs f, then cleanup (when not nil). ctx is checked first. A
// local write takes microseconds and runs to its end; in the shared mode
// (etcd round trips, each bounded by Options.EtcdTimeout) a context that
// ends first ends the wait: the call returns ctx's error and the write may
// still be applied, as with etcd's own client.
func (s *Store) writeThen(ctx context.Context, f writeFunc, cleanup func()) (WriteResult, error) {
	if err := ctx.Err(); err != nil {
		if cleanup != nil {
			cleanup()
		}
		return WriteResult{}, err
	}
	if !s.shared || ctx.Done() == nil {
		if cleanup != nil {
			defer cleanup()
		}
		return s.writeNow(f)
	}
	type outcome struct {
		r   WriteResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := s.writeNow(f)
		if cleanup != nil {
			cleanup()
		}
		done <- outcome{r, err}
	}()
	select {
	case o := <-done:
		return o.r, o.err
	case <-ctx.Done():
		return WriteResult{}, fmt.Errorf("%w (the write may still be applied)", ctx.Err())
	}
}

func (s *Store) writeNow(f writeFunc) (WriteResult, error) {
	if !s.lock() {
		return WriteResult{}, ErrClosed
	}
	defer s.mu.RUnlock()
	w := &C.cs_write_t{} // the outcome and the error: one allocation
	if code := f(s.handle(), w); code != 0 {
		return WriteResult{}, fromC(code, C.cs_error(w.error))
	}
	return WriteResult{Revision: uint64(w.result.revision), Changed: w.result.changed != 0}, nil
}

// handle is the store's handle as calls.h takes it.
func (s *Store) handle() C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(s.db))) }

// Put writes a whole claim (a record, e.g. from Decode or another store),
// creating it if absent.
func (s *Store) Put(ctx context.Context, c *Claim, pre Preconditions) (WriteResult, error) {
	return s.write(ctx, func(db C.uintptr_t, w *C.cs_write_t) C.int {
		return C.cs_put(db, bytesSlice(c.b), cPre(pre), w)
	})
}

// PutJSON writes a whole claim from one ResourceClaim's JSON.
func (s *Store) PutJSON(ctx context.Context, claimJSON []byte, pre Preconditions) (WriteResult, error) {
	return s.write(ctx, func(db C.uintptr_t, w *C.cs_write_t) C.int {
		return C.cs_put_json(db, bytesSlice(claimJSON), cPre(pre), w)
	})
}

// ApplyClusterEventsJSON applies claims as a Kubernetes cluster has them
// (what claimstore follow does): input is one ResourceClaim, a List, JSON
// lines or watch events (a DELETED event deletes its claim), applied in one
// atomic write, each validated whole with no rule about a change (the API
// server ratified it) and skipped where the stored claim's resourceVersion
// is as new; resourceVersion is stored as the stream's position
// (Stats.FollowResourceVersion; it only moves forward). One result per
// claim, Changed false for a skipped one. ErrInvalid naming the item and field
// path, ErrConflict for a device another claim holds: nothing is written
// then.
//
// objects, when not nil, holds one entry per claim of input: the rest of
// its Kubernetes object (metadata and spec; nil: none) for the record to
// keep (Claim.Object), at most 1.5 MiB each.
func (s *Store) ApplyClusterEventsJSON(ctx context.Context, input []byte, objects [][]byte, resourceVersion uint64) ([]WriteResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.lock() {
		return nil, ErrClosed
	}
	defer s.mu.RUnlock()
	var arena cArena
	defer arena.free()
	var objs *C.claimstore_slice_t
	if len(objects) > 0 {
		arr := unsafe.Slice((*C.claimstore_slice_t)(arena.alloc(
			uintptr(len(objects))*unsafe.Sizeof(C.claimstore_slice_t{}), 8)), len(objects))
		for i, o := range objects {
			arr[i] = arena.bytes(o)
		}
		objs = &arr[0]
	}
	var results *C.claimstore_write_result_t
	var count C.size_t
	var e *C.claimstore_error_t
	if code := C.claimstore_apply_cluster_events_json(s.db, bytesSlice(input), objs, C.size_t(len(objects)),
		C.uint64_t(resourceVersion), &results, &count, &e); code != 0 {
		return nil, fromC(code, e)
	}
	defer C.claimstore_free(unsafe.Pointer(results))
	out := make([]WriteResult, count)
	for i, r := range unsafe.Slice(results, count) {
		out[i] = WriteResult{Revision: uint64(r.revision), Changed: r.changed != 0}
	}
	return out, nil
}

// Delete deletes the claim.
func (s *Store) Delete(ctx context.Context, key Key, pre Preconditions) (WriteResult, error) {
	return s.write(ctx, func(db C.uintptr_t, w *C.cs_write_t) C.int {
		return C.cs_delete(db, cKey(key), cPre(pre), w)
	})
}

// Reserve adds the consumer to status.reservedFor (a no-op when its uid is
// there). ErrRefused when the claim is not allocated or is being deleted,
// ErrExhausted at 256 consumers, ErrConflict when a precondition fails.
func (s *Store) Reserve(ctx context.Context, key Key, c Consumer, pre Preconditions) (WriteResult, error) {
	return s.write(ctx, func(db C.uintptr_t, w *C.cs_write_t) C.int {
		return C.cs_reserve(db, cKey(key), C.claimstore_consumer_t{
			api_group: str(c.APIGroup), resource: str(c.Resource), name: str(c.Name), uid: str(c.UID),
		}, cPre(pre), w)
	})
}

// Unreserve removes the consumer with the uid (a no-op when absent).
func (s *Store) Unreserve(ctx context.Context, key Key, uid string, pre Preconditions) (WriteResult, error) {
	return s.write(ctx, func(db C.uintptr_t, w *C.cs_write_t) C.int {
		return C.cs_unreserve(db, cKey(key), str(uid), cPre(pre), w)
	})
}

// DeviceCapacity is the capacity of one device as the ResourceSlice has it
// (capacity name to quantity), for Allocate's capacity check.
type DeviceCapacity struct {
	Driver, Pool, Device string
	Capacity             map[string]string
}

// AllocateOptions completes an allocation built from device results.
type AllocateOptions struct {
	// NodeName restricts the allocation to one node (a node selector on
	// metadata.name); empty: none.
	NodeName string
	// AllocationTimestamp; zero: none.
	AllocationTimestamp time.Time
	// Capacity limits of devices the allocation shares: the shares of each
	// may together consume at most this much (else ErrConflict, naming the
	// device, the capacity, the limit and what is consumed).
	Capacity []DeviceCapacity
}

func (a *cArena) limits(cs []DeviceCapacity) (*C.claimstore_device_capacity_t, C.size_t) {
	if len(cs) == 0 {
		return nil, 0
	}
	arr := unsafe.Slice((*C.claimstore_device_capacity_t)(a.alloc(
		uintptr(len(cs))*unsafe.Sizeof(C.claimstore_device_capacity_t{}), 8)), len(cs))
	for i, c := range cs {
		arr[i] = C.claimstore_device_capacity_t{driver: a.str(c.Driver), pool: a.str(c.Pool), device: a.str(c.Device)}
		arr[i].capacity, arr[i].capacity_count = a.capacities(c.Capacity)
	}
	return &arr[0], C.size_t(len(cs))
}

// Allocate sets status.allocation from device results. ErrRefused when the
// claim is already allocated; ErrConflict naming the holder when a device
// it takes (exclusively, or a share of) is held by another claim, or when
// a capacity limit would be passed.
func (s *Store) Allocate(ctx context.Context, key Key, results []DeviceResult, opts AllocateOptions, pre Preconditions) (WriteResult, error) {
	for i, r := range results {
		if len(r.Tolerations) > 0 || len(r.BindingConditions) > 0 || len(r.BindingFailureConditions) > 0 ||
			len(r.SkipNodeOperations) > 0 {
			return WriteResult{}, &Error{Code: CodeInvalidArgument, Message: "results[" + strconv.Itoa(i) +
				"]: Tolerations, binding conditions and SkipNodeOperations are read only here; use AllocateJSON"}
		}
	}
	a := &cArena{}
	var alloc C.claimstore_allocation_t
	if len(results) > 0 {
		rs := unsafe.Slice((*C.claimstore_device_result_t)(a.alloc(
			uintptr(len(results))*unsafe.Sizeof(C.claimstore_device_result_t{}), 8)), len(results))
		for i, r := range results {
			d := &rs[i]
			d.request, d.driver, d.pool, d.device = a.str(r.Request), a.str(r.Driver), a.str(r.Pool), a.str(r.Device)
			if r.ShareID != nil {
				d.has_share_id = 1
				d.share_id = a.str(*r.ShareID)
			}
			d.admin_access = -1
			if r.AdminAccess != nil {
				d.admin_access = cBool(*r.AdminAccess)
			}
			d.consumed_capacity, d.consumed_capacity_count = a.capacities(r.ConsumedCapacity)
		}
		alloc.results = &rs[0]
		alloc.result_count = C.size_t(len(results))
	}
	alloc.node_name = a.str(opts.NodeName)
	if !opts.AllocationTimestamp.IsZero() {
		alloc.has_allocation_timestamp = 1
		alloc.allocation_timestamp = C.int64_t(opts.AllocationTimestamp.Unix())
	}
	pa := (*C.claimstore_allocation_t)(a.alloc(unsafe.Sizeof(alloc), 8))
	*pa = alloc
	caps, ncaps := a.limits(opts.Capacity)
	return s.writeThen(ctx, func(db C.uintptr_t, w *C.cs_write_t) C.int {
		return C.cs_allocate(db, cKey(key), pa, caps, ncaps, cPre(pre), w)
	}, a.free)
}

// AllocateJSON sets status.allocation from an AllocationResult's JSON
// ({"devices":{"results":[...]},"nodeSelector":...}); errors name the path
// as in a claim (status.allocation.devices.results[0]...).
func (s *Store) AllocateJSON(ctx context.Context, key Key, allocationJSON []byte, capacity []DeviceCapacity, pre Preconditions) (WriteResult, error) {
	a := &cArena{}
	caps, ncaps := a.limits(capacity)
	return s.writeThen(ctx, func(db C.uintptr_t, w *C.cs_write_t) C.int {
		return C.cs_allocate_json(db, cKey(key), bytesSlice(allocationJSON), caps, ncaps, cPre(pre), w)
	}, a.free)
}

// Deallocate clears the allocation and device statuses; ErrRefused while
// reservedFor is not empty, a no-op when not allocated.
func (s *Store) Deallocate(ctx context.Context, key Key, pre Preconditions) (WriteResult, error) {
	return s.write(ctx, func(db C.uintptr_t, w *C.cs_write_t) C.int {
		return C.cs_deallocate(db, cKey(key), cPre(pre), w)
	})
}

// SetDeviceStatusJSON sets status.devices entries from a JSON array of
// AllocatedDeviceStatus objects (each replaces the entry of its
// driver/pool/device/shareID or is added).
func (s *Store) SetDeviceStatusJSON(ctx context.Context, key Key, statusesJSON []byte, pre Preconditions) (WriteResult, error) {
	return s.write(ctx, func(db C.uintptr_t, w *C.cs_write_t) C.int {
		return C.cs_set_device_status_json(db, cKey(key), bytesSlice(statusesJSON), cPre(pre), w)
	})
}
