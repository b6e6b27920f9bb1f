// The change feed of a writable store: its events staged by the write path,
// its compaction, its publication to the hub, and the watchers (feed.h).

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "db/rocksdb_status.h"
#include "feed/feed.h"
#include "index/keys.h"
#include "store/store_impl.h"
#include "util/status_macros.h"
#include "util/store_errors.h"

namespace claimstore {

Watcher::~Watcher() = default;

namespace internal {
namespace {

// A watcher of a writable store: events from the hub while it has them,
// else from RocksDB at the published snapshot.
class LocalWatcher final : public BufferedWatcher {
 public:
  LocalWatcher(uint64_t from, WatchOptions options, const Database& db, FeedHub& hub,
               const PublishedState& published)
      : BufferedWatcher(from, std::move(options)), reader_(db), hub_(hub), published_(published) {}

 private:
  absl::Status Fetch(uint64_t next, Deadline deadline, std::vector<EventPtr>* out) override {
    uint64_t published = 0, compact = 0;
    switch (hub_.Fetch(next, deadline, cancelled(), out, &published, &compact)) {
      case FeedHub::Fetched::kEvents:
        return absl::OkStatus();
      case FeedHub::Fetched::kOlder: {
        const Pin pin = published_.Current();  // at or past `published`
        return reader_.Read(pin.snapshot.get(), next, pin.revision, out, &spare_);
      }
      case FeedHub::Fetched::kCompacted:
        return FeedCompacted(next, compact);
      case FeedHub::Fetched::kTimeout:
        return absl::DeadlineExceededError("no event within the timeout");
      case FeedHub::Fetched::kCancelled:
        return WatchCancelled();
    }
    return absl::InternalError("unknown fetch result");
  }
  void Wake() override { hub_.WakeAll(); }

  const FeedReader reader_;
  std::shared_ptr<FeedBatch> spare_;
  FeedHub& hub_;
  const PublishedState& published_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Watcher>> StoreImpl::Watch(uint64_t from_revision,
                                                          const WatchOptions& options) {
  if (!FeedOn()) {
    return absl::FailedPreconditionError(
        "the store keeps no change feed (Options::feed_history_revisions is 0)");
  }
  uint64_t published = 0, compact = 0;
  hub_.Position(&published, &compact);
  const uint64_t from = from_revision == 0 ? published + 1 : from_revision;
  if (from <= compact) return FeedCompacted(from, compact);
  return std::unique_ptr<Watcher>(new LocalWatcher(from, options, *db_, hub_, published_));
}

absl::Status StoreImpl::OpenFeed() {
  {
    rocksdb::PinnableSlice value;
    rocksdb::Status s = db_->db()->Get(rocksdb::ReadOptions(), db_->meta(), kFollowKey, &value);
    if (!s.IsNotFound()) {
      CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the follow position"));
      if (!ParseUint64(ToView(value), &follow_rv_)) {
        return absl::DataLossError("the follow position is malformed");
      }
    }
  }
  const FeedReader reader(*db_);
  CS_ASSIGN_OR_RETURN(feed_compact_, reader.CompactPoint(nullptr));
  CS_ASSIGN_OR_RETURN(const FeedPoint first, reader.First());
  CS_ASSIGN_OR_RETURN(const FeedPoint last, reader.Last());
  feed_total_ = std::max(last.total_bytes, feed_compact_.total_bytes);
  rocksdb::WriteBatch batch;
  if (FeedOn() && last.revision < revision_ && feed_compact_.revision < revision_) {
    // Events are missing up to the revision: the feed starts after it.
    feed_compact_ = FeedPoint{revision_, feed_total_};
    CS_RETURN_IF_ERROR(FromRocksDB(
        batch.Put(db_->meta(), kFeedCompactKey, EncodeFeedPoint(feed_compact_)), "staging"));
  }
  // Whether the writer keeps the feed, for read-only stores' watches
  // (written when it changes).
  {
    rocksdb::PinnableSlice off;
    rocksdb::Status s = db_->db()->Get(rocksdb::ReadOptions(), db_->meta(), kFeedOffKey, &off);
    if (!s.IsNotFound()) CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the feed's state"));
    const bool marked_off = s.ok();
    if (marked_off == FeedOn()) {
      CS_RETURN_IF_ERROR(FromRocksDB(FeedOn() ? batch.Delete(db_->meta(), kFeedOffKey)
                                              : batch.Put(db_->meta(), kFeedOffKey, ""),
                                     "staging"));
    }
  }
  if (first.revision != 0 && first.revision <= feed_compact_.revision) {
    // Events below the compact point that a bulk load left.
    CS_RETURN_IF_ERROR(FromRocksDB(batch.DeleteRange(db_->feed(), FeedKey(first.revision),
                                                     FeedKey(feed_compact_.revision + 1)),
                                   "staging"));
  }
  if (batch.Count() > 0) {
    CS_RETURN_IF_ERROR(FromRocksDB(db_->db()->Write(write_options_, &batch),
                                   absl::StrCat("opening the change feed of ", db_->path())));
  }
  feed_dropped_ = feed_compact_.revision;
  hub_.Reset(revision_, feed_compact_.revision);
  return absl::OkStatus();
}

absl::Status StoreImpl::StageEvent(WatchEventType type, const std::string& record_key,
                                   uint64_t revision, const ClaimRecord& record,
                                   const ClaimRecord* previous, rocksdb::WriteBatch* batch) {
  const ClaimRecord* before =
      type == WatchEventType::kModified && options_.feed_records_before ? previous : nullptr;
  const std::string value =
      EncodeFeedEvent(type, record_key, record, before, staged_feed_total_, &staged_feed_total_);
  return FromRocksDB(batch->Put(db_->feed(), FeedKey(revision), value), "staging the event");
}

absl::StatusOr<FeedPoint> StoreImpl::CompactTarget(uint64_t revision, uint64_t total) const {
  const uint64_t keep = options_.feed_history_revisions;
  const uint64_t keep_bytes = options_.feed_history_bytes;
  const FeedPoint c = feed_compact_;
  const bool over_revisions = revision - c.revision > keep + keep / 8;
  const bool over_bytes = total - c.total_bytes > keep_bytes + keep_bytes / 8;
  if (!over_revisions && !over_bytes) return c;
  // The totals of committed events can be read: the point stays within them.
  const FeedReader reader(*db_);
  const auto total_at = [&](uint64_t r) -> absl::StatusOr<uint64_t> {
    return r == c.revision ? c.total_bytes : reader.TotalAt(r);
  };
  uint64_t target =
      std::max(c.revision, std::min(revision_, revision > keep ? revision - keep : 0));
  CS_ASSIGN_OR_RETURN(uint64_t at, total_at(target));
  if (total - at > keep_bytes && target < revision_) {
    // The first revision from which the rest fits: in (target, revision_].
    uint64_t lo = target, hi = revision_;
    CS_ASSIGN_OR_RETURN(uint64_t at_hi, total_at(hi));
    while (hi - lo > 1 && total - at_hi <= keep_bytes) {
      const uint64_t mid = lo + (hi - lo) / 2;
      CS_ASSIGN_OR_RETURN(const uint64_t at_mid, total_at(mid));
      if (total - at_mid > keep_bytes) {
        lo = mid;
      } else {
        hi = mid;
        at_hi = at_mid;
      }
    }
    target = hi;
    at = at_hi;
  }
  return FeedPoint{target, at};
}

absl::Status StoreImpl::StageCompaction(uint64_t revision, rocksdb::WriteBatch* batch,
                                        FeedPoint* compact) {
  if (!FeedOn()) {
    // No events: the feed starts after every revision written.
    *compact = FeedPoint{revision, feed_total_};
  } else {
    CS_ASSIGN_OR_RETURN(*compact, CompactTarget(revision, staged_feed_total_));
    if (compact->revision == feed_compact_.revision) return absl::OkStatus();
    CS_RETURN_IF_ERROR(FromRocksDB(
        batch->DeleteRange(db_->feed(), FeedKey(feed_dropped_ + 1), FeedKey(compact->revision + 1)),
        "staging the feed's compaction"));
  }
  return FromRocksDB(batch->Put(db_->meta(), kFeedCompactKey, EncodeFeedPoint(*compact)),
                     "staging the feed's compaction");
}

std::vector<EventPtr> StoreImpl::EventsOf(absl::Span<const RecordChange> changes) const {
  std::vector<EventPtr> events;
  events.reserve(changes.size());
  for (const RecordChange& c : changes) {
    auto e = std::make_shared<WatchEvent>();
    e->revision = c.revision;
    if (c.record.has_value()) {
      e->type = c.previous.has_value() ? WatchEventType::kModified : WatchEventType::kAdded;
      e->record = c.record;
      if (options_.feed_records_before) e->before = c.previous;
    } else {
      e->type = WatchEventType::kDeleted;
      e->record = c.previous;
      e->before = c.previous;
    }
    e->key = ClaimKey{std::string(e->record->claim_namespace()), std::string(e->record->name())};
    events.push_back(std::move(e));
  }
  return events;
}

}  // namespace internal
}  // namespace claimstore
