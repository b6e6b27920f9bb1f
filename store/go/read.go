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
	"iter"
	"sync"
	"unsafe"
)

// Get returns the claim, or ErrNotFound. One call into C, which copies the
// record straight into the claim's own buffer. The buffer is sized like the
// records the store's Gets read lately (512 bytes to 16 KiB: see
// learnSize), so claims of similar sizes take one call each; a record that
// does not fit (a claim larger than those read before it) takes a second
// call that reads it into a buffer of its size.
func (s *Store) Get(key Key) (*Claim, error) {
	if !s.lock() {
		return nil, ErrClosed
	}
	defer s.mu.RUnlock()
	// The claim and the call's out-parameters are one allocation, and the
	// C library copies the record, in place, straight into the claim's own
	// buffer: one copy, two allocations, one call (calls.h: no check, no
	// boxing) for a record that fits. (A Go variable whose address goes to
	// C is moved to the heap, one allocation each (Go 1.19); a field of an
	// object made for the heap anyway is not.)
	g := &getCall{}
	size := s.getSize.Load()
	buf := make([]byte, bufferSize(size))
	for first := true; ; first = false {
		n, err := s.getInto(key, buf, &g.out)
		if err != nil {
			return nil, err
		}
		if first { // the call that getSize sized
			s.learnSize(size, n)
		}
		if n <= len(buf) {
			if len(buf) > getBufferBytes && n <= len(buf)/2 {
				// The buffer was sized for a larger record read before: the
				// claim keeps a copy of its size, not the buffer.
				buf = append([]byte(nil), buf[:n]...)
			}
			g.c.b = buf[:n:n]
			g.c.root = rootTable(g.c.b)
			return &g.c, nil
		}
		// Larger: read again into a buffer of its size (a write may have
		// grown it meanwhile).
		buf = make([]byte, n)
	}
}

// getInto copies the record of `key` into buf when it fits; n is its size
// (larger than len(buf): nothing was copied). One call into C.
func (s *Store) getInto(key Key, buf []byte, out *C.cs_get_t) (n int, err error) {
	if code := C.cs_get_into(s.handle(), cKey(key), (*C.char)(unsafe.Pointer(&buf[0])),
		C.size_t(len(buf)), out); code != 0 {
		return 0, fromC(code, C.cs_error(out.error))
	}
	return int(out.size), nil
}

// A ClaimView is a claim read by GetView into a buffer that is reused once
// the view is released: the read of a claim without an allocation, for a
// caller that reads a few fields and moves on (a scheduler's filter). It
// has every accessor of Claim. It is valid until Release: after that,
// neither the view nor any string or slice its accessors returned may be
// used (the buffer holds another read's claim); keep what you need as a
// copy (strings.Clone), or the claim as Clone returns it. Not safe for
// concurrent use: one goroutine reads and releases it.
type ClaimView struct {
	Claim
	out      C.cs_get_t
	buf      []byte
	released bool
}

// viewPool holds released views and their buffers (any store's: a buffer
// is Go memory, nothing of the store's).
var viewPool = sync.Pool{New: func() any { return &ClaimView{buf: make([]byte, getBufferBytes)} }}

// viewBufferMax is the largest buffer a released view keeps: a view that
// read a larger claim gives its buffer to the GC.
const viewBufferMax = 64 << 10

// GetView reads the claim into a reused buffer and returns a view of it, or
// ErrNotFound: one call into C and, once views have been released, no
// allocation (Get allocates the claim it returns). Call Release when done
// with it. Safe for concurrent use, as Get is; each view is its caller's.
func (s *Store) GetView(key Key) (*ClaimView, error) {
	if !s.lock() {
		return nil, ErrClosed
	}
	defer s.mu.RUnlock()
	v := viewPool.Get().(*ClaimView)
	for {
		n, err := s.getInto(key, v.buf, &v.out)
		if err != nil {
			v.recycle()
			return nil, err
		}
		if n <= len(v.buf) {
			v.released = false
			v.b = v.buf[:n:n]
			v.root = rootTable(v.b)
			return v, nil
		}
		// Larger than the buffer: read again into one of its size (a
		// write may have grown it meanwhile).
		v.buf = make([]byte, n)
	}
}

// Release gives the view's buffer back for the next GetView. The view and
// what its accessors returned must not be used afterwards. Releasing a
// view twice is a bug; it panics unless another GetView took the view
// meanwhile (then it gives that one's buffer away too).
func (v *ClaimView) Release() {
	if v.released {
		panic("claimstore: ClaimView released twice")
	}
	v.recycle()
}

// recycle empties the view and gives it back to viewPool, without a buffer
// larger than viewBufferMax.
func (v *ClaimView) recycle() {
	v.released = true
	v.b, v.root = nil, fbTable{}
	if cap(v.buf) > viewBufferMax {
		v.buf = make([]byte, getBufferBytes)
	}
	viewPool.Put(v)
}

// Clone returns a copy of the claim the view reads, independent of it (as
// Get returns it): valid after Release.
func (v *ClaimView) Clone() *Claim {
	return newClaim(append([]byte(nil), v.b...))
}

// The first buffer of a Get (getSize): at least getBufferBytes, a size
// class of Go's allocator that holds a claim with a few results and
// reservations (one device and one pod take about 450 bytes); at most
// getBufferMax (a claim with about 200 pods): a larger record takes two
// calls, and does not move the size.
const (
	getBufferBytes = 512
	getBufferMax   = 16 << 10
)

// bufferSize is the first buffer for getSize's value `size`.
func bufferSize(size int32) int {
	if size > getBufferBytes {
		return int(size)
	}
	return getBufferBytes
}

// learnSize moves Get's first buffer size (getSize, `cur` when the Get
// read it) towards the record just read (n bytes, rounded up to 64): up to
// it when it did not fit; halved, but not below it nor getBufferBytes, when
// it was smaller; not at all for a record over getBufferMax. A second call
// costs about as much as the read, and each byte a Get allocates costs GC time
// later (bench/RESULTS.md): the size follows records of one size closely,
// and one large record does not make every later Get allocate as much.
// Written only when it changes (goroutines reading records of one size do
// not all write one cache line); when another Get moved it meanwhile, its
// move stands.
func (s *Store) learnSize(cur int32, n int) {
	if n > getBufferMax {
		return
	}
	size := int32(bufferSize(cur))
	want := int32((n + 63) &^ 63)
	var next int32
	switch {
	case want > size:
		next = want
	case want < size && size > getBufferBytes:
		next = (size / 2) &^ 63
		if next < want {
			next = want
		}
		if next < getBufferBytes {
			next = getBufferBytes
		}
	default:
		return
	}
	s.getSize.CompareAndSwap(cur, next)
}

// getCall is a Claim with Get's out-parameters beside it (cgo's rules allow
// a pointer to a field without pointers to be passed to C).
type getCall struct {
	c   Claim
	out C.cs_get_t
}

func recordsOf(r *C.claimstore_records_t) []*Claim {
	n := int(C.claimstore_records_count(r))
	if n == 0 {
		return nil
	}
	out := make([]*Claim, n)
	for i, v := range unsafe.Slice(C.claimstore_records_items(r), n) {
		if v.data != nil {
			out[i] = newClaim(goBytes(v))
		}
	}
	return out
}

// GetManyResult is what GetMany read: the claims in the order asked (nil
// for claims that do not exist), and the store revision of the snapshot.
type GetManyResult struct {
	Claims   []*Claim
	Revision uint64
}

// GetMany reads many claims at one snapshot.
func (s *Store) GetMany(keys []Key) (GetManyResult, error) {
	if !s.lock() {
		return GetManyResult{}, ErrClosed
	}
	defer s.mu.RUnlock()
	var a cArena
	defer a.free()
	var arr *C.claimstore_key_t
	if len(keys) > 0 {
		ks := unsafe.Slice((*C.claimstore_key_t)(a.alloc(uintptr(len(keys))*unsafe.Sizeof(C.claimstore_key_t{}), 8)), len(keys))
		for i, k := range keys {
			ks[i] = a.key(k)
		}
		arr = &ks[0]
	}
	var r *C.claimstore_records_t
	var e *C.claimstore_error_t
	if code := C.claimstore_get_many(s.db, arr, C.size_t(len(keys)), &r, &e); code != 0 {
		return GetManyResult{}, fromC(code, e)
	}
	defer C.claimstore_records_destroy(r)
	out := recordsOf(r)
	if out == nil {
		out = []*Claim{}
	}
	return GetManyResult{Claims: out, Revision: uint64(C.claimstore_records_revision(r))}, nil
}

// ListOptions selects a page of claims.
type ListOptions struct {
	Namespace string // empty: every namespace
	Limit     int    // 0: no limit
	Continue  string // from the previous page
}

// ListPage is one page of claims in namespace/name order, at one snapshot.
type ListPage struct {
	Claims   []*Claim
	Continue string // empty on the last page
	Revision uint64
}

// List returns a page of claims.
func (s *Store) List(opts ListOptions) (*ListPage, error) {
	if opts.Limit < 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "ListOptions.Limit: must not be negative"}
	}
	if !s.lock() {
		return nil, ErrClosed
	}
	defer s.mu.RUnlock()
	var r *C.claimstore_records_t
	var e *C.claimstore_error_t
	if code := C.claimstore_list(s.db, str(opts.Namespace), C.size_t(opts.Limit), str(opts.Continue), &r, &e); code != 0 {
		return nil, fromC(code, e)
	}
	defer C.claimstore_records_destroy(r)
	return &ListPage{Claims: recordsOf(r), Continue: goString(C.claimstore_records_continue(r)),
		Revision: uint64(C.claimstore_records_revision(r))}, nil
}

// All walks every claim (of opts.Namespace, when set) in namespace/name
// order, a page of opts.Limit claims (default 1,000) per call into the
// store; each page is one snapshot. An error ends the walk (yielded with a
// nil claim); so does ctx's end.
func (s *Store) All(ctx context.Context, opts ListOptions) iter.Seq2[*Claim, error] {
	return func(yield func(*Claim, error) bool) {
		if opts.Limit == 0 {
			opts.Limit = 1000
		}
		for {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			page, err := s.List(opts)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, c := range page.Claims {
				if !yield(c, nil) {
					return
				}
			}
			if page.Continue == "" {
				return
			}
			opts.Continue = page.Continue
		}
	}
}

// KeysResult is the claims an index query found, and the store revision
// of the read.
type KeysResult struct {
	Keys     []Key
	Revision uint64
}

// ClaimsReservedFor returns the claims whose status.reservedFor holds the
// consumer uid.
func (s *Store) ClaimsReservedFor(uid string) (KeysResult, error) {
	if !s.lock() {
		return KeysResult{}, ErrClosed
	}
	defer s.mu.RUnlock()
	var k *C.claimstore_keys_t
	var e *C.claimstore_error_t
	if code := C.claimstore_claims_reserved_for(s.db, str(uid), &k, &e); code != 0 {
		return KeysResult{}, fromC(code, e)
	}
	defer C.claimstore_keys_destroy(k)
	var n C.size_t
	items := C.claimstore_keys_items(k, &n)
	out := make([]Key, int(n))
	if n > 0 {
		for i, key := range unsafe.Slice(items, int(n)) {
			out[i] = goKey(key)
		}
	}
	return KeysResult{Keys: out, Revision: uint64(C.claimstore_keys_revision(k))}, nil
}

// HoldingKind is how a claim holds a device.
type HoldingKind int

const (
	HoldingExclusive HoldingKind = iota
	HoldingShare
	HoldingAdminAccess
)

// DeviceHolding is one allocated device of one claim.
type DeviceHolding struct {
	Driver, Pool, Device string
	Kind                 HoldingKind
	ShareID              string // for a share (and admin results that had one)
	Claim                Key
}

// DeviceQuery selects devices: a driver, a pool of it, one device, or one
// share. Empty members after Driver are not given.
type DeviceQuery struct {
	Driver, Pool, Device, ShareID string
}

// HoldingsResult is what ClaimsUsingDevice found, in driver/pool/device
// order, and the store revision of the read.
type HoldingsResult struct {
	Holdings []DeviceHolding
	Revision uint64
}

// ClaimsUsingDevice returns who holds a device, or every holding of a
// driver or pool.
func (s *Store) ClaimsUsingDevice(q DeviceQuery) (HoldingsResult, error) {
	if !s.lock() {
		return HoldingsResult{}, ErrClosed
	}
	defer s.mu.RUnlock()
	cq := C.claimstore_device_query_t{driver: str(q.Driver)}
	if q.Pool != "" {
		cq.pool = str(q.Pool)
	}
	if q.Device != "" {
		cq.device = str(q.Device)
	}
	if q.ShareID != "" {
		cq.share_id = str(q.ShareID)
	}
	var h *C.claimstore_holdings_t
	var e *C.claimstore_error_t
	if code := C.claimstore_claims_using_device(s.db, cq, &h, &e); code != 0 {
		return HoldingsResult{}, fromC(code, e)
	}
	defer C.claimstore_holdings_destroy(h)
	var n C.size_t
	items := C.claimstore_holdings_items(h, &n)
	out := make([]DeviceHolding, int(n))
	if n > 0 {
		for i, v := range unsafe.Slice(items, int(n)) {
			out[i] = DeviceHolding{goString(v.driver), goString(v.pool), goString(v.device),
				HoldingKind(v.kind), goString(v.share_id), goKey(v.claim)}
		}
	}
	return HoldingsResult{Holdings: out, Revision: uint64(C.claimstore_holdings_revision(h))}, nil
}
