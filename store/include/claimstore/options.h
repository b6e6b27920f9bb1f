// Options: how Store::Open opens a store (claimstore/store.h): the
// database's memory and durability, the record cache, the change feed,
// read-only and secondary opens, and the shared mode's etcd endpoints, TLS
// files and timeouts. Each field says its default; `Options{}` is a local
// store with synced-off writes sized for a scheduler's working set.
//
// A plain struct: copy it, change what you need, pass it to Store::Open.
// docs/api.md, "Opening a store", walks through the fields that matter most.
#ifndef CLAIMSTORE_OPTIONS_H_
#define CLAIMSTORE_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace claimstore {

enum class Compression { kNone, kLZ4, kZstd };

struct Options {
  // Create the database directory (and its parents) if it does not exist.
  // Default: true.
  bool create_if_missing = true;
  // Open read-only, as a RocksDB secondary instance: safe while another
  // process has the database open for writing. Reads see the state as of
  // Open() or the last catch-up (Refresh(), or a watcher's). Write calls
  // return FailedPrecondition.
  // Default: false.
  bool read_only = false;
  // Sync the write-ahead log before acknowledging a write: an acknowledged
  // write survives power loss. Concurrent writers share fsyncs (group
  // commit). When false, an acknowledged write survives a crash of the
  // process but not of the machine. Default: false.
  bool sync_writes = false;
  // Size of the block cache shared by all column families. Default: 64 MiB.
  size_t block_cache_bytes = size_t{64} << 20;
  // The store switches its memtables (and RocksDB flushes them to table
  // files) once the batches written since the last switch reach this many
  // bytes. Default: 16 MiB.
  size_t write_buffer_bytes = size_t{16} << 20;
  // Compression of data blocks. Default: LZ4.
  Compression compression = Compression::kLZ4;
  // Records kept in memory for reads (Get, GetMany), exact: the write path
  // updates them. Reads of other records go to RocksDB (block cache) and
  // enter this cache. Besides it, a writable store keeps both indexes in
  // memory, whole: about 150 bytes per reservation and per allocated
  // device. 0 turns the record cache off. Default: 64 MiB.
  size_t record_cache_bytes = size_t{64} << 20;
  // Read the in-memory indexes when they are first needed (an index lookup,
  // a write that takes devices, a bulk load that keeps stored claims and
  // takes devices) instead of at Open, and a bulk load that replaces them
  // builds none in memory: the first such call takes what Open would have
  // (about 2.4 s at a million claims, bench/RESULTS.md), and Verify checks
  // no in-memory indexes until then. For a process that does one thing and
  // exits (the claimstore tool: a reservation, a restore --replace). A
  // scheduler wants the default, where no call pays for the load.
  // Default: false.
  bool defer_index_load = false;

  // The change feed (Store::Watch): every write leaves its event in the
  // same atomic write as the change, in a column family keyed by revision.
  // The feed keeps at least the latest feed_history_revisions revisions,
  // unless they take more than feed_history_bytes (then as many of the
  // latest as fit); the older ones are compacted away when either bound is
  // exceeded by an eighth, in the commit that exceeds it (one range
  // deletion; RocksDB reclaims the space in the background). The bytes are
  // the events' own, before compression (a modification is about a
  // record's size). 0 turns the feed off: no events are written, and a
  // watch is refused.
  // Default: 100,000 revisions, 256 MiB.
  uint64_t feed_history_revisions = 100000;
  uint64_t feed_history_bytes = uint64_t{256} << 20;
  // Modified events carry the claim as it was before the change too
  // (WatchEvent::before), which about doubles the feed's bytes. Deleted
  // events always carry it. Default: false.
  bool feed_records_before = false;

  // --- The shared mode: several processes on several machines ---
  //
  // etcd's client URLs ("http://10.0.0.1:2379" or "10.0.0.1:2379", or all
  // "https://HOST:PORT" for TLS, the members' certificates naming HOST).
  // When set, etcd holds the authoritative claims and device
  // holdings, and the database at `path` is this process's mirror of them,
  // fed by an etcd watch: reads stay local. Each write is one etcd Txn
  // that compares the claim's mod revision and the holdings of the devices
  // it takes, so that across processes exactly one of racing writes wins,
  // as between threads of one process; it returns once the mirror has
  // applied it. Revisions are etcd's. See docs/shared-mode.md.
  // Default: empty (the local mode).
  std::vector<std::string> etcd_endpoints = {};
  // The prefix of this store's keys in etcd. Default: "/claimstore/".
  std::string etcd_prefix = "/claimstore/";
  // The deadline of one etcd request, and how long a write waits for the
  // mirror to apply it: more than 0, at most 24 h. Default: 5 s.
  absl::Duration etcd_timeout = absl::Seconds(5);
  // TLS to etcd (https:// endpoints; as etcdctl's --cacert, --cert,
  // --key): PEM files of the CA that signed the members' certificates
  // (empty: gRPC's default roots), and of this client's certificate and
  // key (both or neither; needed by etcd's --client-cert-auth). Read at
  // Open; InvalidArgument names a file that cannot be read.
  std::string etcd_ca_file = {};
  std::string etcd_cert_file = {};
  std::string etcd_key_file = {};
};

}  // namespace claimstore

#endif  // CLAIMSTORE_OPTIONS_H_
