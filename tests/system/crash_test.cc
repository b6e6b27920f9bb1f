// kill -9 crash test: a writer process runs a random workload with
// sync_writes from three threads and reports each call to its parent before
// making it ("I thread op") and when it returns ("D thread revision", 0 when
// nothing changed); the parent kills it with SIGKILL at a random moment,
// reopens the database and checks that
//   - no acknowledged write is lost: the store revision is at least the
//     highest acknowledged one;
//   - the state equals a replay, through the sequential model
//     (claim_model.h), of a prefix of the history that holds every
//     acknowledged write: revision by revision, each acknowledged write at
//     its own revision, and each revision nobody acknowledged filled by one
//     of the calls in flight at the kill (committed, not yet acknowledged);
//     every claim's uid, allocation, reservedFor and revisions must match;
//   - Verify is clean: indexes match the records, no device is held
//     exclusively by two claims;
//   - the change feed holds exactly the committed changes: one event per
//     revision up to the store's, and replaying the feed from revision 1
//     gives the records the store holds, byte for byte.
// Then it continues the workload on the reopened database, and the model
// carries over.
//
//   crash_test [--cycles N] [--seed S]      (prints "N passed, M failed")
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "claimstore/store.h"
#include "testutil/claim_model.h"

namespace claimstore {
namespace {

using testing::ClaimModel;
using testing::ModelOp;

constexpr int kClaims = 64;
constexpr int kDevices = 10;
constexpr int kThreads = 3;

std::vector<std::string> ClaimNames() {
  std::vector<std::string> names;
  for (int i = 0; i < kClaims; ++i) names.push_back(absl::StrCat("c", i));
  return names;
}

// One write(2) per line: atomic on a pipe, so a kill never tears a line.
void Report(int fd, const std::string& line) {
  if (write(fd, line.data(), line.size()) < 0) _exit(3);
}

// --- The writer child -----------------------------------------------------------

int Child(const std::string& db, int fd, uint64_t seed) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, {.sync_writes = true});
  if (!store.ok()) {
    std::fprintf(stderr, "child: %s\n", store.status().ToString().c_str());
    return 2;
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 7919 + t);
      while (true) {
        const ModelOp op = testing::RandomOp(rng, kClaims, kDevices, 6);
        Report(fd, absl::StrCat("I ", t, " ", op.ToString(), "\n"));
        const testing::ModelOutcome outcome = testing::RunOnStore(**store, op);
        Report(fd, absl::StrCat("D ", t, " ", outcome.changed ? outcome.revision : 0, "\n"));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  return 0;
}

// --- The parent ---------------------------------------------------------------

// What one cycle's writer reported.
struct CycleLog {
  std::map<uint64_t, ModelOp> acknowledged;  // by revision
  std::vector<ModelOp> in_flight;            // called, not returned at the kill
  std::vector<std::string> problems;
};

CycleLog ParseLog(const std::string& buffer) {
  CycleLog log;
  std::map<int, ModelOp> pending;
  for (absl::string_view line : absl::StrSplit(buffer, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    int thread = 0;
    if (f.size() != 3 || !absl::SimpleAtoi(f[1], &thread)) {
      log.problems.push_back(absl::StrCat("malformed report: ", line));
      continue;
    }
    if (f[0] == "I") {
      std::optional<ModelOp> op = ModelOp::Parse(f[2]);
      if (!op.has_value()) log.problems.push_back(absl::StrCat("malformed report: ", line));
      if (op.has_value()) pending[thread] = *op;
      continue;
    }
    uint64_t revision = 0;
    auto it = pending.find(thread);
    if (f[0] != "D" || !absl::SimpleAtoi(f[2], &revision) || it == pending.end()) {
      log.problems.push_back(absl::StrCat("malformed report: ", line));
      continue;
    }
    if (revision > 0 && !log.acknowledged.emplace(revision, it->second).second) {
      log.problems.push_back(absl::StrCat("two writes acknowledged at revision ", revision));
    }
    pending.erase(it);
  }
  for (const auto& [thread, op] : pending) log.in_flight.push_back(op);
  return log;
}

// Replays revisions model.revision()+1 .. target: acknowledged writes at
// their revisions, the gaps filled by unused in-flight calls, trying each
// choice until the result agrees with `store`. On success `model` holds the
// replayed state and `placed` counts the in-flight calls used.
bool Replay(const Store& store, const CycleLog& log, uint64_t target, ClaimModel* model,
            std::vector<bool>* used, int* placed, std::vector<std::string>* why) {
  if (model->revision() == target) {
    std::vector<std::string> diff = model->Diff(store, ClaimNames());
    if (diff.empty()) return true;
    if (why->empty()) *why = diff;  // the first full replay's differences
    return false;
  }
  const uint64_t next = model->revision() + 1;
  if (auto it = log.acknowledged.find(next); it != log.acknowledged.end()) {
    ClaimModel after = *model;
    const testing::ModelOutcome outcome = after.Apply(it->second);
    if (!outcome.changed || outcome.revision != next) {
      if (why->empty()) {
        why->push_back(absl::StrCat("the write acknowledged at revision ", next, " (",
                                    it->second.ToString(), ") replays as ", outcome.ToString()));
      }
      return false;
    }
    if (!Replay(store, log, target, &after, used, placed, why)) return false;
    *model = std::move(after);
    return true;
  }
  for (size_t i = 0; i < log.in_flight.size(); ++i) {
    if ((*used)[i]) continue;
    ClaimModel after = *model;
    const testing::ModelOutcome outcome = after.Apply(log.in_flight[i]);
    if (!outcome.changed) continue;
    (*used)[i] = true;
    if (Replay(store, log, target, &after, used, placed, why)) {
      *model = std::move(after);
      ++*placed;
      return true;
    }
    (*used)[i] = false;
  }
  if (why->empty()) {
    why->push_back(absl::StrCat("no write acknowledged at revision ", next,
                                " and no call in flight explains it"));
  }
  return false;
}

// The change feed replayed so far (across cycles): claim -> bytes.
struct FeedReplay {
  std::map<std::string, std::string> claims;
  uint64_t revision = 0;
};

// The feed after the kill holds exactly the committed changes: its events
// from the last check on are the revisions up to the store's, one each, and
// replaying them gives the state the store holds.
void CheckFeed(Store& store, uint64_t revision, FeedReplay* feed,
               std::vector<std::string>* problems) {
  absl::StatusOr<std::unique_ptr<Watcher>> w = store.Watch(feed->revision + 1);
  if (!w.ok()) {
    problems->push_back(
        absl::StrCat("feed: watch from ", feed->revision + 1, ": ", w.status().ToString()));
    return;
  }
  while (feed->revision < revision) {
    absl::StatusOr<WatchEvent> e = (*w)->Next(absl::ZeroDuration());
    if (!e.ok()) {
      problems->push_back(absl::StrCat("feed: revision ", feed->revision + 1, " of ", revision,
                                       ": ", e.status().ToString()));
      return;
    }
    if (e->revision != feed->revision + 1) {
      problems->push_back(absl::StrCat("feed: revision ", e->revision, " after ", feed->revision));
      return;
    }
    feed->revision = e->revision;
    if (e->type == WatchEventType::kDeleted) {
      feed->claims.erase(e->key.ToString());
    } else {
      feed->claims[e->key.ToString()] = std::string(e->record->bytes());
    }
  }
  absl::StatusOr<ListPage> list = store.List({});
  if (!list.ok()) {
    problems->push_back(absl::StrCat("feed: list: ", list.status().ToString()));
    return;
  }
  std::map<std::string, std::string> listed;
  for (const ClaimRecord& r : list->records) {
    listed[absl::StrCat(r.claim_namespace(), "/", r.name())] = std::string(r.bytes());
  }
  if (listed != feed->claims) {
    problems->push_back(absl::StrCat("feed: replaying it gives ", feed->claims.size(),
                                     " claims, not the ", listed.size(),
                                     " stored (or other bytes)"));
  }
}

// Checks the reopened database against the model and this cycle's log, and
// advances the model. Returns the problems found.
std::vector<std::string> Check(const std::string& db, const CycleLog& log, ClaimModel* model,
                               int* placed, FeedReplay* feed) {
  std::vector<std::string> problems = log.problems;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, {});
  if (!store.ok()) return {absl::StrCat("reopen: ", store.status().ToString())};
  absl::StatusOr<ClaimReads> now = (*store)->GetMany({});
  if (!now.ok()) return {absl::StrCat("reading the revision: ", now.status().ToString())};
  const uint64_t revision = now->revision;
  if (!log.acknowledged.empty() && log.acknowledged.rbegin()->first > revision) {
    problems.push_back(absl::StrCat("store revision ", revision,
                                    " is below the acknowledged revision ",
                                    log.acknowledged.rbegin()->first));
  } else if (revision < model->revision()) {
    problems.push_back(
        absl::StrCat("store revision ", revision, " went back from ", model->revision()));
  } else {
    std::vector<bool> used(log.in_flight.size(), false);
    std::vector<std::string> why;
    if (!Replay(**store, log, revision, model, &used, placed, &why)) {
      problems.push_back(
          absl::StrCat("the state at revision ", revision, " is no replay of the history:"));
      problems.insert(problems.end(), why.begin(), why.end());
    }
  }
  CheckFeed(**store, revision, feed, &problems);
  absl::StatusOr<VerifyReport> report = (*store)->Verify(false);
  if (!report.ok()) {
    problems.push_back(absl::StrCat("verify: ", report.status().ToString()));
  } else {
    for (const std::string& p : report->problems) problems.push_back("verify: " + p);
  }
  return problems;
}

int Parent(const char* self, int cycles, uint64_t seed) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / absl::StrCat("claimstore-crash-", getpid()))
          .string();
  std::filesystem::remove_all(dir);
  const std::string db = dir + "/db";
  std::mt19937_64 rng(seed);
  ClaimModel model;  // across cycles: the database lives on
  FeedReplay feed;
  uint64_t acks = 0;
  int passed = 0, failed = 0, placed = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    int fds[2];
    if (pipe(fds) != 0) return 2;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const std::string fd = absl::StrCat(fds[1]);
      const std::string child_seed = absl::StrCat(seed * 100003 + cycle);
      execl(self, self, "--child", db.c_str(), fd.c_str(), child_seed.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    // Let it run for a random while, reading acknowledgements, then kill -9.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(20 + rng() % 180);
    std::string buffer;
    bool killed = false;
    while (true) {
      if (!killed && std::chrono::steady_clock::now() >= deadline) {
        kill(pid, SIGKILL);
        killed = true;
      }
      fd_set set;
      FD_ZERO(&set);
      FD_SET(fds[0], &set);
      timeval timeout{0, 2000};
      if (select(fds[0] + 1, &set, nullptr, nullptr, &timeout) <= 0) continue;
      char chunk[4096];
      const ssize_t n = read(fds[0], chunk, sizeof chunk);
      if (n <= 0) break;  // the child is gone and the pipe drained
      buffer.append(chunk, static_cast<size_t>(n));
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
      std::fprintf(stderr, "cycle %d: the writer ended on its own (status %d)\n", cycle, status);
      ++failed;
      continue;
    }
    const CycleLog log = ParseLog(buffer);
    acks += log.acknowledged.size();
    const std::vector<std::string> problems = Check(db, log, &model, &placed, &feed);
    if (problems.empty()) {
      ++passed;
    } else {
      // The model no longer follows the database: later cycles would only
      // repeat this failure.
      ++failed;
      std::fprintf(stderr, "cycle %d:\n  %s\n", cycle, absl::StrJoin(problems, "\n  ").c_str());
      break;
    }
  }
  std::filesystem::remove_all(dir);
  std::printf(
      "kill -9 cycles: %d, acknowledged writes replayed: %llu, committed but unacknowledged "
      "writes placed: %d, store revision reached: %llu\n",
      passed + failed, static_cast<unsigned long long>(acks), placed,
      static_cast<unsigned long long>(model.revision()));
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace claimstore

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--child") == 0) {
    int fd = 0;
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(argv[3], &fd) || !absl::SimpleAtoi(argv[4], &seed)) return 2;
    return claimstore::Child(argv[2], fd, seed);
  }
  int cycles = 100;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cycles") == 0) {
      cycles = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--seed") == 0) {
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: crash_test [--cycles N] [--seed S]\n");
      return 2;
    }
  }
  return claimstore::Parent("/proc/self/exe", cycles, seed);
}
