package claimstore

/*
#cgo CFLAGS: -I${SRCDIR}
#include <stdlib.h>
#include "claimstore/c.h"
#include "calls.h"
*/
import "C"

import (
	"unsafe"
)

// EventType is the kind of a watch event.
type EventType int

const (
	EventNone EventType = iota // a claim not from a watch stream
	EventAdded
	EventModified
	EventDeleted
)

func (t EventType) String() string {
	switch t {
	case EventAdded:
		return "ADDED"
	case EventModified:
		return "MODIFIED"
	case EventDeleted:
		return "DELETED"
	}
	return "NONE"
}

// DecodedClaim is one claim of an input, and the watch event it came in.
type DecodedClaim struct {
	Claim *Claim
	Event EventType
}

// Decode reads every claim of any input form: one ResourceClaim, a list,
// kubectl's List, JSON lines, watch events, in JSON or in YAML (as kubectl
// -o yaml writes it, documents separated by ---). ErrInvalid naming the
// line and column, and the field path.
func Decode(input []byte) ([]DecodedClaim, error) {
	var r *C.claimstore_records_t
	var e *C.claimstore_error_t
	if code := C.claimstore_decode(bytesSlice(input), &r, &e); code != 0 {
		return nil, fromC(code, e)
	}
	defer C.claimstore_records_destroy(r)
	claims := recordsOf(r)
	out := make([]DecodedClaim, len(claims))
	for i, c := range claims {
		out[i] = DecodedClaim{c, EventType(C.claimstore_records_event(r, C.size_t(i)))}
	}
	return out, nil
}

// JSON returns the claim as a ResourceClaim of resource.k8s.io/v1 (compact).
func (c *Claim) JSON() ([]byte, error) { return c.JSONIndent("") }

// JSONIndent returns the claim's JSON indented as json.MarshalIndent does
// (kubectl uses four spaces).
func (c *Claim) JSONIndent(indent string) ([]byte, error) {
	var out *C.char
	var n C.size_t
	var e *C.claimstore_error_t
	if code := C.claimstore_encode_json(bytesSlice(c.b), str(indent), &out, &n, &e); code != 0 {
		return nil, fromC(code, e)
	}
	defer C.claimstore_free(unsafe.Pointer(out))
	return C.GoBytes(unsafe.Pointer(out), C.int(n)), nil
}
