// The shared mode across processes: 4 processes of 4 threads each, every
// process with a mirror of its own, race through a real 3-member etcd
// cluster for the last consumer slot of a claim, for one device, and for
// the capacity of one shared device, 100 rounds each; also with a member,
// and with the leader, killed (SIGKILL) and restarted mid-race, and with a
// racing process killed mid-write. Every round has exactly its winners
// (one; or as many shares as fit), every loser is told why, no write that
// was acknowledged is lost, and a fresh mirror of the end state verifies
// clean.
//
// The processes are this binary, run with --child (main below).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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
#include "etcd_cluster.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store_test_util.h"
#include "test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::Uuid;
using ::claimstore::testing::EtcdCluster;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::Pod;
using ::claimstore::testing::ScopedTempDir;
using ::claimstore::testing::TestCluster;

constexpr char kDriver[] = "gpu.example.com";
constexpr int kProcesses = 4, kThreads = 4, kRacers = kProcesses * kThreads;
constexpr int kFit = 5;  // shares of 1Gi that fit the capacity race's device


Options SharedOptions(const std::string& endpoints, const std::string& prefix) {
  Options o;
  o.etcd_endpoints = absl::StrSplit(endpoints, ',');
  o.etcd_prefix = prefix;
  o.etcd_timeout = absl::Seconds(10);
  return o;
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
  result.share_id = Uuid(racer);
  result.consumed_capacity = {{"memory", racer % 2 == 0 ? "1Gi" : "1024Mi"}};
  builder.AddResult(std::move(result));
  const std::vector<DeviceCapacity> limit = {
      {kDriver, "pool-a", absl::StrCat(scenario, "-dev-", r), {{"memory", absl::StrCat(kFit, "Gi")}}}};
  return store.Allocate({"ns", absl::StrCat("capacity-", r, "-", racer)}, builder.Build(), {}, limit)
      .status();
}

// Prints "R round racer code message" per racer and round; retries what
// etcd could not take (Unavailable): a retry of a write that landed is a
// no-op, which counts as the win it was.
int Child(const std::string& endpoints, const std::string& prefix, const std::string& mirror,
          const std::string& scenario, int process, int rounds, const std::string& start_file) {
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(mirror, SharedOptions(endpoints, prefix));
  if (!opened.ok()) {
    fprintf(stderr, "child %d: %s\n", process, opened.status().ToString().c_str());
    return 2;
  }
  Store& store = **opened;
  // The claims of this process's racers.
  if (scenario != "slot") {
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
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int racer = process * kThreads + t;
      for (int r = 0; r < rounds; ++r) {
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
    auto s = Store::Open(absl::StrCat(dir_.path(), "/fresh-", name), SharedOptions(endpoints_, prefix_));
    EXPECT_THAT(s.status(), IsOk());
    return s.ok() ? *std::move(s) : nullptr;
  }

  void SlotRace(int rounds, const std::function<void()>& during = nullptr) {
    auto setup = Fresh("setup-slot");
    ASSERT_TRUE(setup);
    for (int r = 0; r < rounds; ++r) {
      std::string reserved;
      for (int i = 0; i < 255; ++i) {
        absl::StrAppend(&reserved, i == 0 ? "" : ",",
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
          EXPECT_EQ(o.code, absl::StatusCode::kResourceExhausted) << "round " << r << ": " << o.message;
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
      int won = -1;
      for (int racer = 0; racer < kRacers; ++racer) {
        if (outcomes[r][racer].code == absl::StatusCode::kOk) {
          EXPECT_EQ(won, -1) << "round " << r << ": two winners";
          won = racer;
        }
      }
      ASSERT_NE(won, -1) << "round " << r << ": no winner";
      const std::string holder = absl::StrCat("ns/device-", r, "-", won);
      for (int racer = 0; racer < kRacers; ++racer) {
        if (racer == won) continue;
        EXPECT_EQ(outcomes[r][racer].code, absl::StatusCode::kAborted) << outcomes[r][racer].message;
        EXPECT_THAT(outcomes[r][racer].message, ::testing::HasSubstr("allocated to claim " + holder));
      }
      const AllocatedDevice* d = state->Find(kDriver, "pool-a", absl::StrCat("device-dev-", r));
      ASSERT_NE(d, nullptr) << "round " << r;
      const size_t holders = (d->exclusive.has_value() ? 1 : 0) + d->shares.size();
      EXPECT_EQ(holders, 1u) << "round " << r << ": the device is held " << holders << " times";
      const ClaimKey expected{"ns", absl::StrCat("device-", r, "-", won)};
      EXPECT_TRUE(d->exclusive == expected || (!d->shares.empty() && d->shares[0].claim == expected))
          << "round " << r;
    }
    ExpectVerifiesClean(*fresh);
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

  static void ExpectVerifiesClean(Store& store) {
    absl::StatusOr<VerifyReport> report = store.Verify(false);
    ASSERT_THAT(report.status(), IsOk());
    EXPECT_THAT(report->problems, ::testing::IsEmpty());
  }

  // Waits until the racers have reported a tenth of their results, kills
  // a member (a follower, or the leader) with SIGKILL, and starts it again
  // once they have reported another tenth (or after 3 s). The race must
  // still be running when the member dies.
  void KillAndRestart(bool leader, int rounds) {
    const int total = rounds * kRacers;
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

  ScopedTempDir dir_;
  std::string prefix_, endpoints_;
  std::atomic<int> lines_read_{0};
};

constexpr int kRounds = 100;

TEST_F(SharedProcessTest, LastConsumerSlot) { SlotRace(kRounds); }
TEST_F(SharedProcessTest, OneDevice) { DeviceRace(kRounds); }
TEST_F(SharedProcessTest, CapacityOfASharedDevice) { CapacityRace(kRounds); }

// A member, then the leader, SIGKILLed and restarted while the racers run.
TEST_F(SharedProcessTest, DeviceWithAFollowerKilled) {
  DeviceRace(kRounds, [this] { KillAndRestart(false, kRounds); });
}
TEST_F(SharedProcessTest, LastConsumerSlotWithTheLeaderKilled) {
  SlotRace(kRounds, [this] { KillAndRestart(true, kRounds); });
}
TEST_F(SharedProcessTest, CapacityWithTheLeaderKilled) {
  CapacityRace(kRounds, [this] { KillAndRestart(true, kRounds); });
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
  auto restarted = Store::Open(absl::StrCat(dir_.path(), "/mirror-device-0"),
                               SharedOptions(endpoints_, prefix_));
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
    int won = -1;
    for (int racer = 0; racer < kRacers; ++racer) {
      if (outcomes[r][racer].code == absl::StatusCode::kOk) {
        EXPECT_EQ(won, -1) << "round " << r << ": two winners";
        won = racer;
      }
    }
    const AllocatedDevice* d = state->Find(kDriver, "pool-a", absl::StrCat("device-dev-", r));
    ASSERT_NE(d, nullptr) << "round " << r << ": nobody holds the device";
    const size_t holders = (d->exclusive.has_value() ? 1 : 0) + d->shares.size();
    EXPECT_EQ(holders, 1u) << "round " << r;
    const ClaimKey holder = d->exclusive.has_value() ? *d->exclusive : d->shares[0].claim;
    if (won >= 0) {
      EXPECT_EQ(holder, ClaimKey({"ns", absl::StrCat("device-", r, "-", won)})) << "round " << r;
    } else {
      ++killed_unreported;
      bool of_killed = false;
      for (int t = 0; t < kThreads; ++t) {
        of_killed |= holder == ClaimKey{"ns", absl::StrCat("device-", r, "-", t)};
      }
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
