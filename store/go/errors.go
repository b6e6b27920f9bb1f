package claimstore

/*
#include "claimstore/c.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Code is the store's status code: absl::StatusCode's values, as the C ABI
// returns them.
type Code int

const (
	CodeOK                 Code = 0
	CodeCancelled          Code = 1
	CodeUnknown            Code = 2
	CodeInvalidArgument    Code = 3
	CodeDeadlineExceeded   Code = 4
	CodeNotFound           Code = 5
	CodeAlreadyExists      Code = 6
	CodePermissionDenied   Code = 7
	CodeResourceExhausted  Code = 8
	CodeFailedPrecondition Code = 9
	CodeAborted            Code = 10
	CodeOutOfRange         Code = 11
	CodeUnimplemented      Code = 12
	CodeInternal           Code = 13
	CodeUnavailable        Code = 14
	CodeDataLoss           Code = 15
	CodeUnauthenticated    Code = 16
)

var codeNames = [...]string{"OK", "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded",
	"NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
	"Unauthenticated"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Sentinel errors, for errors.Is. Every error a Store returns is one of
// *Error, *ConflictError or *CompactedError, which match these by code.
var (
	// ErrNotFound: the claim does not exist.
	ErrNotFound = errors.New("claimstore: not found")
	// ErrConflict: a revision or uid precondition failed, or a device the
	// write takes is held by another claim (errors.As gives a
	// *ConflictError with the current revision or the holder). Re-read and
	// retry, or requeue.
	ErrConflict = errors.New("claimstore: conflict")
	// ErrRefused: a rule forbids the change (not allocated, still reserved,
	// being deleted, already allocated, a read-only store).
	ErrRefused = errors.New("claimstore: refused")
	// ErrExhausted: reservedFor already holds 256 consumers, a device's
	// capacity is used up, or the disk is full (then ErrNoSpace matches
	// too).
	ErrExhausted = errors.New("claimstore: exhausted")
	// ErrNoSpace: the disk under the database is full. The write changed
	// nothing; reads go on, and the store takes writes again by itself once
	// space is freed (or, where it says so with ErrUnavailable, after a
	// reopen).
	ErrNoSpace = errors.New("claimstore: no space left on device")
	// ErrInvalid: bad input; *Error's Fields name the field paths.
	ErrInvalid = errors.New("claimstore: invalid")
	// ErrCorrupt: a stored record or key is corrupt.
	ErrCorrupt = errors.New("claimstore: corrupt")
	// ErrUnavailable: the database is open for writing elsewhere, or a
	// storage failure stopped writes until the store is reopened.
	ErrUnavailable = errors.New("claimstore: unavailable")
	// ErrCompacted: a watch of revisions the feed no longer holds
	// (*CompactedError says up to where): re-list, then watch from the
	// list's revision + 1.
	ErrCompacted = errors.New("claimstore: compacted")
	// ErrClosed: the Store (or the Watcher) was closed. (A closed
	// AllocatedState finds nothing.)
	ErrClosed = errors.New("claimstore: closed")
)

func sentinel(c Code) error {
	switch c {
	case CodeNotFound:
		return ErrNotFound
	case CodeAborted:
		return ErrConflict
	case CodeFailedPrecondition:
		return ErrRefused
	case CodeResourceExhausted:
		return ErrExhausted
	case CodeInvalidArgument:
		return ErrInvalid
	case CodeDataLoss:
		return ErrCorrupt
	case CodeUnavailable:
		return ErrUnavailable
	case CodeOutOfRange:
		return ErrCompacted
	}
	return nil
}

// FieldError is one Kubernetes field error of a refused write:
// "<Field>: <Type>[: <Value>][: <Detail>]".
type FieldError struct {
	Type   string // "Required value", "Invalid value", "Duplicate value", ...
	Field  string // e.g. status.reservedFor[3].uid
	Value  string // as Kubernetes prints it, or empty
	Detail string
	Rule   string // claimstore's name for the rule
}

// Error is a failed call's status: its code and message (which names the
// field path for bad input) and, for validation errors, every field error.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
	// NoSpace: a ResourceExhausted of a full disk (errors.Is ErrNoSpace).
	NoSpace bool
}

func (e *Error) Error() string { return "claimstore: " + e.Code.String() + ": " + e.Message }

// Is matches the sentinel of the error's code.
func (e *Error) Is(target error) bool {
	if target == ErrNoSpace {
		return e.NoSpace
	}
	return target != nil && sentinel(e.Code) == target
}

// ConflictError is an Aborted write: a revision or uid precondition that
// did not hold (CurrentRevision set), or a device held by another claim
// (Holders names it).
type ConflictError struct {
	Message string
	// The claim's current mod revision, when a revision precondition failed
	// (0 when the error carries none).
	CurrentRevision uint64
	// The claims holding the device the write asked for (empty for a
	// precondition failure).
	Holders []Key
}

func (e *ConflictError) Error() string        { return "claimstore: Aborted: " + e.Message }
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// CompactedError is a watch of revisions the feed no longer holds.
type CompactedError struct {
	Message string
	// Events up to this revision are no longer in the feed.
	CompactRevision uint64
}

func (e *CompactedError) Error() string        { return "claimstore: OutOfRange: " + e.Message }
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

// fromC turns a failed call's code and error handle into a Go error, and
// frees the handle.
func fromC(code C.int, e *C.claimstore_error_t) error {
	c := Code(code)
	if e == nil {
		return &Error{Code: c, Message: c.String()}
	}
	defer C.claimstore_error_destroy(e)
	var n C.size_t
	msg := C.GoStringN(C.claimstore_error_message(e, &n), C.int(n))
	switch c {
	case CodeAborted:
		ce := &ConflictError{Message: msg}
		var rev C.uint64_t
		if C.claimstore_error_current_revision(e, &rev) != 0 {
			ce.CurrentRevision = uint64(rev)
		}
		var keys *C.claimstore_key_t
		if k := int(C.claimstore_error_claims(e, &keys)); k > 0 {
			for _, key := range unsafe.Slice(keys, k) {
				ce.Holders = append(ce.Holders, goKey(key))
			}
		}
		return ce
	case CodeOutOfRange:
		var rev C.uint64_t
		if C.claimstore_error_compact_revision(e, &rev) != 0 {
			return &CompactedError{Message: msg, CompactRevision: uint64(rev)}
		}
	}
	out := &Error{Code: c, Message: msg, NoSpace: C.claimstore_error_no_space(e) != 0}
	var fields *C.claimstore_field_error_t
	if k := int(C.claimstore_error_fields(e, &fields)); k > 0 {
		for _, f := range unsafe.Slice(fields, k) {
			out.Fields = append(out.Fields, FieldError{goString(f._type), goString(f.field),
				goString(f.value), goString(f.detail), goString(f.rule)})
		}
	}
	return out
}
