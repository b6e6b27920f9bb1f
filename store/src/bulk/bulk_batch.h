// BulkBatch: what a bulk load collected: claims prepared by the write
// path's rules, and deletions, each with the ordinal that orders what the
// load says of one claim. Kept in a few large arenas rather than in
// millions of small heap blocks: adding from many threads does not contend
// (a shard, with its own lock and arena, per thread, roughly), and
// releasing a million claims is a few hundred frees instead of millions.
//
// Thread-safety: Add and AddDeletion from any number of threads; Collect
// and the key accessors after every Add has returned.
//
// Bulk loads: docs/api.md; the spill file: docs/design.md.
#ifndef CLAIMSTORE_SRC_BULK_BULK_BATCH_H_
#define CLAIMSTORE_SRC_BULK_BULK_BATCH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bulk/spill_file.h"
#include "index/index_entries.h"
#include "util/mutex.h"

namespace claimstore::internal {

class BulkBatch {
 public:
  // The encoded records go to a spill file in `spill_dir` (spill_file.h)
  // when it can make one there, else to the heap as everything else.
  explicit BulkBatch(const std::string& spill_dir = "");

  struct Claim {
    absl::string_view record_key;
    absl::string_view bytes;  // 8-byte aligned; empty for a deletion
    uint64_t ordinal = 0;
    bool deleted = false;
    bool unvalidated = false;  // the record's mark (schema/claim.fbs)
    // Where its index keys are: in shard `shard`, [begin, end) of each list.
    uint32_t shard = 0;
    uint32_t consumers_begin = 0, consumers_end = 0, devices_begin = 0, devices_end = 0;
  };

  // Keeps a copy of a prepared claim: its record key, record bytes and
  // index keys.
  void Add(absl::string_view record_key, absl::string_view bytes, const IndexEntries& index,
           uint64_t ordinal);
  // Keeps a deletion of the claim of `record_key`.
  void AddDeletion(absl::string_view record_key, uint64_t ordinal);
  // Views of everything added, valid while the batch lives: the claims and
  // deletions, and every consumer and device index key of the claims
  // (unsorted).
  void Collect(std::vector<Claim>* claims, std::vector<absl::string_view>* consumers,
               std::vector<absl::string_view>* devices) const;
  // The index keys of one claim of Collect.
  absl::Span<const absl::string_view> Consumers(const Claim& claim) const;
  absl::Span<const absl::string_view> Devices(const Claim& claim) const;

 private:
  // Bump allocation in chunks of 1 MiB (or one of its own for a bigger
  // item), 8-byte aligned; with a spill file, in chunks of 8 MiB of it
  // (the heap when it has no room).
  class Arena {
   public:
    explicit Arena(SpillFile* spill = nullptr) : spill_(spill) {}
    absl::string_view Keep(absl::string_view bytes);

   private:
    char* NewChunk(size_t at_least);

    SpillFile* const spill_;
    std::vector<std::unique_ptr<char[]>> chunks_;
    char* next_ = nullptr;
    size_t left_ = 0;
  };
  struct Shard {
    explicit Shard(SpillFile* spill) : records(spill) {}
    mutable Mutex mu;
    Arena arena ABSL_GUARDED_BY(mu);    // record and index keys
    Arena records ABSL_GUARDED_BY(mu);  // encoded records
    std::vector<Claim> claims ABSL_GUARDED_BY(mu);
    std::vector<absl::string_view> consumers ABSL_GUARDED_BY(mu);
    std::vector<absl::string_view> devices ABSL_GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 16;
  Shard& ThisThreadsShard(uint32_t* index);
  // Declared first: the shards' arenas use it until they go.
  const std::unique_ptr<SpillFile> spill_;
  std::vector<std::unique_ptr<Shard>> shards_;  // kShards
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_BULK_BULK_BATCH_H_
