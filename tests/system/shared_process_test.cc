// The shared mode across processes: 4 processes of 4 threads each, every
// process with a mirror of its own, race through a real 3-member etcd
// cluster for the last consumer slot of a claim, for one device, and for
// the capacity of one shared device, 100 rounds each; also with a member,
// and with the leader, killed (SIGKILL) and restarted mid-race, and with a
// racing process killed mid-write. Every round has exactly its winners
// (one; or as many shares as fit), every loser is told why, no write that
// was acknowledged is lost, and a fresh mirror of the end state verifies
// clean. And histories: the same processes and threads make random calls on
// two claims competing for two devices, each call recorded with its times
// (one clock for the machine) and what it returned; every round's history
// of all processes passes the linearizability checker (history_checker.h),
// with the leader or a follower killed mid-race too.
//
// The processes are this binary, run with --child (main below).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "claimstore/allocation.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "etcd/etcd_client.h"
#include "etcd/shared_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testutil/claim_model.h"
#include "testutil/etcd_cluster.h"
#include "testutil/history_checker.h"
#include "testutil/store_test_util.h"
#include "testutil/test_util.h"
#include "util/status_macros.h"

namespace claimstore {
namespace {

using ::claimstore::testing::Call;
using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::ClaimModel;
using ::claimstore::testing::EtcdCluster;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::ModelOp;
using ::claimstore::testing::ModelOutcome;
using ::claimstore::testing::Pod;
using ::claimstore::testing::ScopedTempDir;
using ::claimstore::testing::TestCluster;
using ::claimstore::testing::Uuid;

constexpr char kDriver[] = "gpu.example.com";
constexpr int kProcesses = 4, kThreads = 4, kRacers = kProcesses * kThreads;
constexpr int kFit = 5;           // shares of 1Gi that fit the capacity race's device
constexpr int kHistoryCalls = 2;  // per racer and round of a history
// The most attempts a write of the fairness race may take.
constexpr int kFairAttempts = 8;

// The two claims and two devices of a history's round.
std::string HistoryClaim(int round, char which) {
  return absl::StrCat("hist-", round, "-", std::string(1, which));
}
std::string HistoryDevice(int round, char which) {
  return absl::StrCat("hist-dev-", round, "-", std::string(1, which));
}

// The racers' stores: endpoints as the child's command line has them.
Options RacerOptions(const std::string& endpoints, const std::string& prefix) {
  return testing::SharedOptions(absl::StrSplit(endpoints, ','), prefix, absl::Seconds(10));
}

// --- The child: one process of racers -------------------------------------------

// What a racer does in round `r`.
absl::Status Race(Store& store, const std::string& scenario, int r, int racer) {
  if (scenario == "slot") {
    return store.Reserve({"ns", absl::StrCat("slot-", r)}, Pod(absl::StrCat("racer-", racer)))
        .status();
  }
  AllocationBuilder builder;
  DeviceResult result{"req", kDriver, "pool-a", absl::StrCat(scenario, "-dev-", r)};
  if (scenario == "device") {
    // Half exclusive, half a share with one shareID: any winner excludes
    // every other.
    if (racer % 2 == 1) result.share_id = Uuid(1);
    builder.AddResult(std::move(result));
    return store.Allocate({"ns", absl::StrCat("device-", r, "-", racer)}, builder.Build()).status();
  }
  if (scenario == "fair") {
    // Every racer shares one device (room for all), allocating and
    // deallocating: each write compares and rewrites its shares key.
    result.device = "fair-dev";
    result.share_id = Uuid(racer);
    result.consumed_capacity = {{"memory", "1Gi"}};
    builder.AddResult(std::move(result));
    const std::vector<DeviceCapacity> room = {
        {kDriver, "pool-a", "fair-dev", {{"memory", "64Gi"}}}};
    const ClaimKey key{"ns", absl::StrCat("fair-", r, "-", racer)};
    CS_RETURN_IF_ERROR(store.Allocate(key, builder.Build(), {}, room).status());
    return store.Deallocate(key).status();
  }
  result.share_id = Uuid(racer);
  result.consumed_capacity = {{"memory", racer % 2 == 0 ? "1Gi" : "1024Mi"}};
  builder.AddResult(std::move(result));
  const std::vector<DeviceCapacity> limit = {{kDriver,
                                              "pool-a",
                                              absl::StrCat(scenario, "-dev-", r),
                                              {{"memory", absl::StrCat(kFit, "Gi")}}}};
  return store
      .Allocate({"ns", absl::StrCat("capacity-", r, "-", racer)}, builder.Build(), {}, limit)
      .status();
}

// Prints "R round racer code message" per racer and round; retries what
// etcd could not take (Unavailable): a retry of a write that landed is a
// no-op, which counts as the win it was.
// A racer's calls in a round of a history: writes only (a mirror's reads
// are not linearizable across machines, by design), on the round's claims
// (claim_model.h's language). Prints "H round racer call_ns return_ns code
// changed revision op" per call; a call that etcd could not take
// (Unavailable: its outcome unknown) is printed, then made again.
void History(Store& store, int r, int racer, std::mutex& out) {
  std::mt19937_64 rng(static_cast<uint64_t>(r) * kRacers + racer);
  for (int i = 0; i < kHistoryCalls; ++i) {
    ModelOp op;
    op.claim = HistoryClaim(r, rng() % 2 == 0 ? 'a' : 'b');
    const std::string pod = absl::StrCat("pod-", rng() % 3);
    switch (rng() % 6) {
      case 0:
      case 1:
        op.kind = ModelOp::Kind::kReserve, op.arg = pod;
        break;
      case 2:
        op.kind = ModelOp::Kind::kUnreserve, op.arg = pod;
        break;
      case 3:
      case 4:
        op.kind = ModelOp::Kind::kAllocate, op.arg = HistoryDevice(r, rng() % 2 == 0 ? 'x' : 'y');
        break;
      default:
        op.kind = ModelOp::Kind::kDeallocate;
    }
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (true) {
      const int64_t called = testing::NowNs();
      const ModelOutcome got = testing::RunOnStore(store, op);
      const int64_t returned = testing::NowNs();
      {
        std::lock_guard<std::mutex> lock(out);
        printf("H %d %d %lld %lld %d %d %llu %s\n", r, racer, static_cast<long long>(called),
               static_cast<long long>(returned), static_cast<int>(got.code), got.changed ? 1 : 0,
               static_cast<unsigned long long>(got.revision), op.ToString().c_str());
        fflush(stdout);
      }
      if (got.code != absl::StatusCode::kUnavailable || absl::Now() > give_up) break;
    }
  }
}

int Child(const std::string& endpoints, const std::string& prefix, const std::string& mirror,
          const std::string& scenario, int process, int rounds, const std::string& start_file) {
  absl::StatusOr<std::unique_ptr<Store>> opened =
      Store::Open(mirror, RacerOptions(endpoints, prefix));
  if (!opened.ok()) {
    fprintf(stderr, "child %d: %s\n", process, opened.status().ToString().c_str());
    return 2;
  }
  Store& store = **opened;
  // The claims of this process's racers.
  if (scenario != "slot" && scenario != "history") {
    for (int r = 0; r < rounds; ++r) {
      for (int t = 0; t < kThreads; ++t) {
        const std::string name = absl::StrCat(scenario, "-", r, "-", process * kThreads + t);
        absl::Status s;
        do {
          s = store.Put(ClaimJson("ns", name)).status();
        } while (absl::IsUnavailable(s));
        if (!s.ok()) {
          fprintf(stderr, "child %d: put %s: %s\n", process, name.c_str(), s.ToString().c_str());
          return 2;
        }
      }
    }
  }
  printf("READY\n");
  fflush(stdout);
  while (access(start_file.c_str(), F_OK) != 0) absl::SleepFor(absl::Milliseconds(1));
  std::mutex out;
  std::vector<std::thread> threads;
  // A history's round starts on every thread of every process at once (or
  // nearly: a process that does not arrive within 10 s is not waited for).
  int round = 0;
  std::barrier round_start(kThreads, [&]() noexcept {
    const std::string mine = absl::StrCat(start_file, ".", round, ".", process);
    { std::ofstream(mine) << "here"; }
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    for (int p = 0; p < kProcesses && absl::Now() < give_up; ++p) {
      while (access(absl::StrCat(start_file, ".", round, ".", p).c_str(), F_OK) != 0 &&
             absl::Now() < give_up) {
        absl::SleepFor(absl::Microseconds(200));
      }
    }
    ++round;
  });
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int racer = process * kThreads + t;
      for (int r = 0; r < rounds; ++r) {
        if (scenario == "history") {
          round_start.arrive_and_wait();
          History(store, r, racer, out);
          continue;
        }
        absl::Status s;
        const absl::Time give_up = absl::Now() + absl::Seconds(60);
        do {
          s = Race(store, scenario, r, racer);
        } while (absl::IsUnavailable(s) && absl::Now() < give_up);
        std::string message(s.message());
        for (char& c : message) {
          if (c == '\n') c = ' ';
        }
        std::lock_guard<std::mutex> lock(out);
        printf("R %d %d %d %s\n", r, racer, static_cast<int>(s.code()), message.c_str());
        fflush(stdout);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  printf("A %d\n", internal::MostWriteAttemptsForTesting());
  fflush(stdout);
  return 0;
}

// --- The parent ----------------------------------------------------------------

struct Outcome {
  absl::StatusCode code;
  std::string message;
};

class SharedProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    prefix_ = absl::StrCat("/procs-", getpid(), "-", ++counter, "/");
    endpoints_ = absl::StrJoin(TestCluster().Endpoints(), ",");
  }

  // Runs the scenario's race in kProcesses children; `during` runs in the
  // parent once they race (member kills). Returns outcomes[round][racer].
  std::vector<std::vector<Outcome>> RunRace(const std::string& scenario, int rounds,
                                            const std::function<void()>& during = nullptr,
                                            int kill_child_after_ms = -1) {
    const std::string start = absl::StrCat(dir_.path(), "/start-", scenario);
    lines_read_.store(0);
    history_lines_.clear();
    struct Proc {
      pid_t pid;
      FILE* out;
    };
    std::vector<Proc> procs;
    for (int p = 0; p < kProcesses; ++p) {
      int fds[2];
      EXPECT_EQ(pipe(fds), 0);
      // Everything the child needs is made before fork: between fork and
      // exec only async-signal-safe calls (this process has threads).
      const std::string mirror = absl::StrCat(dir_.path(), "/mirror-", scenario, "-", p);
      const std::string ps = absl::StrCat(p), rs = absl::StrCat(rounds);
      const pid_t pid = fork();
      if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl("/proc/self/exe", "shared_process_test", "--child", endpoints_.c_str(),
              prefix_.c_str(), mirror.c_str(), scenario.c_str(), ps.c_str(), rs.c_str(),
              start.c_str(), nullptr);
        _exit(127);
      }
      close(fds[1]);
      procs.push_back({pid, fdopen(fds[0], "r")});
    }
    // Every child ready (its mirror open, its claims made), then go.
    for (Proc& p : procs) {
      char line[256];
      while (fgets(line, sizeof(line), p.out) != nullptr && std::string(line) != "READY\n") {
      }
    }
    { std::ofstream(start) << "go"; }
    // The children's lines are read on threads of their own, so that the
    // member kills run on this (the main) thread: etcd members die with
    // the thread that started them (etcd_cluster.h).
    std::vector<std::vector<Outcome>> outcomes(
        rounds, std::vector<Outcome>(kRacers, {absl::StatusCode::kUnknown, "(no result)"}));
    std::mutex mu;
    std::vector<std::thread> readers;
    std::vector<int> statuses(procs.size());
    for (size_t i = 0; i < procs.size(); ++i) {
      readers.emplace_back([&, i] {
        char line[4096];
        while (fgets(line, sizeof(line), procs[i].out) != nullptr) {
          if (line[0] == 'H') {
            lines_read_.fetch_add(1);
            std::lock_guard<std::mutex> lock(mu);
            history_lines_.push_back(line);
            continue;
          }
          if (int attempts = 0;
              line[0] == 'A' && absl::SimpleAtoi(absl::StripAsciiWhitespace(line + 1), &attempts)) {
            std::lock_guard<std::mutex> lock(mu);
            most_attempts_ = std::max(most_attempts_, attempts);
            continue;
          }
          std::vector<std::string> f =
              absl::StrSplit(absl::string_view(line), absl::MaxSplits(' ', 4));
          int r = 0, racer = 0, code = 0;
          if (f.size() < 4 || f[0] != "R" || !absl::SimpleAtoi(f[1], &r) ||
              !absl::SimpleAtoi(f[2], &racer) || !absl::SimpleAtoi(f[3], &code) || r < 0 ||
              r >= rounds || racer < 0 || racer >= kRacers) {
            continue;
          }
          lines_read_.fetch_add(1);
          std::string message = f.size() > 4 ? f[4] : "";
          if (!message.empty() && message.back() == '\n') message.pop_back();
          std::lock_guard<std::mutex> lock(mu);
          outcomes[r][racer] = {static_cast<absl::StatusCode>(code), std::move(message)};
        }
        fclose(procs[i].out);
        waitpid(procs[i].pid, &statuses[i], 0);
      });
    }
    if (kill_child_after_ms >= 0) {
      absl::SleepFor(absl::Milliseconds(kill_child_after_ms));
      kill(procs[0].pid, SIGKILL);
    }
    if (during) during();
    for (std::thread& t : readers) t.join();
    for (size_t i = 0; i < procs.size(); ++i) {
      if (kill_child_after_ms >= 0 && i == 0) continue;
      EXPECT_TRUE(WIFEXITED(statuses[i]) && WEXITSTATUS(statuses[i]) == 0)
          << "child " << i << " failed: " << statuses[i];
    }
    return outcomes;
  }

  std::unique_ptr<Store> Fresh(const std::string& name) {
    auto s =
        Store::Open(absl::StrCat(dir_.path(), "/fresh-", name), RacerOptions(endpoints_, prefix_));
    EXPECT_THAT(s.status(), IsOk());
    return s.ok() ? *std::move(s) : nullptr;
  }

  void SlotRace(int rounds, const std::function<void()>& during = nullptr) {
    auto setup = Fresh("setup-slot");
    ASSERT_TRUE(setup);
    for (int r = 0; r < rounds; ++r) {
      std::string reserved;
      for (int i = 0; i < 255; ++i) {
        absl::StrAppend(
            &reserved, i == 0 ? "" : ",",
            absl::StrFormat(R"({"resource":"pods","name":"p%d","uid":"taken-%d"})", i, i));
      }
      const std::string status = absl::StrCat(
          R"({"allocation":{"devices":{"results":[{"request":"req","driver":"gpu.example.com",)",
          R"("pool":"pool-a","device":"slot-dev-)", r, R"("}]}},"reservedFor":[)", reserved, "]}");
      ASSERT_THAT(setup->Put(ClaimJson("ns", absl::StrCat("slot-", r), status)), IsOk());
    }
    const auto outcomes = RunRace("slot", rounds, during);
    auto fresh = Fresh("check-slot");
    ASSERT_TRUE(fresh);
    for (int r = 0; r < rounds; ++r) {
      int won = -1, exhausted = 0;
      for (int racer = 0; racer < kRacers; ++racer) {
        const Outcome& o = outcomes[r][racer];
        if (o.code == absl::StatusCode::kOk) {
          EXPECT_EQ(won, -1) << "round " << r << ": two winners";
          won = racer;
        } else {
          EXPECT_EQ(o.code, absl::StatusCode::kResourceExhausted)
              << "round " << r << ": " << o.message;
          EXPECT_THAT(o.message, ::testing::HasSubstr("256")) << "round " << r;
          ++exhausted;
        }
      }
      EXPECT_EQ(exhausted, kRacers - 1) << "round " << r;
      // The acknowledged winner is in the claim.
      absl::StatusOr<ClaimRead> read = fresh->Get({"ns", absl::StrCat("slot-", r)});
      ASSERT_THAT(read.status(), IsOk());
      const auto* rf = read->record.table().status()->reserved_for();
      ASSERT_EQ(rf->size(), 256u) << "round " << r;
      EXPECT_EQ(rf->Get(255)->uid()->str(), absl::StrCat("racer-", won)) << "round " << r;
    }
    ExpectVerifiesClean(*fresh);
  }

  void DeviceRace(int rounds, const std::function<void()>& during = nullptr) {
    const auto outcomes = RunRace("device", rounds, during);
    auto fresh = Fresh("check-device");
    ASSERT_TRUE(fresh);
    absl::StatusOr<AllocatedState> state = fresh->AllocatedDevices();
    ASSERT_THAT(state.status(), IsOk());
    for (int r = 0; r < rounds; ++r) {
      const auto [won, holder] = CheckDeviceRound(outcomes, *state, r);
      ASSERT_NE(won, -1) << "round " << r << ": no winner";
      EXPECT_EQ(holder, RacerClaim(r, won)) << "round " << r;
      for (int racer = 0; racer < kRacers; ++racer) {
        if (racer == won) continue;
        EXPECT_EQ(outcomes[r][racer].code, absl::StatusCode::kAborted)
            << outcomes[r][racer].message;
        EXPECT_THAT(outcomes[r][racer].message,
                    ::testing::HasSubstr("allocated to claim " + holder.ToString()));
      }
    }
    ExpectVerifiesClean(*fresh);
  }

  static ClaimKey RacerClaim(int round, int racer) {
    return {"ns", absl::StrCat("device-", round, "-", racer)};
  }

  // Round `r` of the device race: at most one racer reported a win, and
  // the device is held exactly once. Returns the winner (-1: none
  // reported) and the holder.
  static std::pair<int, ClaimKey> CheckDeviceRound(
      const std::vector<std::vector<Outcome>>& outcomes, const AllocatedState& state, int r) {
    int won = -1;
    for (int racer = 0; racer < kRacers; ++racer) {
      if (outcomes[r][racer].code == absl::StatusCode::kOk) {
        EXPECT_EQ(won, -1) << "round " << r << ": two winners";
        won = racer;
      }
    }
    const AllocatedDevice* d = state.Find(kDriver, "pool-a", absl::StrCat("device-dev-", r));
    EXPECT_NE(d, nullptr) << "round " << r << ": nobody holds the device";
    if (d == nullptr) return {won, {}};
    const size_t holders = (d->exclusive.has_value() ? 1 : 0) + d->shares.size();
    EXPECT_EQ(holders, 1u) << "round " << r << ": the device is held " << holders << " times";
    return {won, d->exclusive.has_value() ? *d->exclusive
                 : d->shares.empty()      ? ClaimKey{}
                                          : d->shares[0].claim};
  }

  void CapacityRace(int rounds, const std::function<void()>& during = nullptr) {
    const auto outcomes = RunRace("capacity", rounds, during);
    auto fresh = Fresh("check-capacity");
    ASSERT_TRUE(fresh);
    absl::StatusOr<AllocatedState> state = fresh->AllocatedDevices();
    ASSERT_THAT(state.status(), IsOk());
    for (int r = 0; r < rounds; ++r) {
      std::vector<ClaimKey> winners;
      for (int racer = 0; racer < kRacers; ++racer) {
        const Outcome& o = outcomes[r][racer];
        if (o.code == absl::StatusCode::kOk) {
          winners.push_back({"ns", absl::StrCat("capacity-", r, "-", racer)});
        } else {
          EXPECT_EQ(o.code, absl::StatusCode::kAborted) << o.message;
          EXPECT_THAT(o.message, ::testing::HasSubstr("would be over-committed: limit 5Gi"));
        }
      }
      EXPECT_EQ(winners.size(), static_cast<size_t>(kFit)) << "round " << r;
      const AllocatedDevice* d = state->Find(kDriver, "pool-a", absl::StrCat("capacity-dev-", r));
      ASSERT_NE(d, nullptr);
      std::vector<ClaimKey> holders;
      for (const DeviceShare& s : d->shares) holders.push_back(s.claim);
      std::sort(holders.begin(), holders.end());
      std::sort(winners.begin(), winners.end());
      EXPECT_EQ(holders, winners) << "round " << r;
    }
    ExpectVerifiesClean(*fresh);
  }

  // 16 racers in 4 processes allocate and deallocate a share of one
  // device, round after round: every write succeeds, within a bounded
  // number of attempts (the device's queue: no write starves).
  void FairRace(int rounds) {
    most_attempts_ = 0;
    const auto outcomes = RunRace("fair", rounds);
    for (int r = 0; r < rounds; ++r) {
      for (int racer = 0; racer < kRacers; ++racer) {
        EXPECT_EQ(outcomes[r][racer].code, absl::StatusCode::kOk)
            << "round " << r << " racer " << racer << ": " << outcomes[r][racer].message;
      }
    }
    EXPECT_GT(most_attempts_, 0);
    EXPECT_LE(most_attempts_, kFairAttempts);
    std::cout << "the most attempts of one write: " << most_attempts_ << "\n";
    // Every ticket went with its write: the queues are empty.
    internal::EtcdOptions eo;
    eo.endpoints = TestCluster().Endpoints();
    absl::StatusOr<std::unique_ptr<internal::EtcdClient>> etcd = internal::EtcdClient::Connect(eo);
    ASSERT_THAT(etcd.status(), IsOk());
    etcdserverpb::RangeRequest queues;
    queues.set_key(prefix_ + "queues/");
    queues.set_range_end(internal::PrefixRangeEnd(prefix_ + "queues/"));
    queues.set_count_only(true);
    absl::StatusOr<etcdserverpb::RangeResponse> left = (*etcd)->Range(queues);
    ASSERT_THAT(left.status(), IsOk());
    EXPECT_EQ(left->count(), 0);
    auto fresh = Fresh("check-fair");
    ASSERT_TRUE(fresh);
    ExpectVerifiesClean(*fresh);
  }

  static void ExpectVerifiesClean(Store& store) {
    absl::StatusOr<VerifyReport> report = store.Verify(false);
    ASSERT_THAT(report.status(), IsOk());
    EXPECT_THAT(report->problems, ::testing::IsEmpty());
  }

  // Waits until the racers have reported a tenth of their `total` lines,
  // kills a member (a follower, or the leader) with SIGKILL, and starts it
  // again once they have reported another tenth (or after 3 s). The race
  // must still be running when the member dies.
  void KillAndRestart(bool leader, int total) {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    while (lines_read_.load() < total / 10 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    EtcdCluster& cluster = TestCluster();
    const int lead = cluster.Leader();
    ASSERT_GE(lead, 0);
    const int victim = leader ? lead : (lead + 1) % cluster.size();
    cluster.Kill(victim);
    const int at_kill = lines_read_.load();
    EXPECT_LT(at_kill, total) << "the race was over before the member was killed";
    const absl::Time restart_at = absl::Now() + absl::Seconds(3);
    while (lines_read_.load() < at_kill + total / 10 && absl::Now() < restart_at) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_THAT(cluster.Restart(victim), IsOk());
  }

  // Rounds of random calls by every racer on two claims competing for two
  // devices (one of them allocated to start), through etcd; every round's
  // history of all processes is linearizable, and a fresh mirror's reads
  // of the claims at the end are part of it (no acknowledged write lost).
  void HistoryRace(int rounds, const std::function<void()>& during = nullptr) {
    auto setup = Fresh("setup-history");
    ASSERT_TRUE(setup);
    std::vector<ClaimModel> start(rounds);
    for (int r = 0; r < rounds; ++r) {
      for (const ModelOp& op :
           {ModelOp{ModelOp::Kind::kPut, HistoryClaim(r, 'a'), "uid-a"},
            ModelOp{ModelOp::Kind::kPut, HistoryClaim(r, 'b'), "uid-b"},
            ModelOp{ModelOp::Kind::kAllocate, HistoryClaim(r, 'a'), HistoryDevice(r, 'x')}}) {
        const ModelOutcome got = testing::RunOnStore(*setup, op);
        ASSERT_EQ(start[r].ApplyObserved(op, got), got) << op.ToString();
      }
    }
    RunRace("history", rounds, during);
    std::vector<std::vector<Call>> calls(rounds);
    for (const std::string& line : history_lines_) {
      // H round racer call_ns return_ns code changed revision op...
      std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(' ', 8));
      int r = 0, racer = 0, code = 0, changed = 0;
      Call call;
      ASSERT_EQ(f.size(), 9u) << line;
      if (!f[8].empty() && f[8].back() == '\n') f[8].pop_back();
      std::optional<ModelOp> op = ModelOp::Parse(f[8]);
      ASSERT_TRUE(
          absl::SimpleAtoi(f[1], &r) && absl::SimpleAtoi(f[2], &racer) &&
          absl::SimpleAtoi(f[3], &call.call_ns) && absl::SimpleAtoi(f[4], &call.return_ns) &&
          absl::SimpleAtoi(f[5], &code) && absl::SimpleAtoi(f[6], &changed) &&
          absl::SimpleAtoi(f[7], &call.outcome.revision) && op.has_value() && r >= 0 && r < rounds)
          << line;
      call.thread = racer;
      call.op = *std::move(op);
      call.outcome.code = static_cast<absl::StatusCode>(code);
      call.outcome.changed = changed != 0;
      calls[r].push_back(std::move(call));
    }
    // A fresh mirror reads the claims after every call returned.
    auto fresh = Fresh("check-history");
    ASSERT_TRUE(fresh);
    std::map<std::string, int> outcomes;
    int unknown = 0, across = 0;
    for (int r = 0; r < rounds; ++r) {
      EXPECT_GE(calls[r].size(), static_cast<size_t>(kRacers * kHistoryCalls)) << "round " << r;
      for (char which : {'a', 'b'}) {
        Call read{-1, {ModelOp::Kind::kGet, HistoryClaim(r, which), ""}, testing::NowNs(), 0, {}};
        read.outcome = testing::RunOnStore(*fresh, read.op);
        read.return_ns = testing::NowNs();
        calls[r].push_back(std::move(read));
      }
      ASSERT_LE(calls[r].size(), 64u) << "round " << r << ": more calls than the checker takes";
      EXPECT_TRUE(testing::Linearizable(start[r], calls[r], testing::Revisions::kObserved))
          << "round " << r << " is not linearizable; from " << start[r].revision() << ", "
          << absl::StrJoin(start[r].claims(), ", ",
                           [](std::string* out, const auto& c) {
                             absl::StrAppend(out, c.first, " ", c.second.ToString());
                           })
          << ":\n"
          << testing::Describe(calls[r]);
      bool overlap = false;
      for (const Call& x : calls[r]) {
        for (const Call& y : calls[r]) {
          overlap |= x.thread >= 0 && y.thread >= 0 && x.thread / kThreads != y.thread / kThreads &&
                     x.call_ns < y.return_ns && y.call_ns < x.return_ns;
        }
        if (x.thread < 0) continue;
        unknown += x.outcome.code == absl::StatusCode::kUnavailable ? 1 : 0;
        const std::string verb = x.op.ToString().substr(0, x.op.ToString().find(' '));
        ++outcomes[absl::StrCat(verb, " ",
                                x.outcome.code == absl::StatusCode::kOk
                                    ? (x.outcome.changed ? "changed" : "ok")
                                    : absl::StatusCodeToString(x.outcome.code))];
      }
      across += overlap ? 1 : 0;
    }
    // The races were real: calls of different processes overlapped in
    // most rounds, and the calls met the outcomes the model tells apart,
    // the losers' included.
    EXPECT_GE(across, rounds / 2);
    for (const char* seen :
         {"reserve changed", "reserve FAILED_PRECONDITION", "allocate changed", "allocate ABORTED",
          "allocate FAILED_PRECONDITION", "deallocate changed", "deallocate FAILED_PRECONDITION"}) {
      EXPECT_GT(outcomes[seen], 0) << seen;
    }
    std::vector<std::string> lines;
    for (const auto& [what, n] : outcomes) lines.push_back(absl::StrCat(what, ": ", n));
    std::printf(
        "%d rounds, %d with calls of different processes overlapping, %d outcomes unknown\n  %s\n",
        rounds, across, unknown, absl::StrJoin(lines, "\n  ").c_str());
    ExpectVerifiesClean(*fresh);
  }

  ScopedTempDir dir_;
  std::string prefix_, endpoints_;
  std::atomic<int> lines_read_{0};
  std::vector<std::string> history_lines_;  // the children's "H" lines
  int most_attempts_ = 0;                   // of a write, in any child (their "A" lines)
};

constexpr int kRounds = 100;

TEST_F(SharedProcessTest, LastConsumerSlot) { SlotRace(kRounds); }
TEST_F(SharedProcessTest, OneDevice) { DeviceRace(kRounds); }
TEST_F(SharedProcessTest, CapacityOfASharedDevice) { CapacityRace(kRounds); }
TEST_F(SharedProcessTest, NoWriteStarvesOnAHotDevice) { FairRace(20); }

// A member, then the leader, SIGKILLed and restarted while the racers run.
TEST_F(SharedProcessTest, DeviceWithAFollowerKilled) {
  DeviceRace(kRounds, [this] { KillAndRestart(false, kRounds * kRacers); });
}
TEST_F(SharedProcessTest, LastConsumerSlotWithTheLeaderKilled) {
  SlotRace(kRounds, [this] { KillAndRestart(true, kRounds * kRacers); });
}
TEST_F(SharedProcessTest, CapacityWithTheLeaderKilled) {
  CapacityRace(kRounds, [this] { KillAndRestart(true, kRounds * kRacers); });
}

// Histories of all processes, linearizable; also with a follower, and with
// the leader, killed and restarted mid-race.
TEST_F(SharedProcessTest, HistoriesAreLinearizable) { HistoryRace(kRounds); }
TEST_F(SharedProcessTest, HistoriesWithAFollowerKilled) {
  HistoryRace(kRounds, [this] { KillAndRestart(false, kRounds * kRacers * kHistoryCalls); });
}
TEST_F(SharedProcessTest, HistoriesWithTheLeaderKilled) {
  HistoryRace(kRounds, [this] { KillAndRestart(true, kRounds * kRacers * kHistoryCalls); });
}

// The claims of a store, each as its key, revisions and JSON.
std::vector<std::string> Contents(Store& store) {
  std::vector<std::string> out;
  ListOptions list;
  while (true) {
    absl::StatusOr<ListPage> page = store.List(list);
    EXPECT_THAT(page.status(), IsOk());
    if (!page.ok()) return out;
    for (const ClaimRecord& r : page->records) {
      out.push_back(absl::StrCat(r.claim_namespace(), "/", r.name(), "@", r.create_revision(), "/",
                                 r.mod_revision(), "/", r.version(), " ", EncodeClaim(r)));
    }
    if (page->continue_token.empty()) return out;
    list.continue_token = page->continue_token;
  }
}

TEST_F(SharedProcessTest, ARacerKilledMidWriteCatchesUpWhenRestarted) {
  const auto outcomes = RunRace("device", kRounds, nullptr, /*kill_child_after_ms=*/400);
  // The killed process's mirror, opened again: it catches up with etcd,
  // verifies clean, and holds what a fresh mirror of etcd holds.
  auto restarted =
      Store::Open(absl::StrCat(dir_.path(), "/mirror-device-0"), RacerOptions(endpoints_, prefix_));
  ASSERT_THAT(restarted.status(), IsOk());
  auto fresh = Fresh("check-killed");
  ASSERT_TRUE(fresh);
  ExpectVerifiesClean(**restarted);
  ExpectVerifiesClean(*fresh);
  EXPECT_EQ(Contents(**restarted), Contents(*fresh));
  // No device held twice; a reported winner holds its device. (The killed
  // process's racers report nothing after the kill: one of them may hold a
  // device unreported, when its write landed as it died.)
  absl::StatusOr<AllocatedState> state = fresh->AllocatedDevices();
  ASSERT_THAT(state.status(), IsOk());
  int killed_unreported = 0;
  for (int r = 0; r < kRounds; ++r) {
    const auto [won, holder] = CheckDeviceRound(outcomes, *state, r);
    if (won >= 0) {
      EXPECT_EQ(holder, RacerClaim(r, won)) << "round " << r;
    } else {
      ++killed_unreported;
      bool of_killed = false;
      for (int t = 0; t < kThreads; ++t) of_killed |= holder == RacerClaim(r, t);
      EXPECT_TRUE(of_killed) << "round " << r << ": held by " << holder.ToString()
                             << ", whose win nobody reported";
    }
  }
  EXPECT_LE(killed_unreported, kThreads);
}

}  // namespace
}  // namespace claimstore

int main(int argc, char** argv) {
  if (argc == 9 && std::string(argv[1]) == "--child") {
    int process = 0, rounds = 0;
    if (!absl::SimpleAtoi(argv[6], &process) || !absl::SimpleAtoi(argv[7], &rounds)) return 2;
    return claimstore::Child(argv[2], argv[3], argv[4], argv[5], process, rounds, argv[8]);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
