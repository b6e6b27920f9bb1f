#include "testutil/store_test_util.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace claimstore::testing {

Allocation AllocationOf(const std::vector<Dev>& devices) {
  AllocationBuilder builder;
  for (const Dev& d : devices) {
    DeviceResult r{"req", d.driver, d.pool, d.device, std::nullopt, std::nullopt};
    if (!d.share_id.empty()) r.share_id = d.share_id;
    if (d.admin) r.admin_access = true;
    builder.AddResult(std::move(r));
  }
  return builder.Build();
}

ClaimRecord ClaimJson(const std::string& ns, const std::string& name,
                      const std::string& status_json, const std::string& extra_metadata) {
  const std::string json = absl::StrCat(
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":")", name,
      R"(","namespace":")", ns, R"(","uid":"uid-)", name, R"(")", extra_metadata.empty() ? "" : ",",
      extra_metadata, R"(},"status":)", status_json, "}");
  absl::StatusOr<ClaimRecord> record = DecodeClaim(json);
  EXPECT_TRUE(record.ok()) << record.status() << "\n" << json;
  return *std::move(record);
}

std::string ShareId(int n) {
  return absl::StrCat("0000000", n % 10, "-0000-4000-8000-000000000000");
}

ConsumerRef Pod(const std::string& uid) { return ConsumerRef{"", "pods", "pod-" + uid, uid}; }

std::string Uuid(int n) { return absl::StrFormat("%08x-0000-4000-8000-000000000000", n); }

DeviceResult Exclusive(const std::string& device, const std::string& pool) {
  return DeviceResult{"req", "gpu.example.com", pool, device};
}

DeviceResult Share(const std::string& device, int share, std::vector<CapacityValue> consumed,
                   const std::string& pool) {
  DeviceResult r{"req", "gpu.example.com", pool, device};
  r.share_id = Uuid(share);
  r.consumed_capacity = std::move(consumed);
  return r;
}

DeviceResult Admin(const std::string& device, const std::string& pool) {
  DeviceResult r{"req", "gpu.example.com", pool, device};
  r.admin_access = true;
  return r;
}

Allocation Of(std::vector<DeviceResult> results) {
  AllocationBuilder builder;
  for (DeviceResult& r : results) builder.AddResult(std::move(r));
  return builder.Build();
}

void StoreFixture::Reopen(const Options& options) {
  store_.reset();
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db_path(), options);
  ASSERT_TRUE(store.ok()) << store.status();
  store_ = *std::move(store);
}

}  // namespace claimstore::testing
