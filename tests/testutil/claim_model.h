// A sequential model of the store for the reliability tests: what each write
// of a small workload language does to a set of claims, and what a read
// returns, written from docs/validation-rules.md and store.h, not from the store's code
// (store/src).
//
// The crash test replays acknowledged histories through it; the
// linearizability test searches for an order of concurrent calls that it
// accepts; model_test checks it against the store call by call.
//
// Claims live in namespace "ns"; allocations take one device of
// gpu.example.com/pool-a exclusively; consumers are pods named "p".
//
// Thread-safety: none; a ClaimModel is a value.
#ifndef CLAIMSTORE_TESTS_TESTUTIL_CLAIM_MODEL_H_
#define CLAIMSTORE_TESTS_TESTUTIL_CLAIM_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "claimstore/store.h"

namespace claimstore::testing {

struct ModelOp {
  enum class Kind { kPut, kDelete, kAllocate, kDeallocate, kReserve, kUnreserve, kGet };
  Kind kind = Kind::kGet;
  std::string claim;  // the claim's name
  // kPut: the new uid; kAllocate: the device; kReserve, kUnreserve: the
  // consumer's uid; otherwise empty.
  std::string arg;

  // "reserve c3 pod-1"; Parse() reads it back (nullopt when malformed).
  std::string ToString() const;
  static std::optional<ModelOp> Parse(absl::string_view text);
};

// What the model keeps of a claim.
struct ModelClaim {
  std::string uid;
  std::string device;                 // empty: not allocated
  std::vector<std::string> reserved;  // consumer uids, in reservedFor order
  uint64_t create_revision = 0, mod_revision = 0, version = 0;

  std::string ToString() const;
  friend bool operator==(const ModelClaim&, const ModelClaim&) = default;
};

// What a call returned, as far as the model predicts it.
struct ModelOutcome {
  absl::StatusCode code = absl::StatusCode::kOk;
  // Writes: the WriteResult. Get: the revision the read saw.
  bool changed = false;
  uint64_t revision = 0;
  std::optional<ModelClaim> read;  // Get of a claim that exists

  std::string ToString() const;
  friend bool operator==(const ModelOutcome&, const ModelOutcome&) = default;
};

class ClaimModel {
 public:
  // A model of a store at `revision` whose claims the model does not track
  // (they are never named by its operations).
  explicit ClaimModel(uint64_t revision = 0) : revision_(revision) {}

  // Applies `op` as the store specifies it and returns what the call
  // returns. A change takes the next store revision (revisions are dense, as
  // a local store's are).
  ModelOutcome Apply(const ModelOp& op);

  // The same, with revisions as observed: a change takes `observed`'s
  // revision when it is past the model's (etcd's revisions in the shared
  // mode, which other keys' writes also advance), else the next one (which
  // then does not match `observed`); a read is at `observed`'s revision when
  // that is not before the model's, and later changes come after it.
  ModelOutcome ApplyObserved(const ModelOp& op, const ModelOutcome& observed);

  uint64_t revision() const { return revision_; }
  const std::map<std::string, ModelClaim>& claims() const { return claims_; }

  // Differences between the model and the store's claims `names` (and the
  // store revision); empty when they agree.
  std::vector<std::string> Diff(const Store& store, const std::vector<std::string>& names) const;

  friend bool operator==(const ClaimModel&, const ClaimModel&) = default;

 private:
  // `op`, with `next_revision` (past revision_) for a change and
  // `read_revision` (not before revision_) for a read.
  ModelOutcome ApplyAt(const ModelOp& op, uint64_t next_revision, uint64_t read_revision);

  std::map<std::string, ModelClaim> claims_;
  uint64_t revision_ = 0;
};

// A random call on claims c0..c<claims-1>: devices gpu-<n>, consumers
// pod-<n>, uids uid-<n>; writes 7 in 8, reads 1 in 8.
ModelOp RandomOp(std::mt19937_64& rng, int claims, int devices, int consumers);

// Runs `op` against `store` and returns what it returned, in the model's terms.
ModelOutcome RunOnStore(Store& store, const ModelOp& op);

// The model's view of a stored record.
ModelClaim ToModelClaim(const ClaimRecord& record);

}  // namespace claimstore::testing

#endif  // CLAIMSTORE_TESTS_TESTUTIL_CLAIM_MODEL_H_
