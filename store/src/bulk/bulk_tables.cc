// A bulk load's table files, written on five tasks, each one pass over its
// keys: the record files of the first and of the second half of the
// claims (revisions stamped in key order, deletions merged in); the
// consumer index file; the in-memory consumer index (when the indexes are
// rebuilt, unless their load is deferred); the device rule (when given),
// the device index file and its in-memory index, and the revision. A failed task stops the others.
// (With the consumer file and its in-memory index in one task, that task ran 1.5 s alone at the end
// of a 1M-claim load, one core idle: there are two consumer keys per claim, and each costs as much
// to index in memory as to write.)

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bulk/bulk_load.h"
#include "db/rocksdb_status.h"
#include "feed/feed.h"
#include "index/keys.h"
#include "record/record_edit.h"
#include "util/parallel.h"
#include "util/status_macros.h"

namespace claimstore::internal {

namespace {

std::atomic<uint64_t> table_file_bytes_for_testing{0};

uint64_t TableFileBytes() {
  const uint64_t bytes = table_file_bytes_for_testing.load();
  return bytes != 0 ? bytes : uint64_t{64} << 20;
}

}  // namespace

void SetBulkTableFileBytesForTesting(uint64_t bytes) { table_file_bytes_for_testing = bytes; }

TableWriter::TableWriter(const Database& db, const std::string& dir, const Load& load,
                         const StoredPart& stored, bool memory_indexes,
                         std::function<absl::Status()> check,
                         const std::function<void(const BulkLoadProgress&)>& progress)
    : load_(load),
      stored_(stored),
      memory_(stored.rebuild && memory_indexes),
      check_(std::move(check)),
      progress_(progress),
      records_{{db.db(), db.records(), dir, "records-0", TableFileBytes()},
               {db.db(), db.records(), dir, "records-1", TableFileBytes()}},
      consumers_(db.db(), db.consumers(), dir, "consumers", TableFileBytes()),
      devices_(db.db(), db.devices(), dir, "devices", TableFileBytes()),
      meta_(db.db(), db.meta(), dir, "meta") {
  if (memory_) consumer_index_.Reserve(load_.consumers.size());
  if (stored_.delete_ranges) DeleteStoredRanges();
}

namespace {

// The larger of a stored family's end and just past the last key put.
std::string RangeEnd(const std::string& stored_end, absl::string_view last_put) {
  std::string past = absl::StrCat(last_put, absl::string_view("\0", 1));
  return std::max(stored_end, past);
}

}  // namespace

void TableWriter::DeleteStoredRanges() {
  // Records: the first half's files from the smallest key to the second
  // half's first, the second half's from there on.
  const size_t n = load_.claims.size();
  if (n == 0) {
    if (!stored_.records_end.empty()) records_[0].DeleteStoredRange("", stored_.records_end);
  } else {
    const std::string split(load_.claims[n / 2].record_key);
    records_[0].DeleteStoredRange("", split);
    records_[1].DeleteStoredRange(split,
                                  RangeEnd(stored_.records_end, load_.claims[n - 1].record_key));
  }
  const auto index = [](TableSink* sink, const std::string& stored_end,
                        const std::vector<absl::string_view>& puts) {
    if (stored_end.empty()) return;  // nothing stored to delete
    sink->DeleteStoredRange("", puts.empty() ? stored_end : RangeEnd(stored_end, puts.back()));
  };
  index(&consumers_, stored_.consumers_end, load_.consumers);
  index(&devices_, stored_.devices_end, load_.devices);
}

absl::Status TableWriter::Run() {
  const size_t n = load_.claims.size();
  // The deletions of each half: those before the second half's first key.
  const std::vector<std::string>& deletes = stored_.record_deletes;
  const size_t split =
      n == 0 ? deletes.size()
             : static_cast<size_t>(std::lower_bound(deletes.begin(), deletes.end(),
                                                    load_.claims[n / 2].record_key,
                                                    [](const std::string& d, absl::string_view k) {
                                                      return absl::string_view(d) < k;
                                                    }) -
                                   deletes.begin());
  BucketedKeys* const consumer_memory = memory_ ? &consumer_index_ : nullptr;
  absl::Status written[5];
  RunConcurrently(
      {Task(&written[0], [&] { return WriteRecords(0, n / 2, 0, split, &records_[0]); }),
       Task(&written[1],
            [&] { return WriteRecords(n / 2, n, split, deletes.size(), &records_[1]); }),
       Task(&written[2],
            [&] {
              return WriteIndex(load_.consumers, stored_.consumer_deletes, &consumers_, nullptr);
            }),
       Task(&written[3],
            [&] {
              if (consumer_memory == nullptr) return absl::OkStatus();
              return EachKey(load_.consumers, [&](absl::string_view key) {
                consumer_memory->AppendSorted(key);
                return absl::OkStatus();
              });
            }),
       Task(&written[4], [&] { return WriteDevices(); })});
  absl::Status s;
  for (const absl::Status& w : written) {
    if (!w.ok() && (s.ok() || absl::IsCancelled(s))) s = w;
  }
  return s;
}

std::vector<rocksdb::IngestExternalFileArg> TableWriter::IngestArgs() const {
  std::vector<std::string> record_files = records_[0].paths();  // in key order
  record_files.insert(record_files.end(), records_[1].paths().begin(), records_[1].paths().end());
  const std::pair<rocksdb::ColumnFamilyHandle*, const std::vector<std::string>*> files[] = {
      {records_[0].family(), &record_files},
      {consumers_.family(), &consumers_.paths()},
      {devices_.family(), &devices_.paths()},
      {meta_.family(), &meta_.paths()}};
  std::vector<rocksdb::IngestExternalFileArg> args;
  for (const auto& [family, paths] : files) {
    if (paths->empty()) continue;
    rocksdb::IngestExternalFileArg arg;
    arg.column_family = family;
    arg.external_files = *paths;
    arg.options.move_files = true;
    arg.options.write_global_seqno = false;  // no rewrite of the moved files
    args.push_back(std::move(arg));
  }
  return args;
}

std::function<void()> TableWriter::Task(absl::Status* status, std::function<absl::Status()> work) {
  return [this, status, work = std::move(work)] {
    *status = work();
    if (!status->ok()) stop_ = true;
  };
}

absl::Status TableWriter::Stopped(size_t i) const {
  if (i % 4096 == 0 && stop_.load()) return absl::CancelledError("stopped");
  return absl::OkStatus();
}

absl::Status TableWriter::WriteRecords(size_t begin, size_t end, size_t deletes_begin,
                                       size_t deletes_end, TableSink* sink) {
  const std::vector<std::string>& deletes = stored_.record_deletes;
  const uint64_t first = stored_.before_claims;  // the revision before claim 0
  std::string stamped;
  size_t d = deletes_begin;
  for (size_t i = begin; i < end; ++i) {
    CS_RETURN_IF_ERROR(Stopped(i));
    if (i + kPrefetchAhead < end) {
      __builtin_prefetch(load_.claims[i + kPrefetchAhead].bytes.data());
      __builtin_prefetch(load_.claims[i + kPrefetchAhead].record_key.data());
    }
    if (progress_ && i % 4096 == 4095) {
      progress_(BulkLoadProgress{"writing", written_ += 4096, load_.claims.size()});
    }
    const BulkBatch::Claim& claim = load_.claims[i];
    for (; d < deletes_end && absl::string_view(deletes[d]) < claim.record_key; ++d) {
      CS_RETURN_IF_ERROR(sink->Delete(deletes[d]));
    }
    if (stored_.mirrored) {  // stamped by etcd's revisions already
      CS_RETURN_IF_ERROR(sink->Put(claim.record_key, claim.bytes));
      continue;
    }
    // Written anew: the claim's create revision is this one, version 1.
    const uint64_t revision = first + i + 1;
    StampRevisionsInto(claim.bytes, revision, revision, 1, &stamped);
    CS_RETURN_IF_ERROR(sink->Put(claim.record_key, stamped));
  }
  for (; d < deletes_end; ++d) CS_RETURN_IF_ERROR(sink->Delete(deletes[d]));
  return sink->Finish();
}

template <typename Visit>
absl::Status TableWriter::EachKey(const std::vector<absl::string_view>& keys, const Visit& visit) {
  for (size_t i = 0; i < keys.size(); ++i) {
    CS_RETURN_IF_ERROR(Stopped(i));
    Prefetch(keys, i + kPrefetchAhead);
    CS_RETURN_IF_ERROR(visit(keys[i]));
  }
  return absl::OkStatus();
}

// The load's keys and the stored keys that go (none of them among the
// load's), merged in key order; each put also into `memory` when given.
absl::Status TableWriter::WriteIndex(const std::vector<absl::string_view>& puts,
                                     const std::vector<std::string>& deletes, TableSink* sink,
                                     BucketedKeys* memory) {
  size_t d = 0;
  CS_RETURN_IF_ERROR(EachKey(puts, [&](absl::string_view key) {
    for (; d < deletes.size() && absl::string_view(deletes[d]) < key; ++d) {
      CS_RETURN_IF_ERROR(sink->Delete(deletes[d]));
    }
    CS_RETURN_IF_ERROR(sink->Put(key, ""));
    if (memory != nullptr) memory->AppendSorted(key);
    return absl::OkStatus();
  }));
  for (; d < deletes.size(); ++d) CS_RETURN_IF_ERROR(sink->Delete(deletes[d]));
  return sink->Finish();
}

absl::Status TableWriter::WriteDevices() {
  if (check_) CS_RETURN_IF_ERROR(check_());
  CS_RETURN_IF_ERROR(WriteIndex(load_.devices, stored_.device_deletes, &devices_,
                                memory_ ? &device_index_ : nullptr));
  return WriteRevision();
}

absl::Status TableWriter::WriteRevision() {
  // In key order: "feed_compact" < "revision". The feed is compacted to the
  // load's revision (store.h, BulkLoad): no event per claim.
  CS_RETURN_IF_ERROR(meta_.Put(
      kFeedCompactKey, EncodeFeedPoint(FeedPoint{stored_.result.revision, stored_.feed_total})));
  std::string encoded;
  AppendUint64(stored_.result.revision, &encoded);
  CS_RETURN_IF_ERROR(meta_.Put(kRevisionKey, encoded));
  return meta_.Finish();
}

absl::Status IngestTables(const Database& db, const std::string& dir,
                          const std::vector<rocksdb::IngestExternalFileArg>& args) {
  db.fs().Watch(dir);
  absl::Status s = FromRocksDB(db.db()->IngestExternalFiles(args),
                               absl::StrCat("ingesting a bulk load into ", db.path()));
  if (!s.ok()) {
    // RocksDB deleted the files it linked in, but its MANIFEST record may
    // come back at the next open (a failed sync that wrote): put them back.
    // Unreferenced, the next open deletes them.
    std::error_code ec;
    for (const auto& [source, target] : db.fs().Links()) {
      if (!std::filesystem::exists(target, ec))
        std::filesystem::create_hard_link(source, target, ec);
    }
  }
  db.fs().Watch("");
  return s;
}

}  // namespace claimstore::internal
