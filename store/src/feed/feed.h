// The change feed: how an event is stored (one value per revision in the
// feed family, written by the write path in the same WriteBatch as the
// change), read back and handed to watchers. FeedReader reads events from
// RocksDB, for watchers further behind and for read-only stores; FeedHub
// holds the latest events of a writable store in memory, as the write
// leader publishes them, and wakes the watchers waiting for them.
//
// Thread-safety: the functions are pure; FeedHub is internally synchronized
// (Publish and Reset by the write leader).
//
// Layout: docs/format.md, section The change feed.
#ifndef CLAIMSTORE_SRC_FEED_FEED_H_
#define CLAIMSTORE_SRC_FEED_FEED_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "claimstore/claim_record.h"
#include "claimstore/store.h"
#include "util/mutex.h"

namespace rocksdb {
class Snapshot;
}  // namespace rocksdb

namespace claimstore::internal {

class Database;

using EventPtr = std::shared_ptr<const WatchEvent>;

// The most events a watcher reads from RocksDB at once (one iterator: its
// readahead pays off over long stretches), and copies from the hub at once
// (under the hub's lock, which a commit's publication waits for).
inline constexpr size_t kFeedFetchMax = 1024;
inline constexpr size_t kHubFetchMax = 256;

// Where the feed was compacted to.
struct FeedPoint {
  uint64_t revision = 0;
  uint64_t total_bytes = 0;  // of the event at `revision` (0 before any)
};

std::string FeedKey(uint64_t revision);
bool ParseFeedKey(absl::string_view key, uint64_t* revision);

// The value of one event. `total_before` is the total of the event before
// it; the value's own total is total_before + its size (returned in *total).
std::string EncodeFeedEvent(WatchEventType type, absl::string_view record_key,
                            const ClaimRecord& record, const ClaimRecord* before,
                            uint64_t total_before, uint64_t* total);
// The total bytes field of an event value.
absl::StatusOr<uint64_t> FeedEventTotal(absl::string_view value);
// The event of `revision` from its value (records verified), whose bytes
// `holder` keeps alive: its records point into them when 8-byte aligned.
absl::Status DecodeFeedEvent(uint64_t revision, absl::string_view value,
                             const std::shared_ptr<const void>& holder, WatchEvent* e);

std::string EncodeFeedPoint(const FeedPoint& point);
absl::StatusOr<FeedPoint> ParseFeedPoint(absl::string_view value);

// Whether `e` is one the options select.
bool Selected(const WatchOptions& options, const WatchEvent& e);

// The events of one read from RocksDB, and the bytes their records point
// into (held by the records, apart: see FeedReader::Read).
struct FeedBatch {
  std::shared_ptr<std::string> bytes;
  std::vector<WatchEvent> events;
};

// Reads events from RocksDB at `snapshot` (null: the latest state).
class FeedReader {
 public:
  explicit FeedReader(const Database& db) : db_(db) {}
  // The compact point at `snapshot`.
  absl::StatusOr<FeedPoint> CompactPoint(const rocksdb::Snapshot* snapshot) const;
  // Appends the events of revisions `next` through at most `last` (at most
  // kFeedFetchMax) to *out. OutOfRange when `next` was compacted away;
  // DataLoss when an event that must be there is not. `spare` (optional):
  // a batch to reuse when nothing holds it any more, and where the one read
  // is kept for the next call.
  absl::Status Read(const rocksdb::Snapshot* snapshot, uint64_t next, uint64_t last,
                    std::vector<EventPtr>* out, std::shared_ptr<FeedBatch>* spare = nullptr) const;
  // The first and the last event's revision and total (zeros when the feed
  // is empty), at the latest state.
  absl::StatusOr<FeedPoint> First() const;
  absl::StatusOr<FeedPoint> Last() const;
  // The total of the event of `revision`, at the latest state.
  absl::StatusOr<uint64_t> TotalAt(uint64_t revision) const;

 private:
  absl::StatusOr<FeedPoint> End(bool last) const;

  const Database& db_;
};

// The latest events of a writable store, in memory.
class FeedHub {
 public:
  // Starts over at `revision`, compacted to `compact` (open, bulk loads):
  // no events in memory.
  void Reset(uint64_t revision, uint64_t compact);
  // A commit's events (revisions revision() + 1 through `revision`, in
  // order), and the compact point after it.
  void Publish(uint64_t revision, std::vector<EventPtr> events, uint64_t compact);

  enum class Fetched { kEvents, kOlder, kCompacted, kTimeout, kCancelled };
  // Events from `next` on: kEvents (appended to *out, up to kHubFetchMax)
  // when in memory; kOlder when only RocksDB has them (*published: the
  // revision they are committed up to); kCompacted (*compact set); or
  // waits for them until `deadline` (kTimeout) or `*cancelled` (kCancelled).
  Fetched Fetch(uint64_t next, std::chrono::steady_clock::time_point deadline,
                const std::atomic<bool>& cancelled, std::vector<EventPtr>* out, uint64_t* published,
                uint64_t* compact);
  // Wakes every waiting Fetch (to see its `cancelled`).
  void WakeAll();
  // The published revision and the compact revision.
  void Position(uint64_t* revision, uint64_t* compact);

  // How many events are kept in memory.
  static constexpr size_t kRecent = 4096;

 private:
  Mutex mu_;
  CondVar cv_;
  uint64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t compact_ ABSL_GUARDED_BY(mu_) = 0;
  // Consecutive revisions ending at revision_.
  std::deque<EventPtr> recent_ ABSL_GUARDED_BY(mu_);
};

// What every watcher does: hands over fetched events one at a time, passes
// over those the options do not select, keeps an OutOfRange or DataLoss
// for every later call, and stops at Cancel. A subclass fetches.
class BufferedWatcher : public Watcher {
 public:
  BufferedWatcher(uint64_t from_revision, WatchOptions options)
      : next_(from_revision), options_(std::move(options)) {}
  absl::StatusOr<WatchEvent> Next(absl::Duration timeout) final;
  uint64_t next_revision() const final {
    return pos_ < buffer_.size() ? buffer_[pos_]->revision : next_;
  }
  void Cancel() final;

 protected:
  using Deadline = std::chrono::steady_clock::time_point;
  // Appends events from `next` on (consecutive revisions) to *out, waiting
  // for them until `deadline`: OK with at least one, or an error with none
  // (DeadlineExceeded, Cancelled once cancelled() is set, OutOfRange, ...).
  virtual absl::Status Fetch(uint64_t next, Deadline deadline, std::vector<EventPtr>* out) = 0;
  // Wakes a Fetch waiting now (Cancel).
  virtual void Wake() = 0;
  const std::atomic<bool>& cancelled() const { return cancelled_; }

 private:
  uint64_t next_;  // the revision to fetch from
  const WatchOptions options_;
  std::vector<EventPtr> buffer_;
  size_t pos_ = 0;
  absl::Status error_;  // OutOfRange or DataLoss, for every later call
  std::atomic<bool> cancelled_{false};
};

absl::Status WatchCancelled();

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_FEED_FEED_H_
