// The speed limit: the same FlatBuffer records in an absl::flat_hash_map, the
// same index keys in ordered sets, one reader-writer lock, no durability, no
// validation.
#include <mutex>
#include <shared_mutex>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "backends.h"
#include "claimstore/allocation.h"
#include "claimstore/claim_generated.h"
#include "index/index_entries.h"
#include "index/keys.h"
#include "record/fb_strings.h"
#include "record/record_edit.h"

namespace claimstore::bench {
namespace {

using internal::View;

class HashmapBackend final : public Backend {
 public:
  const char* name() const override { return "hashmap"; }

  absl::Status Load(absl::Span<const LoadItem> items, bool) override {
    std::unique_lock lock(mu_);
    for (const LoadItem& item : items) {
      Store(Key(item.record.claim_namespace(), item.record.name()), nullptr,
            std::string(item.record.bytes()));
    }
    return absl::OkStatus();
  }
  absl::Status Settle() override { return absl::OkStatus(); }

  absl::Status Get(const ClaimKey& key, ClaimFields* out) override {
    std::shared_lock lock(mu_);
    auto it = records_.find(Key(key.claim_namespace, key.name));
    if (it == records_.end()) return absl::NotFoundError("no such claim");
    FieldsOf(fb::GetClaimRecord(it->second.bytes.data())->status(), out);
    out->revision = it->second.revision;
    return absl::OkStatus();
  }
  absl::StatusOr<size_t> GetMany(absl::Span<const ClaimKey> keys) override {
    std::shared_lock lock(mu_);
    size_t found = 0;
    for (const ClaimKey& key : keys) {
      auto it = records_.find(Key(key.claim_namespace, key.name));
      if (it == records_.end()) continue;
      ++found;
    }
    return found;
  }
  absl::StatusOr<size_t> ByConsumer(absl::string_view uid) override {
    std::string prefix;
    internal::AppendComponent(uid, &prefix);
    std::shared_lock lock(mu_);
    return Claims(consumers_, prefix, ClaimOfConsumerKey);
  }
  absl::StatusOr<size_t> ByDevice(absl::string_view driver, absl::string_view pool,
                                  absl::string_view device) override {
    const std::string prefix = DevicePrefix(driver, pool, device);
    std::shared_lock lock(mu_);
    return Claims(devices_, prefix, ClaimOfDeviceKey);
  }

  absl::Status Reserve(const ClaimKey& key, const ConsumerRef& consumer) override {
    return Edit(key, [&](const fb::ClaimRecord& c, internal::StatusEdit* edit) -> absl::Status {
      if (c.status() == nullptr || c.status()->allocation() == nullptr) {
        return absl::FailedPreconditionError("not allocated");
      }
      edit->reserved_for = internal::StatusEdit::Part::kReplace;
      if (c.status()->reserved_for() != nullptr) {
        for (const auto* r : *c.status()->reserved_for()) {
          if (View(r->uid()) == consumer.uid) return absl::CancelledError();  // no-op
          edit->consumers.push_back(r);
        }
      }
      edit->add_consumer = &consumer;
      return absl::OkStatus();
    });
  }
  absl::Status Unreserve(const ClaimKey& key, absl::string_view uid) override {
    return Edit(key, [&](const fb::ClaimRecord& c, internal::StatusEdit* edit) -> absl::Status {
      if (c.status() == nullptr || c.status()->reserved_for() == nullptr) {
        return absl::CancelledError();
      }
      edit->reserved_for = internal::StatusEdit::Part::kReplace;
      for (const auto* r : *c.status()->reserved_for()) {
        if (View(r->uid()) != uid) edit->consumers.push_back(r);
      }
      if (edit->consumers.size() == c.status()->reserved_for()->size()) {
        return absl::CancelledError();
      }
      return absl::OkStatus();
    });
  }
  absl::Status Allocate(const ClaimKey& key, absl::string_view driver, absl::string_view pool,
                        absl::string_view device) override {
    const Allocation allocation = OneDevice(driver, pool, device);
    const std::string prefix = DevicePrefix(driver, pool, device);
    return Edit(key, [&](const fb::ClaimRecord& c, internal::StatusEdit* edit) -> absl::Status {
      if (c.status() != nullptr && c.status()->allocation() != nullptr) {
        return absl::FailedPreconditionError("allocated already");
      }
      if (CountPrefix(devices_, prefix) > 0) return absl::AbortedError("device is taken");
      edit->allocation = internal::StatusEdit::Part::kReplace;
      edit->new_allocation = &allocation.table();
      return absl::OkStatus();
    });
  }
  absl::Status Deallocate(const ClaimKey& key) override {
    return Edit(key, [&](const fb::ClaimRecord& c, internal::StatusEdit* edit) -> absl::Status {
      if (c.status() == nullptr || c.status()->allocation() == nullptr) {
        return absl::CancelledError();
      }
      if (c.status()->reserved_for() != nullptr && c.status()->reserved_for()->size() > 0) {
        return absl::FailedPreconditionError("still reserved");
      }
      edit->allocation = internal::StatusEdit::Part::kClear;
      edit->devices = internal::StatusEdit::Part::kClear;
      return absl::OkStatus();
    });
  }
  absl::Status Put(const LoadItem& item) override {
    std::unique_lock lock(mu_);
    const std::string key = Key(item.record.claim_namespace(), item.record.name());
    auto it = records_.find(key);
    Store(key, it == records_.end() ? nullptr : &it->second, std::string(item.record.bytes()));
    return absl::OkStatus();
  }

  uint64_t DiskBytes() override { return 0; }

 private:
  struct Entry {
    std::string bytes;
    uint64_t revision = 0;
  };

  static std::string Key(absl::string_view ns, absl::string_view name) {
    return absl::StrCat(ns, "/", name);
  }

  static size_t CountPrefix(const absl::btree_set<std::string>& set, const std::string& prefix) {
    size_t n = 0;
    for (auto it = set.lower_bound(prefix); it != set.end() && it->starts_with(prefix); ++it) ++n;
    return n;
  }

  // The claims of the index keys under `prefix`, materialised as the other
  // backends return them.
  template <typename Parse>
  static absl::StatusOr<size_t> Claims(const absl::btree_set<std::string>& set,
                                       const std::string& prefix, Parse parse) {
    std::vector<ClaimKey> keys;
    for (auto it = set.lower_bound(prefix); it != set.end() && it->starts_with(prefix); ++it) {
      ClaimKey key;
      if (!parse(*it, &key)) return absl::DataLossError("malformed index key");
      keys.push_back(std::move(key));
    }
    return keys.size();
  }

  // Replaces the record at `key` (old entry `old`, or none) and its index
  // entries. REQUIRES: mu_ held exclusively.
  void Store(const std::string& key, Entry* old, std::string bytes) {
    const internal::IndexEntries before =
        old == nullptr ? internal::IndexEntries{}
                       : internal::ComputeIndexEntries(*fb::GetClaimRecord(old->bytes.data()));
    const internal::IndexEntries after =
        internal::ComputeIndexEntries(*fb::GetClaimRecord(bytes.data()));
    for (const auto& k : internal::Minus(before.consumers, after.consumers)) consumers_.erase(k);
    for (const auto& k : internal::Minus(after.consumers, before.consumers)) consumers_.insert(k);
    for (const auto& k : internal::Minus(before.devices, after.devices)) devices_.erase(k);
    for (const auto& k : internal::Minus(after.devices, before.devices)) devices_.insert(k);
    Entry& e = records_[key];
    e.bytes = std::move(bytes);
    e.revision = ++revision_;
  }

  // A read-modify-write of one record: `edit` fills the StatusEdit, or
  // returns Cancelled for a no-op or an error.
  absl::Status Edit(
      const ClaimKey& key,
      const std::function<absl::Status(const fb::ClaimRecord&, internal::StatusEdit*)>& edit) {
    std::unique_lock lock(mu_);
    const std::string k = Key(key.claim_namespace, key.name);
    auto it = records_.find(k);
    if (it == records_.end()) return absl::NotFoundError("no such claim");
    const fb::ClaimRecord& current = *fb::GetClaimRecord(it->second.bytes.data());
    internal::StatusEdit e;
    absl::Status s = edit(current, &e);
    if (absl::IsCancelled(s)) return absl::OkStatus();
    if (!s.ok()) return s;
    Store(k, &it->second, internal::RebuildRecord(current, e));
    return absl::OkStatus();
  }

  std::shared_mutex mu_;
  absl::flat_hash_map<std::string, Entry> records_;
  absl::btree_set<std::string> consumers_, devices_;
  uint64_t revision_ = 0;
};

}  // namespace

std::unique_ptr<Backend> NewHashmapBackend() { return std::make_unique<HashmapBackend>(); }

}  // namespace claimstore::bench
