// Power loss and I/O errors, injected under RocksDB by FaultFileSystem
// (fault_fs.h), with the claim model (claim_model.h) as the reference:
//   - power loss with sync_writes off: the reopened state is the state after
//     some prefix of the history (every claim and index as of one revision);
//   - power loss with sync_writes on: nothing acknowledged is lost, also with
//     concurrent writers sharing fsyncs (group commit);
//   - the n-th write, sync or read failing with EIO or ENOSPC, n swept
//     across a workload: the failing call returns an error, the live store
//     shows nothing of it, and after reopening, Verify is clean and the
//     state is the acknowledged history, with at most the failed call whole;
//   - each kind of file RocksDB writes failing for a stretch (a full disk,
//     a failing one): the process never dies, writes resume once the disk
//     is back, nothing acknowledged is lost.
#include <pthread.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "gtest/gtest.h"
#include "rocksdb/env.h"
#include "store/store_testing.h"
#include "testutil/claim_model.h"
#include "testutil/fault_fs.h"
#include "testutil/test_util.h"

namespace claimstore::testing {
namespace {

using Op = FaultFileSystem::Op;
using Error = FaultFileSystem::Error;

constexpr int kClaims = 12;

std::vector<std::string> Names() {
  std::vector<std::string> names;
  for (int i = 0; i < kClaims; ++i) names.push_back(absl::StrCat("c", i));
  return names;
}

// Small memtables, so that flushes (and their syncs) happen within a short
// workload, and a tiny block cache, so that reads go to the files.
Options SmallOptions(bool sync) {
  return Options{
      .sync_writes = sync, .block_cache_bytes = 64 << 10, .write_buffer_bytes = 64 << 10};
}

std::vector<std::string> VerifyProblems(Store& store) {
  absl::StatusOr<VerifyReport> report = store.Verify(false);
  if (!report.ok()) return {absl::StrCat("verify: ", report.status().ToString())};
  return report->problems;
}

class FaultTest : public ::testing::Test {
 protected:
  FaultTest() : fs_(std::make_shared<FaultFileSystem>()), env_(rocksdb::NewCompositeEnv(fs_)) {}

  absl::StatusOr<std::unique_ptr<Store>> OpenFaulty(const Options& options) {
    return internal::OpenStoreWithEnv(db_path(), options, env_.get());
  }
  std::string db_path() const { return dir_.path() + "/db"; }

  // Cuts the power under `store`, closes it and leaves only what was synced.
  void PowerLoss(std::unique_ptr<Store>* store) {
    fs_->PowerCut();
    store->reset();
    ASSERT_TRUE(fs_->DropUnsyncedData().ok());
  }

  // The I/O-error sweep over a bulk load (below).
  void SweepBulkLoad(const std::vector<ClaimRecord>& stored, const std::vector<ClaimRecord>& loaded,
                     bool replace_all = false);

  ScopedTempDir dir_;
  std::shared_ptr<FaultFileSystem> fs_;
  std::unique_ptr<rocksdb::Env> env_;
};

// --- Power loss ------------------------------------------------------------

// Runs trials of random calls, each ended by a power loss, and checks the
// reopened state against the model's state at the revision that survived.
// Counts the trials that lost acknowledged calls and those that kept some
// but not all of them.
void PowerLossTrials(const std::function<absl::StatusOr<std::unique_ptr<Store>>()>& open,
                     const std::function<void(std::unique_ptr<Store>*)>& power_loss, bool sync,
                     int trials, int* lost, int* partly_kept) {
  std::mt19937_64 rng(sync ? 11 : 12);
  ClaimModel model;
  std::map<uint64_t, ClaimModel> at = {{0, model}};  // the model after each revision
  for (int trial = 0; trial < trials; ++trial) {
    absl::StatusOr<std::unique_ptr<Store>> store = open();
    ASSERT_TRUE(store.ok()) << "trial " << trial << ": " << store.status();
    const uint64_t start = model.revision();
    const int calls = 20 + static_cast<int>(rng() % 200);
    for (int i = 0; i < calls; ++i) {
      const ModelOp op = RandomOp(rng, kClaims, 6, 4);
      const ModelOutcome want = model.Apply(op);
      const ModelOutcome got = RunOnStore(**store, op);
      ASSERT_EQ(got, want) << op.ToString();
      if (got.changed) at[model.revision()] = model;
      if (rng() % 64 == 0) {
        ASSERT_TRUE((*store)->Compact().ok());  // flushes: a durable point
      }
    }
    const uint64_t acknowledged = model.revision();
    power_loss(&*store);
    store = open();
    ASSERT_TRUE(store.ok()) << "trial " << trial
                            << ": reopening after power loss: " << store.status();
    absl::StatusOr<ClaimReads> now = (*store)->GetMany({});
    ASSERT_TRUE(now.ok()) << now.status();
    const uint64_t revision = now->revision;
    ASSERT_GE(revision, start) << "trial " << trial << ": lost what was durable before it";
    ASSERT_LE(revision, acknowledged) << "trial " << trial;
    if (sync) {
      ASSERT_EQ(revision, acknowledged) << "trial " << trial << ": a synced write was lost";
    }
    model = at.at(revision);
    at.erase(at.upper_bound(revision), at.end());
    const std::vector<std::string> diff = model.Diff(**store, Names());
    ASSERT_TRUE(diff.empty()) << "trial " << trial << ", revision " << revision << ":\n"
                              << absl::StrJoin(diff, "\n");
    const std::vector<std::string> problems = VerifyProblems(**store);
    ASSERT_TRUE(problems.empty()) << absl::StrJoin(problems, "\n");
    *lost += revision < acknowledged ? 1 : 0;
    *partly_kept += revision > start && revision < acknowledged ? 1 : 0;
  }
}

TEST_F(FaultTest, PowerLossWithoutSyncLeavesAPrefixOfTheHistory) {
  int lost = 0, partly_kept = 0;
  PowerLossTrials([&] { return OpenFaulty(SmallOptions(false)); },
                  [&](std::unique_ptr<Store>* s) { PowerLoss(s); }, /*sync=*/false, 40, &lost,
                  &partly_kept);
  ASSERT_FALSE(HasFatalFailure());
  // The power losses really lost unsynced writes, and some trials kept a
  // part of theirs (flushed before the loss): prefixes of every length.
  EXPECT_GT(lost, 10);
  EXPECT_GT(partly_kept, 3);
  std::printf("40 power losses without sync: %d lost writes, %d kept a part\n", lost, partly_kept);
}

TEST_F(FaultTest, PowerLossWithSyncLosesNoAcknowledgedWrite) {
  int lost = 0, partly_kept = 0;
  PowerLossTrials([&] { return OpenFaulty(SmallOptions(true)); },
                  [&](std::unique_ptr<Store>* s) { PowerLoss(s); }, /*sync=*/true, 25, &lost,
                  &partly_kept);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(lost, 0);
}

TEST_F(FaultTest, TheFileSystemReallyDropsUnsyncedData) {
  // Without sync the same calls are lost: the power-loss emulation is not a
  // no-op (the test above would pass vacuously if it were).
  absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(false));
  ASSERT_TRUE(store.ok()) << store.status();
  ClaimModel model;
  RunOnStore(**store, {ModelOp::Kind::kPut, "c0", "uid-1"});
  PowerLoss(&*store);
  store = OpenFaulty(SmallOptions(false));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(model.Diff(**store, Names()).empty());  // back to empty
}

TEST_F(FaultTest, PowerLossUnderConcurrentSyncedWritersKeepsEveryAcknowledgedWrite) {
  // Three writers on their own claims share fsyncs; the power goes while
  // they write. Every acknowledged write must survive: each claim is at
  // least as new as its last acknowledged write, and exactly that write's
  // content when it is at that revision.
  // Memtables large enough that no automatic flush runs in a round: an
  // automatic atomic flush failing at the power cut makes Debian's RocksDB
  // 7.8 leak a column family reference and abort at close (asserting
  // last_ref in ~ColumnFamilySet, about 1 run in 40-160; fixed upstream in
  // facebook/rocksdb#12176, "Fix leak or crash on failure in automatic
  // atomic flush"). What this test is for, acknowledged group-committed
  // writes surviving, is in the WAL; a power cut during flushes is the
  // other power-loss tests' (one writer, small memtables).
  Options options = SmallOptions(true);
  options.write_buffer_bytes = 16 << 20;
  for (int round = 0; round < 8; ++round) {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(options);
    ASSERT_TRUE(store.ok()) << store.status();
    struct Ack {
      uint64_t revision = 0;
      std::optional<ModelClaim> content;  // nullopt: deleted
    };
    std::vector<std::map<std::string, Ack>> acks(3);
    std::atomic<bool> stop{false};
    std::atomic<int> acknowledged{0};
    std::vector<std::thread> writers;
    for (int t = 0; t < 3; ++t) {
      writers.emplace_back([&, t] {
        std::mt19937_64 rng(round * 10 + t);
        ClaimModel mine;  // this thread's claims, revisions aside
        while (!stop.load()) {
          ModelOp op = RandomOp(rng, 4, 6, 3);
          // Claims and devices of this round and thread alone.
          op.claim = absl::StrCat("r", round, "t", t, op.claim);
          if (op.kind == ModelOp::Kind::kAllocate) op.arg = absl::StrCat(op.claim, op.arg);
          const ModelOutcome got = RunOnStore(**store, op);
          if (got.code != absl::StatusCode::kOk) {
            // Expected refusals, or the power is gone.
            if (fs_->PoweredOff()) continue;
          }
          ClaimModel next = mine;
          next.Apply(op);
          if (!got.changed) continue;
          mine = next;
          const auto it = mine.claims().find(op.claim);
          acks[t][op.claim] =
              Ack{got.revision,
                  it == mine.claims().end() ? std::nullopt : std::optional<ModelClaim>(it->second)};
          ++acknowledged;
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + round * 10));
    // On a loaded machine the first synced writes can take longer than the
    // sleep: the power goes once there is something acknowledged to keep.
    for (int waited = 0; acknowledged.load() < 3 && waited < 30000; ++waited) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    fs_->PowerCut();
    stop = true;
    for (std::thread& w : writers) w.join();
    store->reset();
    ASSERT_TRUE(fs_->DropUnsyncedData().ok());
    store = OpenFaulty(options);
    ASSERT_TRUE(store.ok()) << store.status();
    int checked = 0;
    for (int t = 0; t < 3; ++t) {
      for (const auto& [name, ack] : acks[t]) {
        absl::StatusOr<ClaimRead> read = (*store)->Get({"ns", name});
        ++checked;
        if (!read.ok()) {
          ASSERT_TRUE(absl::IsNotFound(read.status())) << read.status();
          // Gone: the acknowledged write deleted it, or a later one did.
          const absl::StatusOr<ClaimReads> now = (*store)->GetMany({});
          ASSERT_TRUE(!ack.content.has_value() || now->revision > ack.revision)
              << name << " acknowledged at " << ack.revision << " is gone";
          continue;
        }
        const ModelClaim stored = ToModelClaim(read->record);
        ASSERT_GE(stored.mod_revision, ack.revision) << name << " lost an acknowledged write";
        if (stored.mod_revision == ack.revision) {
          ASSERT_TRUE(ack.content.has_value());
          // The thread's model does not know the store's revisions.
          ModelClaim want = *ack.content;
          want.create_revision = stored.create_revision;
          want.mod_revision = stored.mod_revision;
          EXPECT_EQ(stored.ToString(), want.ToString()) << name;
        }
      }
    }
    EXPECT_GT(checked, 0);
    const std::vector<std::string> problems = VerifyProblems(**store);
    ASSERT_TRUE(problems.empty()) << absl::StrJoin(problems, "\n");
  }
}

// --- I/O errors ------------------------------------------------------------

TEST_F(FaultTest, AFailedCommitStopsWritesUntilReopenedAndReadsGoOn) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(true));
  ASSERT_TRUE(store.ok()) << store.status();
  ClaimModel model;
  const ModelOp put0{ModelOp::Kind::kPut, "c0", "uid-0"};
  ASSERT_EQ(RunOnStore(**store, put0), model.Apply(put0));
  // The write-ahead log's next sync fails (a background flush's or
  // compaction's sync could otherwise take the one injected error).
  fs_->FailNth(Op::kSync, 1, Error::kEIO, ".log");
  const ModelOutcome failed = RunOnStore(**store, {ModelOp::Kind::kPut, "c1", "uid-1"});
  EXPECT_EQ(failed.code, absl::StatusCode::kUnavailable) << failed.ToString();
  EXPECT_TRUE(fs_->Fired());
  // Later writes are refused without touching the disk; reads still work.
  const absl::StatusOr<WriteResult> later = (*store)->Delete({"ns", "c0"});
  EXPECT_TRUE(absl::IsUnavailable(later.status())) << later.status();
  EXPECT_NE(later.status().message().find("reopen"), std::string::npos) << later.status();
  EXPECT_TRUE((*store)->Get({"ns", "c0"}).ok());
  store->reset();
  store = OpenFaulty(SmallOptions(true));
  ASSERT_TRUE(store.ok()) << store.status();
  // The failed write was synced to the log's file but not acknowledged: it
  // may be there or not, whole; then writing goes on.
  absl::StatusOr<ClaimRead> c1 = (*store)->Get({"ns", "c1"});
  if (c1.ok()) model.Apply({ModelOp::Kind::kPut, "c1", "uid-1"});
  const ModelOp delete0{ModelOp::Kind::kDelete, "c0", ""};
  EXPECT_EQ(RunOnStore(**store, delete0), model.Apply(delete0));
  EXPECT_TRUE(model.Diff(**store, Names()).empty());
}

struct FaultRun {
  bool open_failed = false;
  int failed_calls = 0;
  bool committed_anyway = false;  // a failed call was whole after reopening
};

class IoErrorTest : public FaultTest {
 protected:
  // The calls of the workload (fixed), with a Compact every 16 calls.
  static std::vector<ModelOp> Workload() {
    std::mt19937_64 rng(5);
    std::vector<ModelOp> ops;
    for (int i = 0; i < 64; ++i) ops.push_back(RandomOp(rng, kClaims, 6, 4));
    return ops;
  }

  // A database with some claims, made without faults; each run starts from
  // a copy of it.
  void SetUp() override {
    template_ = dir_.path() + "/template";
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(template_, SmallOptions(true));
    ASSERT_TRUE(store.ok()) << store.status();
    std::mt19937_64 rng(4);
    for (int i = 0; i < 80; ++i) {
      const ModelOp op = RandomOp(rng, kClaims, 6, 4);
      ASSERT_EQ(RunOnStore(**store, op), base_.Apply(op)) << op.ToString();
    }
    ASSERT_TRUE((*store)->Compact().ok());
  }

  // Runs the workload with the n-th `op` failing, then checks.
  FaultRun Run(Op op, uint64_t n, Error error) {
    FaultRun run;
    std::filesystem::remove_all(db_path());
    std::filesystem::copy(template_, db_path(), std::filesystem::copy_options::recursive);
    fs_->FailNth(op, n, error);
    const std::string what = absl::StrCat(op == Op::kWrite  ? "write"
                                          : op == Op::kSync ? "sync"
                                                            : "read",
                                          " #", n, error == Error::kEIO ? " EIO" : " ENOSPC");
    ClaimModel model = base_;
    // What happened, for the reopened state: each call with whether it
    // returned an I/O error.
    std::vector<std::pair<ModelOp, bool>> history;
    {
      absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(true));
      if (!store.ok()) {
        run.open_failed = true;
      } else {
        const std::vector<ModelOp> ops = Workload();
        for (size_t i = 0; i < ops.size(); ++i) {
          ClaimModel next = model;
          const ModelOutcome want = next.Apply(ops[i]);
          const ModelOutcome got = RunOnStore(**store, ops[i]);
          if (got == want) {
            model = std::move(next);
            history.emplace_back(ops[i], false);
          } else {
            // Only an I/O error may make the store differ from the model.
            const bool io_error = got.code == absl::StatusCode::kUnavailable ||
                                  got.code == absl::StatusCode::kResourceExhausted ||
                                  got.code == absl::StatusCode::kInternal;
            EXPECT_TRUE(io_error) << what << ": " << ops[i].ToString() << ": store "
                                  << got.ToString() << ", model " << want.ToString();
            ++run.failed_calls;
            history.emplace_back(ops[i], true);
            // Nothing of the failed call is visible.
            std::vector<std::string> diff = model.Diff(**store, Names());
            if (!diff.empty() && diff[0].rfind("reading:", 0) != 0) {
              ADD_FAILURE() << what << ": after the failed " << ops[i].ToString() << ":\n"
                            << absl::StrJoin(diff, "\n");
            }
          }
          if (i % 16 == 15) (void)(*store)->Compact();  // may fail too
        }
      }
    }
    fs_->ResetCounts();
    run.committed_anyway = CheckReopened(what, history, model);
    return run;
  }

  // Reopens without faults: the database opens, verifies clean, and holds
  // the acknowledged history (`model`), plus at most one failed call of
  // `history` (each call with whether it failed), whole. Returns whether
  // a failed call was found whole.
  bool CheckReopened(const std::string& what, const std::vector<std::pair<ModelOp, bool>>& history,
                     const ClaimModel& model) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db_path(), SmallOptions(true));
    if (!store.ok()) {
      ADD_FAILURE() << what << ": reopening: " << store.status();
      return false;
    }
    const std::vector<std::string> problems = VerifyProblems(**store);
    EXPECT_TRUE(problems.empty()) << what << ":\n" << absl::StrJoin(problems, "\n");
    if (model.Diff(**store, Names()).empty()) return false;
    for (size_t f = 0; f < history.size(); ++f) {
      if (!history[f].second) continue;
      // The failed call f committed after all: replay with it in place.
      ClaimModel replay = base_;
      bool consistent = true;
      for (size_t i = 0; i < history.size() && consistent; ++i) {
        if (history[i].second && i != f) continue;
        const ModelOutcome outcome = replay.Apply(history[i].first);
        if (i == f) consistent = outcome.changed;
      }
      if (consistent && replay.Diff(**store, Names()).empty()) return true;
    }
    ADD_FAILURE() << what << ": the reopened state is not the acknowledged history:\n"
                  << absl::StrJoin(model.Diff(**store, Names()), "\n");
    return false;
  }

  std::string template_;
  ClaimModel base_;
};

TEST_F(IoErrorTest, EveryNthWriteSyncOrReadFailing) {
  // How many operations of each kind the workload does without faults.
  std::map<Op, uint64_t> totals;
  fs_->ResetCounts();
  {
    std::filesystem::copy(template_, db_path(), std::filesystem::copy_options::recursive);
    absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(true));
    ASSERT_TRUE(store.ok()) << store.status();
    for (const ModelOp& op : Workload()) RunOnStore(**store, op);
  }
  for (Op op : {Op::kWrite, Op::kSync, Op::kRead}) totals[op] = fs_->Count(op);
  ASSERT_GT(totals[Op::kWrite], 20u);
  ASSERT_GT(totals[Op::kSync], 20u);
  ASSERT_GT(totals[Op::kRead], 5u);

  int runs = 0, fired = 0, failed_calls = 0, open_failed = 0, committed_anyway = 0;
  for (Op op : {Op::kWrite, Op::kSync, Op::kRead}) {
    for (Error error : {Error::kEIO, Error::kNoSpace}) {
      // n from 1 (during open) to past the end, in 10 steps.
      const uint64_t total = totals[op];
      for (uint64_t n = 1; n <= total + 1; n += std::max<uint64_t>(1, total / 10)) {
        const FaultRun run = Run(op, n, error);
        ++runs;
        fired += fs_->Fired() || run.open_failed || run.failed_calls > 0 ? 1 : 0;
        failed_calls += run.failed_calls;
        open_failed += run.open_failed ? 1 : 0;
        committed_anyway += run.committed_anyway ? 1 : 0;
        if (HasFailure()) return;
      }
    }
  }
  std::printf(
      "%d runs: %d with an injected fault, %d calls failed, %d opens failed, "
      "%d failed calls found whole after reopening\n",
      runs, fired, failed_calls, open_failed, committed_anyway);
  EXPECT_GT(failed_calls, runs / 2);  // the faults reached the callers
  EXPECT_GT(open_failed, 0);          // and the recovery at open
}

// --- Bulk loads ------------------------------------------------------------

constexpr size_t kBulkClaims = 300;

std::vector<ClaimRecord> BulkClaims() {
  std::vector<ClaimRecord> out;
  for (size_t i = 0; i < kBulkClaims; ++i) {
    absl::StatusOr<ClaimRecord> r = DecodeClaim(GenerateClaimJson(i));
    EXPECT_TRUE(r.ok()) << r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

// Commits a bulk load of `claims` into the store.
absl::Status BulkLoadInto(Store& store, const std::vector<ClaimRecord>& claims,
                          bool replace_all = false) {
  absl::StatusOr<std::unique_ptr<BulkLoad>> load =
      store.StartBulkLoad({.replace_all = replace_all});
  if (!load.ok()) return load.status();
  for (const ClaimRecord& c : claims) {
    if (absl::Status s = (*load)->Add(c); !s.ok()) return s;
  }
  return (*load)->Commit().status();
}

// How many claims a store holds, and whether Verify finds it clean.
uint64_t ClaimsIn(Store& store) {
  absl::StatusOr<StoreStats> stats = store.Stats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.ok() ? stats->claims : 0;
}

TEST_F(FaultTest, PowerLossAfterABulkLoadKeepsIt) {
  const std::vector<ClaimRecord> claims = BulkClaims();
  absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(false));
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(BulkLoadInto(**store, claims).ok());
  PowerLoss(&*store);
  store = OpenFaulty(SmallOptions(false));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(ClaimsIn(**store), kBulkClaims);
  EXPECT_TRUE(VerifyProblems(**store).empty());
}

// What a reader sees of a store, compactly: each claim's key, uid and
// revisions, and the store revision.
std::string StateOf(Store& store) {
  std::string out;
  absl::StatusOr<ListPage> all = store.List({});
  EXPECT_TRUE(all.ok()) << all.status();
  if (!all.ok()) return "";
  for (const ClaimRecord& r : all->records) {
    absl::StrAppend(&out, r.claim_namespace(), "/", r.name(), " ", r.uid(), " ",
                    r.create_revision(), " ", r.mod_revision(), "\n");
  }
  absl::StrAppend(&out, "revision ", all->revision, "\n");
  return out;
}

std::vector<ClaimRecord> GeneratedClaims(size_t first, size_t n, uint64_t seed) {
  std::vector<ClaimRecord> out;
  for (size_t i = first; i < first + n; ++i) {
    absl::StatusOr<ClaimRecord> r = DecodeClaim(GenerateClaimJson(i, seed));
    EXPECT_TRUE(r.ok()) << r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

// The n-th write, sync or read of a bulk load failing: the load fails and
// the live store shows nothing of it; after reopening the store is as
// before the load or as after it, verifies clean, and takes writes. The
// store starts with `stored`; the load is `loaded`.
//
// Reads of the table files being ingested are spared: RocksDB 7.8 reads
// their last key without checking that the read worked
// (ExternalSstFileIngestionJob::GetIngestedFileInfo calls key() on an
// invalid iterator after SeekToLast), and Debian's build asserts there. The
// store writes those files just before, with their pages kept cached, so
// such a read does not reach the disk in practice; and if it aborts the
// process, nothing was ingested (the kill -9 tests of bulk_load_test cover
// a process that dies there).
void FaultTest::SweepBulkLoad(const std::vector<ClaimRecord>& stored,
                              const std::vector<ClaimRecord>& loaded, bool replace_all) {
  fs_->SpareReadsOf("/bulk-load.tmp/");
  const auto fresh = [&] {
    std::filesystem::remove_all(db_path());
    absl::StatusOr<std::unique_ptr<Store>> made = Store::Open(db_path(), SmallOptions(true));
    ASSERT_TRUE(made.ok()) << made.status();
    if (!stored.empty()) {
      ASSERT_TRUE(BulkLoadInto(**made, stored).ok());
    }
  };
  std::map<Op, uint64_t> totals;
  std::string before, after;
  {
    fresh();
    absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(true));
    ASSERT_TRUE(store.ok()) << store.status();
    before = StateOf(**store);
    fs_->ResetCounts();
    ASSERT_TRUE(BulkLoadInto(**store, loaded, replace_all).ok());
    for (Op op : {Op::kWrite, Op::kSync, Op::kRead}) totals[op] = fs_->Count(op);
    after = StateOf(**store);
  }
  ASSERT_NE(before, after);
  ASSERT_GT(totals[Op::kWrite], 5u);
  ASSERT_GT(totals[Op::kSync], 3u);
  int runs = 0, failed = 0, kept_after_failure = 0;
#ifdef CLAIMSTORE_TEST_SANITIZED
  // Under the sanitizers (several times slower; the sweep is bound by
  // syncs) each write and read fails with one of the two errors, in turn:
  // every point and both errors are still met, and the release build runs
  // both at each. Every sync still fails with both: a failed sync of the
  // MANIFEST whose bytes were written is the case checked last below.
  constexpr bool kAlternate = true;
#else
  constexpr bool kAlternate = false;
#endif
  for (Op op : {Op::kWrite, Op::kSync, Op::kRead}) {
    for (Error error : {Error::kEIO, Error::kNoSpace}) {
      // Every sync (a few dozen: the MANIFEST's among them), every few
      // writes and reads.
      const uint64_t step = op == Op::kSync ? 1 : std::max<uint64_t>(1, totals[op] / 8);
      for (uint64_t n = 1; n <= totals[op]; n += step) {
        if (kAlternate && op != Op::kSync &&
            ((n - 1) / step + (error == Error::kEIO ? 0 : 1)) % 2 != 0) {
          continue;
        }
        const std::string what = absl::StrCat(op == Op::kWrite  ? "write"
                                              : op == Op::kSync ? "sync"
                                                                : "read",
                                              " #", n, error == Error::kEIO ? " EIO" : " ENOSPC");
        fresh();
        bool load_failed = false;
        {
          absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(true));
          ASSERT_TRUE(store.ok()) << store.status();
          fs_->FailNth(op, n, error);
          const absl::Status s = BulkLoadInto(**store, loaded, replace_all);
          // The checks below must not meet a fault that the load did not
          // reach (how many reads a load makes depends on timing).
          fs_->ResetCounts();
          if (!s.ok()) {
            load_failed = true;
            ++failed;
            EXPECT_EQ(StateOf(**store), before) << what << ": " << s;
            EXPECT_TRUE((*store)->GetMany({{"ns", "x"}}).ok()) << what;
          } else {
            EXPECT_EQ(StateOf(**store), after) << what;
          }
        }
        fs_->ResetCounts();
        ++runs;
        absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db_path(), SmallOptions(true));
        ASSERT_TRUE(store.ok()) << what << ": reopening: " << store.status();
        const std::string held = StateOf(**store);
        EXPECT_TRUE(held == before || held == after) << what << ": neither before nor after";
        if (!load_failed) {
          EXPECT_EQ(held, after) << what;
        }
        kept_after_failure += load_failed && held == after ? 1 : 0;
        const std::vector<std::string> problems = VerifyProblems(**store);
        EXPECT_TRUE(problems.empty()) << what << ":\n" << absl::StrJoin(problems, "\n");
        EXPECT_FALSE(std::filesystem::exists(db_path() + "/bulk-load.tmp")) << what;
        // Writes go on (and a failed load can be retried).
        if (held == before) {
          EXPECT_TRUE(BulkLoadInto(**store, loaded).ok()) << what;
        } else {
          EXPECT_TRUE((*store)
                          ->Delete({std::string(loaded[0].claim_namespace()),
                                    std::string(loaded[0].name())})
                          .ok())
              << what;
        }
        if (HasFailure()) return;
      }
    }
  }
  std::printf(
      "%d bulk loads with an I/O error: %d failed, %d of those found whole after "
      "reopening\n",
      runs, failed, kept_after_failure);
  EXPECT_GT(failed, runs / 2);
  // A failed sync of the MANIFEST record whose bytes were written anyway:
  // the ingestion failed, and the reopened store has all of it, which needs
  // the files RocksDB deleted put back (database_fs.h).
  EXPECT_GT(kept_after_failure, 0);
}

TEST_F(FaultTest, BulkLoadUnderIoErrorsIsAllOrNothing) { SweepBulkLoad({}, BulkClaims()); }

// Over stored claims (issue 13): half of the load replaces stored claims.
TEST_F(FaultTest, BulkLoadOverStoredClaimsUnderIoErrorsIsBeforeOrAfter) {
  SweepBulkLoad(GeneratedClaims(0, kBulkClaims, 1),
                GeneratedClaims(kBulkClaims / 2, kBulkClaims, 2));
}

// replace_all over stored claims (restore --replace): the stored claims the
// load does not name go by range tombstones in the load's own files.
TEST_F(FaultTest, BulkLoadReplacingAllUnderIoErrorsIsBeforeOrAfter) {
  SweepBulkLoad(GeneratedClaims(0, kBulkClaims, 1),
                GeneratedClaims(kBulkClaims / 2, kBulkClaims, 2),
                /*replace_all=*/true);
}

// --- A failing writer ------------------------------------------------------
//
// Each kind of file RocksDB writes fails (every write and sync of it, ENOSPC
// or EIO) for a stretch of the workload, then heals. The process never
// dies; a call that fails says why (ResourceExhausted "no space left on
// device" for ENOSPC, Unavailable with "reopen" where the store cannot go
// on by itself) and shows nothing; after ENOSPC heals, writes resume
// without a reopen unless the store said it needs one; after a reopen
// every acknowledged write is there and Verify is clean.

using Writer = FaultFileSystem::Writer;

struct WriterRun {
  int failed_calls = 0;
  bool resumed = false;        // writes went on after Heal, without a reopen
  bool reopen_needed = false;  // the store said it needs a reopen
};

class FailingWriterTest : public IoErrorTest {
 protected:
  // The workload with `writer` failing with `error` from call `from` until
  // call `to`.
  WriterRun Run(Writer writer, Error error, size_t from, size_t to) {
    WriterRun run;
    std::filesystem::remove_all(db_path());
    std::filesystem::copy(template_, db_path(), std::filesystem::copy_options::recursive);
    const std::string what =
        absl::StrCat(FaultFileSystem::WriterName(writer), " failing with ",
                     error == Error::kEIO ? "EIO" : "ENOSPC", " for calls ", from, "-", to);
    ClaimModel model = base_;
    std::vector<std::pair<ModelOp, bool>> history;
    uint64_t injected = 0;
    {
      absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(true));
      if (!store.ok()) {
        ADD_FAILURE() << what << ": opening: " << store.status();
        return run;
      }
      // Runs `op`; on a failure checks the error and that nothing shows.
      const auto call = [&](const ModelOp& op) {
        ClaimModel next = model;
        const ModelOutcome want = next.Apply(op);
        const ModelOutcome got = RunOnStore(**store, op);
        if (got == want) {
          model = std::move(next);
          history.emplace_back(op, false);
          return true;
        }
        const bool expected =
            got.code == absl::StatusCode::kUnavailable ||
            (error == Error::kNoSpace && got.code == absl::StatusCode::kResourceExhausted);
        EXPECT_TRUE(expected) << what << ": " << op.ToString() << ": store " << got.ToString()
                              << ", model " << want.ToString();
        run.reopen_needed = run.reopen_needed || got.code == absl::StatusCode::kUnavailable;
        ++run.failed_calls;
        history.emplace_back(op, true);
        const std::vector<std::string> diff = model.Diff(**store, Names());
        EXPECT_TRUE(diff.empty()) << what << ": after the failed " << op.ToString() << ":\n"
                                  << absl::StrJoin(diff, "\n");
        return false;
      };
      const std::vector<ModelOp> ops = Workload();
      for (size_t i = 0; i < ops.size(); ++i) {
        if (i == from) fs_->FailWriter(writer, error);
        if (i == to) {
          injected = fs_->Failures();
          fs_->Heal();
        }
        call(ops[i]);
        if (i % 16 == 15) (void)(*store)->Compact();  // flushes, MANIFEST records
      }
      // Space returned: writes resume by themselves within a second or two,
      // unless the store said it needs a reopen.
      if (!run.reopen_needed) {
        for (int attempt = 0; attempt < 250 && !run.resumed; ++attempt) {
          run.resumed = call({ModelOp::Kind::kPut, "c0", absl::StrCat("uid-probe-", attempt)});
          if (!run.resumed) absl::SleepFor(absl::Milliseconds(20));
        }
        EXPECT_TRUE(run.resumed || run.reopen_needed) << what << ": writes did not resume";
      }
      EXPECT_TRUE(model.Diff(**store, Names()).empty()) << what;
    }
    EXPECT_GT(injected, 0u) << what << ": the workload never wrote to the failing files";
    CheckReopened(what, history, model);
    return run;
  }
  // With `env` (wrapping env_) and memtables of 4 KiB: for each of the
  // first `calls` calls of the workload, the log fails from that call on
  // for three calls and `full_for`; writes resume by themselves once it
  // heals, and no failed write comes back after a reopen.
  void FailTheLogFromEachCall(rocksdb::Env* env, size_t calls, absl::Duration full_for);
};

TEST_F(FailingWriterTest, NoWriterFailingAbortsAndAcknowledgedWritesStay) {
  int runs = 0, failed_calls = 0, resumed = 0, reopened = 0;
  for (Writer writer :
       {Writer::kInfoLog, Writer::kWal, Writer::kManifest, Writer::kTable, Writer::kAll}) {
    for (Error error : {Error::kNoSpace, Error::kEIO}) {
      for (const auto& [from, to] : {std::pair<size_t, size_t>{4, 20}, {14, 40}, {30, 50}}) {
        const WriterRun run = Run(writer, error, from, to);
        ++runs;
        failed_calls += run.failed_calls;
        resumed += run.resumed ? 1 : 0;
        reopened += run.reopen_needed ? 1 : 0;
        if (writer == Writer::kInfoLog) {
          // The info log failing fails nothing else.
          EXPECT_EQ(run.failed_calls, 0) << "info log, from " << from;
        } else if (writer != Writer::kManifest || error == Error::kNoSpace) {
          EXPECT_GT(run.failed_calls, 0)
              << FaultFileSystem::WriterName(writer) << ", from " << from;
        }
        if (error == Error::kNoSpace && writer != Writer::kManifest) {
          // A full disk that empties again: writes go on by themselves.
          // (A MANIFEST record that fails can leave RocksDB 7.8 a flush it
          // never finishes: then the store says it needs a reopen.)
          EXPECT_TRUE(run.resumed) << FaultFileSystem::WriterName(writer) << ", from " << from;
        }
      }
    }
  }
  std::printf(
      "%d runs: %d calls failed, writes resumed by themselves in %d, after a reopen in %d\n", runs,
      failed_calls, resumed, reopened);
}

// The OPTIONS file is written at open. RocksDB keeps it for people and
// tools to read, and opens without it when it cannot be written: the open
// goes on, and so do writes.
TEST_F(FailingWriterTest, AnOptionsFileThatCannotBeWrittenFailsNothing) {
  for (Error error : {Error::kNoSpace, Error::kEIO}) {
    std::filesystem::remove_all(db_path());
    std::filesystem::copy(template_, db_path(), std::filesystem::copy_options::recursive);
    fs_->FailWriter(Writer::kOptions, error);
    absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(true));
    EXPECT_GT(fs_->Failures(), 0u);
    ASSERT_THAT(store, IsOk());
    ClaimModel model = base_;
    const ModelOp put{ModelOp::Kind::kPut, "c0", "uid-options"};
    EXPECT_EQ(RunOnStore(**store, put), model.Apply(put));
    fs_->Heal();
    EXPECT_TRUE(model.Diff(**store, Names()).empty());
  }
}

// A whole disk failing while the database is opened: every kind of file's
// first write fails in turn; the open is refused clearly, never aborts, and
// the database opens once the disk is back.
TEST_F(FailingWriterTest, OpeningOnAFullDiskIsAClearError) {
  std::filesystem::copy(template_, db_path(), std::filesystem::copy_options::recursive);
  fs_->FailWriter(Writer::kAll, Error::kNoSpace);
  absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(true));
  fs_->Heal();
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kResourceExhausted, "no space left on device"));
  EXPECT_TRUE(IsNoSpace(store.status())) << store.status();
  store = OpenFaulty(SmallOptions(true));
  ASSERT_THAT(store, IsOk());
  EXPECT_TRUE(base_.Diff(**store, Names()).empty());
}

// An Env whose flush jobs start `delay` after RocksDB schedules them: the
// commit after a memtable switch then meets a failing log before the
// switch's flush job has taken its request.
class SlowFlushStartEnv : public rocksdb::EnvWrapper {
 public:
  SlowFlushStartEnv(rocksdb::Env* target, absl::Duration delay)
      : EnvWrapper(target), delay_(delay) {}
  const char* Name() const override { return "SlowFlushStartEnv"; }
  void Schedule(void (*function)(void*), void* arg, Priority pri, void* tag,
                void (*unschedule)(void*)) override {
    if (pri != Priority::HIGH) return target()->Schedule(function, arg, pri, tag, unschedule);
    target()->Schedule(&Delayed::Run, new Delayed{function, arg, unschedule, delay_}, pri, tag,
                       &Delayed::Unschedule);
  }

 private:
  struct Delayed {
    void (*function)(void*);
    void* arg;
    void (*unschedule)(void*);
    absl::Duration delay;
    static void Run(void* job) {
      std::unique_ptr<Delayed> d(static_cast<Delayed*>(job));
      absl::SleepFor(d->delay);
      d->function(d->arg);
    }
    static void Unschedule(void* job) {
      std::unique_ptr<Delayed> d(static_cast<Delayed*>(job));
      if (d->unschedule != nullptr) d->unschedule(d->arg);
    }
  };
  absl::Duration delay_;
};

// The write-ahead log failing from any call on, with memtables so small
// that they switch every few commits: also on the first record after a
// switch or a flush (Compact), when nothing was written to the memtables
// yet. RocksDB's recovery would have nothing to flush then and keep the
// failed log; the store puts a record in new memtables before a commit,
// and writes resume without a reopen every time.
TEST_F(FailingWriterTest, ALogFailingRightAfterASwitchIsLeftBehindToo) {
  FailTheLogFromEachCall(env_.get(), 40, absl::ZeroDuration());
}

// The same with flush jobs that start 20 ms late. RocksDB 7.8 counts a
// flush as started once a job ran for it; a job that runs while the failed
// log stops the database ends without taking its request, and the store's
// recovery then took that stale request for its own flush and never
// finished (writes did not resume here from call 18 on; a mirror of
// shared_store_test hung so in 1 of 6 runs). The store waits after a
// switch until a job took the flush.
TEST_F(FailingWriterTest, AFlushQueuedWhenTheLogFailsLeavesNoRecoveryWaitingForever) {
  SlowFlushStartEnv slow(env_.get(), absl::Milliseconds(20));
  FailTheLogFromEachCall(&slow, 40, absl::Milliseconds(60));
}

// Whether the calling thread is one of RocksDB's compaction threads (its
// thread pools name theirs "rocksdb:low", "rocksdb:high", ...).
bool InCompactionThread() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return std::string_view(name) == "rocksdb:low";
}

// A compaction that is running when the disk fills, and fails while the
// store resumes. RocksDB 7.8 takes any background error during a resume for
// the resume's own: its flush may then neither install nor roll back its
// memtables, and no later flush can take them (writes stopped for good,
// "reopen it to recover"; full_disk_test met this in 1 of 50 runs on a
// loaded machine). The store resumes only when no compaction runs. Each
// round met the dead end in about 1 of 4 runs before that.
TEST_F(FailingWriterTest, ACompactionFailingWhileTheStoreResumesLeavesNoFlushUnfinished) {
  for (int round = 0; round < 5 && !HasFailure(); ++round) {
    const std::string what = absl::StrCat("round ", round);
    std::filesystem::remove_all(db_path());
    std::filesystem::copy(template_, db_path(), std::filesystem::copy_options::recursive);
    // The first table write of a compaction, once armed, waits for `go`.
    std::atomic<bool> armed{false}, held{false};
    absl::Notification go;
    fs_->SetWriteHook([&](Writer writer) {
      if (writer != Writer::kTable || !armed.load() || !InCompactionThread()) return;
      if (held.exchange(true)) return;
      go.WaitForNotificationWithTimeout(absl::Seconds(30));
    });
    ClaimModel model = base_;
    std::vector<std::pair<ModelOp, bool>> history;
    {
      // Memtables large enough that the commits below switch none: no
      // flush runs (and fails, and waits out its error) when the disk fills.
      Options options = SmallOptions(true);
      options.write_buffer_bytes = 64 << 10;
      absl::StatusOr<std::unique_ptr<Store>> store =
          internal::OpenStoreWithEnv(db_path(), options, env_.get());
      ASSERT_THAT(store, IsOk()) << what;
      int i = 0;
      const auto put = [&] {
        const ModelOp op{ModelOp::Kind::kPut, absl::StrCat("c", i % kClaims),
                         absl::StrCat("uid-", i)};
        ++i;
        ClaimModel next = model;
        const ModelOutcome want = next.Apply(op);
        const ModelOutcome got = RunOnStore(**store, op);
        history.emplace_back(op, got != want);
        if (got == want) model = std::move(next);
        return got.code;
      };
      armed = true;
      while (i < 5000 && !held.load()) ASSERT_EQ(put(), absl::StatusCode::kOk) << what;
      ASSERT_TRUE(held.load()) << what << ": no compaction began in " << i << " calls";
      absl::SleepFor(absl::Milliseconds(200));  // a flush of the calls above ends
      // The disk fills: a commit fails on the log, and the compaction is
      // let go to fail too; its failure frees its output, so the disk has
      // room again while it waits out its error (a second).
      fs_->FailWriter(Writer::kWal, Error::kNoSpace);
      EXPECT_EQ(put(), absl::StatusCode::kResourceExhausted) << what;
      fs_->FailWriter(Writer::kAll, Error::kNoSpace);
      std::thread release([&] {
        absl::SleepFor(absl::Milliseconds(100));
        go.Notify();
        absl::SleepFor(absl::Milliseconds(300));
        fs_->Heal();
      });
      // The next commit comes while the compaction runs: the store must
      // not resume then.
      EXPECT_EQ(put(), absl::StatusCode::kResourceExhausted) << what;
      release.join();
      absl::StatusCode resumed = absl::StatusCode::kResourceExhausted;
      for (int attempt = 0; attempt < 250 && resumed == absl::StatusCode::kResourceExhausted;
           ++attempt) {
        resumed = put();
        if (resumed != absl::StatusCode::kOk) absl::SleepFor(absl::Milliseconds(20));
      }
      EXPECT_EQ(resumed, absl::StatusCode::kOk)
          << what << ": writes did not resume once the disk had room";
      fs_->SetWriteHook(nullptr);
    }
    EXPECT_FALSE(CheckReopened(what, history, model)) << what << ": a failed write came back";
  }
}

void FailingWriterTest::FailTheLogFromEachCall(rocksdb::Env* env, size_t calls,
                                               absl::Duration full_for) {
  const std::vector<ModelOp> ops = Workload();
  for (size_t from = 0; from < calls; ++from) {
    const std::string what = absl::StrCat("the log failing from call ", from);
    std::filesystem::remove_all(db_path());
    std::filesystem::copy(template_, db_path(), std::filesystem::copy_options::recursive);
    ClaimModel model = base_;
    std::vector<std::pair<ModelOp, bool>> history;
    {
      Options tiny = SmallOptions(true);
      tiny.write_buffer_bytes = 1 << 10;
      absl::StatusOr<std::unique_ptr<Store>> store =
          internal::OpenStoreWithEnv(db_path(), tiny, env);
      ASSERT_THAT(store, IsOk()) << what;
      // Runs `op`; true when it did what the model did.
      const auto call = [&](const ModelOp& op) {
        ClaimModel next = model;
        const ModelOutcome want = next.Apply(op);
        const ModelOutcome got = RunOnStore(**store, op);
        history.emplace_back(op, got != want);
        if (got == want) {
          model = std::move(next);
          return true;
        }
        EXPECT_EQ(got.code, absl::StatusCode::kResourceExhausted)
            << what << ": " << op.ToString() << ": store " << got.ToString();
        return false;
      };
      for (size_t i = 0; i < from; ++i) {
        ASSERT_TRUE(call(ops[i])) << what;
        if (i % 8 == 7) {
          ASSERT_THAT((*store)->Compact(), IsOk()) << what;
        }
      }
      fs_->FailWriter(Writer::kWal, Error::kNoSpace);
      for (size_t i = from; i < from + 3; ++i) call(ops[i]);
      EXPECT_FALSE(call({ModelOp::Kind::kPut, "c1", absl::StrCat("uid-full-", from)})) << what;
      EXPECT_GT(fs_->Failures(), 0u) << what;
      absl::SleepFor(full_for);
      fs_->Heal();
      bool resumed = false;
      for (int attempt = 0; attempt < 250 && !resumed && !HasFailure(); ++attempt) {
        resumed = call({ModelOp::Kind::kPut, "c0", absl::StrCat("uid-again-", attempt)});
        if (!resumed) absl::SleepFor(absl::Milliseconds(20));
      }
      ASSERT_TRUE(resumed) << what << ": writes did not resume";
      for (size_t i = from + 3; i < ops.size(); ++i) ASSERT_TRUE(call(ops[i])) << what;
    }
    EXPECT_FALSE(CheckReopened(what, history, model)) << what << ": a failed write came back";
    if (HasFailure()) return;
  }
}

// Bulk loads while their table files (or every file) fail: the load is
// refused and shows nothing, the next one after the disk is back lands.
TEST_F(FailingWriterTest, BulkLoadsWhileTheirTableFilesFailAreRefusedThenLand) {
  const std::vector<ClaimRecord> loaded = GeneratedClaims(0, kBulkClaims, 7);
  for (Writer writer : {Writer::kBulkTable, Writer::kAll}) {
    for (Error error : {Error::kNoSpace, Error::kEIO}) {
      const std::string what = absl::StrCat(FaultFileSystem::WriterName(writer), " failing with ",
                                            error == Error::kEIO ? "EIO" : "ENOSPC");
      std::filesystem::remove_all(db_path());
      std::filesystem::copy(template_, db_path(), std::filesystem::copy_options::recursive);
      std::string before, after;
      {
        absl::StatusOr<std::unique_ptr<Store>> store = OpenFaulty(SmallOptions(true));
        ASSERT_THAT(store, IsOk());
        before = StateOf(**store);
        fs_->FailWriter(writer, error);
        const absl::Status failed = BulkLoadInto(**store, loaded);
        EXPECT_GT(fs_->Failures(), 0u) << what;
        fs_->Heal();
        ASSERT_FALSE(failed.ok()) << what;
        if (error == Error::kNoSpace) {
          EXPECT_TRUE(IsNoSpace(failed)) << what << ": " << failed;
          EXPECT_THAT(failed, StatusIs(absl::StatusCode::kResourceExhausted, db_path())) << what;
        }
        EXPECT_EQ(StateOf(**store), before) << what;
        absl::Status landed;
        for (int attempt = 0; attempt < 250; ++attempt) {
          landed = BulkLoadInto(**store, loaded);
          if (landed.ok() || absl::IsUnavailable(landed)) break;
          absl::SleepFor(absl::Milliseconds(20));
        }
        if (landed.ok()) {
          after = StateOf(**store);
          EXPECT_NE(after, before) << what;
        } else {
          // Only where RocksDB itself was hit (every file failing).
          EXPECT_EQ(writer, Writer::kAll) << what << ": " << landed;
          EXPECT_THAT(landed, StatusIs(absl::StatusCode::kUnavailable, "reopen")) << what;
        }
      }
      absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db_path(), SmallOptions(true));
      ASSERT_THAT(store, IsOk()) << what;
      if (!after.empty()) {
        EXPECT_EQ(StateOf(**store), after) << what;
      } else {
        EXPECT_EQ(StateOf(**store), before) << what;
      }
      EXPECT_TRUE(VerifyProblems(**store).empty()) << what;
    }
  }
}

}  // namespace
}  // namespace claimstore::testing
