// The index entries of a record (index_entries.h): a pure function, the one
// definition of what the indexes hold.
#include "index/index_entries.h"

#include <string>

#include "index/keys.h"
#include "testutil/store_test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::ClaimJson;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(ComputeIndexEntriesTest, AClaimWithoutStatusHasNone) {
  const IndexEntries entries = ComputeIndexEntries(ClaimJson("ns", "c").table());
  EXPECT_THAT(entries.consumers, IsEmpty());
  EXPECT_THAT(entries.devices, IsEmpty());
}

TEST(ComputeIndexEntriesTest, OneConsumerKeyPerUidSortedAndUnique) {
  const IndexEntries entries =
      ComputeIndexEntries(ClaimJson("ns", "c",
                                    R"({"reservedFor":[{"resource":"pods","name":"b","uid":"u2"},)"
                                    R"({"resource":"pods","name":"a","uid":"u1"},)"
                                    R"({"resource":"pods","name":"a","uid":"u1"}]})")
                              .table());
  EXPECT_THAT(entries.consumers,
              ElementsAre(ConsumerKey("u1", "ns", "c"), ConsumerKey("u2", "ns", "c")));
}

TEST(ComputeIndexEntriesTest, DeviceKeysCarryTheKindOfHolding) {
  const IndexEntries entries = ComputeIndexEntries(
      ClaimJson("ns", "c",
                R"({"allocation":{"devices":{"results":[)"
                R"({"request":"r","driver":"d","pool":"p","device":"x"},)"
                R"({"request":"r","driver":"d","pool":"p","device":"y","shareID":"s"},)"
                R"({"request":"r","driver":"d","pool":"p","device":"z","adminAccess":true},)"
                R"({"request":"r","driver":"d","pool":"p","device":"w","adminAccess":false}]}}})")
          .table());
  EXPECT_THAT(entries.devices,
              ElementsAre(DeviceKey("d", "p", "w", HoldingKind::kExclusive, "", "ns", "c"),
                          DeviceKey("d", "p", "x", HoldingKind::kExclusive, "", "ns", "c"),
                          DeviceKey("d", "p", "y", HoldingKind::kShare, "s", "ns", "c"),
                          DeviceKey("d", "p", "z", HoldingKind::kAdmin, "", "ns", "c")));
}

TEST(MinusTest, IsTheSortedSetDifference) {
  EXPECT_THAT(Minus({"a", "b", "d"}, {"b", "c"}), ElementsAre("a", "d"));
  EXPECT_THAT(Minus({}, {"a"}), IsEmpty());
  EXPECT_THAT(Minus({"a"}, {}), ElementsAre("a"));
}

}  // namespace
}  // namespace claimstore::internal
