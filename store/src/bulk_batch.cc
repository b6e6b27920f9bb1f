#include "bulk_batch.h"

#include <cstring>
#include <functional>
#include <thread>

namespace claimstore::internal {

absl::string_view BulkBatch::Arena::Keep(absl::string_view bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t size = (bytes.size() + 7) & ~size_t{7};
  if (size > left_) {
    const size_t chunk = std::max(size, kChunk);
    chunks_.push_back(std::make_unique<char[]>(chunk));  // new[] aligns for any scalar
    next_ = chunks_.back().get();
    left_ = chunk;
  }
  char* at = next_;
  if (!bytes.empty()) std::memcpy(at, bytes.data(), bytes.size());
  next_ += size;
  left_ -= size;
  return absl::string_view(at, bytes.size());
}

void BulkBatch::Add(absl::string_view record_key, absl::string_view bytes,
                    const IndexEntries& index) {
  Shard& shard = shards_[std::hash<std::thread::id>()(std::this_thread::get_id()) % kShards];
  MutexLock lock(&shard.mu);
  // The bytes first: they are the ones that must stay 8-byte aligned.
  const absl::string_view kept_bytes = shard.arena.Keep(bytes);
  shard.claims.push_back({shard.arena.Keep(record_key), kept_bytes});
  for (const std::string& k : index.consumers) shard.consumers.push_back(shard.arena.Keep(k));
  for (const std::string& k : index.devices) shard.devices.push_back(shard.arena.Keep(k));
}

void BulkBatch::Collect(std::vector<Claim>* claims, std::vector<absl::string_view>* consumers,
                        std::vector<absl::string_view>* devices) const {
  size_t n[3] = {0, 0, 0};
  for (const Shard& s : shards_) {
    MutexLock lock(&s.mu);  // uncontended: every Add has returned
    n[0] += s.claims.size();
    n[1] += s.consumers.size();
    n[2] += s.devices.size();
  }
  claims->reserve(n[0]);
  consumers->reserve(n[1]);
  devices->reserve(n[2]);
  for (const Shard& s : shards_) {
    MutexLock lock(&s.mu);
    claims->insert(claims->end(), s.claims.begin(), s.claims.end());
    consumers->insert(consumers->end(), s.consumers.begin(), s.consumers.end());
    devices->insert(devices->end(), s.devices.begin(), s.devices.end());
  }
}

}  // namespace claimstore::internal
