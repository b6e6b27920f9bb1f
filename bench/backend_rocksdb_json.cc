// RocksDB with claimstore's keys and index families, but the claim's JSON as
// the value: what claimstore would be without FlatBuffers. Reads parse the
// JSON; writes are read-modify-write under one lock (compare-and-set), with
// the old index entries found by decoding the old JSON.
#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "backends.h"
#include "claimstore/codec.h"
#include "index/index_entries.h"
#include "index/keys.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/table.h"

namespace claimstore::bench {
namespace {

absl::Status Check(const rocksdb::Status& s) {
  if (s.ok()) return absl::OkStatus();
  if (s.IsNotFound()) return absl::NotFoundError("no such claim");
  return absl::InternalError(s.ToString());
}

std::string UpperBound(const std::string& prefix) {
  std::string bound = prefix;
  while (!bound.empty() && static_cast<unsigned char>(bound.back()) == 0xff) bound.pop_back();
  if (!bound.empty()) bound.back() = static_cast<char>(bound.back() + 1);
  return bound;
}

class RocksdbJsonBackend final : public Backend {
 public:
  explicit RocksdbJsonBackend(const BackendOptions& options) : dir_(options.dir) {
    std::shared_ptr<rocksdb::Cache> cache = rocksdb::NewLRUCache(size_t{1} << 30);
    rocksdb::ColumnFamilyOptions family;
    family.write_buffer_size = 16 << 20;
    family.compression = rocksdb::kLZ4Compression;
    rocksdb::BlockBasedTableOptions table;
    table.block_cache = cache;
    table.cache_index_and_filter_blocks = true;
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    table.format_version = 5;
    family.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const char* name : {"default", "records", "consumers", "devices"}) {
      families.emplace_back(name, family);
    }
    rocksdb::DBOptions db;
    db.create_if_missing = true;
    db.create_missing_column_families = true;
    db.max_background_jobs = 2;
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(db, options.dir, families, &handles_, &raw);
    if (!s.ok()) {
      fprintf(stderr, "rocksdb_json: %s\n", s.ToString().c_str());
      abort();
    }
    db_.reset(raw);
    records_ = handles_[1];
    consumers_ = handles_[2];
    devices_ = handles_[3];
  }
  ~RocksdbJsonBackend() override {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
  }
  const char* name() const override { return "rocksdb_json"; }

  absl::Status Load(absl::Span<const LoadItem> items, bool) override {
    std::lock_guard lock(mu_);
    rocksdb::WriteBatch batch;
    for (const LoadItem& item : items) {
      batch.Put(records_, internal::RecordKey(item.record.claim_namespace(), item.record.name()),
                item.json);
      const internal::IndexEntries entries = internal::ComputeIndexEntries(item.record.table());
      for (const auto& k : entries.consumers) batch.Put(consumers_, k, "");
      for (const auto& k : entries.devices) batch.Put(devices_, k, "");
    }
    return Check(db_->Write(rocksdb::WriteOptions(), &batch));
  }
  absl::Status Settle() override {
    rocksdb::CompactRangeOptions options;
    for (auto* h : handles_) {
      absl::Status s = Check(db_->CompactRange(options, h, nullptr, nullptr));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Get(const ClaimKey& key, ClaimFields* out) override {
    rocksdb::PinnableSlice value;
    absl::Status s = Check(db_->Get(rocksdb::ReadOptions(), records_,
                                    internal::RecordKey(key.claim_namespace, key.name), &value));
    if (!s.ok()) return s;
    return json::ReadFields(absl::string_view(value.data(), value.size()), out);
  }
  absl::StatusOr<size_t> GetMany(absl::Span<const ClaimKey> keys) override {
    std::vector<std::string> key_bytes;
    std::vector<rocksdb::Slice> slices;
    key_bytes.reserve(keys.size());
    for (const ClaimKey& k : keys)
      key_bytes.push_back(internal::RecordKey(k.claim_namespace, k.name));
    for (const std::string& k : key_bytes) slices.emplace_back(k);
    std::vector<rocksdb::PinnableSlice> values(keys.size());
    std::vector<rocksdb::Status> statuses(keys.size());
    db_->MultiGet(rocksdb::ReadOptions(), records_, keys.size(), slices.data(), values.data(),
                  statuses.data());
    size_t found = 0;
    for (const auto& s : statuses) found += s.ok() ? 1 : 0;
    return found;
  }
  absl::StatusOr<size_t> ByConsumer(absl::string_view uid) override {
    std::string prefix;
    internal::AppendComponent(uid, &prefix);
    return Scan(consumers_, prefix, ClaimOfConsumerKey);
  }
  absl::StatusOr<size_t> ByDevice(absl::string_view driver, absl::string_view pool,
                                  absl::string_view device) override {
    return Scan(devices_, DevicePrefix(driver, pool, device), ClaimOfDeviceKey);
  }

  absl::Status Reserve(const ClaimKey& key, const ConsumerRef& consumer) override {
    return Modify(key,
                  [&](absl::string_view json, rocksdb::WriteBatch* batch,
                      bool* changed) -> absl::StatusOr<std::string> {
                    absl::StatusOr<std::string> next = json::AddConsumer(json, consumer, changed);
                    if (next.ok() && *changed) {
                      batch->Put(consumers_,
                                 internal::ConsumerKey(consumer.uid, key.claim_namespace, key.name),
                                 "");
                    }
                    return next;
                  });
  }
  absl::Status Unreserve(const ClaimKey& key, absl::string_view uid) override {
    return Modify(key,
                  [&](absl::string_view json, rocksdb::WriteBatch* batch,
                      bool* changed) -> absl::StatusOr<std::string> {
                    absl::StatusOr<std::string> next = json::RemoveConsumer(json, uid, changed);
                    if (next.ok() && *changed) {
                      batch->Delete(consumers_,
                                    internal::ConsumerKey(uid, key.claim_namespace, key.name));
                    }
                    return next;
                  });
  }
  absl::Status Allocate(const ClaimKey& key, absl::string_view driver, absl::string_view pool,
                        absl::string_view device) override {
    return Modify(
        key,
        [&](absl::string_view json, rocksdb::WriteBatch* batch,
            bool* changed) -> absl::StatusOr<std::string> {
          absl::StatusOr<size_t> holders = Scan(devices_, DevicePrefix(driver, pool, device),
                                                [](absl::string_view, ClaimKey*) { return true; });
          if (!holders.ok()) return holders.status();
          if (*holders > 0) return absl::AbortedError("device is taken");
          absl::StatusOr<std::string> next = json::SetAllocation(json, driver, pool, device);
          if (!next.ok()) return next;
          *changed = true;
          batch->Put(devices_,
                     internal::DeviceKey(driver, pool, device, internal::HoldingKind::kExclusive,
                                         "", key.claim_namespace, key.name),
                     "");
          return next;
        });
  }
  absl::Status Deallocate(const ClaimKey& key) override {
    return Modify(key,
                  [&](absl::string_view json, rocksdb::WriteBatch* batch,
                      bool* changed) -> absl::StatusOr<std::string> {
                    absl::StatusOr<std::string> next = json::ClearAllocation(json, changed);
                    if (!next.ok() || !*changed) return next;
                    // Which device entries go: the old JSON's allocation.
                    absl::StatusOr<ClaimRecord> old = DecodeClaim(json);
                    if (!old.ok()) return old.status();
                    for (const auto& k : internal::ComputeIndexEntries(old->table()).devices) {
                      batch->Delete(devices_, k);
                    }
                    return next;
                  });
  }
  absl::Status Put(const LoadItem& item) override {
    const ClaimKey key{std::string(item.record.claim_namespace()), std::string(item.record.name())};
    return Modify(
        key,
        [&](absl::string_view json, rocksdb::WriteBatch* batch,
            bool* changed) -> absl::StatusOr<std::string> {
          absl::StatusOr<ClaimRecord> old = DecodeClaim(json);
          if (!old.ok()) return old.status();
          const internal::IndexEntries before = internal::ComputeIndexEntries(old->table());
          const internal::IndexEntries after = internal::ComputeIndexEntries(item.record.table());
          for (const auto& k : internal::Minus(before.consumers, after.consumers))
            batch->Delete(consumers_, k);
          for (const auto& k : internal::Minus(after.consumers, before.consumers))
            batch->Put(consumers_, k, "");
          for (const auto& k : internal::Minus(before.devices, after.devices))
            batch->Delete(devices_, k);
          for (const auto& k : internal::Minus(after.devices, before.devices))
            batch->Put(devices_, k, "");
          *changed = true;
          return item.json;
        });
  }

  uint64_t DiskBytes() override {
    uint64_t total = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_, ec)) {
      if (e.is_regular_file(ec)) total += e.file_size(ec);
    }
    return total;
  }

 private:
  absl::StatusOr<size_t> Scan(rocksdb::ColumnFamilyHandle* family, const std::string& prefix,
                              const std::function<bool(absl::string_view, ClaimKey*)>& parse) {
    const std::string bound = UpperBound(prefix);
    const rocksdb::Slice bound_slice(bound);
    rocksdb::ReadOptions options;
    options.iterate_upper_bound = &bound_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(options, family));
    std::vector<ClaimKey> keys;
    for (it->Seek(prefix); it->Valid(); it->Next()) {
      ClaimKey key;
      if (!parse(absl::string_view(it->key().data(), it->key().size()), &key)) {
        return absl::DataLossError("malformed index key");
      }
      keys.push_back(std::move(key));
    }
    absl::Status s = Check(it->status());
    if (!s.ok()) return s;
    return keys.size();
  }

  absl::Status Modify(const ClaimKey& key,
                      const std::function<absl::StatusOr<std::string>(
                          absl::string_view, rocksdb::WriteBatch*, bool*)>& edit) {
    std::lock_guard lock(mu_);
    const std::string record_key = internal::RecordKey(key.claim_namespace, key.name);
    rocksdb::PinnableSlice value;
    absl::Status s = Check(db_->Get(rocksdb::ReadOptions(), records_, record_key, &value));
    if (!s.ok()) return s;
    rocksdb::WriteBatch batch;
    bool changed = false;
    absl::StatusOr<std::string> next =
        edit(absl::string_view(value.data(), value.size()), &batch, &changed);
    if (!next.ok() || !changed) return next.status();
    batch.Put(records_, record_key, *next);
    return Check(db_->Write(rocksdb::WriteOptions(), &batch));
  }

  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  rocksdb::ColumnFamilyHandle *records_ = nullptr, *consumers_ = nullptr, *devices_ = nullptr;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<Backend> NewRocksdbJsonBackend(const BackendOptions& options) {
  return std::make_unique<RocksdbJsonBackend>(options);
}

}  // namespace claimstore::bench
