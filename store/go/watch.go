package claimstore

/*
#include "claimstore/c.h"
*/
import "C"

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Event is one committed change of one claim.
type Event struct {
	Type EventType
	// The store revision of the change: every revision is one event.
	Revision uint64
	Key      Key
	// The claim as written; for EventDeleted, as it was when deleted.
	Claim *Claim
	// EventDeleted: the same as Claim. EventModified, with
	// Options.FeedRecordsBefore: the claim before the change. Else nil.
	Before *Claim
}

// WatchOptions select the events a Watcher hands over (all when empty).
type WatchOptions struct {
	Namespace string // only claims of this namespace
	KeyPrefix string // only claims whose "namespace/name" starts with this
}

// Watcher follows the change feed: events in revision order, each once,
// none skipped; a watcher that falls behind the feed's history gets
// ErrCompacted (a *CompactedError) rather than being moved ahead.
//
// Next is called from one goroutine at a time; Close and NextRevision from
// any. Close a Watcher when done with it (or cancel its context and then
// Close): until then it holds a handle in C and a goroutine, like a
// time.Ticker until Stop. Store.Close closes every watcher of the store.
type Watcher struct {
	store *Store
	ctx   context.Context

	next sync.Mutex // held by Next during its call into C
	hmu  sync.Mutex // guards h against Close
	h    *C.claimstore_watcher_t
	done chan struct{}
	// The revision the next event is looked for from, as of the last Next.
	nextRevision atomic.Uint64
}

// Watch follows the feed from fromRevision on (inclusive; 0: from the next
// revision committed). To follow the store from a List at revision R,
// watch from R + 1. ctx bounds the watcher's life: once it is done, Next
// returns ctx.Err(). ErrCompacted when fromRevision is no longer in the
// feed; ErrRefused when the store keeps no feed.
func (s *Store) Watch(ctx context.Context, fromRevision uint64, opts WatchOptions) (*Watcher, error) {
	if !s.lock() {
		return nil, ErrClosed
	}
	defer s.mu.RUnlock()
	var h *C.claimstore_watcher_t
	var e *C.claimstore_error_t
	if code := C.claimstore_watch(s.db, C.uint64_t(fromRevision), str(opts.Namespace), str(opts.KeyPrefix), &h, &e); code != 0 {
		return nil, fromC(code, e)
	}
	w := &Watcher{store: s, ctx: ctx, h: h, done: make(chan struct{})}
	w.nextRevision.Store(uint64(C.claimstore_watcher_next_revision(h)))
	s.wmu.Lock()
	if s.watchers == nil || s.closing.Load() { // Close has begun: it would not cancel this one
		s.wmu.Unlock()
		C.claimstore_watcher_destroy(h)
		return nil, ErrClosed
	}
	s.watchers[w] = struct{}{}
	s.wmu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
			w.cancel()
		case <-w.done:
		}
	}()
	return w, nil
}

// cancel makes a waiting Next, and every later one, return.
func (w *Watcher) cancel() {
	w.hmu.Lock()
	if w.h != nil {
		C.claimstore_watcher_cancel(w.h)
	}
	w.hmu.Unlock()
}

// destroyLocked frees the handle; the store's wmu is held by the caller,
// and no Next is in C (Close holds the store exclusively, or w.next).
func (w *Watcher) destroyLocked() {
	w.hmu.Lock()
	defer w.hmu.Unlock()
	if w.h != nil {
		C.claimstore_watcher_destroy(w.h)
		w.h = nil
		close(w.done)
	}
}

// Next waits for the next event, until ctx ends (then ctx.Err(); the
// watcher stays usable) or the Watch's context ends (then its error, for
// good). Errors: ErrCompacted, ErrClosed after Close (of the watcher or its
// store), ErrCorrupt for a corrupt stored event. A context without a
// deadline that can end is checked every 50 ms while Next waits.
func (w *Watcher) Next(ctx context.Context) (Event, error) {
	w.next.Lock()
	defer w.next.Unlock()
	s := w.store
	if !s.lock() {
		return Event{}, ErrClosed
	}
	defer s.mu.RUnlock()
	w.hmu.Lock()
	h := w.h
	w.hmu.Unlock()
	if h == nil {
		return Event{}, ErrClosed
	}
	if err := w.ctx.Err(); err != nil {
		return Event{}, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return Event{}, err
		}
		wait := int64(1000)
		if ctx.Done() != nil {
			wait = 50
			if d, ok := ctx.Deadline(); ok {
				wait = min(1000, max(0, time.Until(d).Milliseconds()+1))
			}
		}
		var ev C.claimstore_event_t
		var e *C.claimstore_error_t
		code := C.claimstore_watcher_next(h, C.int64_t(wait), &ev, &e)
		w.nextRevision.Store(uint64(C.claimstore_watcher_next_revision(h)))
		switch Code(code) {
		case CodeOK:
			out := Event{Type: EventType(ev._type), Revision: uint64(ev.revision), Key: goKey(ev.key)}
			if ev.record.data != nil {
				out.Claim = newClaim(goBytes(ev.record))
			}
			if ev.before.data != nil {
				out.Before = newClaim(goBytes(ev.before))
			}
			return out, nil
		case CodeDeadlineExceeded:
			C.claimstore_error_destroy(e)
			if s.closing.Load() { // Close is waiting for this call
				return Event{}, ErrClosed
			}
			continue
		case CodeCancelled:
			C.claimstore_error_destroy(e)
			if err := w.ctx.Err(); err != nil {
				return Event{}, err
			}
			return Event{}, ErrClosed
		}
		return Event{}, fromC(code, e)
	}
}

// NextRevision is the revision the next event is looked for from (as of
// the last Next; safe to call while another goroutine waits in Next).
func (w *Watcher) NextRevision() uint64 { return w.nextRevision.Load() }

// Close cancels a waiting Next and frees the watcher. Idempotent.
func (w *Watcher) Close() {
	w.cancel()
	w.next.Lock() // waits for a Next in C to return
	defer w.next.Unlock()
	s := w.store
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.watchers != nil {
		delete(s.watchers, w)
	}
	w.destroyLocked()
}
