// The index lookups over a source of keys (index_queries.h), with a fake
// source standing in for the published state or RocksDB.
#include "index/index_queries.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "index/keys.h"
#include "testutil/test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::IsOk;
using ::claimstore::testing::StatusIs;
using ::testing::ElementsAre;

// A sorted set of keys at revision 7; records the prefixes it was asked.
struct FakeIndex {
  std::vector<std::string> keys;
  std::vector<std::string> asked;
  absl::StatusOr<uint64_t> Scan(const std::string& prefix, KeyVisitor visit) {
    asked.push_back(prefix);
    for (const std::string& k : keys) {
      if (absl::StartsWith(k, prefix)) visit(k);
    }
    return 7;
  }
};

std::vector<std::string> Names(const ClaimKeys& keys) {
  std::vector<std::string> out;
  for (const ClaimKey& k : keys.claims) out.push_back(k.ToString());
  return out;
}

TEST(FindReservationsTest, TheClaimsOfOneUidExactly) {
  FakeIndex index{
      {ConsumerKey("u1", "ns", "a"), ConsumerKey("u1", "ns", "b"), ConsumerKey("u10", "ns", "c")}};
  absl::StatusOr<ClaimKeys> found =
      FindReservations("u1", [&](const std::string& p, KeyVisitor v) { return index.Scan(p, v); });
  ASSERT_THAT(found, IsOk());
  EXPECT_THAT(Names(*found), ElementsAre("ns/a", "ns/b"));  // not u10's
  EXPECT_EQ(found->revision, 7u);
}

TEST(FindReservationsTest, AMalformedKeyIsDataLoss) {
  std::string bad;
  AppendComponent("u1", &bad);
  bad += "junk";
  FakeIndex index{{bad}};
  EXPECT_THAT(
      FindReservations("u1", [&](const std::string& p, KeyVisitor v) { return index.Scan(p, v); }),
      StatusIs(absl::StatusCode::kDataLoss, "consumer index key"));
}

TEST(FindHoldingsTest, ByDriverPoolDeviceAndShare) {
  FakeIndex index{{DeviceKey("d", "p", "x", HoldingKind::kExclusive, "", "ns", "a"),
                   DeviceKey("d", "p", "y", HoldingKind::kShare, "s1", "ns", "b"),
                   DeviceKey("d", "p", "y", HoldingKind::kShare, "s2", "ns", "c"),
                   DeviceKey("d", "q", "z", HoldingKind::kAdmin, "", "ns", "d")}};
  const auto scan = [&](const std::string& p, KeyVisitor v) { return index.Scan(p, v); };
  EXPECT_EQ(FindHoldings({"d", {}, {}, {}}, scan)->holdings.size(), 4u);
  EXPECT_EQ(FindHoldings({"d", "p", {}, {}}, scan)->holdings.size(), 3u);
  absl::StatusOr<DeviceHoldings> share = FindHoldings({"d", "p", "y", "s2"}, scan);
  ASSERT_THAT(share, IsOk());
  ASSERT_EQ(share->holdings.size(), 1u);
  EXPECT_EQ(share->holdings[0].claim.ToString(), "ns/c");
  EXPECT_EQ(share->holdings[0].kind, claimstore::HoldingKind::kShare);
  EXPECT_EQ(FindHoldings({"d", "q", {}, {}}, scan)->holdings[0].kind,
            claimstore::HoldingKind::kAdminAccess);
}

TEST(FindHoldingsTest, AQueryMayNotSkipALevel) {
  FakeIndex index;
  const auto scan = [&](const std::string& p, KeyVisitor v) { return index.Scan(p, v); };
  EXPECT_THAT(FindHoldings({"d", {}, "x", {}}, scan),
              StatusIs(absl::StatusCode::kInvalidArgument, "each requiring the one before"));
  EXPECT_THAT(FindHoldings({"d", "p", {}, "s"}, scan),
              StatusIs(absl::StatusCode::kInvalidArgument, "each requiring the one before"));
  EXPECT_TRUE(index.asked.empty());  // refused before any scan
}

}  // namespace
}  // namespace claimstore::internal
