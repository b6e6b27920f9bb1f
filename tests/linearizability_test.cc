// Linearizability: thousands of short concurrent histories of reserve,
// unreserve, allocate, deallocate and get on two claims that compete for
// two devices, each call recorded with its call and return times and what
// it returned. A history passes when some order of its calls (a) respects
// real time: a call that returned before another was called comes first,
// and (b) replayed through the sequential model (claim_model.h) gives every
// call exactly what it returned: status code, changed or not, and revision.
// The search is Wing & Gong's, with memoised (calls done, model state)
// pairs as in Lowe's and Porcupine's checkers.
#include <atomic>
#include <barrier>
#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "claim_model.h"
#include "gtest/gtest.h"
#include "store_test_util.h"

namespace claimstore::testing {
namespace {

struct Call {
  int thread = 0;
  ModelOp op;
  int64_t call_ns = 0, return_ns = 0;
  ModelOutcome outcome;
};

std::string Fingerprint(const ClaimModel& model) {
  std::string out = absl::StrCat(model.revision());
  for (const auto& [name, claim] : model.claims()) absl::StrAppend(&out, ";", name, claim.ToString());
  return out;
}

class Checker {
 public:
  Checker(const ClaimModel& start, const std::vector<Call>& calls) : start_(start), calls_(calls) {}

  // True when the history is linearizable.
  bool Check() { return Search(start_, 0); }

 private:
  bool Search(const ClaimModel& model, uint64_t done) {
    if (done == (uint64_t{1} << calls_.size()) - 1) return true;
    if (!seen_.insert({done, Fingerprint(model)}).second) return false;
    // Calls that may go next: not done, and called before every call not
    // done returned.
    int64_t first_return = INT64_MAX;
    for (size_t i = 0; i < calls_.size(); ++i) {
      if (!(done >> i & 1)) first_return = std::min(first_return, calls_[i].return_ns);
    }
    for (size_t i = 0; i < calls_.size(); ++i) {
      if ((done >> i & 1) || calls_[i].call_ns > first_return) continue;
      ClaimModel next = model;
      if (next.Apply(calls_[i].op) == calls_[i].outcome && Search(next, done | uint64_t{1} << i)) {
        return true;
      }
    }
    return false;
  }

  const ClaimModel& start_;
  const std::vector<Call>& calls_;
  std::set<std::pair<uint64_t, std::string>> seen_;
};

std::string Describe(const std::vector<Call>& calls) {
  std::vector<std::string> lines;
  for (const Call& c : calls) {
    lines.push_back(absl::StrCat("  t", c.thread, " [", c.call_ns, ", ", c.return_ns, "] ",
                                 c.op.ToString(), " -> ", c.outcome.ToString()));
  }
  return absl::StrJoin(lines, "\n");
}

// --- The checker rejects what is not linearizable. -------------------------

ModelOutcome Changed(uint64_t revision) { return {absl::StatusCode::kOk, true, revision, {}}; }

class CheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    start_.Apply({ModelOp::Kind::kPut, "a", "uid-a"});         // revision 1
    start_.Apply({ModelOp::Kind::kPut, "b", "uid-b"});         // 2
    start_.Apply({ModelOp::Kind::kAllocate, "a", "gpu-0"});    // 3
  }
  bool Linearizable(const std::vector<Call>& calls) { return Checker(start_, calls).Check(); }
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
  EXPECT_FALSE(Checker(start, calls).Check());
  std::vector<Call> one_wins = calls;
  one_wins[0].outcome = {absl::StatusCode::kAborted, false, 0, {}};
  one_wins[1].outcome = Changed(3);
  EXPECT_TRUE(Checker(start, one_wins).Check());
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

// --- Histories of the store. ------------------------------------------------

constexpr int kThreads = 3;
constexpr int kCallsPerThread = 4;

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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
          Call call{t, op, Now(), 0, {}};
          call.outcome = RunOnStore(store, op);
          call.return_ns = Now();
          recorded[t].push_back(std::move(call));
        }
        sync.arrive_and_wait();  // done
      }
    });
  }
  for (int h = 0; (h < histories || stats.overlapping < overlapping) && h < 10 * histories &&
                  failure.empty();
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
    for (const ModelOp& setup : {ModelOp{ModelOp::Kind::kPut, a, "uid-a"},
                                 ModelOp{ModelOp::Kind::kPut, b, "uid-b"},
                                 ModelOp{ModelOp::Kind::kAllocate, a, devices[0]}}) {
      const ModelOutcome want = model.Apply(setup);
      const ModelOutcome got = RunOnStore(store, setup);
      if (!(got == want)) {
        failure = absl::StrCat(setup.ToString(), ": store ", got.ToString(), ", model ",
                               want.ToString());
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
          case 1: plan[t].push_back({ModelOp::Kind::kReserve, claim, pod}); break;
          case 2: plan[t].push_back({ModelOp::Kind::kUnreserve, claim, pod}); break;
          case 3: plan[t].push_back({ModelOp::Kind::kAllocate, claim, devices[rng() % 2]}); break;
          case 4: plan[t].push_back({ModelOp::Kind::kDeallocate, claim, ""}); break;
          default: plan[t].push_back({ModelOp::Kind::kGet, claim, ""});
        }
      }
    }
    sync.arrive_and_wait();  // go
    sync.arrive_and_wait();  // all returned
    std::vector<Call> calls;
    for (const std::vector<Call>& r : recorded) calls.insert(calls.end(), r.begin(), r.end());
    if (!Checker(model, calls).Check()) {
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
  for (const char* seen : {"reserve changed", "reserve ok", "reserve FAILED_PRECONDITION",
                           "unreserve changed", "allocate changed", "allocate ABORTED",
                           "allocate FAILED_PRECONDITION", "deallocate changed",
                           "deallocate FAILED_PRECONDITION", "get ok"}) {
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
