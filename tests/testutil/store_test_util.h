// Claims and stores for the store tests.
#ifndef CLAIMSTORE_TESTS_TESTUTIL_STORE_TEST_UTIL_H_
#define CLAIMSTORE_TESTS_TESTUTIL_STORE_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "testutil/test_util.h"

namespace claimstore::testing {

// A device as driver/pool/device, with an optional shareID or admin access.
struct Dev {
  std::string driver = "gpu.example.com";
  std::string pool = "pool-a";
  std::string device;
  std::string share_id;  // non-empty: a share
  bool admin = false;
};

// ShareIDs (lower-case RFC 4122 UUIDs, as validation requires).
inline constexpr char kShare1[] = "11111111-1111-4111-8111-111111111111";
inline constexpr char kShare2[] = "22222222-2222-4222-8222-222222222222";
inline constexpr char kShare9[] = "99999999-9999-4999-8999-999999999999";
// The n-th of a few shareIDs.
std::string ShareId(int n);

// An allocation of `devices`, request "req".
Allocation AllocationOf(const std::vector<Dev>& devices);

// A claim ns/name with the given status JSON (and optional metadata members,
// e.g. R"("deletionTimestamp":"2026-01-01T00:00:00Z")").
ClaimRecord ClaimJson(const std::string& ns, const std::string& name,
                      const std::string& status_json = "{}",
                      const std::string& extra_metadata = "");

ConsumerRef Pod(const std::string& uid);

// The n-th UUID-shaped shareID ("0000000n-0000-4000-8000-000000000000", in hex).
std::string Uuid(int n);
// Device results of gpu.example.com, request "req": the device held
// exclusively, shared as Uuid(share) consuming `consumed`, with admin
// access; and an allocation of results.
DeviceResult Exclusive(const std::string& device, const std::string& pool = "pool-a");
DeviceResult Share(const std::string& device, int share, std::vector<CapacityValue> consumed,
                   const std::string& pool = "pool-a");
DeviceResult Admin(const std::string& device, const std::string& pool = "pool-a");
Allocation Of(std::vector<DeviceResult> results);

// A store in a fresh directory, reopened on demand.
class StoreFixture : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen(const Options& options = {});
  std::string db_path() const { return dir_.path() + "/db"; }

  ScopedTempDir dir_;
  std::unique_ptr<Store> store_;
};

}  // namespace claimstore::testing

#endif  // CLAIMSTORE_TESTS_TESTUTIL_STORE_TEST_UTIL_H_
