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
	"iter"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Key is a claim's identity: namespace and name.
type Key struct {
	Namespace, Name string
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Compression of the database's data blocks.
type Compression int

const (
	CompressionDefault Compression = iota // LZ4
	CompressionNone
	CompressionLZ4
	CompressionZstd
)

// Options for Open. The zero value is the default of every option.
type Options struct {
	// ErrorIfMissing: do not create the database when it does not exist.
	ErrorIfMissing bool
	// ReadOnly opens the database as a secondary instance, safe while
	// another process writes it: reads see the state of the last catch-up
	// (Refresh, or a waiting Watcher's); writes return ErrRefused.
	ReadOnly bool
	// SyncWrites: an acknowledged write survives power loss (writers share
	// fsyncs). Otherwise it survives a crash of the process.
	SyncWrites bool
	// Sizes; 0 is the default (block cache 64 MiB, memtables 16 MiB,
	// record cache 64 MiB).
	BlockCacheBytes, WriteBufferBytes, RecordCacheBytes uint64
	// DisableRecordCache turns the record cache off.
	DisableRecordCache bool
	Compression        Compression
	// DeferIndexLoad reads the in-memory indexes at their first use instead
	// of at Open (for a process that does one thing and exits).
	DeferIndexLoad bool
	// The change feed's history: at least the latest FeedHistoryRevisions
	// revisions (0: 100,000) unless they take more than FeedHistoryBytes
	// (0: 256 MiB). DisableFeed keeps no feed (Watch is refused).
	FeedHistoryRevisions, FeedHistoryBytes uint64
	DisableFeed                            bool
	// FeedRecordsBefore: Modified events carry the claim before the change.
	FeedRecordsBefore bool

	// The shared mode (docs/shared-mode.md): etcd's client URLs
	// ("http://10.0.0.1:2379"). When set, etcd holds the claims and the
	// device holdings, and the database at dir is this process's mirror,
	// fed by an etcd watch: reads stay local; each write is one etcd
	// compare-and-set that returns once the mirror has applied it.
	// Revisions are etcd's, the same on every machine, and Watch hands
	// over etcd's history of the claims (revisions with gaps).
	EtcdEndpoints []string
	// The prefix of the store's keys in etcd (default "/claimstore/").
	EtcdPrefix string
	// The deadline of one etcd request, and of a write's wait for the
	// mirror (default 5s; at most 24h): without a quorum, writes fail with
	// ErrUnavailable within a few of it.
	EtcdTimeout time.Duration
	// TLS to etcd (https:// endpoints; as etcdctl's --cacert, --cert,
	// --key): PEM files of the CA that signed the members' certificates
	// (empty: gRPC's default roots), and of this client's certificate and
	// key (both or neither). Read at Open.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
}

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

// Open opens (or creates) the database at dir. One process may open a
// database for writing (another gets ErrUnavailable); any number may open
// it with Options.ReadOnly.
//
// ctx bounds the wait: in the shared mode Open connects to etcd and loads
// its state (each request bounded by Options.EtcdTimeout); when ctx ends
// first, Open returns its error and closes the store once it is open.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(opts.EtcdEndpoints) == 0 || ctx.Done() == nil {
		return open(dir, opts)
	}
	type outcome struct {
		s   *Store
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		s, err := open(dir, opts)
		done <- outcome{s, err}
	}()
	select {
	case o := <-done:
		return o.s, o.err
	case <-ctx.Done():
		go func() {
			if o := <-done; o.s != nil {
				o.s.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func open(dir string, opts Options) (*Store, error) {
	o := C.claimstore_options_create()
	if o == nil {
		return nil, &Error{Code: CodeResourceExhausted, Message: "out of memory"}
	}
	defer C.claimstore_options_destroy(o)
	C.claimstore_options_set_create_if_missing(o, cBool(!opts.ErrorIfMissing))
	C.claimstore_options_set_read_only(o, cBool(opts.ReadOnly))
	C.claimstore_options_set_sync_writes(o, cBool(opts.SyncWrites))
	if opts.BlockCacheBytes != 0 {
		C.claimstore_options_set_block_cache_bytes(o, C.uint64_t(opts.BlockCacheBytes))
	}
	if opts.WriteBufferBytes != 0 {
		C.claimstore_options_set_write_buffer_bytes(o, C.uint64_t(opts.WriteBufferBytes))
	}
	if opts.RecordCacheBytes != 0 {
		C.claimstore_options_set_record_cache_bytes(o, C.uint64_t(opts.RecordCacheBytes))
	}
	if opts.DisableRecordCache {
		C.claimstore_options_set_record_cache_bytes(o, 0)
	}
	switch opts.Compression {
	case CompressionDefault, CompressionLZ4:
		C.claimstore_options_set_compression(o, C.CLAIMSTORE_COMPRESSION_LZ4)
	case CompressionNone:
		C.claimstore_options_set_compression(o, C.CLAIMSTORE_COMPRESSION_NONE)
	case CompressionZstd:
		C.claimstore_options_set_compression(o, C.CLAIMSTORE_COMPRESSION_ZSTD)
	default:
		return nil, &Error{Code: CodeInvalidArgument, Message: "Options.Compression: not a Compression value"}
	}
	C.claimstore_options_set_defer_index_load(o, cBool(opts.DeferIndexLoad))
	if opts.FeedHistoryRevisions != 0 {
		C.claimstore_options_set_feed_history_revisions(o, C.uint64_t(opts.FeedHistoryRevisions))
	}
	if opts.FeedHistoryBytes != 0 {
		C.claimstore_options_set_feed_history_bytes(o, C.uint64_t(opts.FeedHistoryBytes))
	}
	if opts.DisableFeed {
		C.claimstore_options_set_feed_history_revisions(o, 0)
	}
	C.claimstore_options_set_feed_records_before(o, cBool(opts.FeedRecordsBefore))
	for _, url := range opts.EtcdEndpoints {
		C.claimstore_options_add_etcd_endpoint(o, str(url))
	}
	if opts.EtcdPrefix != "" {
		C.claimstore_options_set_etcd_prefix(o, str(opts.EtcdPrefix))
	}
	if opts.EtcdCAFile != "" || opts.EtcdCertFile != "" || opts.EtcdKeyFile != "" {
		C.claimstore_options_set_etcd_tls_files(o, str(opts.EtcdCAFile), str(opts.EtcdCertFile), str(opts.EtcdKeyFile))
	}
	if opts.EtcdTimeout < 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "Options.EtcdTimeout: negative"}
	}
	if opts.EtcdTimeout != 0 {
		C.claimstore_options_set_etcd_timeout_ms(o, C.uint64_t((opts.EtcdTimeout+time.Millisecond-1)/time.Millisecond))
	}

	var db *C.claimstore_t
	var e *C.claimstore_error_t
	if code := C.claimstore_open(o, str(dir), &db, &e); code != 0 {
		return nil, fromC(code, e)
	}
	return &Store{db: db, shared: len(opts.EtcdEndpoints) > 0, watchers: map[*Watcher]struct{}{}}, nil
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
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

// --- Reads ---

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
		if code := C.cs_get_into(s.handle(), cKey(key), (*C.char)(unsafe.Pointer(&buf[0])),
			C.size_t(len(buf)), &g.out); code != 0 {
			return nil, fromC(code, C.cs_error(g.out.error))
		}
		n := int(g.out.size)
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

// --- Writes ---

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

// --- Maintenance ---

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

// --- The codec ---

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
