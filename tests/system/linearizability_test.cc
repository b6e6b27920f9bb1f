// Linearizability: thousands of short concurrent histories of reserve,
// unreserve, allocate, deallocate and get on two claims that compete for
// two devices, each call recorded with its call and return times and what
// it returned, each checked by history_checker.h. Also: the checker
// rejects what is not linearizable.
#include <atomic>
#include <barrier>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "testutil/claim_model.h"
#include "testutil/history_checker.h"
#include "testutil/store_test_util.h"

namespace claimstore::testing {
namespace {

// --- The checker rejects what is not linearizable. -------------------------

ModelOutcome Changed(uint64_t revision) { return {absl::StatusCode::kOk, true, revision, {}}; }
ModelOutcome Unchanged(uint64_t revision) { return {absl::StatusCode::kOk, false, revision, {}}; }
ModelOutcome Failed(absl::StatusCode code) { return {code, false, 0, {}}; }
const ModelOutcome kUnknown = Failed(absl::StatusCode::kUnavailable);

class CheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    start_.Apply({ModelOp::Kind::kPut, "a", "uid-a"});       // revision 1
    start_.Apply({ModelOp::Kind::kPut, "b", "uid-b"});       // 2
    start_.Apply({ModelOp::Kind::kAllocate, "a", "gpu-0"});  // 3
  }
  bool Linearizable(const std::vector<Call>& calls) {
    return testing::Linearizable(start_, calls, Revisions::kDense);
  }
  ClaimModel start_;
};

TEST_F(CheckerTest, AcceptsOverlappingCallsInEitherOrder) {
  // Called in one order, committed in the other: fine while they overlap.
  const std::vector<Call> calls = {
      {0, {ModelOp::Kind::kReserve, "a", "pod-0"}, 0, 10, Changed(5)},
      {1, {ModelOp::Kind::kReserve, "a", "pod-1"}, 1, 9, Changed(4)},
  };
  EXPECT_TRUE(Linearizable(calls));
}

TEST_F(CheckerTest, RejectsRevisionsAgainstRealTime) {
  // The same, but the first returned before the second was called.
  const std::vector<Call> calls = {
      {0, {ModelOp::Kind::kReserve, "a", "pod-0"}, 0, 5, Changed(5)},
      {1, {ModelOp::Kind::kReserve, "a", "pod-1"}, 6, 9, Changed(4)},
  };
  EXPECT_FALSE(Linearizable(calls));
}

TEST_F(CheckerTest, RejectsAStaleRead) {
  ModelClaim before = start_.claims().at("a");
  const std::vector<Call> calls = {
      {0, {ModelOp::Kind::kReserve, "a", "pod-0"}, 0, 5, Changed(4)},
      {1, {ModelOp::Kind::kGet, "a", ""}, 6, 9, {absl::StatusCode::kOk, false, 3, before}},
  };
  EXPECT_FALSE(Linearizable(calls));
  // Overlapping, the same read is fine.
  std::vector<Call> overlapping = calls;
  overlapping[1].call_ns = 4;
  EXPECT_TRUE(Linearizable(overlapping));
}

TEST_F(CheckerTest, RejectsOneDeviceAllocatedTwice) {
  ClaimModel start;
  start.Apply({ModelOp::Kind::kPut, "a", "uid-a"});
  start.Apply({ModelOp::Kind::kPut, "b", "uid-b"});
  const std::vector<Call> calls = {
      {0, {ModelOp::Kind::kAllocate, "a", "gpu-0"}, 0, 10, Changed(3)},
      {1, {ModelOp::Kind::kAllocate, "b", "gpu-0"}, 0, 10, Changed(4)},
  };
  EXPECT_FALSE(testing::Linearizable(start, calls, Revisions::kDense));
  std::vector<Call> one_wins = calls;
  one_wins[0].outcome = {absl::StatusCode::kAborted, false, 0, {}};
  one_wins[1].outcome = Changed(3);
  EXPECT_TRUE(testing::Linearizable(start, one_wins, Revisions::kDense));
}

TEST_F(CheckerTest, RejectsALostReservation) {
  // Both reservations acknowledged, but a later read shows only one.
  ModelClaim after = start_.claims().at("a");
  after.reserved = {"pod-1"};
  after.mod_revision = 5;
  after.version += 2;
  const std::vector<Call> calls = {
      {0, {ModelOp::Kind::kReserve, "a", "pod-0"}, 0, 10, Changed(4)},
      {1, {ModelOp::Kind::kReserve, "a", "pod-1"}, 0, 10, Changed(5)},
      {2, {ModelOp::Kind::kGet, "a", ""}, 11, 12, {absl::StatusCode::kOk, false, 5, after}},
  };
  EXPECT_FALSE(Linearizable(calls));
}

// Observed revisions (the shared mode's, etcd's): gaps are fine, order
// against real time and repeats are not.
TEST_F(CheckerTest, ObservedRevisionsMayHaveGaps) {
  const std::vector<Call> calls = {
      {0, {ModelOp::Kind::kReserve, "a", "pod-0"}, 0, 5, Changed(10)},
      {1, {ModelOp::Kind::kReserve, "a", "pod-1"}, 6, 9, Changed(14)},
      {2, {ModelOp::Kind::kReserve, "a", "pod-1"}, 10, 11, Unchanged(14)},
  };
  EXPECT_TRUE(testing::Linearizable(start_, calls, Revisions::kObserved));
  // Dense revisions have none.
  EXPECT_FALSE(Linearizable(calls));
  // The no-op must report the claim's revision.
  std::vector<Call> wrong = calls;
  wrong[2].outcome = Unchanged(13);
  EXPECT_FALSE(testing::Linearizable(start_, wrong, Revisions::kObserved));
}

TEST_F(CheckerTest, ObservedRevisionsFollowRealTime) {
  const std::vector<Call> calls = {
      {0, {ModelOp::Kind::kReserve, "a", "pod-0"}, 0, 5, Changed(14)},
      {1, {ModelOp::Kind::kReserve, "a", "pod-1"}, 6, 9, Changed(10)},
  };
  EXPECT_FALSE(testing::Linearizable(start_, calls, Revisions::kObserved));
  std::vector<Call> overlapping = calls;
  overlapping[1].call_ns = 4;
  EXPECT_TRUE(testing::Linearizable(start_, overlapping, Revisions::kObserved));
  // Two changes never share a revision, nor go back before the start.
  overlapping[1].outcome = Changed(14);
  EXPECT_FALSE(testing::Linearizable(start_, overlapping, Revisions::kObserved));
  overlapping[1].outcome = Changed(2);
  EXPECT_FALSE(testing::Linearizable(start_, overlapping, Revisions::kObserved));
}

TEST_F(CheckerTest, ObservedRevisionsRejectOneDeviceAllocatedTwice) {
  ClaimModel start;
  start.ApplyObserved({ModelOp::Kind::kPut, "a", "uid-a"}, Changed(100));
  start.ApplyObserved({ModelOp::Kind::kPut, "b", "uid-b"}, Changed(120));
  const std::vector<Call> calls = {
      {0, {ModelOp::Kind::kAllocate, "a", "gpu-0"}, 0, 10, Changed(130)},
      {1, {ModelOp::Kind::kAllocate, "b", "gpu-0"}, 0, 10, Changed(131)},
  };
  EXPECT_FALSE(testing::Linearizable(start, calls, Revisions::kObserved));
  std::vector<Call> one_wins = calls;
  one_wins[0].outcome = Failed(absl::StatusCode::kAborted);
  EXPECT_TRUE(testing::Linearizable(start, one_wins, Revisions::kObserved));
}

// A call whose outcome is unknown (Unavailable) may have taken effect, at
// any time after it was called, or not at all; it licenses nothing else.
TEST_F(CheckerTest, AnUnknownOutcomeMayHaveLandedOrNot) {
  ModelClaim landed = start_.claims().at("a");
  landed.reserved = {"pod-0"};
  landed.mod_revision = 4;
  ++landed.version;
  const ModelClaim not_landed = start_.claims().at("a");
  const Call unknown{0, {ModelOp::Kind::kReserve, "a", "pod-0"}, 0, 5, kUnknown};
  const auto read = [](const ModelClaim& c, int64_t at) {
    return Call{1,
                {ModelOp::Kind::kGet, "a", ""},
                at,
                at + 1,
                {absl::StatusCode::kOk, false, c.mod_revision, c}};
  };
  EXPECT_TRUE(Linearizable({unknown, read(landed, 6)}));
  EXPECT_TRUE(Linearizable({unknown, read(not_landed, 6)}));
  // Even after the call gave up: a Txn in flight may land later.
  EXPECT_TRUE(Linearizable({unknown, read(not_landed, 6), read(landed, 8)}));
  // But once seen, it stays.
  ModelClaim later = landed;
  EXPECT_FALSE(Linearizable({unknown, read(landed, 6), read(not_landed, 8)}));
  // And it does nothing else.
  later.reserved = {"pod-1"};
  EXPECT_FALSE(Linearizable({unknown, read(later, 6)}));
}

TEST_F(CheckerTest, AnUnknownOutcomeTakesTheRevisionALaterNoOpReports) {
  // The write landed at 17 (etcd's revisions have gaps); a retry found it
  // done and reported the claim's revision.
  const std::vector<Call> calls = {
      {0, {ModelOp::Kind::kReserve, "a", "pod-0"}, 0, 5, kUnknown},
      {0, {ModelOp::Kind::kReserve, "a", "pod-0"}, 6, 9, Unchanged(17)},
      {1, {ModelOp::Kind::kReserve, "a", "pod-1"}, 10, 12, Changed(20)},
  };
  EXPECT_TRUE(testing::Linearizable(start_, calls, Revisions::kObserved));
  // Without the unknown call, the no-op reports a change nobody made.
  EXPECT_FALSE(testing::Linearizable(start_, {calls[1], calls[2]}, Revisions::kObserved));
}

TEST_F(CheckerTest, AnUnknownOutcomeTakesTheRevisionALaterReadReports) {
  // An allocation landed at 17 though its caller was told Unavailable; its
  // retry was refused (already allocated, no revision); only a read shows
  // where it landed.
  ModelClaim b = start_.claims().at("b");
  b.device = "gpu-1";
  b.mod_revision = 17;
  ++b.version;
  const std::vector<Call> calls = {
      {0, {ModelOp::Kind::kAllocate, "b", "gpu-1"}, 0, 5, kUnknown},
      {0,
       {ModelOp::Kind::kAllocate, "b", "gpu-1"},
       6,
       9,
       Failed(absl::StatusCode::kFailedPrecondition)},
      {1, {ModelOp::Kind::kGet, "b", ""}, 10, 11, {absl::StatusCode::kOk, false, 30, b}},
  };
  EXPECT_TRUE(testing::Linearizable(start_, calls, Revisions::kObserved));
  // A read of a revision nobody could have written is still refused.
  std::vector<Call> wrong = calls;
  wrong[2].outcome.read->mod_revision = 2;
  EXPECT_FALSE(testing::Linearizable(start_, wrong, Revisions::kObserved));
}

// --- Histories of the store. ------------------------------------------------

constexpr int kThreads = 3;
constexpr int kCallsPerThread = 4;

struct HistoryStats {
  int histories = 0, overlapping = 0, calls = 0;
  std::map<std::string, int> outcomes;  // e.g. "allocate ABORTED"
};

// Runs at least `histories` histories on one store, each on fresh claims,
// and more until `overlapping` of them had calls that overlapped in time (a
// loaded machine runs threads one after another more often), at most
// 10 x `histories`. Checks each, stopping at the first that fails. Returns
// what went wrong, if any.
std::string RunHistories(Store& store, int histories, int overlapping, uint64_t seed,
                         HistoryStats* out) {
  HistoryStats& stats = *out;
  std::string failure;
  std::mt19937_64 rng(seed);
  std::vector<std::vector<ModelOp>> plan(kThreads);
  std::vector<std::vector<Call>> recorded(kThreads);
  std::barrier sync(kThreads + 1);
  bool stop = false;
  std::atomic<int> ready{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      while (true) {
        sync.arrive_and_wait();  // a plan is ready (or stop)
        if (stop) return;
        recorded[t].clear();
        // Start together: the barrier wakes threads one by one.
        ready.fetch_add(1);
        while (ready.load() % kThreads != 0) std::this_thread::yield();
        for (const ModelOp& op : plan[t]) {
          Call call{t, op, NowNs(), 0, {}};
          call.outcome = RunOnStore(store, op);
          call.return_ns = NowNs();
          recorded[t].push_back(std::move(call));
        }
        sync.arrive_and_wait();  // done
      }
    });
  }
  for (int h = 0;
       (h < histories || stats.overlapping < overlapping) && h < 10 * histories && failure.empty();
       ++h) {
    // Two claims competing for two devices; one of them allocated to start.
    const std::string a = absl::StrCat("h", seed, "-", h, "a");
    const std::string b = absl::StrCat("h", seed, "-", h, "b");
    const std::string devices[2] = {absl::StrCat("d", seed, "-", h, "x"),
                                    absl::StrCat("d", seed, "-", h, "y")};
    absl::StatusOr<ClaimReads> before = store.GetMany({});  // the store revision
    if (!before.ok()) {
      failure = before.status().ToString();
      break;
    }
    ClaimModel model(before->revision);
    for (const ModelOp& setup :
         {ModelOp{ModelOp::Kind::kPut, a, "uid-a"}, ModelOp{ModelOp::Kind::kPut, b, "uid-b"},
          ModelOp{ModelOp::Kind::kAllocate, a, devices[0]}}) {
      const ModelOutcome want = model.Apply(setup);
      const ModelOutcome got = RunOnStore(store, setup);
      if (!(got == want)) {
        failure =
            absl::StrCat(setup.ToString(), ": store ", got.ToString(), ", model ", want.ToString());
      }
    }
    if (!failure.empty()) break;
    for (int t = 0; t < kThreads; ++t) {
      plan[t].clear();
      for (int i = 0; i < kCallsPerThread; ++i) {
        const std::string& claim = rng() % 2 == 0 ? a : b;
        const std::string pod = absl::StrCat("pod-", rng() % 3);
        switch (rng() % 7) {
          case 0:
          case 1:
            plan[t].push_back({ModelOp::Kind::kReserve, claim, pod});
            break;
          case 2:
            plan[t].push_back({ModelOp::Kind::kUnreserve, claim, pod});
            break;
          case 3:
            plan[t].push_back({ModelOp::Kind::kAllocate, claim, devices[rng() % 2]});
            break;
          case 4:
            plan[t].push_back({ModelOp::Kind::kDeallocate, claim, ""});
            break;
          default:
            plan[t].push_back({ModelOp::Kind::kGet, claim, ""});
        }
      }
    }
    sync.arrive_and_wait();  // go
    sync.arrive_and_wait();  // all returned
    std::vector<Call> calls;
    for (const std::vector<Call>& r : recorded) calls.insert(calls.end(), r.begin(), r.end());
    if (!testing::Linearizable(model, calls, Revisions::kDense)) {
      failure = absl::StrCat("history ", h, " is not linearizable (start revision ",
                             model.revision(), "):\n", Describe(calls));
      break;
    }
    ++stats.histories;
    stats.calls += static_cast<int>(calls.size());
    bool overlap = false;
    for (const Call& x : calls) {
      for (const Call& y : calls) {
        overlap |= x.thread != y.thread && x.call_ns < y.return_ns && y.call_ns < x.return_ns;
      }
      const std::string verb = x.op.ToString().substr(0, x.op.ToString().find(' '));
      ++stats.outcomes[absl::StrCat(verb, " ",
                                    x.outcome.code == absl::StatusCode::kOk
                                        ? (x.outcome.changed ? "changed" : "ok")
                                        : absl::StatusCodeToString(x.outcome.code))];
    }
    stats.overlapping += overlap ? 1 : 0;
  }
  stop = true;
  sync.arrive_and_wait();
  for (std::thread& w : workers) w.join();
  return failure;
}

void ExpectRealContention(const HistoryStats& stats, int overlapping) {
  // Enough histories were concurrent, and the calls met every outcome the
  // model distinguishes, including the races' losers.
  EXPECT_GE(stats.overlapping, overlapping);
  for (const char* seen :
       {"reserve changed", "reserve ok", "reserve FAILED_PRECONDITION", "unreserve changed",
        "allocate changed", "allocate ABORTED", "allocate FAILED_PRECONDITION",
        "deallocate changed", "deallocate FAILED_PRECONDITION", "get ok"}) {
    EXPECT_GT(stats.outcomes.at(seen), 0) << seen;
  }
  std::vector<std::string> lines;
  for (const auto& [what, n] : stats.outcomes) lines.push_back(absl::StrCat(what, ": ", n));
  std::printf("%d histories, %d calls, %d with overlapping calls\n  %s\n", stats.histories,
              stats.calls, stats.overlapping, absl::StrJoin(lines, "\n  ").c_str());
}

class LinearizabilityTest : public StoreFixture {};

TEST_F(LinearizabilityTest, ThousandsOfHistories) {
  HistoryStats stats;
  const std::string failure = RunHistories(*store_, 3000, 300, 1, &stats);
  ASSERT_EQ(failure, "");
  EXPECT_GE(stats.histories, 3000);
  ExpectRealContention(stats, 300);
}

TEST_F(LinearizabilityTest, HistoriesWithATinyRecordCache) {
  // Most reads miss the record cache and read RocksDB at the published
  // snapshot while writers publish newer states.
  Reopen({.record_cache_bytes = 4096});
  HistoryStats stats;
  const std::string failure = RunHistories(*store_, 1000, 100, 3, &stats);
  ASSERT_EQ(failure, "");
  ExpectRealContention(stats, 100);
}

TEST_F(LinearizabilityTest, HistoriesWithSyncedGroupCommits) {
  // With sync_writes, writers queue behind an fsync and commit in groups: a
  // different interleaving of the same write path.
  Reopen({.sync_writes = true});
  HistoryStats stats;
  const std::string failure = RunHistories(*store_, 300, 50, 2, &stats);
  ASSERT_EQ(failure, "");
  EXPECT_GE(stats.histories, 300);
  ExpectRealContention(stats, 50);
}

}  // namespace
}  // namespace claimstore::testing
