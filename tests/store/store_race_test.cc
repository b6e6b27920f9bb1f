// Correctness under races: exactly one winner, indexes that never drift.
#include <atomic>
#include <latch>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "claimstore/claim_generated.h"
#include "claimstore/store.h"
#include "testutil/store_test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::AllocationOf;
using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::Dev;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::Pod;
using ::claimstore::testing::RaceThreads;
using ::claimstore::testing::StoreFixture;

using StoreRaceTest = StoreFixture;

// Options::defer_index_load: readers load the indexes while a writer
// publishes reservations; whichever wins the race, nothing is lost (the
// load must not read at a state older than the published one).
TEST_F(StoreRaceTest, DeferredIndexLoadRacingWritesLosesNoReservation) {
  constexpr int kClaims = 200;
  constexpr int kRounds = 12;
  constexpr int kWrites = 40;
  for (int i = 0; i < kClaims; ++i) {
    const ClaimKey key{"ns", absl::StrCat("c", i)};
    ASSERT_THAT(store_->Put(ClaimJson("ns", key.name)), IsOk());
    ASSERT_THAT(store_->Allocate(key, AllocationOf({{.device = key.name}})), IsOk());
    ASSERT_THAT(store_->Reserve(key, Pod(absl::StrCat("old-", i))), IsOk());
  }
  for (int round = 0; round < kRounds; ++round) {
    Reopen({.defer_index_load = true});
    RaceThreads(3, [&](int t) {
      if (t == 0) {  // the writer
        for (int i = 0; i < kWrites; ++i) {
          const ClaimKey key{"ns", absl::StrCat("c", (round * kWrites + i) % kClaims)};
          ASSERT_THAT(store_->Reserve(key, Pod(absl::StrCat("r", round, "-", i))), IsOk());
        }
        return;
      }
      for (int i = 0; i < kWrites; ++i) {  // readers: the first lookup loads
        ASSERT_THAT(store_->ClaimsReservedFor(absl::StrCat("old-", i)), IsOk());
      }
    });
    for (int i = 0; i < kWrites; ++i) {
      absl::StatusOr<ClaimKeys> got = store_->ClaimsReservedFor(absl::StrCat("r", round, "-", i));
      ASSERT_THAT(got, IsOk());
      ASSERT_EQ(got->claims.size(), 1u) << "round " << round << ", write " << i;
    }
    absl::StatusOr<VerifyReport> report = store_->Verify(false);
    ASSERT_THAT(report, IsOk());
    ASSERT_TRUE(report->problems.empty()) << absl::StrJoin(report->problems, "\n");
  }
}

// Options::defer_index_load: a bulk load that replaces everything resets
// the published state to a deferred load; readers racing it see the state
// before or after (here the same reservation), never empty indexes.
TEST_F(StoreRaceTest, DeferredIndexesStayWholeWhileBulkLoadsReplaceThem) {
  Reopen({.defer_index_load = true});
  const ClaimKey key{"ns", "keep"};
  ASSERT_THAT(store_->Put(ClaimJson("ns", key.name)), IsOk());
  ASSERT_THAT(store_->Allocate(key, AllocationOf({{.device = "keep-dev"}})), IsOk());
  ASSERT_THAT(store_->Reserve(key, Pod("u-keep")), IsOk());
  const ClaimRecord record = store_->Get(key)->record;
  std::atomic<bool> stop{false};
  std::atomic<int> misses{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        absl::StatusOr<ClaimKeys> got = store_->ClaimsReservedFor("u-keep");
        if (!got.ok() || got->claims.size() != 1) ++misses;
        absl::StatusOr<DeviceHoldings> held = store_->ClaimsUsingDevice(
            {.driver = "gpu.example.com", .pool = "pool-a", .device = "keep-dev"});
        if (!held.ok() || held->holdings.size() != 1) ++misses;
        ++reads;
      }
    });
  }
  for (int round = 0; round < 25; ++round) {
    absl::StatusOr<std::unique_ptr<BulkLoad>> load = store_->StartBulkLoad({.replace_all = true});
    ASSERT_THAT(load, IsOk());
    ASSERT_THAT((*load)->Add(record, 1), IsOk());
    ASSERT_THAT((*load)->Commit(), IsOk());
  }
  stop = true;
  for (std::thread& r : readers) r.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(misses.load(), 0);
}

TEST_F(StoreRaceTest, LastFreeReservationSlotHasExactlyOneWinner) {
  constexpr int kRounds = 15;
  constexpr int kThreads = 8;
  for (int round = 0; round < kRounds; ++round) {
    const ClaimKey key{"ns", absl::StrCat("claim-", round)};
    ASSERT_THAT(store_->Put(ClaimJson("ns", key.name)), IsOk());
    ASSERT_THAT(store_->Allocate(key, AllocationOf({{.device = key.name}})), IsOk());
    for (int i = 0; i < 255; ++i) {
      ASSERT_THAT(store_->Reserve(key, Pod(absl::StrCat("taken-", i))), IsOk());
    }
    std::vector<absl::Status> results(kThreads);
    RaceThreads(kThreads, [&](int t) {
      results[t] = store_->Reserve(key, Pod(absl::StrCat("racer-", t))).status();
    });
    int won = 0, exhausted = 0;
    for (const absl::Status& s : results) {
      if (s.ok()) ++won;
      if (absl::IsResourceExhausted(s)) ++exhausted;
    }
    EXPECT_EQ(won, 1) << "round " << round;
    EXPECT_EQ(exhausted, kThreads - 1) << "round " << round;
    EXPECT_EQ(store_->Get(key)->record.table().status()->reserved_for()->size(), 256u);
  }
  EXPECT_TRUE(store_->Verify(false)->problems.empty());
}

TEST_F(StoreRaceTest, SameDeviceAllocatedByManyClaimsHasExactlyOneWinner) {
  constexpr int kRounds = 20;
  constexpr int kThreads = 6;
  for (int round = 0; round < kRounds; ++round) {
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_THAT(store_->Put(ClaimJson("ns", absl::StrCat("r", round, "-c", t))), IsOk());
    }
    const std::string device = absl::StrCat("gpu-", round);
    std::vector<absl::Status> results(kThreads);
    RaceThreads(kThreads, [&](int t) {
      // Half ask for the device exclusively, half for a share of it: any
      // winner excludes every other asker, since exclusive and share holdings
      // exclude each other and the shareID is the same.
      Dev dev{.device = device};
      if (t % 2 == 1) dev.share_id = testing::kShare1;
      results[t] =
          store_->Allocate({"ns", absl::StrCat("r", round, "-c", t)}, AllocationOf({dev})).status();
    });
    int winner = -1, aborted = 0;
    for (int t = 0; t < kThreads; ++t) {
      if (results[t].ok()) {
        EXPECT_EQ(winner, -1) << "two winners in round " << round;
        winner = t;
      } else if (absl::IsAborted(results[t])) {
        ++aborted;
      }
    }
    ASSERT_NE(winner, -1) << "no winner in round " << round;
    EXPECT_EQ(aborted, kThreads - 1);
    for (int t = 0; t < kThreads; ++t) {
      if (t == winner) continue;
      EXPECT_THAT(std::string(results[t].message()),
                  ::testing::HasSubstr(absl::StrCat("claim ns/r", round, "-c", winner)));
    }
  }
  EXPECT_TRUE(store_->Verify(false)->problems.empty());
}

TEST_F(StoreRaceTest, CompareAndSetHasOneWinnerAndTheLoserLearnsTheRevision) {
  const ClaimKey key{"ns", "claim"};
  ASSERT_THAT(store_->Put(ClaimJson("ns", "claim")), IsOk());
  ASSERT_THAT(store_->Allocate(key, AllocationOf({{.device = "gpu-0"}})), IsOk());
  for (int round = 0; round < 50; ++round) {
    const uint64_t seen = store_->Get(key)->record.mod_revision();
    std::vector<absl::StatusOr<WriteResult>> results(2, absl::UnknownError(""));
    RaceThreads(2, [&](int t) {
      results[t] =
          store_->Reserve(key, Pod(absl::StrCat("r", round, "-", t)), {.mod_revision = seen});
    });
    const int winner = results[0].ok() ? 0 : 1;
    ASSERT_THAT(results[winner], IsOk()) << "round " << round;
    const absl::Status& lost = results[1 - winner].status();
    ASSERT_TRUE(absl::IsAborted(lost)) << lost;
    EXPECT_EQ(CurrentRevision(lost), results[winner]->revision);
  }
}

// Random reserve/unreserve/allocate/deallocate/put/delete/device-status from
// several threads; afterwards every index entry belongs to a record that has
// it, every record's entries are there, no device is held exclusively twice,
// and a reopened store holds the same state.
struct WorkloadCounts {
  std::atomic<int> changed{0}, conflicts{0}, refused{0}, unexpected{0};
  // Successful writes that added index entries: device holdings and
  // reservations.
  std::atomic<int> allocated{0}, reserved{0};
};

void RunRandomWorkload(Store& store, int threads, int ops_per_thread, uint64_t seed,
                       WorkloadCounts* counts) {
  constexpr int kClaims = 30;
  constexpr int kDevices = 12;
  std::atomic<int>& unexpected = counts->unexpected;
  std::mutex failure_mu;
  std::string first_failure;
  RaceThreads(threads, [&](int t) {
    std::mt19937_64 rng(seed * 1000 + t);
    const auto pick = [&](int n) { return static_cast<int>(rng() % n); };
    for (int i = 0; i < ops_per_thread; ++i) {
      const ClaimKey key{"ns", absl::StrCat("c", pick(kClaims))};
      absl::StatusOr<WriteResult> r = absl::UnknownError("no operation");
      const int op = pick(8);
      switch (op) {
        case 0:
          r = store.Put(ClaimJson("ns", key.name));
          break;
        case 1:
          r = store.Delete(key);
          break;
        case 2:
        case 3: {
          std::vector<Dev> devices;
          for (int d = 0, n = 1 + pick(3); d < n; ++d) {
            Dev dev{.device = absl::StrCat("gpu-", pick(kDevices))};
            const int kind = pick(4);
            if (kind == 1) dev.share_id = testing::ShareId(pick(3));
            if (kind == 2) dev.admin = true;
            devices.push_back(dev);
          }
          r = store.Allocate(key, AllocationOf(devices));
          break;
        }
        case 4:
          r = store.Deallocate(key);
          break;
        case 5:
          r = store.Reserve(key, Pod(absl::StrCat("pod-", pick(10))));
          break;
        case 6:
          r = store.Unreserve(key, absl::StrCat("pod-", pick(10)));
          break;
        default: {
          absl::StatusOr<ClaimRead> read = store.Get(key);
          if (read.ok()) {
            // A compare-and-set write on what was just read.
            r = store.Reserve(key, Pod(absl::StrCat("cas-", t)),
                              {.mod_revision = read->record.mod_revision()});
          } else {
            r = read.status();
          }
        }
      }
      const absl::Status& s = r.status();
      if (r.ok() && r->changed) {
        ++counts->changed;
        if (op == 2 || op == 3) ++counts->allocated;
        if (op == 5 || op == 7) ++counts->reserved;
      }
      if (absl::IsAborted(s)) ++counts->conflicts;
      if (absl::IsFailedPrecondition(s) || absl::IsNotFound(s)) ++counts->refused;
      // Refusals by rule or conflict are expected; storage errors are not.
      if (!s.ok() && !absl::IsNotFound(s) && !absl::IsAborted(s) &&
          !absl::IsFailedPrecondition(s) && !absl::IsResourceExhausted(s)) {
        ++unexpected;
        std::lock_guard<std::mutex> lock(failure_mu);
        if (first_failure.empty()) first_failure = s.ToString();
      }
    }
  });
  EXPECT_EQ(unexpected.load(), 0) << first_failure;
}

std::string Snapshot(Store& store) {
  absl::StatusOr<ListPage> all = store.List({});
  EXPECT_THAT(all, IsOk());
  std::string out = absl::StrCat("revision ", all->revision, "\n");
  for (const ClaimRecord& r : all->records) {
    absl::StrAppend(&out, r.claim_namespace(), "/", r.name(), " ", r.mod_revision(), " ",
                    absl::CHexEscape(r.bytes()), "\n");
  }
  return out;
}

TEST_F(StoreRaceTest, RandomConcurrentWorkloadKeepsIndexesExact) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    WorkloadCounts counts;
    RunRandomWorkload(*store_, 4, 1500, seed, &counts);
    // The workload really changes things and really collides.
    EXPECT_GT(counts.changed.load(), 1000);  // of 6,000 calls; 1,540 was the fewest seen
    EXPECT_GT(counts.conflicts.load(), 50);
    EXPECT_GT(counts.refused.load(), 50);
    absl::StatusOr<VerifyReport> report = store_->Verify(false);
    ASSERT_THAT(report, IsOk());
    EXPECT_TRUE(report->problems.empty()) << absl::StrJoin(report->problems, "\n");
    // The indexes were really exercised. (The state at the end may hold no
    // entry at all: every claim deallocated, replaced or deleted last. That
    // happened about once in 150 runs, so it is not asserted.)
    EXPECT_GT(counts.allocated.load(), 100);
    EXPECT_GT(counts.reserved.load(), 100);
  }
  const std::string before = Snapshot(*store_);
  Reopen();
  EXPECT_EQ(Snapshot(*store_), before);
}

TEST_F(StoreRaceTest, VerifyDuringWritesSeesOneConsistentState) {
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    WorkloadCounts counts;
    RunRandomWorkload(*store_, 2, 1500, 7, &counts);
    stop = true;
  });
  int verified = 0;
  while (!stop) {
    absl::StatusOr<VerifyReport> report = store_->Verify(false);
    ASSERT_THAT(report, IsOk());
    EXPECT_TRUE(report->problems.empty()) << absl::StrJoin(report->problems, "\n");
    ++verified;
  }
  writer.join();
  EXPECT_GT(verified, 1);
}

TEST_F(StoreRaceTest, SyncedWritersShareCommitsAndStayConsistent) {
  Reopen({.sync_writes = true});
  WorkloadCounts counts;
  RunRandomWorkload(*store_, 3, 150, 42, &counts);
  EXPECT_GT(counts.changed.load(), 50);  // of 450 operations
  absl::StatusOr<VerifyReport> report = store_->Verify(false);
  ASSERT_THAT(report, IsOk());
  EXPECT_TRUE(report->problems.empty()) << absl::StrJoin(report->problems, "\n");
}

}  // namespace
}  // namespace claimstore
