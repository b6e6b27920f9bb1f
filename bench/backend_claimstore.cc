// claimstore as a scheduler plugin uses it.
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backends.h"
#include "claimstore/allocation.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "index/keys.h"

namespace claimstore::bench {
namespace {

uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  }
  return total;
}

class ClaimstoreBackend final : public Backend {
 public:
  explicit ClaimstoreBackend(const BackendOptions& options) : dir_(options.dir) {
    // A block cache that holds the working set (the records of 1M claims are
    // ~2 GB uncompressed), as a scheduler host would give the store.
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(
        options.dir,
        Options{.sync_writes = options.sync_writes, .block_cache_bytes = size_t{1} << 30});
    if (!store.ok()) {
      fprintf(stderr, "claimstore: %s\n", store.status().ToString().c_str());
      abort();
    }
    store_ = *std::move(store);
  }
  const char* name() const override { return "claimstore"; }

  absl::Status Load(absl::Span<const LoadItem> items, bool validate) override {
    (void)validate;  // the store always validates
    std::vector<ClaimRecord> records;
    records.reserve(items.size());
    for (const LoadItem& item : items) records.push_back(item.record);
    return store_->PutAll(records).status();
  }
  // Two threads decode half of the lines each and add the claims to a bulk
  // load (which validates them); Commit sorts, writes and ingests.
  absl::Status Restore(absl::string_view jsonl) override {
    absl::StatusOr<std::unique_ptr<BulkLoad>> load = store_->StartBulkLoad();
    if (!load.ok()) return load.status();
    const size_t middle = jsonl.find('\n', jsonl.size() / 2);
    const absl::string_view halves[2] = {
        jsonl.substr(0, middle), middle == absl::string_view::npos ? "" : jsonl.substr(middle + 1)};
    absl::Status status[2];
    const auto add = [&](int h) {
      for (absl::string_view line : absl::StrSplit(halves[h], '\n', absl::SkipEmpty())) {
        absl::StatusOr<ClaimRecord> record = DecodeClaim(line);
        status[h] = record.ok() ? (*load)->Add(*record) : record.status();
        if (!status[h].ok()) return;
      }
    };
    std::thread second(add, 1);
    add(0);
    second.join();
    for (const absl::Status& s : status) {
      if (!s.ok()) return s;
    }
    return (*load)->Commit().status();
  }
  absl::Status Settle() override { return store_->Compact(); }

  absl::Status Get(const ClaimKey& key, ClaimFields* out) override {
    absl::StatusOr<ClaimRead> read = store_->Get(key);
    if (!read.ok()) return read.status();
    FieldsOf(read->record.table().status(), out);
    out->revision = read->record.mod_revision();
    return absl::OkStatus();
  }
  absl::StatusOr<size_t> GetMany(absl::Span<const ClaimKey> keys) override {
    absl::StatusOr<ClaimReads> reads = store_->GetMany(keys);
    if (!reads.ok()) return reads.status();
    size_t found = 0;
    for (const auto& r : reads->records) found += r.has_value() ? 1 : 0;
    return found;
  }
  absl::StatusOr<size_t> ByConsumer(absl::string_view uid) override {
    absl::StatusOr<ClaimKeys> keys = store_->ClaimsReservedFor(uid);
    if (!keys.ok()) return keys.status();
    return keys->claims.size();
  }
  absl::StatusOr<size_t> ByDevice(absl::string_view driver, absl::string_view pool,
                                  absl::string_view device) override {
    DeviceQuery query{std::string(driver), std::string(pool), std::nullopt, std::nullopt};
    if (!device.empty()) query.device = std::string(device);
    absl::StatusOr<DeviceHoldings> h = store_->ClaimsUsingDevice(query);
    if (!h.ok()) return h.status();
    return h->holdings.size();
  }

  absl::Status Reserve(const ClaimKey& key, const ConsumerRef& consumer) override {
    return store_->Reserve(key, consumer).status();
  }
  absl::Status Unreserve(const ClaimKey& key, absl::string_view uid) override {
    return store_->Unreserve(key, uid).status();
  }
  absl::Status Allocate(const ClaimKey& key, absl::string_view driver, absl::string_view pool,
                        absl::string_view device) override {
    return store_->Allocate(key, OneDevice(driver, pool, device)).status();
  }
  absl::Status Deallocate(const ClaimKey& key) override { return store_->Deallocate(key).status(); }
  absl::Status Put(const LoadItem& item) override { return store_->Put(item.record).status(); }

  uint64_t DiskBytes() override { return DirectoryBytes(dir_); }

 private:
  std::string dir_;
  std::unique_ptr<Store> store_;
};

}  // namespace

void FieldsOf(const void* resource_claim_status, ClaimFields* out) {
  const auto* status = static_cast<const fb::ResourceClaimStatus*>(resource_claim_status);
  *out = ClaimFields{};
  if (status == nullptr) return;
  if (status->reserved_for() != nullptr) out->consumers = status->reserved_for()->size();
  if (status->allocation() != nullptr && status->allocation()->results() != nullptr &&
      status->allocation()->results()->size() > 0) {
    out->first_device = status->allocation()->results()->Get(0)->device()->str();
  }
}

Allocation OneDevice(absl::string_view driver, absl::string_view pool, absl::string_view device) {
  return AllocationBuilder()
      .AddResult({"gpu", std::string(driver), std::string(pool), std::string(device), std::nullopt,
                  std::nullopt})
      .Build();
}

std::string DevicePrefix(absl::string_view driver, absl::string_view pool,
                         absl::string_view device) {
  std::string prefix;
  internal::AppendComponent(driver, &prefix);
  internal::AppendComponent(pool, &prefix);
  if (!device.empty()) internal::AppendComponent(device, &prefix);
  return prefix;
}

bool ClaimOfConsumerKey(absl::string_view key, ClaimKey* out) {
  std::string uid;
  return internal::ParseConsumerKey(key, &uid, &out->claim_namespace, &out->name);
}

bool ClaimOfDeviceKey(absl::string_view key, ClaimKey* out) {
  internal::DeviceKeyParts parts;
  if (!internal::ParseDeviceKey(key, &parts)) return false;
  *out = ClaimKey{std::move(parts.claim_namespace), std::move(parts.name)};
  return true;
}

std::unique_ptr<Backend> NewClaimstoreBackend(const BackendOptions& options) {
  return std::make_unique<ClaimstoreBackend>(options);
}

}  // namespace claimstore::bench
