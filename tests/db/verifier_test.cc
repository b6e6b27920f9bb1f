// Verify and repair (verifier.h) over a database changed behind the
// store's back: each kind of problem is found, and a repair leaves none.
#include "db/verifier.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "db/database.h"
#include "index/index_entries.h"
#include "index/keys.h"
#include "testutil/store_test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::ScopedTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class VerifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(dir_.path() + "/db", {}, nullptr);
    ASSERT_THAT(db, IsOk());
    db_ = *std::move(db);
  }
  // Writes the record of ns/`name` with `status`, and its index entries
  // unless `indexes` is false.
  void PutRaw(const std::string& name, const std::string& status, bool indexes = true) {
    const ClaimRecord record = ClaimJson("ns", name, status);
    rocksdb::WriteBatch batch;
    batch.Put(db_->records(), RecordKey("ns", name), std::string(record.bytes()));
    if (indexes) {
      const IndexEntries entries = ComputeIndexEntries(record.table());
      for (const std::string& k : entries.consumers) batch.Put(db_->consumers(), k, "");
      for (const std::string& k : entries.devices) batch.Put(db_->devices(), k, "");
    }
    ASSERT_TRUE(db_->db()->Write(rocksdb::WriteOptions(), &batch).ok());
  }
  Verification Run() {
    absl::StatusOr<Verification> v = VerifyAt(*db_, ReadPoint{}, nullptr);
    EXPECT_THAT(v, IsOk());
    return *std::move(v);
  }

  ScopedTempDir dir_;
  std::unique_ptr<Database> db_;
};

constexpr char kGpu0[] =
    R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"gpu-0"}]}},)"
    R"("reservedFor":[{"resource":"pods","name":"a","uid":"u1"}]})";

TEST_F(VerifierTest, AConsistentDatabaseHasNoProblems) {
  PutRaw("a", kGpu0);
  const Verification v = Run();
  EXPECT_THAT(v.report.problems, IsEmpty());
  EXPECT_EQ(v.report.records, 1u);
  EXPECT_EQ(v.report.index_entries, 2u);
}

TEST_F(VerifierTest, FindsMissingAndStrayEntries) {
  PutRaw("a", kGpu0, /*indexes=*/false);  // both of its entries missing
  ASSERT_TRUE(
      db_->db()
          ->Put(rocksdb::WriteOptions(), db_->consumers(), ConsumerKey("ghost", "ns", "nobody"), "")
          .ok());
  EXPECT_THAT(Run().report.problems,
              ElementsAre(HasSubstr("consumers index: missing entry"),
                          HasSubstr("consumers index: entry"),  // the ghost's
                          HasSubstr("devices index: missing entry")));
}

TEST_F(VerifierTest, ARepairWritesWhatTheRecordsImply) {
  PutRaw("a", kGpu0, /*indexes=*/false);
  ASSERT_TRUE(
      db_->db()
          ->Put(rocksdb::WriteOptions(), db_->consumers(), ConsumerKey("ghost", "ns", "nobody"), "")
          .ok());
  Verification before = Run();
  ASSERT_FALSE(before.report.problems.empty());
  ASSERT_THAT(RewriteIndexes(*db_, rocksdb::WriteOptions(), before.expected), IsOk());
  EXPECT_THAT(Run().report.problems, IsEmpty());
}

TEST_F(VerifierTest, InMemoryIndexesThatDifferAreDrift) {
  PutRaw("a", kGpu0);
  MemoryIndexes memory;
  memory.consumers = {ConsumerKey("u1", "ns", "a"), ConsumerKey("u9", "ns", "a")};  // one extra
  // no device entry: one missing
  absl::StatusOr<Verification> v = VerifyAt(*db_, ReadPoint{}, &memory);
  ASSERT_THAT(v, IsOk());
  EXPECT_THAT(v->report.problems,
              ElementsAre(HasSubstr("in-memory consumers index: entry"),
                          HasSubstr("in-memory devices index: missing the stored entry")));
}

TEST_F(VerifierTest, DoubleHoldingsAreReported) {
  PutRaw("a", kGpu0);
  PutRaw("b", kGpu0);
  EXPECT_THAT(Run().report.problems,
              ElementsAre("device d/p/gpu-0 is held by both ns/a and ns/b (one exclusively)"));
}

}  // namespace
}  // namespace claimstore::internal
