#include "claimstore/generate.h"

#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "testutil/store_test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::IsOk;
using ::claimstore::testing::StoreFixture;

TEST(GenerateTest, IsDeterministicPerSeedAndIndex) {
  EXPECT_EQ(GenerateClaimJson(17, 3), GenerateClaimJson(17, 3));
  EXPECT_NE(GenerateClaimJson(17, 3), GenerateClaimJson(17, 4));
  EXPECT_NE(GenerateClaimJson(17, 3), GenerateClaimJson(18, 3));
  const std::string uuid = GeneratedUuid(1, 2, 3);
  EXPECT_EQ(uuid.size(), 36u);
  EXPECT_EQ(uuid[14], '4');                                          // version 4
  EXPECT_NE(std::string("89ab").find(uuid[19]), std::string::npos);  // RFC 4122 variant
}

TEST(GenerateTest, ClaimsHaveTheAdvertisedShapes) {
  int allocated = 0, shared = 0, admin = 0, nic = 0, with_status = 0;
  constexpr int kClaims = 4000;
  for (int i = 0; i < kClaims; ++i) {
    absl::StatusOr<ClaimRecord> r = DecodeClaim(GenerateClaimJson(i));
    ASSERT_THAT(r, IsOk()) << i;
    const fb::ResourceClaimStatus* s = r->table().status();
    if (s->allocation() == nullptr) continue;
    ++allocated;
    const auto* result = s->allocation()->results()->Get(0);
    if (result->share_id() != nullptr) ++shared;
    if (result->admin_access().has_value()) ++admin;
    if (result->driver()->str() == "nic.example.com") ++nic;
    if (s->devices() != nullptr) ++with_status;
    EXPECT_GE(s->reserved_for()->size(), 1u);
    EXPECT_LE(s->reserved_for()->size(), 3u);
  }
  EXPECT_NEAR(allocated, kClaims * 0.85, kClaims * 0.03);
  EXPECT_NEAR(shared, kClaims * 0.10, kClaims * 0.02);
  EXPECT_NEAR(admin, kClaims * 0.05, kClaims * 0.02);
  EXPECT_NEAR(nic, kClaims * 0.10, kClaims * 0.02);
  EXPECT_GT(with_status, allocated / 3);
}

using GenerateStoreTest = StoreFixture;

TEST_F(GenerateStoreTest, AGeneratedClusterStoresWithoutConflicts) {
  for (int i = 0; i < 1500; ++i) {
    ASSERT_THAT(store_->Put(*DecodeClaim(GenerateClaimJson(i, 5))), IsOk()) << i;
  }
  absl::StatusOr<VerifyReport> report = store_->Verify(false);
  ASSERT_THAT(report, IsOk());
  EXPECT_TRUE(report->problems.empty());
  EXPECT_EQ(report->records, 1500u);
}

}  // namespace
}  // namespace claimstore
