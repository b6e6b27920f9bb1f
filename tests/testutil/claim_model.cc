#include "testutil/claim_model.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "claimstore/allocation.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"

namespace claimstore::testing {
namespace {

constexpr char kNamespace[] = "ns";
constexpr char kDriver[] = "gpu.example.com";
constexpr char kPool[] = "pool-a";

constexpr std::array<std::pair<ModelOp::Kind, absl::string_view>, 7> kNames = {{
    {ModelOp::Kind::kPut, "put"},
    {ModelOp::Kind::kDelete, "delete"},
    {ModelOp::Kind::kAllocate, "allocate"},
    {ModelOp::Kind::kDeallocate, "deallocate"},
    {ModelOp::Kind::kReserve, "reserve"},
    {ModelOp::Kind::kUnreserve, "unreserve"},
    {ModelOp::Kind::kGet, "get"},
}};

bool TakesArg(ModelOp::Kind kind) {
  return kind == ModelOp::Kind::kPut || kind == ModelOp::Kind::kAllocate ||
         kind == ModelOp::Kind::kReserve || kind == ModelOp::Kind::kUnreserve;
}

ModelOutcome Error(absl::StatusCode code) { return ModelOutcome{code, false, 0, std::nullopt}; }

absl::string_view View(const flatbuffers::String* s) {
  return s == nullptr ? absl::string_view() : absl::string_view(s->data(), s->size());
}

}  // namespace

std::string ModelOp::ToString() const {
  for (const auto& [k, name] : kNames) {
    if (k == kind)
      return TakesArg(kind) ? absl::StrCat(name, " ", claim, " ", arg)
                            : absl::StrCat(name, " ", claim);
  }
  return "?";
}

std::optional<ModelOp> ModelOp::Parse(absl::string_view text) {
  std::vector<absl::string_view> words = absl::StrSplit(text, ' ');
  for (const auto& [k, name] : kNames) {
    if (words.empty() || words[0] != name) continue;
    if (words.size() != (TakesArg(k) ? 3u : 2u)) return std::nullopt;
    return ModelOp{k, std::string(words[1]), TakesArg(k) ? std::string(words[2]) : ""};
  }
  return std::nullopt;
}

std::string ModelClaim::ToString() const {
  return absl::StrCat("{uid ", uid, ", device ", device.empty() ? "-" : device, ", reservedFor [",
                      absl::StrJoin(reserved, " "), "], revisions ", create_revision, "/",
                      mod_revision, "/", version, "}");
}

std::string ModelOutcome::ToString() const {
  if (code != absl::StatusCode::kOk) return absl::StatusCodeToString(code);
  return absl::StrCat(changed ? "changed" : "unchanged", " @", revision,
                      read.has_value() ? absl::StrCat(" ", read->ToString()) : "");
}

ModelOutcome ClaimModel::Apply(const ModelOp& op) { return ApplyAt(op, revision_ + 1, revision_); }

ModelOutcome ClaimModel::ApplyObserved(const ModelOp& op, const ModelOutcome& observed) {
  return ApplyAt(op, std::max(revision_ + 1, observed.revision),
                 std::max(revision_, observed.revision));
}

ModelOutcome ClaimModel::ApplyAt(const ModelOp& op, uint64_t next_revision,
                                 uint64_t read_revision) {
  using Kind = ModelOp::Kind;
  auto it = claims_.find(op.claim);
  ModelClaim* claim = it == claims_.end() ? nullptr : &it->second;
  // A write that changes the claim: the next store revision.
  const auto commit = [&](ModelClaim* c) {
    c->mod_revision = revision_ = next_revision;
    ++c->version;
    return ModelOutcome{absl::StatusCode::kOk, true, revision_, std::nullopt};
  };
  const auto unchanged = [&] {
    return ModelOutcome{absl::StatusCode::kOk, false, claim->mod_revision, std::nullopt};
  };
  if (op.kind == Kind::kPut) {
    // A whole record with an empty status: a new incarnation keeps the
    // create revision and the version count.
    ModelClaim next;
    next.uid = op.arg;
    if (claim != nullptr) {
      next.create_revision = claim->create_revision;
      next.version = claim->version;
    } else {
      next.create_revision = next_revision;
    }
    ModelClaim& stored = claims_[op.claim] = std::move(next);
    return commit(&stored);
  }
  if (op.kind == Kind::kGet) {
    if (claim == nullptr) return Error(absl::StatusCode::kNotFound);
    revision_ = read_revision;  // what changes later comes after it
    return ModelOutcome{absl::StatusCode::kOk, false, revision_, *claim};
  }
  if (claim == nullptr) return Error(absl::StatusCode::kNotFound);
  switch (op.kind) {
    case Kind::kDelete:
      claims_.erase(it);
      revision_ = next_revision;
      return ModelOutcome{absl::StatusCode::kOk, true, revision_, std::nullopt};
    case Kind::kAllocate:
      if (!claim->device.empty()) return Error(absl::StatusCode::kFailedPrecondition);
      for (const auto& [name, other] : claims_) {
        if (name != op.claim && other.device == op.arg) return Error(absl::StatusCode::kAborted);
      }
      claim->device = op.arg;
      return commit(claim);
    case Kind::kDeallocate:
      if (claim->device.empty()) return unchanged();
      if (!claim->reserved.empty()) return Error(absl::StatusCode::kFailedPrecondition);
      claim->device.clear();
      return commit(claim);
    case Kind::kReserve:
      if (claim->device.empty()) return Error(absl::StatusCode::kFailedPrecondition);
      if (std::find(claim->reserved.begin(), claim->reserved.end(), op.arg) !=
          claim->reserved.end()) {
        return unchanged();
      }
      if (claim->reserved.size() >= 256) return Error(absl::StatusCode::kResourceExhausted);
      claim->reserved.push_back(op.arg);
      return commit(claim);
    case Kind::kUnreserve: {
      auto found = std::find(claim->reserved.begin(), claim->reserved.end(), op.arg);
      if (found == claim->reserved.end()) return unchanged();
      claim->reserved.erase(found);
      return commit(claim);
    }
    default:
      return Error(absl::StatusCode::kInternal);
  }
}

ModelClaim ToModelClaim(const ClaimRecord& record) {
  ModelClaim out;
  out.uid = std::string(record.uid());
  const fb::ResourceClaimStatus* status = record.table().status();
  if (status != nullptr && status->allocation() != nullptr &&
      status->allocation()->results() != nullptr) {
    std::vector<std::string> devices;
    for (const fb::DeviceRequestAllocationResult* r : *status->allocation()->results()) {
      devices.push_back(std::string(View(r->device())));
    }
    out.device = absl::StrJoin(devices, ",");
  }
  if (status != nullptr && status->reserved_for() != nullptr) {
    for (const fb::ResourceClaimConsumerReference* r : *status->reserved_for()) {
      out.reserved.push_back(std::string(View(r->uid())));
    }
  }
  out.create_revision = record.create_revision();
  out.mod_revision = record.mod_revision();
  out.version = record.version();
  return out;
}

std::vector<std::string> ClaimModel::Diff(const Store& store,
                                          const std::vector<std::string>& names) const {
  std::vector<std::string> problems;
  std::vector<ClaimKey> keys;
  for (const std::string& name : names) keys.push_back({kNamespace, name});
  absl::StatusOr<ClaimReads> reads = store.GetMany(keys);
  if (!reads.ok()) return {absl::StrCat("reading: ", reads.status().ToString())};
  if (reads->revision != revision_) {
    problems.push_back(
        absl::StrCat("store revision ", reads->revision, ", model revision ", revision_));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = claims_.find(names[i]);
    const std::optional<ClaimRecord>& record = reads->records[i];
    if (it == claims_.end() && !record.has_value()) continue;
    const std::string want = it == claims_.end() ? "absent" : it->second.ToString();
    const std::string got = record.has_value() ? ToModelClaim(*record).ToString() : "absent";
    if (want != got) problems.push_back(absl::StrCat(names[i], ": store ", got, ", model ", want));
  }
  return problems;
}

ModelOp RandomOp(std::mt19937_64& rng, int claims, int devices, int consumers) {
  ModelOp op;
  op.claim = absl::StrCat("c", rng() % claims);
  switch (rng() % 8) {
    case 0:
      op = {ModelOp::Kind::kPut, op.claim, absl::StrCat("uid-", rng() % 1000)};
      break;
    case 1:
      op = {ModelOp::Kind::kDelete, op.claim, ""};
      break;
    case 2:
      op = {ModelOp::Kind::kAllocate, op.claim, absl::StrCat("gpu-", rng() % devices)};
      break;
    case 3:
      op = {ModelOp::Kind::kDeallocate, op.claim, ""};
      break;
    case 4:
    case 5:
      op = {ModelOp::Kind::kReserve, op.claim, absl::StrCat("pod-", rng() % consumers)};
      break;
    case 6:
      op = {ModelOp::Kind::kUnreserve, op.claim, absl::StrCat("pod-", rng() % consumers)};
      break;
    default:
      op = {ModelOp::Kind::kGet, op.claim, ""};
  }
  return op;
}

ModelOutcome RunOnStore(Store& store, const ModelOp& op) {
  using Kind = ModelOp::Kind;
  const ClaimKey key{kNamespace, op.claim};
  const auto outcome = [](const absl::StatusOr<WriteResult>& r) {
    if (!r.ok()) return Error(r.status().code());
    return ModelOutcome{absl::StatusCode::kOk, r->changed, r->revision, std::nullopt};
  };
  switch (op.kind) {
    case Kind::kPut: {
      absl::StatusOr<ClaimRecord> record =
          DecodeClaim(absl::StrCat(R"({"metadata":{"namespace":")", kNamespace, R"(","name":")",
                                   op.claim, R"(","uid":")", op.arg, R"("},"status":{}})"));
      if (!record.ok()) return Error(record.status().code());
      return outcome(store.Put(*record));
    }
    case Kind::kDelete:
      return outcome(store.Delete(key));
    case Kind::kAllocate: {
      AllocationBuilder b;
      b.AddResult({"req", kDriver, kPool, op.arg, std::nullopt, std::nullopt});
      return outcome(store.Allocate(key, b.Build()));
    }
    case Kind::kDeallocate:
      return outcome(store.Deallocate(key));
    case Kind::kReserve:
      return outcome(store.Reserve(key, {"", "pods", "p", op.arg}));
    case Kind::kUnreserve:
      return outcome(store.Unreserve(key, op.arg));
    case Kind::kGet: {
      // Every other read goes through GetInPlace (the record lent, not
      // copied): both must answer as the model does. One call per read, so
      // that a read stays one point in a concurrent history.
      static std::atomic<uint64_t> reads{0};
      if (reads.fetch_add(1, std::memory_order_relaxed) % 2 == 1) {
        std::optional<ModelOutcome> lent;
        const absl::Status s =
            store.GetInPlace(key.claim_namespace, key.name, [&](const ClaimRecord& r, uint64_t at) {
              lent = ModelOutcome{absl::StatusCode::kOk, false, at, ToModelClaim(r)};
            });
        if (!s.ok()) return Error(s.code());
        // OK without a call to `read`: no model answers that.
        if (!lent.has_value()) return Error(absl::StatusCode::kInternal);
        return *lent;
      }
      absl::StatusOr<ClaimRead> read = store.Get(key);
      if (!read.ok()) return Error(read.status().code());
      return ModelOutcome{absl::StatusCode::kOk, false, read->revision, ToModelClaim(read->record)};
    }
  }
  return Error(absl::StatusCode::kInternal);
}

}  // namespace claimstore::testing
