// StagedWrites (staging.h): what a write group staged, and the undo of a
// refused write.
#include "write/staging.h"

#include <string>
#include <vector>

#include "testutil/store_test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::ClaimJson;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

TEST(StagedWritesTest, RecordsAreFoundAsStagedAndDeletionsAreRemembered) {
  StagedWrites staged;
  EXPECT_EQ(staged.FindRecord("k"), nullptr);
  staged.SetRecord("k", ClaimJson("ns", "a"));
  ASSERT_NE(staged.FindRecord("k"), nullptr);
  EXPECT_EQ((*staged.FindRecord("k"))->name(), "a");
  staged.SetRecord("k", std::nullopt);
  ASSERT_NE(staged.FindRecord("k"), nullptr);  // staged as deleted
  EXPECT_FALSE(staged.FindRecord("k")->has_value());
  staged.Clear();
  EXPECT_EQ(staged.FindRecord("k"), nullptr);
}

TEST(StagedWritesTest, UndoRevertsOnlyTheCurrentWrite) {
  StagedWrites staged;
  staged.BeginWrite();
  staged.SetRecord("kept", ClaimJson("ns", "first"));
  staged.SetDevice("dev-kept", true);
  staged.BeginWrite();  // the write that will be refused
  staged.SetRecord("kept", ClaimJson("ns", "second"));
  staged.SetRecord("new", ClaimJson("ns", "new"));
  staged.SetDevice("dev-kept", false);
  staged.SetDevice("dev-new", true);
  staged.Undo();
  EXPECT_EQ((*staged.FindRecord("kept"))->name(), "first");
  EXPECT_EQ(staged.FindRecord("new"), nullptr);
  std::vector<std::string> holders;
  staged.OverlayDevices("dev", &holders);
  EXPECT_THAT(holders, ElementsAre("dev-kept"));
}

TEST(StagedWritesTest, OverlayAddsAndRemovesStagedDevicesUnderThePrefix) {
  StagedWrites staged;
  staged.SetDevice("a/1", true);
  staged.SetDevice("a/2", false);
  staged.SetDevice("b/1", true);
  std::vector<std::string> holders = {"a/2", "a/3"};  // as published
  staged.OverlayDevices("a/", &holders);
  EXPECT_THAT(holders, UnorderedElementsAre("a/1", "a/3"));
}

}  // namespace
}  // namespace claimstore::internal
