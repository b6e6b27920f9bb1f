// The device-exclusion rule (device_rule.h) and the public
// FindDeviceConflicts over it.
#include "index/device_rule.h"

#include <string>
#include <vector>

#include "testutil/store_test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr HoldingKind kE = HoldingKind::kExclusive;
constexpr HoldingKind kS = HoldingKind::kShare;
constexpr HoldingKind kA = HoldingKind::kAdmin;

TEST(HoldingsExcludeTest, TheWholeTable) {
  EXPECT_TRUE(HoldingsExclude(kE, "", kE, ""));
  EXPECT_TRUE(HoldingsExclude(kE, "", kS, "s1"));
  EXPECT_TRUE(HoldingsExclude(kS, "s1", kE, ""));
  EXPECT_TRUE(HoldingsExclude(kS, "s1", kS, "s1"));
  EXPECT_FALSE(HoldingsExclude(kS, "s1", kS, "s2"));
  for (HoldingKind other : {kE, kS, kA}) {
    EXPECT_FALSE(HoldingsExclude(kA, "", other, "s1"));
    EXPECT_FALSE(HoldingsExclude(other, "s1", kA, ""));
  }
}

std::string Key(HoldingKind kind, const std::string& share, const std::string& claim,
                const std::string& device = "x") {
  return DeviceKey("d", "p", device, kind, share, "ns", claim);
}

DeviceKeyParts Parts(const std::string& key) {
  DeviceKeyParts parts;
  EXPECT_TRUE(ParseDeviceKey(key, &parts));
  return parts;
}

TEST(CheckNewHoldingTest, NamesTheHolderAndSkipsTheClaimItself) {
  const ClaimKey claim{"ns", "me"};
  EXPECT_THAT(CheckNewHolding(claim, Parts(Key(kE, "", "me")), {Key(kE, "", "me")}), IsOk());
  EXPECT_THAT(CheckNewHolding(claim, Parts(Key(kS, "s1", "me")), {Key(kS, "s2", "other")}), IsOk());
  EXPECT_THAT(CheckNewHolding(claim, Parts(Key(kE, "", "me")), {Key(kA, "", "other")}), IsOk());
  EXPECT_THAT(CheckNewHolding(claim, Parts(Key(kS, "s1", "me")), {Key(kE, "", "other")}),
              StatusIs(absl::StatusCode::kAborted,
                       "device d/p/x is allocated to claim ns/other exclusively"));
  EXPECT_THAT(CheckNewHolding(claim, Parts(Key(kE, "", "me")), {Key(kS, "s2", "other")}),
              StatusIs(absl::StatusCode::kAborted, "to claim ns/other as share s2"));
  // The holder travels as data.
  const absl::Status held =
      CheckNewHolding(claim, Parts(Key(kS, "s1", "me")), {Key(kE, "", "other")});
  EXPECT_THAT(ClaimsOf(held), ElementsAre(ClaimKey{"ns", "other"}));
}

TEST(ClashErrorTest, NamesTheFirstClashAndCountsTheRest) {
  const absl::Status s = ClashError({Clash{"d/p/x", {"ns", "a"}, {"ns", "b"}, true},
                                     Clash{"d/p/y", {"ns", "c"}, {"ns", "d"}, false}});
  EXPECT_THAT(s,
              StatusIs(absl::StatusCode::kAborted,
                       "device d/p/x is held by both ns/a and ns/b (one exclusively) (and 1 more "
                       "clashes)"));
  EXPECT_THAT(ClaimsOf(s), ElementsAre(ClaimKey{"ns", "a"}, ClaimKey{"ns", "b"}));
  EXPECT_THAT(ClaimsOf(absl::AbortedError("no claims")), IsEmpty());
}

TEST(FindDoubleHoldingsTest, ReportsEachClashingPairOfOneDevice) {
  std::vector<std::string> keys = {Key(kE, "", "a"), Key(kS, "s1", "b"), Key(kA, "", "c"),
                                   Key(kS, "s1", "b", "y"), Key(kS, "s2", "c", "y")};
  std::sort(keys.begin(), keys.end());
  keys.push_back("not a key");
  std::vector<std::string> problems;
  std::vector<std::string> malformed;
  FindDoubleHoldings(
      std::vector<absl::string_view>(keys.begin(), keys.end()),
      [&](const Clash& c) { problems.push_back(c.ToString()); },
      [&](absl::string_view k) { malformed.emplace_back(k); });
  EXPECT_THAT(problems,
              ElementsAre("device d/p/x is held by both ns/a and ns/b (one exclusively)"));
  EXPECT_THAT(malformed, ElementsAre("not a key"));
}

TEST(FindDeviceConflictsTest, RunsTheRuleOverAnyHoldings) {
  const ClaimRecord a = ClaimJson(
      "ns", "a",
      R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x"},)"
      R"({"request":"r","driver":"d","pool":"p","device":"y","shareID":"s1"}]}}})");
  const ClaimRecord b = ClaimJson(
      "ns", "b",
      R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"y","shareID":"s1"},)"
      R"({"request":"r","driver":"d","pool":"p","device":"x","adminAccess":true}]}}})");
  std::vector<DeviceHolding> holdings = DeviceHoldingsOf(a);
  ASSERT_EQ(holdings.size(), 2u);
  EXPECT_EQ(holdings[0].kind, claimstore::HoldingKind::kExclusive);
  EXPECT_EQ(holdings[1].kind, claimstore::HoldingKind::kShare);
  EXPECT_EQ(holdings[1].share_id, "s1");
  EXPECT_THAT(FindDeviceConflicts(holdings), IsEmpty());
  for (const DeviceHolding& h : DeviceHoldingsOf(b)) holdings.push_back(h);
  EXPECT_THAT(
      FindDeviceConflicts(holdings),
      ElementsAre(HasSubstr("device d/p/y is held by both ns/a and ns/b (the same shareID)")));
}

}  // namespace
}  // namespace claimstore::internal
