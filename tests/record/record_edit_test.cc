// Building a record from another (record_edit.h): a copy keeps every field
// and its presence; an edit changes only its part.
#include "record/record_edit.h"

#include <string>

#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "record/record_factory.h"
#include "testutil/store_test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::AllocationOf;
using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::K8sPath;
using ::claimstore::testing::Pod;
using ::claimstore::testing::ReadFile;

ClaimRecord Fixture() {
  absl::StatusOr<ClaimRecord> record =
      DecodeClaim(ReadFile(K8sPath("fixtures/ResourceClaim.roundtrip.json")));
  EXPECT_THAT(record, IsOk());
  return *record;
}

ClaimRecord Built(std::string bytes) { return RecordFactory::FromBuilt(std::move(bytes)); }

TEST(RebuildRecordTest, ACopyWithoutEditsKeepsEveryField) {
  const ClaimRecord fixture = Fixture();  // every field of the API
  const ClaimRecord copy = Built(RebuildRecord(fixture.table(), StatusEdit{}));
  EXPECT_EQ(EncodeClaim(copy), EncodeClaim(fixture));
}

TEST(RebuildRecordTest, AbsentAndEmptyListsStayAsTheyWere) {
  // conditions: present and empty in the first device, absent in the second.
  const ClaimRecord record =
      ClaimJson("ns", "c",
                R"({"devices":[{"driver":"d","pool":"p","device":"a","conditions":[]},)"
                R"({"driver":"d","pool":"p","device":"b"}]})");
  const auto* original = record.table().status()->devices();
  ASSERT_NE(original->Get(0)->conditions(), nullptr);
  ASSERT_EQ(original->Get(1)->conditions(), nullptr);
  const ClaimRecord copy = Built(RebuildRecord(record.table(), StatusEdit{}));
  const auto* copied = copy.table().status()->devices();
  ASSERT_NE(copied->Get(0)->conditions(), nullptr);
  EXPECT_EQ(copied->Get(0)->conditions()->size(), 0u);
  EXPECT_EQ(copied->Get(1)->conditions(), nullptr);
}

TEST(RebuildRecordTest, AnEditReplacesOnlyItsPart) {
  const ClaimRecord fixture = Fixture();
  const ConsumerRef pod = Pod("new-uid");
  StatusEdit edit;
  edit.reserved_for = StatusEdit::Part::kReplace;
  edit.add_consumer = &pod;  // no entries kept: only the new one
  const ClaimRecord edited = Built(RebuildRecord(fixture.table(), edit));
  const auto* reserved = edited.table().status()->reserved_for();
  ASSERT_EQ(reserved->size(), 1u);
  EXPECT_EQ(reserved->Get(0)->uid()->str(), "new-uid");
  // Everything else as before: put the old reservedFor back and compare.
  StatusEdit back;
  back.reserved_for = StatusEdit::Part::kReplace;
  for (const auto* r : *fixture.table().status()->reserved_for()) back.consumers.push_back(r);
  EXPECT_EQ(EncodeClaim(Built(RebuildRecord(edited.table(), back))), EncodeClaim(fixture));
}

TEST(RebuildRecordTest, ClearAndReplaceTheAllocation) {
  const ClaimRecord fixture = Fixture();
  StatusEdit clear;
  clear.allocation = StatusEdit::Part::kClear;
  clear.devices = StatusEdit::Part::kClear;
  const ClaimRecord cleared = Built(RebuildRecord(fixture.table(), clear));
  EXPECT_EQ(cleared.table().status()->allocation(), nullptr);
  EXPECT_EQ(cleared.table().status()->devices(), nullptr);
  EXPECT_NE(cleared.table().status()->reserved_for(), nullptr);  // kept
  const Allocation allocation = AllocationOf({{.device = "gpu-9"}});
  StatusEdit set;
  set.allocation = StatusEdit::Part::kReplace;
  set.new_allocation = &allocation.table();
  const ClaimRecord allocated = Built(RebuildRecord(cleared.table(), set));
  EXPECT_EQ(allocated.table().status()->allocation()->results()->Get(0)->device()->str(), "gpu-9");
}

TEST(StampRevisionsTest, SetsTheRevisionsAndNothingElse) {
  const ClaimRecord fixture = Fixture();
  const ClaimRecord stamped = Built(StampRevisions(fixture.bytes(), 3, 9, 4));
  EXPECT_EQ(stamped.create_revision(), 3u);
  EXPECT_EQ(stamped.mod_revision(), 9u);
  EXPECT_EQ(stamped.version(), 4u);
  EXPECT_EQ(EncodeClaim(stamped), EncodeClaim(fixture));  // revisions are not API fields
  std::string into = "reused";
  StampRevisionsInto(fixture.bytes(), 3, 9, 4, &into);
  EXPECT_EQ(into, stamped.bytes());
}

}  // namespace
}  // namespace claimstore::internal
