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
	"time"
)

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
