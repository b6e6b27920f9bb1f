// The open a scheduler pays at every restart (issue 42): a database of N
// generated claims, opened for writing in a fresh process with default
// Options and ready for the first allocated-state question.
//
//   BM_Open/rocksdb/claims:N  the database opened by RocksDB alone (the
//                             store's column families and settings,
//                             internal::Database::Open), nothing read: the
//                             floor
//   BM_Open/store/claims:N    Store::Open with default Options, then the
//                             allocated state (AllocatedDevices), the
//                             holders of one device (ClaimsUsingDevice) and
//                             one claim (Get)
//
// Each iteration runs this binary again as a child (`open_bench --child
// rocksdb|store DIR`), timed from fork to its exit, so that nothing of
// one open (heap, caches) serves the next; the page cache is warm (one
// untimed open of each kind first). Counter: the child's peak resident
// memory (RssAnon, the heap, sampled every 5 ms).
//
// The database is made once by the claimstore tool (`generate`, then
// `restore`) under $TMPDIR/claimstore-open-bench/ (or /tmp) and kept for
// later runs (about 1 GB at 1M claims). Sizes: CLAIMSTORE_BENCH_SIZES
// (comma-separated; default 1000000).
//
// Run: build/release/bench/open_bench --benchmark_repetitions=3 (bench/RESULTS.md).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "benchmark/benchmark.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "claimstore/store.h"
#include "db/database.h"

namespace claimstore {
namespace {

namespace fs = std::filesystem;

std::string Self() { return fs::read_symlink("/proc/self/exe").string(); }

std::string Dir() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/claimstore-open-bench");
  fs::create_directories(dir);
  return dir;
}

// The database of `n` generated claims, made once; "" when it cannot be.
std::string Database(size_t n) {
  const std::string db = absl::StrCat(Dir(), "/db-", n);
  if (fs::exists(db + "/made")) return db;
  fs::remove_all(db);
  const std::string command =
      absl::StrCat(CLAIMSTORE_CLI, " generate --claims ", n, " -o jsonl | ", CLAIMSTORE_CLI,
                   " restore - --db ", db, " >/dev/null && touch ", db, "/made");
  return std::system(command.c_str()) == 0 ? db : "";
}

// The child: one open of `dir` as `what` says; 0 when it worked.
int Child(const std::string& what, const std::string& dir) {
  if (what == "rocksdb") {
    absl::StatusOr<std::unique_ptr<internal::Database>> db =
        internal::Database::Open(dir, Options{}, nullptr);
    if (!db.ok()) fprintf(stderr, "open_bench: %s\n", db.status().ToString().c_str());
    return db.ok() ? 0 : 1;
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir, Options{});
  if (!store.ok()) {
    fprintf(stderr, "open_bench: %s\n", store.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<AllocatedState> allocated = (*store)->AllocatedDevices();
  if (!allocated.ok() || allocated->size() == 0) {
    fprintf(stderr, "open_bench: no allocated state\n");
    return 1;
  }
  // The first allocated generated claim, and its first device.
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<ClaimRecord> generated = DecodeClaim(GenerateClaimJson(i));
    if (!generated.ok()) return 1;
    const auto* status = generated->table().status();
    if (status == nullptr || status->allocation() == nullptr ||
        status->allocation()->results() == nullptr ||
        status->allocation()->results()->size() == 0) {
      continue;
    }
    const ClaimKey key{std::string(generated->claim_namespace()), std::string(generated->name())};
    const auto* result = status->allocation()->results()->Get(0);
    absl::StatusOr<ClaimRead> read = (*store)->Get(key);
    absl::StatusOr<DeviceHoldings> held = (*store)->ClaimsUsingDevice(
        {result->driver()->str(), result->pool()->str(), result->device()->str()});
    if (!read.ok() || !held.ok() || held->holdings.empty()) {
      fprintf(stderr, "open_bench: claim %s or its device not found\n", key.ToString().c_str());
      return 1;
    }
    return 0;
  }
  fprintf(stderr, "open_bench: no allocated claim among the first 100 generated\n");
  return 1;
}

// Runs the child; its wall time in seconds, and its peak RssAnon in MB
// into *peak_mb (the larger). Negative when it failed.
double RunChild(const std::string& what, const std::string& dir, double* peak_mb) {
  const std::string self = Self();
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    execl(self.c_str(), self.c_str(), "--child", what.c_str(), dir.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string status_path = absl::StrCat("/proc/", pid, "/status");
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    std::ifstream in(status_path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("RssAnon:");
    if (at != std::string::npos) {
      *peak_mb = std::max(*peak_mb, std::atof(text.c_str() + at + 8) / 1024);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? seconds : -1;
}

void BM_Open(benchmark::State& state, const std::string& what, size_t n) {
  const std::string db = Database(n);
  double peak_mb = 0, unused = 0;
  if (db.empty() || RunChild(what, db, &unused) < 0) {  // warms the page cache
    state.SkipWithError("cannot make or open the database");
    return;
  }
  for (auto _ : state) {
    const double seconds = RunChild(what, db, &peak_mb);
    if (seconds < 0) {
      state.SkipWithError("the open failed");
      return;
    }
    state.SetIterationTime(seconds);
  }
  state.counters["peak_anon_MB"] = peak_mb;
}

void Register() {
  std::vector<size_t> sizes = {1000000};
  if (const char* env = std::getenv("CLAIMSTORE_BENCH_SIZES"); env != nullptr) {
    sizes.clear();
    for (absl::string_view s : absl::StrSplit(env, ',', absl::SkipEmpty())) {
      size_t n = 0;
      if (absl::SimpleAtoi(s, &n)) sizes.push_back(n);
    }
  }
  for (size_t n : sizes) {
    for (const char* what : {"rocksdb", "store"}) {
      benchmark::RegisterBenchmark(absl::StrCat("BM_Open/", what, "/claims:", n).c_str(), BM_Open,
                                   std::string(what), n)
          ->UseManualTime()
          ->Iterations(3)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace claimstore

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) {
    return claimstore::Child(argv[2], argv[3]);
  }
  claimstore::Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
