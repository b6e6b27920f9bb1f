package claimstore

/*
#cgo CFLAGS: -I${SRCDIR}
#include <stdlib.h>
#include "claimstore/c.h"
#include "calls.h"
*/
import "C"

import (
	"time"
	"unsafe"
)

// VerifyReport is what Verify found.
type VerifyReport struct {
	Records, IndexEntries uint64
	// One line per problem (empty when clean).
	Problems []string
	Repaired bool
}

// Verify reads every record, recomputes every index entry and compares;
// with repair, rewrites the indexes from the records.
func (s *Store) Verify(repair bool) (*VerifyReport, error) {
	if !s.lock() {
		return nil, ErrClosed
	}
	defer s.mu.RUnlock()
	var r *C.claimstore_verify_report_t
	var e *C.claimstore_error_t
	if code := C.claimstore_verify(s.db, cBool(repair), &r, &e); code != 0 {
		return nil, fromC(code, e)
	}
	defer C.claimstore_verify_report_destroy(r)
	out := &VerifyReport{Records: uint64(C.claimstore_verify_report_records(r)),
		IndexEntries: uint64(C.claimstore_verify_report_index_entries(r)),
		Repaired:     C.claimstore_verify_report_repaired(r) != 0}
	var n C.size_t
	if p := C.claimstore_verify_report_problems(r, &n); n > 0 {
		for _, v := range unsafe.Slice(p, int(n)) {
			out.Problems = append(out.Problems, goString(v))
		}
	}
	return out, nil
}

// Stats are the store's counts.
type Stats struct {
	Claims, Allocated, Reserved, Unvalidated uint64
	ConsumerEntries, DeviceEntries           uint64
	Revision                                 uint64
	SizeOnDiskBytes                          uint64
	// The feed holds revisions FeedCompactRevision+1 through Revision.
	FeedCompactRevision   uint64
	FollowResourceVersion uint64
	// The shared mode: whether the mirror follows etcd; if not, since when
	// it cannot (zero when it never could not). Reads show etcd as of
	// Revision meanwhile.
	EtcdFollowing        bool
	EtcdUnreachableSince time.Time
}

// Stats returns the store's counts at one snapshot.
func (s *Store) Stats() (Stats, error) {
	if !s.lock() {
		return Stats{}, ErrClosed
	}
	defer s.mu.RUnlock()
	var st C.claimstore_stats_t
	var e *C.claimstore_error_t
	if code := C.claimstore_stats(s.db, &st, C.size_t(unsafe.Sizeof(st)), &e); code != 0 {
		return Stats{}, fromC(code, e)
	}
	out := Stats{
		Claims: uint64(st.claims), Allocated: uint64(st.allocated), Reserved: uint64(st.reserved),
		Unvalidated: uint64(st.unvalidated), ConsumerEntries: uint64(st.consumer_entries),
		DeviceEntries: uint64(st.device_entries), Revision: uint64(st.revision),
		SizeOnDiskBytes: uint64(st.size_on_disk_bytes), FeedCompactRevision: uint64(st.feed_compact_revision),
		FollowResourceVersion: uint64(st.follow_resource_version), EtcdFollowing: st.etcd_following != 0,
	}
	if st.etcd_unreachable_since_unix_ns != 0 {
		out.EtcdUnreachableSince = time.Unix(0, int64(st.etcd_unreachable_since_unix_ns))
	}
	return out, nil
}

// Backup writes a consistent copy of the database to dir (which must not
// exist): the state of one revision, which opens as a database.
func (s *Store) Backup(dir string) error {
	if !s.lock() {
		return ErrClosed
	}
	defer s.mu.RUnlock()
	var e *C.claimstore_error_t
	if code := C.claimstore_backup(s.db, str(dir), &e); code != 0 {
		return fromC(code, e)
	}
	return nil
}

// Refresh catches a read-only store up with its writer, and a shared-mode
// mirror up with etcd (a no-op otherwise).
func (s *Store) Refresh() error {
	if !s.lock() {
		return ErrClosed
	}
	defer s.mu.RUnlock()
	var e *C.claimstore_error_t
	if code := C.claimstore_refresh(s.db, &e); code != 0 {
		return fromC(code, e)
	}
	return nil
}
