// The change feed's encoding, its reader and the in-memory hub (feed.h).

#include "feed/feed.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "db/database.h"
#include "db/rocksdb_status.h"
#include "index/keys.h"
#include "record/record_factory.h"
#include "rocksdb/db.h"
#include "util/status_macros.h"
#include "util/store_errors.h"

namespace claimstore::internal {
namespace {

void AppendUint32(uint32_t v, std::string* out) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

bool ConsumeUint32(absl::string_view* in, uint32_t* v) {
  if (in->size() < 4) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i) *v = (*v << 8) | static_cast<unsigned char>((*in)[i]);
  in->remove_prefix(4);
  return true;
}

char KindByte(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return 'A';
    case WatchEventType::kModified:
      return 'M';
    case WatchEventType::kDeleted:
      return 'D';
    case WatchEventType::kNone:
      break;
  }
  return '?';
}

absl::Status Corrupt(uint64_t revision, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("change feed event of revision ", revision, ": ", what));
}

}  // namespace

std::string FeedKey(uint64_t revision) {
  std::string key;
  AppendUint64(revision, &key);
  return key;
}

bool ParseFeedKey(absl::string_view key, uint64_t* revision) {
  return key.size() == 8 && ParseUint64(key, revision);
}

namespace {

constexpr size_t kHeader = 1 + 8 + 4 + 4 + 4;
size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }

}  // namespace

std::string EncodeFeedEvent(WatchEventType type, absl::string_view record_key,
                            const ClaimRecord& record, const ClaimRecord* before,
                            uint64_t total_before, uint64_t* total) {
  const absl::string_view before_bytes = before != nullptr ? before->bytes() : absl::string_view();
  const size_t record_at = Align8(kHeader + record_key.size());
  const size_t before_at = Align8(record_at + record.bytes().size());
  const size_t size =
      before_bytes.empty() ? record_at + record.bytes().size() : before_at + before_bytes.size();
  *total = total_before + size;
  std::string value;
  value.reserve(size);
  value.push_back(KindByte(type));
  AppendUint64(*total, &value);
  AppendUint32(static_cast<uint32_t>(record_key.size()), &value);
  AppendUint32(static_cast<uint32_t>(record.bytes().size()), &value);
  AppendUint32(static_cast<uint32_t>(before_bytes.size()), &value);
  value.append(record_key.data(), record_key.size());
  value.resize(record_at, '\0');
  value.append(record.bytes().data(), record.bytes().size());
  if (!before_bytes.empty()) {
    value.resize(before_at, '\0');
    value.append(before_bytes.data(), before_bytes.size());
  }
  return value;
}

absl::StatusOr<uint64_t> FeedEventTotal(absl::string_view value) {
  uint64_t total = 0;
  if (value.size() < 9 || !ParseUint64(value.substr(1, 8), &total)) {
    return absl::DataLossError("a change feed event is truncated");
  }
  return total;
}

absl::Status DecodeFeedEvent(uint64_t revision, absl::string_view value,
                             const std::shared_ptr<const void>& holder, WatchEvent* e) {
  e->revision = revision;
  if (value.size() < kHeader) return Corrupt(revision, "truncated");
  switch (value[0]) {
    case 'A':
      e->type = WatchEventType::kAdded;
      break;
    case 'M':
      e->type = WatchEventType::kModified;
      break;
    case 'D':
      e->type = WatchEventType::kDeleted;
      break;
    default:
      return Corrupt(revision, "unknown kind");
  }
  absl::string_view lengths = value.substr(9, 12);
  uint32_t key_size = 0, record_size = 0, before_size = 0;
  ConsumeUint32(&lengths, &key_size);
  ConsumeUint32(&lengths, &record_size);
  ConsumeUint32(&lengths, &before_size);
  const size_t record_at = Align8(kHeader + key_size);
  const size_t before_at = Align8(record_at + record_size);
  const size_t size = before_size == 0 ? record_at + record_size : before_at + before_size;
  if (size != value.size() || record_at > value.size()) return Corrupt(revision, "malformed");
  if (!ParseRecordKey(value.substr(kHeader, key_size), &e->key.claim_namespace, &e->key.name)) {
    return Corrupt(revision, "malformed claim key");
  }
  absl::StatusOr<ClaimRecord> r =
      RecordFactory::FromStorage(holder, value.substr(record_at, record_size));
  if (!r.ok()) return Corrupt(revision, r.status().message());
  e->record = *std::move(r);
  if (e->type == WatchEventType::kDeleted) {
    e->before = e->record;
  } else if (before_size > 0) {
    absl::StatusOr<ClaimRecord> b =
        RecordFactory::FromStorage(holder, value.substr(before_at, before_size));
    if (!b.ok()) return Corrupt(revision, b.status().message());
    e->before = *std::move(b);
  }
  return absl::OkStatus();
}

std::string EncodeFeedPoint(const FeedPoint& point) {
  std::string value;
  AppendUint64(point.revision, &value);
  AppendUint64(point.total_bytes, &value);
  return value;
}

absl::StatusOr<FeedPoint> ParseFeedPoint(absl::string_view value) {
  FeedPoint p;
  if (value.size() != 16 || !ParseUint64(value.substr(0, 8), &p.revision) ||
      !ParseUint64(value.substr(8), &p.total_bytes)) {
    return absl::DataLossError("the change feed's compact point is malformed");
  }
  return p;
}

bool Selected(const WatchOptions& options, const WatchEvent& e) {
  if (!options.claim_namespace.empty() && e.key.claim_namespace != options.claim_namespace) {
    return false;
  }
  if (options.key_prefix.empty()) return true;
  const absl::string_view prefix = options.key_prefix;
  const absl::string_view ns = e.key.claim_namespace;
  if (prefix.size() <= ns.size()) return absl::StartsWith(ns, prefix);
  // Past the namespace: "ns/" then a prefix of the name.
  return absl::StartsWith(prefix, ns) && prefix[ns.size()] == '/' &&
         absl::StartsWith(e.key.name, prefix.substr(ns.size() + 1));
}

// FeedReader ----------------------------------------------------------------------

absl::StatusOr<FeedPoint> FeedReader::CompactPoint(const rocksdb::Snapshot* snapshot) const {
  rocksdb::ReadOptions options;
  options.snapshot = snapshot;
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db_.db()->Get(options, db_.meta(), kFeedCompactKey, &value);
  if (s.IsNotFound()) return FeedPoint{};
  CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the change feed's compact point"));
  return ParseFeedPoint(ToView(value));
}

absl::Status FeedReader::Read(const rocksdb::Snapshot* snapshot, uint64_t next, uint64_t last,
                              std::vector<EventPtr>* out, std::shared_ptr<FeedBatch>* spare) const {
  if (next > last) return absl::OkStatus();
  const uint64_t end = std::min(last, next + kFeedFetchMax - 1);
  rocksdb::ReadOptions options;
  options.snapshot = snapshot;
  const std::string upper = FeedKey(end + 1);
  const rocksdb::Slice upper_slice(upper);
  options.iterate_upper_bound = &upper_slice;
  options.fill_cache = false;  // a catch-up reads each event once
  options.readahead_size = 2 << 20;
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator(options, db_.feed()));
  const uint64_t first = next;
  // The values are copied into one buffer, each at an 8-byte aligned
  // offset (so the records in them are aligned and used in place), and
  // the events into one vector: two allocations per fetch, not per event,
  // and the events' vector reused when the spare batch is free again (no
  // event of it left in the watcher's hands; only the watcher's thread ever
  // touches the vector). The bytes are new each time: records the caller
  // kept may hold the old ones, on any thread. The records hold the bytes
  // apart from the batch: the batch holds the records, so a record holding
  // the batch would keep it alive for ever.
  std::shared_ptr<FeedBatch> batch;
  size_t capacity = 0;
  if (spare != nullptr && *spare != nullptr && spare->use_count() == 1) {
    batch = *spare;
    batch->events.clear();
    capacity = batch->bytes != nullptr ? batch->bytes->capacity() : 0;
  } else {
    batch = std::make_shared<FeedBatch>();
    if (spare != nullptr) *spare = batch;
  }
  batch->bytes = std::make_shared<std::string>();
  batch->bytes->reserve(capacity);
  std::string& bytes = *batch->bytes;
  std::vector<std::pair<size_t, size_t>> spans;
  std::vector<uint64_t> revisions;
  for (it->Seek(FeedKey(next)); it->Valid(); it->Next()) {
    uint64_t revision = 0;
    if (!ParseFeedKey(ToView(it->key()), &revision)) return Corrupt(next, "malformed key");
    if (revision != next) break;  // a gap: compacted, or lost
    const absl::string_view value = ToView(it->value());
    bytes.resize(Align8(bytes.size()));
    spans.emplace_back(bytes.size(), value.size());
    bytes.append(value.data(), value.size());
    revisions.push_back(revision);
    ++next;
  }
  batch->events.resize(spans.size());
  const std::shared_ptr<const void> holder(batch->bytes, bytes.data());
  for (size_t i = 0; i < spans.size(); ++i) {
    CS_RETURN_IF_ERROR(DecodeFeedEvent(
        revisions[i], absl::string_view(bytes).substr(spans[i].first, spans[i].second), holder,
        &batch->events[i]));
    out->push_back(EventPtr(batch, &batch->events[i]));
  }
  CS_RETURN_IF_ERROR(FromRocksDB(it->status(), "reading the change feed"));
  if (next > first) return absl::OkStatus();
  // Nothing at `next`: compacted away, or missing.
  CS_ASSIGN_OR_RETURN(const FeedPoint compact, CompactPoint(snapshot));
  if (next <= compact.revision) return FeedCompacted(next, compact.revision);
  return Corrupt(next, "missing from the change feed");
}

absl::StatusOr<FeedPoint> FeedReader::First() const { return End(/*last=*/false); }
absl::StatusOr<FeedPoint> FeedReader::Last() const { return End(/*last=*/true); }

absl::StatusOr<FeedPoint> FeedReader::End(bool last) const {
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator(rocksdb::ReadOptions(), db_.feed()));
  if (last) {
    it->SeekToLast();
  } else {
    it->SeekToFirst();
  }
  CS_RETURN_IF_ERROR(FromRocksDB(it->status(), "reading the change feed"));
  if (!it->Valid()) return FeedPoint{};
  FeedPoint p;
  if (!ParseFeedKey(ToView(it->key()), &p.revision)) return Corrupt(0, "malformed key");
  CS_ASSIGN_OR_RETURN(p.total_bytes, FeedEventTotal(ToView(it->value())));
  return p;
}

absl::StatusOr<uint64_t> FeedReader::TotalAt(uint64_t revision) const {
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db_.db()->Get(rocksdb::ReadOptions(), db_.feed(), FeedKey(revision), &value);
  if (s.IsNotFound()) return Corrupt(revision, "missing from the change feed");
  CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the change feed"));
  return FeedEventTotal(ToView(value));
}

// FeedHub --------------------------------------------------------------------------

void FeedHub::Reset(uint64_t revision, uint64_t compact) {
  {
    MutexLock lock(&mu_);
    revision_ = revision;
    compact_ = compact;
    recent_.clear();
  }
  cv_.NotifyAll();
}

void FeedHub::Publish(uint64_t revision, std::vector<EventPtr> events, uint64_t compact) {
  {
    MutexLock lock(&mu_);
    for (EventPtr& e : events) recent_.push_back(std::move(e));
    while (recent_.size() > kRecent) recent_.pop_front();
    revision_ = revision;
    compact_ = compact;
  }
  cv_.NotifyAll();
}

FeedHub::Fetched FeedHub::Fetch(uint64_t next, std::chrono::steady_clock::time_point deadline,
                                const std::atomic<bool>& cancelled, std::vector<EventPtr>* out,
                                uint64_t* published, uint64_t* compact) {
  MutexLock lock(&mu_);
  for (;;) {
    if (cancelled.load(std::memory_order_acquire)) return Fetched::kCancelled;
    if (next <= compact_) {
      *compact = compact_;
      return Fetched::kCompacted;
    }
    if (next <= revision_) {
      if (recent_.empty() || recent_.front()->revision > next) {
        *published = revision_;
        return Fetched::kOlder;
      }
      for (size_t i = next - recent_.front()->revision;
           i < recent_.size() && out->size() < kHubFetchMax; ++i) {
        out->push_back(recent_[i]);
      }
      return Fetched::kEvents;
    }
    if (!cv_.WaitUntil(&mu_, deadline) && next > revision_ && next > compact_ &&
        !cancelled.load(std::memory_order_acquire)) {
      return Fetched::kTimeout;
    }
  }
}

void FeedHub::Position(uint64_t* revision, uint64_t* compact) {
  MutexLock lock(&mu_);
  *revision = revision_;
  *compact = compact_;
}

void FeedHub::WakeAll() {
  { MutexLock lock(&mu_); }  // a Fetch between its check and its wait sees the flag first
  cv_.NotifyAll();
}

// BufferedWatcher -------------------------------------------------------------------

absl::Status WatchCancelled() { return absl::CancelledError("the watch was cancelled"); }

absl::StatusOr<WatchEvent> BufferedWatcher::Next(absl::Duration timeout) {
  // Only when a fetch is needed: most calls hand over a buffered event.
  std::optional<Deadline> deadline;
  for (;;) {
    if (cancelled_.load(std::memory_order_acquire)) return WatchCancelled();
    if (!error_.ok()) return error_;
    while (pos_ < buffer_.size()) {
      const WatchEvent& e = *buffer_[pos_++];
      if (Selected(options_, e)) return e;
    }
    buffer_.clear();
    pos_ = 0;
    if (!deadline.has_value()) {
      deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     absl::ToChronoNanoseconds(std::min(timeout, absl::Hours(24 * 365))));
    }
    absl::Status s = Fetch(next_, *deadline, &buffer_);
    if (!s.ok()) {
      buffer_.clear();
      if (absl::IsOutOfRange(s) || absl::IsDataLoss(s)) error_ = s;
      return s;
    }
    if (!buffer_.empty()) next_ = buffer_.back()->revision + 1;
  }
}

void BufferedWatcher::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  Wake();
}

}  // namespace claimstore::internal
