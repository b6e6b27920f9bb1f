#include "db/verifier.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "db/rocksdb_status.h"
#include "index/device_rule.h"
#include "index/keys.h"
#include "rocksdb/write_batch.h"
#include "util/status_macros.h"

namespace claimstore::internal {
namespace {

// Checks one stored record (key, verifier, content against key) and adds
// the index entries it implies to `expected`.
void CheckRecord(absl::string_view key, absl::string_view value, VerifyReport* report,
                 IndexEntries* expected) {
  ++report->records;
  std::string ns, name;
  if (!ParseRecordKey(key, &ns, &name)) {
    report->problems.push_back(absl::StrCat("records: malformed key ", absl::CHexEscape(key)));
    return;
  }
  absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(value));
  if (!record.ok()) {
    report->problems.push_back(
        absl::StrCat("records: claim ", ns, "/", name, ": ", record.status().message()));
    return;
  }
  if (record->claim_namespace() != ns || record->name() != name) {
    report->problems.push_back(absl::StrCat("records: claim ", ns, "/", name,
                                            " holds the record of ", record->claim_namespace(), "/",
                                            record->name()));
  }
  IndexEntries entries = ComputeIndexEntries(record->table());
  for (std::string& k : entries.consumers) expected->consumers.push_back(std::move(k));
  for (std::string& k : entries.devices) expected->devices.push_back(std::move(k));
}

absl::Status ScanRecords(const Database& db, const ReadPoint& point, VerifyReport* report,
                         IndexEntries* expected) {
  std::unique_ptr<KeyScan> scan = db.Scan(db.records(), "", point);
  for (scan->SeekToFirst(); scan->Valid(); scan->Next()) {
    CheckRecord(scan->key(), scan->value(), report, expected);
  }
  CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), "reading the records"));
  std::sort(expected->consumers.begin(), expected->consumers.end());
  std::sort(expected->devices.begin(), expected->devices.end());
  return absl::OkStatus();
}

// Reports entries of `expected` missing from `actual`, and entries of
// `actual` that `expected` does not have, as "<what> index: ...".
void ReportDifferences(absl::string_view what, const std::vector<std::string>& expected,
                       const std::vector<std::string>& actual, absl::string_view missing,
                       absl::string_view stray, VerifyReport* report) {
  for (const std::string& k : Minus(expected, actual)) {
    report->problems.push_back(absl::StrCat(what, " index: ", missing, absl::CHexEscape(k)));
  }
  for (const std::string& k : Minus(actual, expected)) {
    report->problems.push_back(absl::StrCat(what, " index: entry ", absl::CHexEscape(k), stray));
  }
}

// Reads the stored index of `family` into `actual` and compares it with
// what the records imply.
absl::Status CompareIndex(const Database& db, const ReadPoint& point,
                          rocksdb::ColumnFamilyHandle* family, absl::string_view name,
                          const std::vector<std::string>& expected, VerifyReport* report,
                          std::vector<std::string>* actual) {
  std::unique_ptr<KeyScan> scan = db.Scan(family, "", point);
  for (scan->SeekToFirst(); scan->Valid(); scan->Next()) actual->emplace_back(scan->key());
  CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), absl::StrCat("reading the ", name, " index")));
  report->index_entries += actual->size();
  ReportDifferences(name, expected, *actual, "missing entry ", " has no record holding it", report);
  return absl::OkStatus();
}

// The in-memory indexes must equal the stored ones (whose own problems are
// reported by CompareIndex): a difference is drift.
void CheckDrift(const MemoryIndexes& memory, const std::vector<std::string>& consumers,
                const std::vector<std::string>& devices, VerifyReport* report) {
  ReportDifferences("in-memory consumers", consumers, memory.consumers, "missing the stored entry ",
                    " is not stored", report);
  ReportDifferences("in-memory devices", devices, memory.devices, "missing the stored entry ",
                    " is not stored", report);
}

}  // namespace

absl::StatusOr<Verification> VerifyAt(const Database& db, const ReadPoint& point,
                                      const MemoryIndexes* memory) {
  Verification v;
  std::vector<std::string> consumers, devices;
  absl::Status s = ScanRecords(db, point, &v.report, &v.expected);
  if (s.ok()) {
    s = CompareIndex(db, point, db.consumers(), "consumers", v.expected.consumers, &v.report,
                     &consumers);
  }
  if (s.ok()) {
    s = CompareIndex(db, point, db.devices(), "devices", v.expected.devices, &v.report, &devices);
  }
  if (absl::IsDataLoss(s)) {
    // Corrupt files are a finding, not a failure to verify.
    v.report.problems.push_back(absl::StrCat("data loss: ", s.message()));
    v.data_loss = true;
    return v;
  }
  CS_RETURN_IF_ERROR(s);
  FindDoubleHoldings(
      std::vector<absl::string_view>(devices.begin(), devices.end()),
      [&](const Clash& c) { v.report.problems.push_back(c.ToString()); },
      [&](absl::string_view key) {
        v.report.problems.push_back(
            absl::StrCat("devices index: malformed key ", absl::CHexEscape(key)));
      });
  if (memory != nullptr) CheckDrift(*memory, consumers, devices, &v.report);
  return v;
}

absl::Status RewriteIndexes(const Database& db, const rocksdb::WriteOptions& options,
                            const IndexEntries& expected) {
  constexpr size_t kChunk = 10000;
  rocksdb::WriteBatch batch;
  const auto flush_full = [&]() -> absl::Status {
    if (batch.Count() < kChunk) return absl::OkStatus();
    CS_RETURN_IF_ERROR(
        FromRocksDB(db.db()->Write(options, &batch), absl::StrCat("repairing ", db.path())));
    batch.Clear();
    return absl::OkStatus();
  };
  for (rocksdb::ColumnFamilyHandle* family : {db.consumers(), db.devices()}) {
    std::unique_ptr<KeyScan> scan = db.Scan(family, "", ReadPoint{});
    for (scan->SeekToFirst(); scan->Valid(); scan->Next()) {
      batch.Delete(family, rocksdb::Slice(scan->key().data(), scan->key().size()));
      CS_RETURN_IF_ERROR(flush_full());
    }
    CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), absl::StrCat("repairing ", db.path())));
    for (const std::string& k : family == db.consumers() ? expected.consumers : expected.devices) {
      batch.Put(family, k, "");
      CS_RETURN_IF_ERROR(flush_full());
    }
    CS_RETURN_IF_ERROR(
        FromRocksDB(db.db()->Write(options, &batch), absl::StrCat("repairing ", db.path())));
    batch.Clear();
  }
  return absl::OkStatus();
}

}  // namespace claimstore::internal
