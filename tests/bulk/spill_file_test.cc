// SpillFile and BulkBatch's records on it: what is kept reads back the
// same, whether the records went to the spill file or (no file possible)
// to the heap, and the file leaves nothing in its directory.
#include "bulk/spill_file.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bulk/bulk_batch.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "testutil/test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::ScopedTempDir;

TEST(SpillFileTest, ChunksAreZeroedWritableAndLeaveNoFileBehind) {
  ScopedTempDir dir;
  std::unique_ptr<SpillFile> spill = SpillFile::Create(dir.path());
  if (spill == nullptr) GTEST_SKIP() << "no O_TMPFILE on " << dir.path();
  std::vector<char*> chunks;
  for (int i = 0; i < 3; ++i) {
    char* chunk = spill->Allocate(size_t{1} << 20);
    ASSERT_NE(chunk, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(chunk) % 4096, 0u);
    EXPECT_EQ(chunk[12345], 0);
    std::fill(chunk, chunk + (size_t{1} << 20), static_cast<char>('a' + i));
    chunks.push_back(chunk);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(chunks[i][(1 << 20) - 1], 'a' + i);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  spill.reset();
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SpillFileTest, NoDirectoryNoSpillFile) {
  EXPECT_EQ(SpillFile::Create("/nonexistent/claimstore"), nullptr);
}

// The same claims kept with and without a spill file read back alike.
TEST(SpillFileTest, BulkBatchRecordsReadBackFromEitherMemory) {
  ScopedTempDir dir;
  std::vector<std::string> records;
  for (int i = 0; i < 3000; ++i) {
    absl::StatusOr<ClaimRecord> r =
        DecodeClaim(absl::StrCat(R"({"metadata":{"namespace":"ns","name":"c)", i, R"(","uid":"u)",
                                 i, R"("},"status":{"reservedFor":[]}})"));
    ASSERT_TRUE(r.ok()) << r.status();
    records.emplace_back(r->bytes());
  }
  for (const std::string& spill_dir : {dir.path(), std::string("/nonexistent"), std::string()}) {
    SCOPED_TRACE(spill_dir);
    BulkBatch batch(spill_dir);
    for (size_t i = 0; i < records.size(); ++i) {
      batch.Add(absl::StrCat("key", i), records[i], IndexEntries{}, i);
    }
    std::vector<BulkBatch::Claim> claims;
    std::vector<absl::string_view> consumers, devices;
    batch.Collect(&claims, &consumers, &devices);
    ASSERT_EQ(claims.size(), records.size());
    for (const BulkBatch::Claim& c : claims) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(c.bytes.data()) % 8, 0u);
      EXPECT_EQ(c.bytes, records[c.ordinal]);
      EXPECT_EQ(c.record_key, absl::StrCat("key", c.ordinal));
    }
  }
}

}  // namespace
}  // namespace claimstore::internal
