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
// rocksdb|store DIR OUT`), so that nothing of one open (heap, caches)
// serves the next; the page cache is warm (one untimed open of each kind
// first). The time is the child's own, from before the open until it was
// ready (the store: until the three answers); counters: its parts (open_s:
// Store::Open, allocated_s: the first AllocatedDevices; opened_anon_MB and
// ready_anon_MB: the heap when Store::Open returned and when ready), the
// whole process
// from fork to exit (process_s: the close and the freeing of the heap
// too), and the child's peak resident memory (peak_anon_MB: RssAnon, the
// heap, sampled every 5 ms).
//
// The database is made once by the claimstore tool (`generate`, then
// `restore`), then compacted, under $TMPDIR/claimstore-open-bench/ (or
// /tmp) and kept for later runs (about 500 MB at 1M claims). Sizes: CLAIMSTORE_BENCH_SIZES
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
#include "child_process.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "claimstore/store.h"
#include "db/database.h"
#include "rocksdb/options.h"

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
  const std::string command = absl::StrCat(CLAIMSTORE_CLI, " generate --claims ", n, " -o jsonl | ",
                                           CLAIMSTORE_CLI, " restore - --db ", db, " >/dev/null");
  if (std::system(command.c_str()) != 0) return "";
  // A restored database's table files keep their sequence numbers, which
  // RocksDB's compactions of bottommost files then zero, a file at a time,
  // over the first opens (each rewriting 64 MB beside the open, on one of
  // two cores): done here once, as a store that has run a while has it.
  {
    absl::StatusOr<std::unique_ptr<internal::Database>> opened =
        internal::Database::Open(db, Options{}, nullptr);
    if (!opened.ok()) return "";
    rocksdb::CompactRangeOptions compact;
    compact.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    for (rocksdb::ColumnFamilyHandle* family : (*opened)->families()) {
      if (!(*opened)->db()->CompactRange(compact, family, nullptr, nullptr).ok()) return "";
    }
  }
  std::ofstream(db + "/made");
  return db;
}

// This process's heap (RssAnon) in MB.
double AnonMb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("RssAnon:", 0) == 0) return std::atof(line.c_str() + 8) / 1024;
  }
  return 0;
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The child: one open of `dir` as `what` says; 0 when it worked. Writes
// to `out` the seconds from before the open until it was ready (RocksDB:
// open; store: the first answers), then the open's and the allocated
// state's parts of them.
int Child(const std::string& what, const std::string& dir, const std::string& out) {
  const auto t0 = std::chrono::steady_clock::now();
  if (what == "rocksdb") {
    absl::StatusOr<std::unique_ptr<internal::Database>> db =
        internal::Database::Open(dir, Options{}, nullptr);
    if (!db.ok()) {
      fprintf(stderr, "open_bench: %s\n", db.status().ToString().c_str());
      return 1;
    }
    const double ready = Since(t0);
    std::ofstream(out) << ready << " " << ready << " 0 " << AnonMb() << " " << AnonMb() << "\n";
    return 0;
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir, Options{});
  if (!store.ok()) {
    fprintf(stderr, "open_bench: %s\n", store.status().ToString().c_str());
    return 1;
  }
  const double opened = Since(t0);
  const double opened_mb = AnonMb();
  absl::StatusOr<AllocatedState> allocated = (*store)->AllocatedDevices();
  const double built = Since(t0) - opened;
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
    std::ofstream(out) << Since(t0) << " " << opened << " " << built << " " << opened_mb << " "
                       << AnonMb() << "\n";
    return 0;
  }
  fprintf(stderr, "open_bench: no allocated claim among the first 100 generated\n");
  return 1;
}

// What one run of the child measured.
struct ChildRun {
  bool ok = false;
  double process_s = 0;                             // fork to exit (the close included)
  double ready_s = 0, open_s = 0, allocated_s = 0;  // the child's own (Child)
  double opened_mb = 0, ready_mb = 0;  // its heap once Store::Open returned, once ready
};

// Runs the child; its peak RssAnon in MB into *peak_mb (the larger).
ChildRun RunChild(const std::string& what, const std::string& dir, double* peak_mb) {
  const std::string self = Self();
  const std::string out = absl::StrCat(Dir(), "/child-", what, ".txt");
  fs::remove(out);
  const auto t0 = std::chrono::steady_clock::now();
  bench::Peak peak;
  const bool exited =
      bench::RunSampled({self, "--child", what, dir, out}, std::chrono::milliseconds(5), &peak);
  *peak_mb = std::max(*peak_mb, peak.anon_mb);
  ChildRun run;
  run.process_s = Since(t0);
  std::ifstream in(out);
  run.ok = exited && static_cast<bool>(in >> run.ready_s >> run.open_s >> run.allocated_s >>
                                       run.opened_mb >> run.ready_mb);
  return run;
}

void BM_Open(benchmark::State& state, const std::string& what, size_t n) {
  const std::string db = Database(n);
  double peak_mb = 0, unused = 0;
  if (db.empty() || !RunChild(what, db, &unused).ok) {  // warms the page cache
    state.SkipWithError("cannot make or open the database");
    return;
  }
  double process_s = 0, open_s = 0, allocated_s = 0, opened_mb = 0, ready_mb = 0;
  for (auto _ : state) {
    const ChildRun run = RunChild(what, db, &peak_mb);
    if (!run.ok) {
      state.SkipWithError("the open failed");
      return;
    }
    state.SetIterationTime(run.ready_s);
    process_s += run.process_s;
    open_s += run.open_s;
    allocated_s += run.allocated_s;
    opened_mb = std::max(opened_mb, run.opened_mb);
    ready_mb = std::max(ready_mb, run.ready_mb);
  }
  const double runs = static_cast<double>(state.iterations());
  state.counters["open_s"] = open_s / runs;
  state.counters["allocated_s"] = allocated_s / runs;
  state.counters["opened_anon_MB"] = opened_mb;
  state.counters["ready_anon_MB"] = ready_mb;
  state.counters["process_s"] = process_s / runs;
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
  if (argc == 5 && std::strcmp(argv[1], "--child") == 0) {
    return claimstore::Child(argv[2], argv[3], argv[4]);
  }
  claimstore::Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
