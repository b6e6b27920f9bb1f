// The restore as users run it: `claimstore restore FILE` (a process of its
// own, the binary this build made) against the sqlite3 shell's import of the
// same JSON lines into a keyed table and the two index tables, as
// compare_bench's SQLite backend keeps them. Each iteration starts from an
// empty database (or, for the --replace case, a copy of one holding as many
// other claims); the input is generated once per size and cached.
//
//   CLAIMSTORE_BENCH_SIZES=200000,1000000 build/release/bench/tool_bench
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

namespace {

namespace fs = std::filesystem;

std::string Dir() {
  const char* tmp = getenv("TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/claimstore-bench");
  fs::create_directories(dir);
  return dir;
}

// Runs `command` in a shell; aborts the benchmark when it fails.
bool Run(benchmark::State& state, const std::string& command) {
  const int status = std::system(command.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  state.SkipWithError(("failed: " + command).c_str());
  return false;
}

using claimstore::bench::Peak;

// Runs `command` as `sh -c "exec command"` (so the sampled process is the
// command itself), its memory sampled every 10 ms; aborts the benchmark
// when it fails.
bool RunMeasured(benchmark::State& state, const std::string& command, Peak* peak) {
  if (claimstore::bench::RunSampled({"/bin/sh", "-c", "exec " + command},
                                    std::chrono::milliseconds(10), peak)) {
    return true;
  }
  state.SkipWithError(("failed: " + command).c_str());
  return false;
}

void ReportPeak(benchmark::State& state, const Peak& peak) {
  state.counters["peak_anon_MB"] = peak.anon_mb;
  state.counters["peak_file_MB"] = peak.file_mb;
}

// N generated claims as JSON lines (seed 1, or `seed`), made once.
std::string Input(size_t n, int seed = 1) {
  const std::string path = absl::StrCat(Dir(), "/tool-", n, "-", seed, ".jsonl");
  if (!fs::exists(path)) {
    const std::string tmp = path + ".tmp";
    const std::string command = absl::StrCat(CLAIMSTORE_CLI, " generate --claims ", n, " --seed ",
                                             seed, " -o jsonl >", tmp);
    if (std::system(command.c_str()) == 0) fs::rename(tmp, path);
  }
  return path;
}

// The sqlite3 shell's import: each line into a staging table, then the
// claims keyed by namespace/name and one row per reservation and per
// allocated device, with their indexes.
std::string SqliteScript(const std::string& input) {
  return absl::StrCat(
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;\n"
      "CREATE TABLE raw(j TEXT);\n"
      ".mode ascii\n.separator \"\\037\" \"\\n\"\n"
      ".import ",
      input,
      " raw\n"
      "BEGIN;\n"
      "CREATE TABLE claims(ns TEXT, name TEXT, status TEXT, PRIMARY KEY(ns, name)) WITHOUT ROWID;\n"
      "CREATE TABLE consumers(uid TEXT, ns TEXT, name TEXT);\n"
      "CREATE TABLE devices(driver TEXT, pool TEXT, device TEXT, share TEXT, ns TEXT, name TEXT);\n"
      "INSERT OR REPLACE INTO claims SELECT json_extract(j,'$.metadata.namespace'),"
      " json_extract(j,'$.metadata.name'), json_extract(j,'$.status') FROM raw;\n"
      "INSERT INTO consumers SELECT json_extract(r.value,'$.uid'), "
      "json_extract(j,'$.metadata.namespace'),"
      " json_extract(j,'$.metadata.name') FROM raw, json_each(j,'$.status.reservedFor') r;\n"
      "INSERT INTO devices SELECT json_extract(d.value,'$.driver'), json_extract(d.value,'$.pool'),"
      " json_extract(d.value,'$.device'), json_extract(d.value,'$.shareID'),"
      " json_extract(j,'$.metadata.namespace'), json_extract(j,'$.metadata.name')"
      " FROM raw, json_each(j,'$.status.allocation.devices.results') d;\n"
      "CREATE INDEX consumers_by_uid ON consumers(uid);\n"
      "CREATE INDEX devices_by_device ON devices(driver, pool, device);\n"
      "DROP TABLE raw;\nCOMMIT;\n");
}

void Report(benchmark::State& state, size_t n) {
  state.counters["claims_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}

// claimstore restore of `input` (n claims) into an empty database.
void MeasureRestore(benchmark::State& state, size_t n, const std::string& input) {
  const std::string db = Dir() + "/tool-claimstore.db";
  Peak peak;
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove_all(db);
    state.ResumeTiming();
    if (!RunMeasured(state,
                     absl::StrCat(CLAIMSTORE_CLI, " --db ", db, " restore ", input, " >/dev/null"),
                     &peak)) {
      return;
    }
  }
  fs::remove_all(db);
  Report(state, n);
  ReportPeak(state, peak);
}

void BM_ToolRestore_Claimstore(benchmark::State& state, size_t n) {
  MeasureRestore(state, n, Input(n));
}

// --replace over a database holding n other claims (the same keys, another
// seed): every stored claim replaced.
void BM_ToolRestoreReplace_Claimstore(benchmark::State& state, size_t n) {
  const std::string input = Input(n);
  const std::string base = Dir() + "/tool-replace-base.db";
  const std::string db = Dir() + "/tool-replace.db";
  Peak peak;
  fs::remove_all(base);
  if (!Run(state,
           absl::StrCat(CLAIMSTORE_CLI, " --db ", base, " restore ", Input(n, 2), " >/dev/null"))) {
    return;
  }
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove_all(db);
    fs::copy(base, db, fs::copy_options::recursive);
    state.ResumeTiming();
    if (!RunMeasured(
            state,
            absl::StrCat(CLAIMSTORE_CLI, " --db ", db, " restore --replace ", input, " >/dev/null"),
            &peak)) {
      return;
    }
  }
  fs::remove_all(db);
  fs::remove_all(base);
  Report(state, n);
  ReportPeak(state, peak);
}

// The same N claims as the tool dumps them, a List in `format` (json: -o
// json, kubectl's indented JSON; yaml: -o yaml, kubectl's YAML), made once.
std::string DumpInput(size_t n, const std::string& format) {
  const std::string path = absl::StrCat(Dir(), "/tool-", n, "-dump.", format);
  if (!fs::exists(path)) {
    const std::string db = Dir() + "/tool-dump-source.db";
    fs::remove_all(db);
    const std::string tmp = path + ".tmp";
    if (std::system(absl::StrCat(CLAIMSTORE_CLI, " --db ", db, " restore ", Input(n), " >/dev/null")
                        .c_str()) == 0 &&
        std::system(
            absl::StrCat(CLAIMSTORE_CLI, " --db ", db, " dump -o ", format, " >", tmp).c_str()) ==
            0) {
      fs::rename(tmp, path);
    }
    fs::remove_all(db);
  }
  return path;
}

// claimstore restore of a dump, JSON or YAML (issue 41: YAML at least a
// quarter of JSON's rate).
void BM_ToolRestoreDump(benchmark::State& state, size_t n, const std::string& format) {
  const std::string input = DumpInput(n, format);
  MeasureRestore(state, n, input);
  state.counters["input_MB"] = static_cast<double>(fs::file_size(input)) / (1 << 20);
}

void BM_ToolRestore_Sqlite3(benchmark::State& state, size_t n) {
  const std::string input = Input(n);
  const std::string db = Dir() + "/tool-sqlite3.db";
  const std::string script = Dir() + "/tool-sqlite3.sql";
  {
    FILE* f = std::fopen(script.c_str(), "w");
    if (f == nullptr) return state.SkipWithError("cannot write the script");
    std::fputs(SqliteScript(input).c_str(), f);
    std::fclose(f);
  }
  Peak peak;
  for (auto _ : state) {
    state.PauseTiming();
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db + suffix);
    state.ResumeTiming();
    if (!RunMeasured(state, absl::StrCat("sqlite3 ", db, " <", script, " >/dev/null"), &peak))
      return;
  }
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db + suffix);
  Report(state, n);
  ReportPeak(state, peak);
}

std::vector<int64_t> Sizes() {
  std::vector<int64_t> sizes;
  const char* env = getenv("CLAIMSTORE_BENCH_SIZES");
  for (absl::string_view s : absl::StrSplit(env != nullptr ? env : "200000", ',')) {
    int64_t n = 0;
    if (absl::SimpleAtoi(s, &n)) sizes.push_back(n);
  }
  return sizes;
}

// Named BM_<Operation>/<backend>/<size>, so that ratio_table pairs them.
void Register() {
  for (int64_t size : Sizes()) {
    const size_t n = static_cast<size_t>(size);
    benchmark::RegisterBenchmark(absl::StrCat("BM_ToolRestore/claimstore/", n).c_str(),
                                 BM_ToolRestore_Claimstore, n)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(absl::StrCat("BM_ToolRestore/sqlite3/", n).c_str(),
                                 BM_ToolRestore_Sqlite3, n)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(absl::StrCat("BM_ToolRestoreReplace/claimstore/", n).c_str(),
                                 BM_ToolRestoreReplace_Claimstore, n)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    for (const char* format : {"json", "yaml"}) {
      benchmark::RegisterBenchmark(absl::StrCat("BM_ToolRestoreDump/", format, "/", n).c_str(),
                                   BM_ToolRestoreDump, n, std::string(format))
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
