// The backends of the comparison benchmark (compare_bench.cc): claimstore,
// and the three ways a scheduler-plugin author might keep claim status
// instead. Each does the same operations on the same generated claims:
//
//   claimstore    the store, as a plugin uses it;
//   hashmap       absl::flat_hash_map of the same FlatBuffer bytes with index
//                 maps, under a reader-writer lock: no durability; the speed
//                 limit to approach;
//   sqlite        SQLite 3.40 (Debian), status as JSON text, WAL mode,
//                 synchronous=NORMAL, index tables for consumer uid and
//                 device, compare-and-set as a transaction on a revision
//                 column;
//   rocksdb_json  RocksDB with claimstore's keys and index families but JSON
//                 values, read-modify-write under a lock per write.
//
// The JSON backends read a few fields by parsing the JSON (simdjson
// On-Demand, the fastest parser at hand) and edit it as a RapidJSON DOM.
// Every write is a compare-and-set on the claim's revision and keeps the
// indexes exact; Allocate refuses a device held exclusively by another claim.
//
// Thread-safety: every backend is safe for concurrent use.
#ifndef CLAIMSTORE_BENCH_BACKENDS_H_
#define CLAIMSTORE_BENCH_BACKENDS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "claimstore/allocation.h"
#include "claimstore/claim_record.h"
#include "claimstore/store.h"

namespace claimstore::bench {

// What a scheduler reads of a claim: how many consumers hold it and which
// device it got first.
struct ClaimFields {
  size_t consumers = 0;
  std::string first_device;  // empty when not allocated
  uint64_t revision = 0;
};

// One claim to load: the JSON as an operator's dump has it, and the decoded
// record (the JSON backends index from it instead of parsing twice).
struct LoadItem {
  std::string json;
  ClaimRecord record;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // Writes `items` (new claims) in one batch or transaction; the dataset load
  // and the restore benchmark. `validate`: claimstore validates; the others
  // ignore it (they have no validation).
  virtual absl::Status Load(absl::Span<const LoadItem> items, bool validate) = 0;
  // Restores every claim of `jsonl` (JSON lines) into this empty backend,
  // decoding each (and validating where the backend validates). The
  // default is a two-stage pipeline that keeps both cores busy: a second
  // thread decodes chunks of 5000 while this one Loads the chunk before.
  // claimstore decodes on two threads into a bulk load.
  virtual absl::Status Restore(absl::string_view jsonl);
  // Makes loaded data settle (compaction, checkpoint) before measuring.
  virtual absl::Status Settle() = 0;

  virtual absl::Status Get(const ClaimKey& key, ClaimFields* out) = 0;
  // Many claims at once: how many were found.
  virtual absl::StatusOr<size_t> GetMany(absl::Span<const ClaimKey> keys) = 0;
  // The claims reserved for a consumer uid.
  virtual absl::StatusOr<size_t> ByConsumer(absl::string_view uid) = 0;
  // Holders of one device, or (device empty) every allocation of a pool.
  virtual absl::StatusOr<size_t> ByDevice(absl::string_view driver, absl::string_view pool,
                                          absl::string_view device) = 0;

  // Writes. Each reads the claim's revision and writes only if it did not
  // change meanwhile (Aborted otherwise).
  virtual absl::Status Reserve(const ClaimKey& key, const ConsumerRef& consumer) = 0;
  virtual absl::Status Unreserve(const ClaimKey& key, absl::string_view uid) = 0;
  // One exclusive device result; Aborted when another claim holds it.
  virtual absl::Status Allocate(const ClaimKey& key, absl::string_view driver,
                                absl::string_view pool, absl::string_view device) = 0;
  virtual absl::Status Deallocate(const ClaimKey& key) = 0;
  // A whole status (PUT of /status) of an existing claim.
  virtual absl::Status Put(const LoadItem& item) = 0;

  // Bytes on disk (0 for the in-memory one).
  virtual uint64_t DiskBytes() = 0;
};

struct BackendOptions {
  std::string dir;           // where the database lives (created if missing)
  bool sync_writes = false;  // claimstore only: fsync before acknowledging
};

std::unique_ptr<Backend> NewClaimstoreBackend(const BackendOptions& options);
std::unique_ptr<Backend> NewHashmapBackend();
std::unique_ptr<Backend> NewSqliteBackend(const BackendOptions& options);
std::unique_ptr<Backend> NewRocksdbJsonBackend(const BackendOptions& options);

// What a stored FlatBuffer status holds of ClaimFields (revision aside).
void FieldsOf(const void* resource_claim_status, ClaimFields* out);
// An allocation of one device, exclusively, for request "gpu".
Allocation OneDevice(absl::string_view driver, absl::string_view pool, absl::string_view device);
// The device index prefix of a driver/pool[/device] (device may be empty).
std::string DevicePrefix(absl::string_view driver, absl::string_view pool,
                         absl::string_view device);
// The claim of a consumer or device index key (keys.h layouts).
bool ClaimOfConsumerKey(absl::string_view key, ClaimKey* out);
bool ClaimOfDeviceKey(absl::string_view key, ClaimKey* out);

// Helpers shared by the JSON backends (json_edit.cc).
namespace json {
// Reads the fields from a claim's JSON.
absl::Status ReadFields(absl::string_view json, ClaimFields* out);
// The claim's JSON with `consumer` appended to status.reservedFor (no-op
// when its uid is there: *changed false).
absl::StatusOr<std::string> AddConsumer(absl::string_view json, const ConsumerRef& consumer,
                                        bool* changed);
absl::StatusOr<std::string> RemoveConsumer(absl::string_view json, absl::string_view uid,
                                           bool* changed);
// Sets status.allocation to one exclusive result; FailedPrecondition when
// allocated already.
absl::StatusOr<std::string> SetAllocation(absl::string_view json, absl::string_view driver,
                                          absl::string_view pool, absl::string_view device);
// Clears status.allocation and status.devices; FailedPrecondition while
// reserved.
absl::StatusOr<std::string> ClearAllocation(absl::string_view json, bool* changed);
}  // namespace json

}  // namespace claimstore::bench

#endif  // CLAIMSTORE_BENCH_BACKENDS_H_
