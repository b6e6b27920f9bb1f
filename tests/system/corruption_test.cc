// Flipped bytes in the database's files: DataLoss naming the file, on open
// or on read, reported by Verify; never a crash, never a wrong record.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "claimstore/store.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

namespace fs = std::filesystem;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::ScopedTempDir;

constexpr int kClaims = 300;

// Flips a run of bytes in the middle of `file`.
void Flip(const fs::path& file, size_t count = 16) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << file;
  f.seekg(0, std::ios::end);
  const size_t size = static_cast<size_t>(f.tellg());
  ASSERT_GT(size, count * 4) << file;
  std::string bytes(count, '\0');
  f.seekg(static_cast<std::streamoff>(size / 2));
  f.read(bytes.data(), static_cast<std::streamsize>(count));
  for (char& c : bytes) c = static_cast<char>(c ^ 0x5A);
  f.seekp(static_cast<std::streamoff>(size / 2));
  f.write(bytes.data(), static_cast<std::streamsize>(count));
}

std::vector<fs::path> Files(const std::string& dir, const std::string& suffix_or_prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(suffix_or_prefix) != std::string::npos) out.push_back(e.path());
  }
  return out;
}

class CorruptionTest : public ::testing::Test {
 protected:
  std::string db() const { return dir_.path() + "/db"; }
  // Writes the claims and the content each has. Without the change feed,
  // so that the largest table file is the records'.
  void Fill(bool compact) {
    absl::StatusOr<std::unique_ptr<Store>> store =
        Store::Open(db(), {.compression = Compression::kNone, .feed_history_revisions = 0});
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < kClaims; ++i) {
      ClaimRecord r = *DecodeClaim(GenerateClaimJson(i));
      ASSERT_TRUE((*store)->Put(r).ok());
      expected_[absl::StrCat(r.claim_namespace(), "/", r.name())] = EncodeClaim(r);
    }
    if (compact) {
      ASSERT_TRUE((*store)->Compact().ok());
    }
  }
  // Every read either returns the written claim or DataLoss naming `file_kind`.
  void ExpectNoWrongRecord(Store& store, const std::string& file_kind, int* losses) {
    for (const auto& [key, json] : expected_) {
      absl::StatusOr<ClaimRead> read = store.Get(*ClaimKey::Parse(key));
      if (read.ok()) {
        EXPECT_EQ(EncodeClaim(read->record), json) << key << " came back different";
      } else {
        EXPECT_TRUE(absl::IsDataLoss(read.status())) << key << ": " << read.status();
        EXPECT_THAT(std::string(read.status().message()), ::testing::HasSubstr(file_kind));
        ++*losses;
      }
    }
  }
  ScopedTempDir dir_;
  std::map<std::string, std::string> expected_;
};

TEST_F(CorruptionTest, FlippedBytesInAnSstFileAreDataLossOnRead) {
  Fill(/*compact=*/true);
  std::vector<fs::path> ssts = Files(db(), ".sst");
  ASSERT_FALSE(ssts.empty());
  std::sort(ssts.begin(), ssts.end(), [](const fs::path& a, const fs::path& b) {
    return fs::file_size(a) > fs::file_size(b);
  });
  Flip(ssts[0], 64);  // the largest: the records
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db(), {});
  ASSERT_THAT(store, IsOk());
  int losses = 0;
  ExpectNoWrongRecord(**store, ".sst", &losses);
  EXPECT_GT(losses, 0);
  absl::StatusOr<VerifyReport> report = (*store)->Verify(false);
  ASSERT_THAT(report, IsOk());
  ASSERT_FALSE(report->problems.empty());
  EXPECT_THAT(report->problems[0], ::testing::HasSubstr("data loss"));
}

TEST_F(CorruptionTest, AFlippedManifestIsDataLossOnOpen) {
  Fill(/*compact=*/true);
  std::vector<fs::path> manifests = Files(db(), "MANIFEST-");
  ASSERT_EQ(manifests.size(), 1u);
  Flip(manifests[0], 8);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db(), {});
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(absl::IsDataLoss(store.status())) << store.status();
  EXPECT_THAT(std::string(store.status().message()), ::testing::HasSubstr("MANIFEST"));
}

TEST_F(CorruptionTest, AFlippedWriteAheadLogIsDataLossOnOpenNotSilentLoss) {
  // Writes that live only in the WAL: a child process writes and exits
  // without closing the store (as a crash would).
  const pid_t pid = fork();
  if (pid == 0) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db(), {.sync_writes = true});
    if (!store.ok()) _exit(2);
    for (int i = 0; i < kClaims; ++i) {
      if (!(*store)->Put(*DecodeClaim(GenerateClaimJson(i))).ok()) _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::vector<fs::path> logs = Files(db(), ".log");
  ASSERT_FALSE(logs.empty());
  std::sort(logs.begin(), logs.end(), [](const fs::path& a, const fs::path& b) {
    return fs::file_size(a) > fs::file_size(b);
  });
  Flip(logs[0], 32);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db(), {});
  ASSERT_FALSE(store.ok()) << "recovered past a corrupt WAL record";
  EXPECT_TRUE(absl::IsDataLoss(store.status())) << store.status();
  EXPECT_THAT(std::string(store.status().message()), ::testing::HasSubstr(".log"));
}

}  // namespace
}  // namespace claimstore
