package claimstore

/*
#cgo pkg-config: claimstore
#include <stdlib.h>
#include "claimstore/c.h"
*/
import "C"

import (
	"sort"
	"unsafe"
)

// Go memory may be handed to C for the duration of a call when it holds no
// Go pointers: string and []byte data, in claimstore_slice_t values passed
// by value. Arrays of structs that point at strings (keys, device results,
// capacities) are built in C memory (cArena) and freed after the call.

// str views a Go string as a C slice, for the duration of one call.
func str(s string) C.claimstore_slice_t {
	if len(s) == 0 {
		return C.claimstore_slice_t{}
	}
	return C.claimstore_slice_t{data: (*C.char)(*(*unsafe.Pointer)(unsafe.Pointer(&s))), size: C.size_t(len(s))}
}

func bytesSlice(b []byte) C.claimstore_slice_t {
	if len(b) == 0 {
		return C.claimstore_slice_t{}
	}
	return C.claimstore_slice_t{data: (*C.char)(unsafe.Pointer(&b[0])), size: C.size_t(len(b))}
}

func goString(s C.claimstore_slice_t) string {
	if s.size == 0 {
		return ""
	}
	return C.GoStringN(s.data, C.int(s.size))
}

func goBytes(s C.claimstore_slice_t) []byte {
	return C.GoBytes(unsafe.Pointer(s.data), C.int(s.size))
}

func goKey(k C.claimstore_key_t) Key {
	return Key{goString(k.claim_namespace), goString(k.name)}
}

func cKey(k Key) C.claimstore_key_t {
	return C.claimstore_key_t{claim_namespace: str(k.Namespace), name: str(k.Name)}
}

func cPre(p Preconditions) C.claimstore_preconditions_t {
	var out C.claimstore_preconditions_t
	if p.ModRevision != nil {
		out.has_mod_revision = 1
		out.mod_revision = C.uint64_t(*p.ModRevision)
	}
	if p.UID != nil {
		out.has_uid = 1
		out.uid = str(*p.UID)
	}
	return out
}

// cArena is C memory for one call's arguments: chunks freed together.
type cArena struct {
	chunks    []unsafe.Pointer
	cur       unsafe.Pointer
	off, size uintptr
}

func (a *cArena) alloc(n, align uintptr) unsafe.Pointer {
	a.off = (a.off + align - 1) &^ (align - 1)
	if a.cur == nil || a.off+n > a.size {
		size := uintptr(4096)
		if n > size {
			size = n
		}
		a.cur = C.calloc(1, C.size_t(size))
		if a.cur == nil {
			panic("claimstore: out of C memory")
		}
		a.chunks = append(a.chunks, a.cur)
		a.off, a.size = 0, size
	}
	p := unsafe.Add(a.cur, a.off)
	a.off += n
	return p
}

func (a *cArena) str(s string) C.claimstore_slice_t {
	if len(s) == 0 {
		return C.claimstore_slice_t{}
	}
	p := a.alloc(uintptr(len(s)), 1)
	copy(unsafe.Slice((*byte)(p), len(s)), s)
	return C.claimstore_slice_t{data: (*C.char)(p), size: C.size_t(len(s))}
}

func (a *cArena) bytes(b []byte) C.claimstore_slice_t {
	if len(b) == 0 {
		return C.claimstore_slice_t{}
	}
	p := a.alloc(uintptr(len(b)), 1)
	copy(unsafe.Slice((*byte)(p), len(b)), b)
	return C.claimstore_slice_t{data: (*C.char)(p), size: C.size_t(len(b))}
}

func (a *cArena) key(k Key) C.claimstore_key_t {
	return C.claimstore_key_t{claim_namespace: a.str(k.Namespace), name: a.str(k.Name)}
}

// capacities lays out a name-to-quantity map in name order.
func (a *cArena) capacities(m map[string]string) (*C.claimstore_capacity_t, C.size_t) {
	if len(m) == 0 {
		return nil, 0
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	arr := unsafe.Slice((*C.claimstore_capacity_t)(a.alloc(
		uintptr(len(names))*unsafe.Sizeof(C.claimstore_capacity_t{}), 8)), len(names))
	for i, n := range names {
		arr[i] = C.claimstore_capacity_t{name: a.str(n), quantity: a.str(m[n])}
	}
	return &arr[0], C.size_t(len(names))
}

func (a *cArena) free() {
	for _, c := range a.chunks {
		C.free(c)
	}
	a.chunks, a.cur = nil, nil
}
