// kill -9 crash test: a writer process runs a random workload with
// sync_writes and reports every acknowledged write; the parent kills it at a
// random moment, reopens the database and checks that
//   - no acknowledged write is lost: the store revision is at least the
//     highest acknowledged one, and every claim is at least as new as its
//     last acknowledged write (or was deleted by a later write);
//   - a claim whose revision is an acknowledged one has exactly the content
//     that write produced;
//   - Verify is clean: indexes match the records, no device is held
//     exclusively by two claims.
// Then it continues the workload on the reopened database.
//
//   crash_test [--cycles N] [--seed S]      (prints "N passed, M failed")
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"

namespace claimstore {
namespace {

constexpr int kClaims = 64;
constexpr int kDevices = 10;

uint64_t Fnv(absl::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string ClaimName(int i) { return absl::StrCat("c", i); }

ClaimRecord Pending(const std::string& name, int generation) {
  return *DecodeClaim(absl::StrCat(R"({"metadata":{"namespace":"ns","name":")", name,
                                   R"(","uid":"uid-)", name, "-", generation, R"("},"status":{}})"));
}

// --- The writer child -----------------------------------------------------------

// Runs the workload until killed, writing "claim revision hash" per
// acknowledged write (or "claim revision deleted") to `fd`.
int Child(const std::string& db, int fd, uint64_t seed) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, {.sync_writes = true});
  if (!store.ok()) {
    std::fprintf(stderr, "child: %s\n", store.status().ToString().c_str());
    return 2;
  }
  Store& s = **store;
  const auto report = [&](const ClaimKey& key, const absl::StatusOr<WriteResult>& r) {
    if (!r.ok() || !r->changed) return;
    // Read the content this write produced (the revision pins it).
    std::string line;
    absl::StatusOr<ClaimRead> read = s.Get(key);
    if (read.ok() && read->record.mod_revision() == r->revision) {
      line = absl::StrCat(key.name, " ", r->revision, " ", Fnv(read->record.bytes()), "\n");
    } else if (read.ok() && read->record.mod_revision() < r->revision) {
      // Read-your-writes broken: an acknowledged write is not visible.
      line = absl::StrCat(key.name, " ", r->revision, " stale\n");
    } else if (absl::IsNotFound(read.status())) {
      line = absl::StrCat(key.name, " ", r->revision, " deleted\n");
    } else {
      line = absl::StrCat(key.name, " ", r->revision, " changed\n");  // overtaken already
    }
    // One write(2) per line: atomic on a pipe.
    if (write(fd, line.data(), line.size()) < 0) _exit(3);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 7919 + t);
      for (int generation = 0;; ++generation) {
        const ClaimKey key{"ns", ClaimName(static_cast<int>(rng() % kClaims))};
        switch (rng() % 7) {
          case 0:
            report(key, s.Put(Pending(key.name, generation)));
            break;
          case 1:
            report(key, s.Delete(key));
            break;
          case 2:
          case 3: {
            AllocationBuilder b;
            b.AddResult({"req", "gpu.example.com", "pool-a", absl::StrCat("gpu-", rng() % kDevices),
                         std::nullopt, std::nullopt});
            report(key, s.Allocate(key, b.Build()));
            break;
          }
          case 4:
            report(key, s.Deallocate(key));
            break;
          case 5:
            report(key, s.Reserve(key, {"", "pods", "p", absl::StrCat("pod-", rng() % 6)}));
            break;
          default:
            report(key, s.Unreserve(key, absl::StrCat("pod-", rng() % 6)));
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  return 0;
}

// --- The parent ---------------------------------------------------------------

struct Ack {
  uint64_t revision = 0;
  std::string content;  // hash, "deleted" or "changed"
};

// Checks the reopened database against the acknowledged writes. Returns the
// problems found.
std::vector<std::string> Check(const std::string& db, const std::map<std::string, Ack>& last_ack,
                               uint64_t max_ack) {
  std::vector<std::string> problems;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, {});
  if (!store.ok()) return {absl::StrCat("reopen: ", store.status().ToString())};
  absl::StatusOr<StoreStats> stats = (*store)->Stats();
  if (!stats.ok()) return {absl::StrCat("stats: ", stats.status().ToString())};
  if (stats->revision < max_ack) {
    problems.push_back(absl::StrCat("store revision ", stats->revision,
                                    " is below the acknowledged revision ", max_ack));
  }
  for (const auto& [name, ack] : last_ack) {
    absl::StatusOr<ClaimRead> read = (*store)->Get({"ns", name});
    if (absl::IsNotFound(read.status())) {
      // Absent: fine if the acknowledged write deleted it, or a later
      // (unacknowledged but committed) write did.
      if (ack.content != "deleted" && stats->revision <= ack.revision) {
        problems.push_back(absl::StrCat(name, ": acknowledged at ", ack.revision, " but gone"));
      }
      continue;
    }
    if (!read.ok()) {
      problems.push_back(absl::StrCat(name, ": ", read.status().ToString()));
      continue;
    }
    const uint64_t rev = read->record.mod_revision();
    if (rev < ack.revision) {  // includes a lost acknowledged delete
      problems.push_back(absl::StrCat(name, ": at revision ", rev, ", older than the acknowledged ",
                                      ack.content == "deleted" ? "delete at " : "write at ",
                                      ack.revision));
    }
    if (rev == ack.revision && ack.content != "changed" &&
        ack.content != absl::StrCat(Fnv(read->record.bytes()))) {
      problems.push_back(absl::StrCat(name, ": content at revision ", rev,
                                      " differs from what was acknowledged"));
    }
  }
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
      (std::filesystem::temp_directory_path() / absl::StrCat("claimstore-crash-", getpid())).string();
  std::filesystem::remove_all(dir);
  const std::string db = dir + "/db";
  std::mt19937_64 rng(seed);
  std::map<std::string, Ack> last_ack;  // across cycles: the database lives on
  uint64_t max_ack = 0, acks = 0;
  int passed = 0, failed = 0;
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
    std::vector<std::string> stale;
    for (absl::string_view line : absl::StrSplit(buffer, '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      uint64_t revision = 0;
      if (f.size() != 3 || !absl::SimpleAtoi(f[1], &revision)) continue;  // torn by the kill
      if (f[2] == "stale") {
        stale.push_back(absl::StrCat(f[0], ": the write acknowledged at ", revision,
                                     " was not visible to the next read"));
        continue;
      }
      Ack& ack = last_ack[f[0]];
      if (revision > ack.revision) ack = Ack{revision, f[2]};
      max_ack = std::max(max_ack, revision);
      ++acks;
    }
    std::vector<std::string> problems = Check(db, last_ack, max_ack);
    problems.insert(problems.end(), stale.begin(), stale.end());
    if (problems.empty()) {
      ++passed;
    } else {
      ++failed;
      std::fprintf(stderr, "cycle %d:\n  %s\n", cycle, absl::StrJoin(problems, "\n  ").c_str());
    }
  }
  std::filesystem::remove_all(dir);
  std::printf("kill -9 cycles: %d, acknowledged writes checked: %llu, store revision reached: %llu\n",
              cycles, static_cast<unsigned long long>(acks), static_cast<unsigned long long>(max_ack));
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
