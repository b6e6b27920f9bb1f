#include "bulk/bulk_batch.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

#include "claimstore/claim_generated.h"

namespace claimstore::internal {

BulkBatch::BulkBatch(const std::string& spill_dir)
    : spill_(spill_dir.empty() ? nullptr : SpillFile::Create(spill_dir)) {
  shards_.reserve(kShards);
  for (size_t i = 0; i < kShards; ++i) shards_.push_back(std::make_unique<Shard>(spill_.get()));
}

char* BulkBatch::Arena::NewChunk(size_t at_least) {
  constexpr size_t kChunk = size_t{1} << 20;
  constexpr size_t kSpillChunk = size_t{8} << 20;
  if (spill_ != nullptr) {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t chunk = (std::max(at_least, kSpillChunk) + page - 1) / page * page;
    if (char* at = spill_->Allocate(chunk); at != nullptr) {
      left_ = chunk;
      return at;
    }
  }
  const size_t chunk = std::max(at_least, kChunk);
  chunks_.push_back(std::make_unique<char[]>(chunk));  // new[] aligns for any scalar
  left_ = chunk;
  return chunks_.back().get();
}

absl::string_view BulkBatch::Arena::Keep(absl::string_view bytes) {
  const size_t size = (bytes.size() + 7) & ~size_t{7};
  if (size > left_) next_ = NewChunk(size);
  char* at = next_;
  if (!bytes.empty()) std::memcpy(at, bytes.data(), bytes.size());
  next_ += size;
  left_ -= size;
  return absl::string_view(at, bytes.size());
}

BulkBatch::Shard& BulkBatch::ThisThreadsShard(uint32_t* index) {
  *index =
      static_cast<uint32_t>(std::hash<std::thread::id>()(std::this_thread::get_id()) % kShards);
  return *shards_[*index];
}

void BulkBatch::Add(absl::string_view record_key, absl::string_view bytes,
                    const IndexEntries& index, uint64_t ordinal) {
  uint32_t shard_index = 0;
  Shard& shard = ThisThreadsShard(&shard_index);
  MutexLock lock(&shard.mu);
  Claim claim;
  claim.bytes = shard.records.Keep(bytes);
  claim.record_key = shard.arena.Keep(record_key);
  claim.ordinal = ordinal;
  claim.unvalidated = fb::GetClaimRecord(bytes.data())->unvalidated();
  claim.shard = shard_index;
  claim.consumers_begin = static_cast<uint32_t>(shard.consumers.size());
  for (const std::string& k : index.consumers) shard.consumers.push_back(shard.arena.Keep(k));
  claim.consumers_end = static_cast<uint32_t>(shard.consumers.size());
  claim.devices_begin = static_cast<uint32_t>(shard.devices.size());
  for (const std::string& k : index.devices) shard.devices.push_back(shard.arena.Keep(k));
  claim.devices_end = static_cast<uint32_t>(shard.devices.size());
  shard.claims.push_back(claim);
}

void BulkBatch::AddDeletion(absl::string_view record_key, uint64_t ordinal) {
  uint32_t shard_index = 0;
  Shard& shard = ThisThreadsShard(&shard_index);
  MutexLock lock(&shard.mu);
  Claim claim;
  claim.record_key = shard.arena.Keep(record_key);
  claim.ordinal = ordinal;
  claim.deleted = true;
  claim.shard = shard_index;
  shard.claims.push_back(claim);
}

void BulkBatch::Collect(std::vector<Claim>* claims, std::vector<absl::string_view>* consumers,
                        std::vector<absl::string_view>* devices) const {
  size_t n[3] = {0, 0, 0};
  for (const auto& shard : shards_) {
    const Shard& s = *shard;
    MutexLock lock(&s.mu);  // uncontended: every Add has returned
    n[0] += s.claims.size();
    n[1] += s.consumers.size();
    n[2] += s.devices.size();
  }
  claims->reserve(n[0]);
  consumers->reserve(n[1]);
  devices->reserve(n[2]);
  for (const auto& shard : shards_) {
    const Shard& s = *shard;
    MutexLock lock(&s.mu);
    claims->insert(claims->end(), s.claims.begin(), s.claims.end());
    consumers->insert(consumers->end(), s.consumers.begin(), s.consumers.end());
    devices->insert(devices->end(), s.devices.begin(), s.devices.end());
  }
}

absl::Span<const absl::string_view> BulkBatch::Consumers(const Claim& claim) const {
  const Shard& s = *shards_[claim.shard];
  MutexLock lock(&s.mu);
  return absl::MakeConstSpan(s.consumers)
      .subspan(claim.consumers_begin, claim.consumers_end - claim.consumers_begin);
}

absl::Span<const absl::string_view> BulkBatch::Devices(const Claim& claim) const {
  const Shard& s = *shards_[claim.shard];
  MutexLock lock(&s.mu);
  return absl::MakeConstSpan(s.devices).subspan(claim.devices_begin,
                                                claim.devices_end - claim.devices_begin);
}

}  // namespace claimstore::internal
