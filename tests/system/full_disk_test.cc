// A full disk, for real: a small tmpfs the test mounts (tests run as root
// in CI), a store on it taking writes while it fills, at several fill
// moments. The process never dies; writes on the full disk fail with
// ResourceExhausted naming the database; reads go on; once space is freed,
// writes resume without a reopen, and every acknowledged write is there,
// before and after a reopen, with Verify clean.
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "claimstore/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testutil/test_util.h"

namespace claimstore::testing {
namespace {

ClaimRecord Claim(uint64_t i) {
  absl::StatusOr<ClaimRecord> r = DecodeClaim(GenerateClaimJson(i));
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

ClaimKey KeyOf(const ClaimRecord& r) {
  return ClaimKey{std::string(r.claim_namespace()), std::string(r.name())};
}

class FullDiskTest : public ::testing::TestWithParam<uint64_t> {};

// Small memtables, so that flushes (table files, MANIFEST records) happen
// while the disk fills, not only write-ahead-log appends.
Options SmallOptions() { return Options{.sync_writes = true, .write_buffer_bytes = 256 << 10}; }

TEST_P(FullDiskTest, WritesFailClearlyReadsGoOnAndWritesResumeWhenSpaceReturns) {
  Tmpfs fs(24 << 20);
  CLAIMSTORE_REQUIRE_TMPFS(fs);
  const std::string db = fs.path() + "/db";
  const std::string ballast = fs.path() + "/ballast";
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, SmallOptions());
  ASSERT_TRUE(store.ok()) << store.status();
  // The fill moment: what is left for the store once the ballast is in.
  const uint64_t left = GetParam();
  fs.FillLeaving(ballast, left);

  // key -> mod revision of its last acknowledged write.
  std::map<std::string, uint64_t> acknowledged;
  uint64_t next = 0;
  // A reader goes on all along: reads never fail for want of space.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::thread reader([&] {
    const ClaimKey first = KeyOf(Claim(0));
    while (!stop.load()) {
      absl::StatusOr<ClaimRead> got = (*store)->Get(first);
      if (!got.ok() && !absl::IsNotFound(got.status())) ADD_FAILURE() << got.status();
      absl::StatusOr<AllocatedState> allocated = (*store)->AllocatedDevices();
      if (!allocated.ok()) ADD_FAILURE() << allocated.status();
      reads.fetch_add(1);
    }
  });
  // Writes until the disk is full, then on for a while: every failure is
  // the full disk's (RocksDB frees the space of a failed flush, so some
  // later writes may land).
  auto put = [&](uint64_t i) {
    const ClaimRecord claim = Claim(i);
    absl::StatusOr<WriteResult> result = (*store)->Put(claim);
    if (result.ok()) acknowledged[KeyOf(claim).ToString()] = result->revision;
    return result.status();
  };
  int failures = 0;
  for (; next < 200000 && failures == 0; ++next) {
    const absl::Status s = put(next);
    if (s.ok()) continue;
    ++failures;
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted,
                            absl::StrCat("writing to ", db, ": no space left on device")));
    EXPECT_TRUE(IsNoSpace(s)) << s;
  }
  ASSERT_EQ(failures, 1) << "the disk never filled";
  for (int i = 0; i < 200; ++i, ++next) {
    const absl::Status s = put(next);
    if (s.ok()) continue;
    ++failures;
    EXPECT_TRUE(IsNoSpace(s)) << s;
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted, db));
  }
  ASSERT_FALSE(acknowledged.empty());
  // Reads go on while the disk is full (on a loaded machine the reader may
  // not have run yet: it gets up to 30 s).
  const uint64_t reads_before = reads.load();
  const auto read_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (reads.load() <= reads_before && std::chrono::steady_clock::now() < read_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop = true;
  reader.join();
  EXPECT_GT(reads.load(), reads_before) << "no read went on while the disk was full";
  std::printf("left %llu bytes: %zu writes acknowledged, %d failed for want of space\n",
              static_cast<unsigned long long>(left), acknowledged.size(), failures);

  // Space returns: writes resume without a reopen.
  std::filesystem::remove(ballast);
  absl::Status resumed;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    const ClaimRecord claim = Claim(next);
    absl::StatusOr<WriteResult> put = (*store)->Put(claim);
    resumed = put.status();
    if (put.ok()) {
      acknowledged[KeyOf(claim).ToString()] = put->revision;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  ASSERT_THAT(resumed, IsOk()) << "writes did not resume once space was freed";
  for (uint64_t i = next + 1; i < next + 50; ++i) {
    const ClaimRecord claim = Claim(i);
    absl::StatusOr<WriteResult> put = (*store)->Put(claim);
    ASSERT_THAT(put, IsOk());
    acknowledged[KeyOf(claim).ToString()] = put->revision;
  }

  auto check = [&](Store& s, const char* when) {
    for (const auto& [key, revision] : acknowledged) {
      absl::StatusOr<ClaimRead> got = s.Get(*ClaimKey::Parse(key));
      ASSERT_THAT(got, IsOk()) << when << ": " << key;
      EXPECT_EQ(got->record.mod_revision(), revision) << when << ": " << key;
    }
    absl::StatusOr<VerifyReport> report = s.Verify(false);
    ASSERT_THAT(report, IsOk());
    EXPECT_THAT(report->problems, ::testing::IsEmpty()) << when;
  };
  check(**store, "live");
  store->reset();
  store = Store::Open(db, SmallOptions());
  ASSERT_THAT(store, IsOk());
  check(**store, "reopened");
}

// What is left for the store when the disk starts to fill: from less than
// a memtable to several.
INSTANTIATE_TEST_SUITE_P(FillMoments, FullDiskTest,
                         ::testing::Values(uint64_t{64} << 10, uint64_t{300} << 10,
                                           uint64_t{1} << 20, uint64_t{3} << 20,
                                           uint64_t{7} << 20));

// Puts claims 0..n-1 and closes the store.
void Seed(const std::string& db, uint64_t n) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, SmallOptions());
  ASSERT_THAT(store, IsOk());
  for (uint64_t i = 0; i < n; ++i) ASSERT_THAT((*store)->Put(Claim(i)), IsOk());
}

// Every claim 0..n-1 is there, and Verify is clean.
void ExpectSeeded(Store& store, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) EXPECT_THAT(store.Get(KeyOf(Claim(i))), IsOk()) << i;
  absl::StatusOr<VerifyReport> report = store.Verify(false);
  ASSERT_THAT(report, IsOk());
  EXPECT_THAT(report->problems, ::testing::IsEmpty());
}

// Opening for writing needs a few bytes (a MANIFEST, a log): on a full disk
// the open is refused clearly and changes nothing; a read-only open still
// reads; once space returns the store opens with everything in it.
TEST(FullDisk, OpeningForWritingOnAFullDiskIsAClearError) {
  Tmpfs fs(16 << 20);
  CLAIMSTORE_REQUIRE_TMPFS(fs);
  const std::string db = fs.path() + "/db";
  Seed(db, 100);
  fs.FillLeaving(fs.path() + "/ballast", 0);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, SmallOptions());
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kResourceExhausted,
                              absl::StrCat(db, ": no space left on device")));
  EXPECT_TRUE(IsNoSpace(store.status())) << store.status();
  {
    absl::StatusOr<std::unique_ptr<Store>> reader = Store::Open(db, Options{.read_only = true});
    ASSERT_THAT(reader, IsOk());
    EXPECT_THAT((*reader)->Get(KeyOf(Claim(7))), IsOk());
  }
  std::filesystem::remove(fs.path() + "/ballast");
  store = Store::Open(db, SmallOptions());
  ASSERT_THAT(store, IsOk());
  ExpectSeeded(**store, 100);
}

#ifdef CLAIMSTORE_CLI  // the tool is not built in the tsan preset
struct ToolRun {
  int code;
  std::string err;
};

ToolRun Tool(const std::string& db, const std::string& args) {
  ScopedTempDir dir;
  const std::string err = dir.path() + "/stderr";
  const int status = std::system(
      absl::StrCat(CLAIMSTORE_CLI, " --db ", db, " ", args, " >/dev/null 2>", err).c_str());
  return ToolRun{WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(err)};
}

// The tool on a full disk: a write says the disk is full and exits with the
// storage code (5), not with a rule's (4); reads go on; once space returns
// the same command works.
TEST(FullDisk, TheToolSaysTheDiskIsFullAndExitsWithTheStorageCode) {
  Tmpfs fs(16 << 20);
  CLAIMSTORE_REQUIRE_TMPFS(fs);
  const std::string db = fs.path() + "/db";
  Seed(db, 20);
  const ClaimKey key = KeyOf(Claim(3));
  const std::string reserve = absl::StrCat(
      "reserve ", key.ToString(), " --consumer pods/pod-x/0b6f7a52-1111-4e2a-9c1d-0d7e5c3b2a10");
  fs.FillLeaving(fs.path() + "/ballast", 0);
  const ToolRun full = Tool(db, reserve);
  EXPECT_EQ(full.code, 5) << full.err;
  EXPECT_THAT(full.err, ::testing::StartsWith("Error: "));
  EXPECT_THAT(full.err, ::testing::HasSubstr(absl::StrCat(db, ": no space left on device\n")));
  const ToolRun get = Tool(db, absl::StrCat("get ", key.ToString()));
  EXPECT_EQ(get.code, 0) << get.err;
  std::filesystem::remove(fs.path() + "/ballast");
  const ToolRun again = Tool(db, reserve);
  EXPECT_EQ(again.code, 0) << again.err;
}
#endif  // CLAIMSTORE_CLI

// A read-only file system: opening for writing is refused with a clear
// error that changes nothing, a read-only open reads, and once the file
// system is writable again the store opens with everything in it. (Linux
// refuses to remount read-only while files are open for writing, so a
// store cannot be open across the remount here.)
TEST(FullDisk, AReadOnlyFileSystemRefusesWritesClearlyAndReadsGoOn) {
  Tmpfs fs(16 << 20);
  CLAIMSTORE_REQUIRE_TMPFS(fs);
  const std::string db = fs.path() + "/db";
  Seed(db, 50);
  ASSERT_TRUE(fs.Remount(/*read_only=*/true)) << std::strerror(errno);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, SmallOptions());
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kUnavailable, "Read-only file system"));
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kUnavailable, db));
  {
    absl::StatusOr<std::unique_ptr<Store>> reader = Store::Open(db, Options{.read_only = true});
    ASSERT_THAT(reader, IsOk());
    EXPECT_THAT((*reader)->Get(KeyOf(Claim(1))), IsOk());
    EXPECT_THAT((*reader)->AllocatedDevices(), IsOk());
  }
  ASSERT_TRUE(fs.Remount(/*read_only=*/false));
  store = Store::Open(db, SmallOptions());
  ASSERT_THAT(store, IsOk());
  ExpectSeeded(**store, 50);
}

// The database directory removed under a writer (an operator's mistake):
// writes fail with a clear error, and closing the store does not abort
// (RocksDB 7.8 asserted in ~ColumnFamilySet when it closed after such a
// background error with a column family still referenced).
TEST(FullDisk, ADatabaseRemovedUnderAWriterFailsClearlyAndClosesCleanly) {
  ScopedTempDir dir;
  for (int round = 0; round < 5; ++round) {
    // A path of its own each round: a store whose directory went while a
    // log was being made is left open until the process exits (database.h).
    const std::string db = absl::StrCat(dir.path(), "/db", round);
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, SmallOptions());
    ASSERT_THAT(store, IsOk());
    std::atomic<bool> stop{false};
    std::thread writer([&] {
      for (uint64_t i = 0; !stop.load(); ++i) {
        absl::StatusOr<WriteResult> put = (*store)->Put(Claim(i % 2000));
        if (!put.ok()) {
          EXPECT_TRUE(absl::IsUnavailable(put.status()) || absl::IsNotFound(put.status()))
              << put.status();
          EXPECT_THAT(put, StatusIs(put.status().code(), db));
        }
      }
    });
    absl::SleepFor(absl::Milliseconds(50 + 40 * round));
    // RocksDB may make a file while the directory is being emptied.
    std::error_code ec;
    for (int i = 0; i < 100 && std::filesystem::exists(db); ++i)
      std::filesystem::remove_all(db, ec);
    EXPECT_FALSE(std::filesystem::exists(db));
    absl::SleepFor(absl::Milliseconds(100));
    (void)(*store)->Compact();  // a flush into the missing directory
    stop = true;
    writer.join();
    EXPECT_THAT((*store)->Put(Claim(5000)), ::testing::Not(IsOk()));
    store->reset();  // closes: must not abort
  }
}

}  // namespace
}  // namespace claimstore::testing
