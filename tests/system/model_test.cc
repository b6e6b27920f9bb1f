// The reliability tests' sequential model against the store, call by call:
// every outcome (status code, changed, revision, what a read returns) and the
// final state must agree, or the model would make the crash and
// linearizability checks meaningless.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "testutil/claim_model.h"
#include "testutil/store_test_util.h"

namespace claimstore::testing {
namespace {

TEST(ModelOpTest, ParsesWhatItPrints) {
  for (const ModelOp& op :
       {ModelOp{ModelOp::Kind::kPut, "c1", "uid-7"}, ModelOp{ModelOp::Kind::kDeallocate, "c2", ""},
        ModelOp{ModelOp::Kind::kReserve, "c3", "pod-1"}}) {
    std::optional<ModelOp> back = ModelOp::Parse(op.ToString());
    ASSERT_TRUE(back.has_value()) << op.ToString();
    EXPECT_EQ(back->ToString(), op.ToString());
  }
  EXPECT_FALSE(ModelOp::Parse("reserve c3").has_value());
  EXPECT_FALSE(ModelOp::Parse("launch c3").has_value());
  EXPECT_FALSE(ModelOp::Parse("").has_value());
}

class ModelTest : public StoreFixture {};

// The record cache's size: off, a few records (constant eviction, most
// reads from RocksDB at the published snapshot), the default (all hits).
class ModelCacheTest : public ModelTest, public ::testing::WithParamInterface<size_t> {};

INSTANTIATE_TEST_SUITE_P(RecordCache, ModelCacheTest,
                         ::testing::Values(size_t{0}, size_t{8} << 10,
                                           Options().record_cache_bytes));

TEST_P(ModelCacheTest, AgreesWithTheStoreOnEveryCall) {
  Reopen({.record_cache_bytes = GetParam()});
  std::mt19937_64 rng(42);
  ClaimModel model;
  std::vector<std::string> names;
  for (int i = 0; i < 8; ++i) names.push_back(absl::StrCat("c", i));
  std::map<std::string, int> outcomes;  // how often each kind of outcome was seen
  for (int i = 0; i < 3000; ++i) {
    const ModelOp op = RandomOp(rng, 8, 4, 3);
    const ModelOutcome want = model.Apply(op);
    const ModelOutcome got = RunOnStore(*store_, op);
    ASSERT_EQ(got, want) << "call " << i << ": " << op.ToString() << ": store " << got.ToString()
                         << ", model " << want.ToString();
    ++outcomes[absl::StrCat(op.ToString().substr(0, op.ToString().find(' ')), " ",
                            want.code == absl::StatusCode::kOk
                                ? (want.changed ? "changed" : "unchanged")
                                : absl::StatusCodeToString(want.code))];
    if (i % 500 == 0) {
      std::vector<std::string> diff = model.Diff(*store_, names);
      ASSERT_TRUE(diff.empty()) << "after call " << i << ":\n" << absl::StrJoin(diff, "\n");
    }
  }
  // The workload reached every rule the model encodes.
  for (const char* seen :
       {"put changed", "delete changed", "delete NOT_FOUND", "allocate changed", "allocate ABORTED",
        "allocate FAILED_PRECONDITION", "deallocate changed", "deallocate unchanged",
        "deallocate FAILED_PRECONDITION", "reserve changed", "reserve unchanged",
        "reserve FAILED_PRECONDITION", "unreserve changed", "unreserve unchanged", "get unchanged",
        "get NOT_FOUND"}) {
    EXPECT_GT(outcomes[seen], 0) << seen;
  }
  Reopen({.record_cache_bytes = GetParam()});
  std::vector<std::string> diff = model.Diff(*store_, names);
  EXPECT_TRUE(diff.empty()) << absl::StrJoin(diff, "\n");
  absl::StatusOr<VerifyReport> report = store_->Verify(false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->problems.empty()) << absl::StrJoin(report->problems, "\n");
}

TEST_F(ModelTest, DiffReportsADisagreement) {
  ClaimModel model;
  model.Apply({ModelOp::Kind::kPut, "c0", "uid-1"});
  model.Apply({ModelOp::Kind::kAllocate, "c0", "gpu-0"});
  RunOnStore(*store_, {ModelOp::Kind::kPut, "c0", "uid-1"});
  RunOnStore(*store_, {ModelOp::Kind::kAllocate, "c0", "gpu-1"});
  std::vector<std::string> diff = model.Diff(*store_, {"c0", "c1"});
  ASSERT_EQ(diff.size(), 1u) << absl::StrJoin(diff, "\n");
  EXPECT_NE(diff[0].find("device gpu-1"), std::string::npos) << diff[0];
  RunOnStore(*store_, {ModelOp::Kind::kPut, "c1", "uid-2"});
  diff = model.Diff(*store_, {"c0", "c1"});
  EXPECT_EQ(diff.size(), 3u) << absl::StrJoin(diff, "\n");  // revision, c0, c1
}

}  // namespace
}  // namespace claimstore::testing
