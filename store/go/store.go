package claimstore

/*
#cgo CFLAGS: -I${SRCDIR}
#include <stdlib.h>
#include "claimstore/c.h"
#include "calls.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"
)

// Key is a claim's identity: namespace and name.
type Key struct {
	Namespace, Name string
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Preconditions a write must meet; nil members are not checked.
type Preconditions struct {
	// The claim's current mod revision (Claim.ModRevision, WriteResult.Revision).
	ModRevision *uint64
	// The claim's metadata.uid: pins the incarnation.
	UID *string
}

// WriteResult is what a write did.
type WriteResult struct {
	// The claim's mod revision after the call: the new store revision when
	// it changed something, the unchanged one for an idempotent no-op.
	Revision uint64
	Changed  bool
}

// Store is an open claimstore database.
//
// A Store is safe for concurrent use by any number of goroutines. Reads
// never wait for writers; writes are applied one at a time in arrival order
// (linearizable) and committed in groups. Each method is one call into the
// C library (cgo): about 0.1 µs of its cost, stated in bench/RESULTS.md.
type Store struct {
	mu      sync.RWMutex // shared by every call, exclusive by Close
	db      *C.claimstore_t
	shared  bool // Options.EtcdEndpoints: writes are etcd round trips
	closing atomic.Bool
	getSize atomic.Int32 // Get's first buffer, in bytes (0: getBufferBytes)

	wmu      sync.Mutex
	watchers map[*Watcher]struct{}
}

// Close cancels the store's watchers, waits for the calls in flight, and
// closes the database. Calls after it return ErrClosed; a second Close
// returns ErrClosed. AllocatedState snapshots stay readable.
func (s *Store) Close() error {
	s.closing.Store(true)
	s.wmu.Lock()
	for w := range s.watchers {
		w.cancel()
	}
	s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return ErrClosed
	}
	s.wmu.Lock()
	for w := range s.watchers {
		w.destroyLocked()
	}
	s.watchers = nil
	s.wmu.Unlock()
	C.claimstore_close(s.db)
	s.db = nil
	return nil
}

// lock takes the store for one call; false when it is closed.
func (s *Store) lock() bool {
	s.mu.RLock()
	if s.db == nil {
		s.mu.RUnlock()
		return false
	}
	return true
}
