// Backend::Restore: the default two-stage pipeline (restore.cc), shared by
// the backends without a restore of their own.
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "backends.h"
#include "claimstore/codec.h"

namespace claimstore::bench {

absl::Status Backend::Restore(absl::string_view jsonl) {
  constexpr size_t kChunk = 5000;
  constexpr size_t kAhead = 4;  // decoded chunks waiting, at most
  const std::vector<absl::string_view> lines = absl::StrSplit(jsonl, '\n', absl::SkipEmpty());
  const size_t chunks = (lines.size() + kChunk - 1) / kChunk;
  std::vector<std::vector<LoadItem>> decoded(chunks);
  std::mutex mu;
  std::condition_variable cv;
  size_t ready = 0, written = 0;  // guarded by mu
  absl::Status decode_error;      // guarded by mu
  std::thread decoder([&] {
    for (size_t c = 0; c < chunks; ++c) {
      std::vector<LoadItem> items;
      for (size_t i = c * kChunk; i < std::min(lines.size(), (c + 1) * kChunk); ++i) {
        absl::StatusOr<ClaimRecord> record = DecodeClaim(lines[i]);
        if (!record.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          decode_error = record.status();
          ready = chunks;
          cv.notify_all();
          return;
        }
        items.push_back({std::string(lines[i]), *std::move(record)});
      }
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return c < written + kAhead; });
      decoded[c] = std::move(items);
      ready = c + 1;
      cv.notify_all();
    }
  });
  absl::Status status;
  for (size_t c = 0; c < chunks && status.ok(); ++c) {
    std::vector<LoadItem> items;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return ready > c; });
      if (!decode_error.ok()) break;
      items = std::move(decoded[c]);
    }
    status = Load(items, true);
    std::lock_guard<std::mutex> lock(mu);
    written = c + 1;
    cv.notify_all();
  }
  {
    // A failed Load: let the decoder finish instead of waiting for room.
    std::lock_guard<std::mutex> lock(mu);
    written = chunks;
    cv.notify_all();
  }
  decoder.join();
  if (!decode_error.ok()) return decode_error;
  return status;
}

}  // namespace claimstore::bench
