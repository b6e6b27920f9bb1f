// Mutations: each write of the store as a pure function from a claim's
// current record (null: the claim does not exist) to what the write does
// to it: nothing (an idempotent no-op), write these record bytes, or delete
// the claim, or an error. No RocksDB, no locks, no revisions: the write
// path (write_path.cc) reads the current record, runs one of these, then
// validates, checks devices, stamps revisions and stages the result. Adding
// an operation to the store is adding one function here.
//
// Errors name the claim: NotFound when it is absent (for operations other
// than a Put), FailedPrecondition for a rule that forbids the change,
// ResourceExhausted at kMaxReservedFor consumers.
//
// Thread-safety: pure functions; call from any thread.
#ifndef CLAIMSTORE_SRC_WRITE_MUTATIONS_H_
#define CLAIMSTORE_SRC_WRITE_MUTATIONS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "claimstore/allocation.h"
#include "claimstore/claim_record.h"
#include "claimstore/store.h"
#include "index/index_entries.h"

namespace claimstore::internal {

// What a mutation decided.
struct Mutation {
  enum class Kind { kNoop, kWrite, kDelete };
  Kind kind = Kind::kNoop;
  std::string bytes;  // kWrite: the new record, revisions not yet stamped
  // kWrite: validated as state (a record loaded whole, as a restore
  // validates it: no rule about a change), not as an update of the current
  // record.
  bool as_state = false;
  // Set: the change as another store decided it (the shared mode's etcd):
  // made at this revision, the record with these revisions, identity rules
  // only, and not checked against other claims' holdings (etcd's Txn
  // did). Unset: the write path checks and stamps.
  struct Stamps {
    uint64_t create_revision = 0, mod_revision = 0, version = 0;
  };
  std::optional<Stamps> mirrored = std::nullopt;
};

// Put: the whole record, over whatever is there.
absl::StatusOr<Mutation> PutRecord(const ClaimRecord& record, const ClaimRecord* current);

// Delete: NotFound when absent.
absl::StatusOr<Mutation> DeleteClaim(const ClaimKey& key, const ClaimRecord* current);

// Reserve: `consumer` appended to reservedFor; a no-op when its uid is
// there already. FailedPrecondition when not allocated or being deleted,
// ResourceExhausted at kMaxReservedFor consumers.
absl::StatusOr<Mutation> AddConsumer(const ClaimKey& key, const ConsumerRef& consumer,
                                     const ClaimRecord* current);

// Unreserve: the consumer with `consumer_uid` removed; a no-op when absent.
absl::StatusOr<Mutation> RemoveConsumer(const ClaimKey& key, absl::string_view consumer_uid,
                                        const ClaimRecord* current);

// Allocate: status.allocation set. FailedPrecondition when already set.
absl::StatusOr<Mutation> SetAllocation(const ClaimKey& key, const Allocation& allocation,
                                       const ClaimRecord* current);

// Deallocate: allocation and device statuses cleared; a no-op when not
// allocated. FailedPrecondition while reservedFor is not empty.
absl::StatusOr<Mutation> ClearAllocation(const ClaimKey& key, const ClaimRecord* current);

// SetDeviceStatus: each entry replaces the one of the same
// driver/pool/device/shareID, or is appended. (Entries that name no
// allocated device are refused by validation, after the mutation.)
absl::StatusOr<Mutation> MergeDeviceStatuses(const ClaimKey& key, const DeviceStatuses& statuses,
                                             const ClaimRecord* current);

// A claim of a Kubernetes watch stream (Store::ApplyClusterEvents): nothing
// when the stored claim's resourceVersion is not older than the event's (a
// duplicate, a replay, an out-of-date event); else the record written as
// state, or the claim deleted. InvalidArgument when a resourceVersion is
// not a number.
absl::StatusOr<Mutation> ApplyClusterEvent(const ClusterEvent& event, const ClaimRecord* current);

// Aborted (RevisionMismatch) when `current` (null: absent) does not meet
// `pre`, NotFound when a precondition names an absent claim (except
// mod_revision 0 alone: "must not exist yet").
absl::Status CheckPreconditions(const ClaimKey& key, const Preconditions& pre,
                                const ClaimRecord* current);

// The shared mode's mirror: the claim as etcd holds it at `stamps`
// (`record`; null: deleted at stamps.mod_revision), whatever is stored
// (a deletion of a claim not stored is a no-op).
absl::StatusOr<Mutation> MirrorClaim(const ClaimRecord* record, const Mutation::Stamps& stamps,
                                     const ClaimRecord* current);

// A claim's metadata.resourceVersion as the number Kubernetes makes it (0
// when empty); InvalidArgument naming it otherwise.
absl::StatusOr<uint64_t> ResourceVersionOf(const ClaimRecord& record);

// Input checks made before a write is queued: InvalidArgument naming the
// field.
absl::Status RequireClaimKey(const ClaimRecord& record);
absl::Status RequireConsumer(const ConsumerRef& consumer);

// How PrepareRecord checks a record.
enum class RecordChecks {
  kValidate,      // every rule; what a write leaves unchanged ratchets
  kIdentityOnly,  // a load with validation off: identity rules only
};

// What a write of `*bytes` over a claim now `old_table` (null: absent)
// stores, revisions aside: the record without statuses of devices it does
// not hold, validated, with its unvalidated mark set as it must be
// (schema/claim.fbs; both rewrite *bytes), and its index entries. The one
// definition for the write path and bulk loads.
absl::Status PrepareRecord(const fb::ClaimRecord* old_table, std::string* bytes,
                           IndexEntries* index, RecordChecks checks = RecordChecks::kValidate);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_WRITE_MUTATIONS_H_
