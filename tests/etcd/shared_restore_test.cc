// Restores through etcd (a bulk load in the shared mode, `claimstore
// --etcd ... restore`): all or nothing at any size for every mirror and
// watcher, refused input changes nothing in etcd, writers racing a restore
// land before its switch or run again after it, and a restoring process
// SIGKILLed at any point leaves the old state or the new one, whole.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "claimstore/bulk_load.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "etcd/etcd_client.h"
#include "etcd/shared_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testutil/etcd_cluster.h"
#include "testutil/shared_store_fixture.h"
#include "testutil/store_test_util.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::Exclusive;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::Key;
using ::claimstore::testing::Of;
using ::claimstore::testing::Pod;
using ::claimstore::testing::SharedStoreTest;
using ::claimstore::testing::StatusIs;
using ::claimstore::testing::TestCluster;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kDriver[] = "gpu.example.com";

// Claim ns/NAME holding DEVICE of pool-a exclusively.
ClaimRecord Holding(const std::string& name, const std::string& device) {
  return ClaimJson(
      "ns", name,
      absl::StrFormat(R"({"allocation":{"devices":{"results":[{"request":"req","driver":"%s",)"
                      R"("pool":"pool-a","device":"%s"}]}}})",
                      kDriver, device));
}

// A thread putting claims w-0, w-1, ... into `store` until stopped; what
// it wrote with the revisions, and the error that stopped it.
class Writer {
 public:
  explicit Writer(Store& store)
      : thread_([this, &store] {
          for (int i = 0; !done_.load(); ++i) {
            const std::string name = absl::StrCat("w-", i);
            absl::StatusOr<WriteResult> w = store.Put(ClaimJson("ns", name));
            if (!w.ok()) {
              error_ = w.status();
              return;
            }
            written_.emplace_back(name, w->revision);
          }
        }) {}
  // Stops it; then written() and error() may be read.
  void Stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  ~Writer() { Stop(); }
  const std::vector<std::pair<std::string, uint64_t>>& written() const { return written_; }
  const absl::Status& error() const { return error_; }

 private:
  std::atomic<bool> done_{false};
  std::vector<std::pair<std::string, uint64_t>> written_;
  absl::Status error_;
  std::thread thread_;  // last: starts once the rest is made
};

class SharedRestoreTest : public SharedStoreTest {
 protected:
  // Every key under the test's prefix with its value, in key order (but
  // PREFIX/sync).
  std::map<std::string, std::string> EtcdKeys() {
    std::map<std::string, std::string> out;
    auto etcd = BareEtcd();
    if (etcd == nullptr) return out;
    etcdserverpb::RangeRequest r;
    r.set_key(prefix_);
    r.set_range_end(internal::PrefixRangeEnd(prefix_));
    absl::StatusOr<etcdserverpb::RangeResponse> got = etcd->Range(r);
    EXPECT_THAT(got.status(), IsOk());
    if (!got.ok()) return out;
    for (const mvccpb::KeyValue& kv : got->kvs()) {
      if (kv.key() == prefix_ + "sync") continue;  // a mirror's catch-up marker (Refresh)
      out[kv.key().substr(prefix_.size())] = kv.value();
    }
    return out;
  }
  // The claims' names a store holds, in key order.
  static std::vector<std::string> Names(Store& store) {
    std::vector<std::string> out;
    absl::StatusOr<ListPage> page = store.List({.limit = 100000});
    EXPECT_THAT(page.status(), IsOk());
    if (!page.ok()) return out;
    for (const ClaimRecord& r : page->records) out.push_back(std::string(r.name()));
    return out;
  }
  static void ExpectVerified(Store& store) {
    ASSERT_THAT(store.Refresh(), IsOk());
    absl::StatusOr<VerifyReport> report = store.Verify(false);
    ASSERT_THAT(report.status(), IsOk());
    EXPECT_THAT(report->problems, IsEmpty());
  }
  // Runs the tool on the test's etcd prefix with a mirror of its own;
  // returns the exit code, or -SIGNAL when a signal ended it.
  int Tool(const std::string& args, const std::string& env = "") {
    const std::string command = absl::StrCat(
        env, " exec ", CLAIMSTORE_CLI, " --db ", dir_.path(), "/tool-mirror-", ++tools_, " --etcd ",
        absl::StrJoin(TestCluster().Endpoints(), ","), " --etcd-prefix ", prefix_, " ", args, " >",
        Out(), " 2>", Err(), " </dev/null");
    const int status = std::system(command.c_str());
    if (WIFSIGNALED(status)) return -WTERMSIG(status);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return -1000;
  }
  std::string Out() const { return dir_.path() + "/out"; }
  std::string Err() const { return dir_.path() + "/err"; }
  // A List of `n` claims load-I holding device load-dev-I (and, from
  // `extra`, more claims) as a file for the tool.
  std::string InputFile(int n, const std::vector<ClaimRecord>& extra = {}) {
    const std::string path = absl::StrCat(dir_.path(), "/input-", ++inputs_, ".json");
    std::ofstream f(path);
    f << R"({"apiVersion":"v1","kind":"List","items":[)";
    for (int i = 0; i < n; ++i) {
      f << (i ? "," : "")
        << EncodeClaim(Holding(absl::StrCat("load-", i), absl::StrCat("load-dev-", i)));
    }
    for (size_t i = 0; i < extra.size(); ++i) f << (n + i ? "," : "") << EncodeClaim(extra[i]);
    f << "]}";
    return path;
  }

  int tools_ = 0, inputs_ = 0;
};

// A restore that replaces everything, in-process: every mirror and a
// fresh one hold the load at once, the device index follows, a watcher is
// told to list again, writes go to the new generation, the old one is gone
// from etcd; a second restore keeps what is stored; a mirror closed
// meanwhile resumes in the new generation.
TEST_F(SharedRestoreTest, ARestoreReplacesTheClaimsAtOnceForEveryMirrorAndWatcher) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  auto c = OpenMirror(2);
  ASSERT_TRUE(a && b && c);
  ASSERT_THAT(a->Put(ClaimJson("ns", "c1")), IsOk());
  ASSERT_THAT(a->Allocate(Key("c1"), Of({Exclusive("gpu-0")})), IsOk());
  ASSERT_THAT(a->Put(ClaimJson("ns", "c2")), IsOk());
  ASSERT_THAT(c->Refresh(), IsOk());
  c.reset();  // closed across the restores, resumed after
  absl::StatusOr<std::unique_ptr<Watcher>> watcher = b->Watch(0);
  ASSERT_THAT(watcher.status(), IsOk());

  std::vector<BulkLoadProgress> phases;
  absl::StatusOr<std::unique_ptr<BulkLoad>> load =
      a->StartBulkLoad({.replace_all = true, .progress = [&](const BulkLoadProgress& p) {
                          if (phases.empty() || std::string(phases.back().phase) != p.phase) {
                            phases.push_back(p);
                          }
                        }});
  ASSERT_THAT(load.status(), IsOk());
  ASSERT_THAT((*load)->Add(Holding("c3", "gpu-0"), 1), IsOk());  // c1's device: c1 goes
  ASSERT_THAT((*load)->Add(ClaimJson("ns", "c2"), 2), IsOk());
  absl::StatusOr<BulkLoadResult> result = (*load)->Commit();
  ASSERT_THAT(result.status(), IsOk());
  EXPECT_EQ(result->claims, 2u);
  EXPECT_EQ(result->replaced, 1u);
  EXPECT_EQ(result->deleted, 1u);
  std::vector<std::string> seen;
  for (const BulkLoadProgress& p : phases) seen.push_back(p.phase);
  EXPECT_THAT(seen, ::testing::IsSupersetOf({"staging", "switching", "switched"}));

  // The restoring mirror shows it when Commit returns; another once caught
  // up; both alike, and whole.
  EXPECT_THAT(Names(*a), ElementsAre("c2", "c3"));
  ASSERT_THAT(b->Refresh(), IsOk());
  EXPECT_EQ(Contents(*a), Contents(*b));
  absl::StatusOr<DeviceHoldings> held = b->ClaimsUsingDevice({kDriver, "pool-a", "gpu-0"});
  ASSERT_THAT(held.status(), IsOk());
  ASSERT_EQ(held->holdings.size(), 1u);
  EXPECT_EQ(held->holdings[0].claim, Key("c3"));
  EXPECT_LT(a->Get(Key("c3"))->record.mod_revision(), result->revision);  // staged before
  ExpectVerified(*a);
  ExpectVerified(*b);
  // The change feed does not hand the replacement over claim by claim: the
  // watcher is told to list again, from the switch's revision.
  absl::Status ended;
  for (int i = 0; i < 10 && ended.ok(); ++i) {
    absl::StatusOr<WatchEvent> e = (*watcher)->Next(absl::Seconds(10));
    if (!e.ok()) ended = e.status();
  }
  EXPECT_THAT(ended,
              StatusIs(absl::StatusCode::kOutOfRange,
                       absl::StrCat("a restore through etcd replaced the claims at revision ",
                                    result->revision)));
  EXPECT_EQ(CompactRevision(ended), std::optional<uint64_t>(result->revision));
  // A watch from after the switch sees the new generation's changes.
  absl::StatusOr<std::unique_ptr<Watcher>> after = b->Watch(result->revision + 1);
  ASSERT_THAT(after.status(), IsOk());

  // Writes go to the new generation, from any mirror, with the device rule.
  ASSERT_THAT(b->Reserve(Key("c3"), Pod("web-0")), IsOk());
  EXPECT_THAT(a->Allocate(Key("c2"), Of({Exclusive("gpu-0")})),
              StatusIs(absl::StatusCode::kAborted, "ns/c3"));
  absl::StatusOr<WatchEvent> e = (*after)->Next(absl::Seconds(10));
  ASSERT_THAT(e.status(), IsOk());
  EXPECT_EQ(e->key, Key("c3"));
  // The old generation's keys are gone from etcd.
  for (const auto& [key, value] : EtcdKeys()) {
    EXPECT_FALSE(absl::StartsWith(key, "claims/") || absl::StartsWith(key, "devices/")) << key;
  }

  // A restore that keeps the stored claims: c2 and c3 (with its
  // reservation) stay, c4 comes.
  load = a->StartBulkLoad();
  ASSERT_THAT(load.status(), IsOk());
  ASSERT_THAT((*load)->Add(ClaimJson("ns", "c4"), 1), IsOk());
  result = (*load)->Commit();
  ASSERT_THAT(result.status(), IsOk());
  EXPECT_EQ(result->claims, 1u);
  EXPECT_EQ(result->replaced, 0u);
  EXPECT_EQ(result->deleted, 0u);
  EXPECT_THAT(Names(*a), ElementsAre("c2", "c3", "c4"));
  EXPECT_EQ(a->Get(Key("c3"))->record.table().status()->reserved_for()->size(), 1u);
  ExpectVerified(*a);
  // One generation in etcd: the current one.
  int generations = 0;
  for (const auto& [key, value] : EtcdKeys()) generations += absl::StartsWith(key, "generations/");
  EXPECT_EQ(generations, 1);

  // A mirror closed across both restores, and a new one, hold the same.
  c = OpenMirror(2);
  auto fresh = OpenMirror(3);
  ASSERT_TRUE(c && fresh);
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_EQ(Contents(*c), Contents(*a));
  EXPECT_EQ(Contents(*fresh), Contents(*a));
  ExpectVerified(*c);
}

// Refused input changes nothing in etcd: not a key, not a value (a
// restore that keeps the stored claims put its hold on writes back).
// The restoring mirror holds what it staged without listing it from etcd
// again, with etcd's revisions (Verify, and a fresh mirror, agree), both
// with replace_all and keeping the stored claims; when a staging Txn was
// sent twice (its claims' revisions are etcd's to say), it lists.
TEST_F(SharedRestoreTest, TheRestoringMirrorHoldsWhatItStagedWithoutListingIt) {
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  ASSERT_THAT(a->Put(ClaimJson("ns", "kept")), IsOk());
  ASSERT_THAT(a->Put(Holding("replaced", "gpu-0")), IsOk());
  int round = 0;
  for (const bool replace_all : {true, false, true}) {
    SCOPED_TRACE(absl::StrCat("round ", round, ", replace_all ", replace_all));
    const bool resend = round == 2;
    const int relists = internal::RelistsForTesting();
    bool faulted = false;
    absl::StatusOr<std::unique_ptr<BulkLoad>> load = a->StartBulkLoad(
        {.replace_all = replace_all, .progress = [&](const BulkLoadProgress& p) {
           // The next staging Txn lands, its reply is lost, it is sent again.
           if (resend && !faulted && std::string(p.phase) == "staging") {
             faulted = true;
             internal::FailNextTxnForTesting(prefix_ + "generations/", /*sent=*/true, nullptr);
           }
         }});
    ASSERT_THAT(load.status(), IsOk());
    constexpr int kClaims = 9000;  // a progress line at 4,096 claims staged
    for (int i = 0; i < kClaims; ++i) {
      ASSERT_THAT(
          (*load)->Add(
              Holding(absl::StrCat("r", round, "-", i), absl::StrCat("dev-", round, "-", i)), i),
          IsOk());
    }
    ASSERT_THAT((*load)->Commit().status(), IsOk());
    EXPECT_EQ(faulted, resend);
    EXPECT_EQ(internal::RelistsForTesting() - relists, resend ? 1 : 0);
    ExpectVerified(*a);
    // Its in-memory indexes and allocated state hold the load too.
    const std::string last_device = absl::StrCat("dev-", round, "-", kClaims - 1);
    absl::StatusOr<DeviceHoldings> held = a->ClaimsUsingDevice({kDriver, "pool-a", last_device});
    ASSERT_THAT(held.status(), IsOk());
    ASSERT_EQ(held->holdings.size(), 1u);
    EXPECT_EQ(held->holdings[0].claim.name, absl::StrCat("r", round, "-", kClaims - 1));
    EXPECT_NE(a->AllocatedDevices()->Find(kDriver, "pool-a", last_device), nullptr);
    auto fresh = OpenMirror(10 + round);
    ASSERT_TRUE(fresh);
    EXPECT_TRUE(Contents(*fresh) == Contents(*a)) << "a fresh mirror differs";
    EXPECT_EQ(a->Get(Key("kept")).ok(), !replace_all);
    // Writes go on in the new generation.
    ASSERT_THAT(a->Put(ClaimJson("ns", absl::StrCat("after-", round))), IsOk());
    ASSERT_THAT(fresh->Refresh(), IsOk());
    EXPECT_TRUE(Contents(*fresh) == Contents(*a)) << "a fresh mirror differs";
    if (replace_all) {
      ASSERT_THAT(a->Put(ClaimJson("ns", "kept")), IsOk());
    }
    ++round;
  }
}

TEST_F(SharedRestoreTest, ARefusedRestoreChangesNothingInEtcd) {
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  ASSERT_THAT(a->Put(Holding("c1", "gpu-1")), IsOk());
  const std::map<std::string, std::string> before = EtcdKeys();
  const std::vector<std::string> contents = Contents(*a);
  for (bool replace_all : {true, false}) {
    SCOPED_TRACE(replace_all ? "replace_all" : "keep the stored claims");
    absl::StatusOr<std::unique_ptr<BulkLoad>> load = a->StartBulkLoad({.replace_all = replace_all});
    ASSERT_THAT(load.status(), IsOk());
    ASSERT_THAT((*load)->Add(Holding("x", "gpu-5"), 1), IsOk());
    ASSERT_THAT((*load)->Add(Holding("y", "gpu-5"), 2), IsOk());
    // An invalid claim is refused as it is added, naming the field.
    EXPECT_THAT((*load)->Add(Holding("z", "Not_A_Device"), 3),
                StatusIs(absl::StatusCode::kInvalidArgument, "status.allocation.devices.results"));
    EXPECT_THAT((*load)->Commit().status(), StatusIs(absl::StatusCode::kAborted, "gpu-5"));
    EXPECT_EQ(EtcdKeys(), before);
    ASSERT_THAT(a->Refresh(), IsOk());
    EXPECT_EQ(Contents(*a), contents);
  }
  // Keeping the stored claims, c1's device is not free either.
  absl::StatusOr<std::unique_ptr<BulkLoad>> load = a->StartBulkLoad();
  ASSERT_THAT(load.status(), IsOk());
  ASSERT_THAT((*load)->Add(Holding("x", "gpu-1"), 1), IsOk());
  EXPECT_THAT((*load)->Commit().status(), StatusIs(absl::StatusCode::kAborted, "gpu-1"));
  EXPECT_EQ(EtcdKeys(), before);
  // Writes are not held after a refused restore.
  absl::StatusOr<WriteResult> w = a->Put(ClaimJson("ns", "after"));
  EXPECT_THAT(w.status(), IsOk());
  // A dry run through etcd checks and writes nothing.
  load = a->StartBulkLoad({.replace_all = true});
  ASSERT_THAT(load.status(), IsOk());
  ASSERT_THAT((*load)->Add(Holding("x", "gpu-1"), 1), IsOk());
  absl::StatusOr<BulkLoadResult> dry = (*load)->DryRun();
  ASSERT_THAT(dry.status(), IsOk());
  EXPECT_EQ(dry->deleted, 2u);
  EXPECT_THAT(Names(*a), ElementsAre("after", "c1"));
}

// A restore of more claims than Txns take, with a writer on another
// mirror all along and a reader that checks each of its reads holds the
// old state or the new one, never a mix. Writes that returned before the
// switch are replaced (as locally); those after it stay.
TEST_F(SharedRestoreTest, ALargeRestoreIsAtomicForReadersAndWriters) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  ASSERT_THAT(a->Put(Holding("old", "old-dev")), IsOk());
  ASSERT_THAT(b->Refresh(), IsOk());  // the reader's mirror holds it before it reads
  constexpr int kClaims = 3000;       // 6,000 keys: 50 Txns and more
  std::atomic<bool> done{false};
  Writer writer(*b);
  std::atomic<int> mixed{0}, reads{0};
  std::string first_mixed;
  std::thread reader([&] {
    const std::vector<ClaimKey> keys = {Key("old"), Key("load-0"),
                                        Key(absl::StrCat("load-", kClaims / 2)),
                                        Key(absl::StrCat("load-", kClaims - 1))};
    while (!done.load()) {
      absl::StatusOr<ClaimReads> got = b->GetMany(keys);
      if (!got.ok()) continue;
      int present = 0;
      for (const auto& r : got->records) present += r.has_value();
      const bool old_state = got->records[0].has_value() && present == 1;
      const bool new_state = !got->records[0].has_value() && present == 3;
      if (!old_state && !new_state && mixed++ == 0) {
        std::string seen = absl::StrCat("revision ", got->revision, ":");
        for (size_t k = 0; k < keys.size(); ++k) {
          absl::StrAppend(&seen, " ", keys[k].name, got->records[k].has_value() ? "+" : "-");
        }
        first_mixed = seen;
      }
      reads++;
    }
  });
  absl::StatusOr<std::unique_ptr<BulkLoad>> load = a->StartBulkLoad({.replace_all = true});
  ASSERT_THAT(load.status(), IsOk());
  for (int i = 0; i < kClaims; ++i) {
    ASSERT_THAT((*load)->Add(Holding(absl::StrCat("load-", i), absl::StrCat("dev-", i)), i),
                IsOk());
  }
  absl::StatusOr<BulkLoadResult> result = (*load)->Commit();
  absl::SleepFor(absl::Milliseconds(300));  // writes after the switch
  done = true;
  writer.Stop();
  reader.join();
  ASSERT_THAT(result.status(), IsOk());
  EXPECT_EQ(result->claims, static_cast<uint64_t>(kClaims));
  EXPECT_THAT(writer.error(), IsOk());
  EXPECT_EQ(mixed.load(), 0) << "of " << reads.load() << " reads; the first at " << first_mixed;
  EXPECT_GT(reads.load(), 0);
  ASSERT_THAT(b->Refresh(), IsOk());
  int before = 0, after = 0;
  for (const auto& [name, revision] : writer.written()) {
    const bool present = b->Get(Key(name)).ok();
    if (revision < result->revision) {
      EXPECT_FALSE(present) << name << " at " << revision << " (switch " << result->revision << ")";
      before++;
    } else {
      EXPECT_TRUE(present) << name << " at " << revision << " (switch " << result->revision << ")";
      after++;
    }
  }
  EXPECT_GT(before, 0);
  EXPECT_GT(after, 0);
  EXPECT_THAT(b->Get(Key("old")).status(), StatusIs(absl::StatusCode::kNotFound, "old"));
  absl::StatusOr<StoreStats> stats = b->Stats();
  ASSERT_THAT(stats.status(), IsOk());
  EXPECT_EQ(stats->claims, static_cast<uint64_t>(kClaims + after));
  ExpectVerified(*a);
  ExpectVerified(*b);
}

// A restore that keeps the stored claims holds writes while it commits:
// a write that came before stays, one that waited lands after the switch,
// none is lost.
TEST_F(SharedRestoreTest, ARestoreThatKeepsTheClaimsLosesNoWrite) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  Writer writer(*b);
  absl::SleepFor(absl::Milliseconds(200));
  // One write surely sent while the restore holds writes (its staging is
  // done, its switch not yet): it lands after the switch.
  absl::StatusOr<WriteResult> held_write = absl::UnknownError("not run");
  std::thread during;
  absl::StatusOr<std::unique_ptr<BulkLoad>> load =
      a->StartBulkLoad({.progress = [&](const BulkLoadProgress& p) {
        if (std::string(p.phase) != "switching" || during.joinable()) return;
        during = std::thread([&] { held_write = b->Put(ClaimJson("ns", "during-hold")); });
        absl::SleepFor(absl::Milliseconds(300));
      }});
  ASSERT_THAT(load.status(), IsOk());
  for (int i = 0; i < 1000; ++i) {
    ASSERT_THAT((*load)->Add(Holding(absl::StrCat("load-", i), absl::StrCat("dev-", i)), i),
                IsOk());
  }
  absl::StatusOr<BulkLoadResult> result = (*load)->Commit();
  absl::SleepFor(absl::Milliseconds(200));
  writer.Stop();
  ASSERT_TRUE(during.joinable());
  during.join();
  ASSERT_THAT(result.status(), IsOk());
  EXPECT_THAT(writer.error(), IsOk());
  ASSERT_THAT(held_write.status(), IsOk());
  EXPECT_GT(held_write->revision, result->revision);
  ASSERT_THAT(b->Refresh(), IsOk());
  for (const auto& [name, revision] : writer.written()) {
    EXPECT_THAT(b->Get(Key(name)).status(), IsOk()) << name;
  }
  EXPECT_THAT(b->Get(Key("during-hold")).status(), IsOk());
  absl::StatusOr<StoreStats> stats = b->Stats();
  ASSERT_THAT(stats.status(), IsOk());
  EXPECT_EQ(stats->claims, 1000u + writer.written().size() + 1);
  ExpectVerified(*b);
}

// `claimstore --etcd ... restore` SIGKILLed at each point of its commit: a
// fresh mirror shows the old state or the new one, whole, Verify is clean,
// a mirror that was watching holds the same; writes go on (a hold on
// writes ends at its time); the next restore removes what was left.
TEST_F(SharedRestoreTest, ARestoreKilledAtAnyPointLeavesOneStateWhole) {
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  ASSERT_THAT(a->Put(Holding("old", "old-dev")), IsOk());
  const std::string input = InputFile(300);
  int round = 0;
  for (const std::string point : {"held", "staging", "staged half", "switch", "switched"}) {
    SCOPED_TRACE(point);
    ASSERT_THAT(a->Refresh(), IsOk());
    const std::vector<std::string> old = Contents(*a);
    const bool keep = point == std::string("held");  // only a restore that keeps claims holds
    const int code =
        Tool(absl::StrCat("restore --etcd-timeout 1s ", keep ? "" : "--replace ", input),
             absl::StrCat("CLAIMSTORE_KILL_RESTORE_AT_FOR_TESTING='", point, "'"));
    ASSERT_EQ(code, -SIGKILL) << testing::ReadFile(Err());
    auto fresh = OpenMirror(10 + round++);
    ASSERT_TRUE(fresh);
    const std::vector<std::string> now = Contents(*fresh);
    if (point == std::string("switched")) {
      EXPECT_EQ(now.size(), 300u);
      EXPECT_THAT(fresh->Get(Key("old")).status(), StatusIs(absl::StatusCode::kNotFound, "old"));
    } else {
      EXPECT_EQ(now, old);
    }
    ExpectVerified(*fresh);
    ASSERT_THAT(a->Refresh(), IsOk());
    EXPECT_EQ(Contents(*a), now);
    // Writes go on: at once, or once a hold whose restorer died ends.
    absl::StatusOr<WriteResult> w;
    const absl::Time start = absl::Now();
    do {
      w = a->Put(ClaimJson("ns", absl::StrCat("after-", round)));
    } while (absl::IsUnavailable(w.status()) && absl::Now() < start + absl::Seconds(30));
    EXPECT_THAT(w.status(), IsOk());
    if (keep) {
      // Not before the hold's time (6 x the tool's 1s etcd timeout, from
      // before the tool was killed).
      EXPECT_GE(absl::Now() - start, absl::Seconds(2));
    }
    ExpectVerified(*a);
  }
  // The killed tools' copies of their mirrors are left; opening a mirror
  // removes its own.
  auto copies = [&](int tool) {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
      n += absl::StartsWith(e.path().filename().string(),
                            absl::StrCat("tool-mirror-", tool, ".restore-"));
    }
    return n;
  };
  ASSERT_EQ(copies(1), 1);
  {
    absl::StatusOr<std::unique_ptr<Store>> reopened =
        Store::Open(absl::StrCat(dir_.path(), "/tool-mirror-1"), SharedOptions());
    ASSERT_THAT(reopened.status(), IsOk());
  }
  EXPECT_EQ(copies(1), 0);
  EXPECT_EQ(copies(2), 1);
  // The next restore runs whole and leaves one generation in etcd.
  ASSERT_EQ(Tool("restore --replace " + InputFile(10)), 0) << testing::ReadFile(Err());
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_EQ(Names(*a).size(), 10u);
  std::string current;
  for (const auto& [key, value] : EtcdKeys()) {
    if (key == "current") current = value.substr(5, value.rfind(' ') - 5);
  }
  ASSERT_FALSE(current.empty());
  for (const auto& [key, value] : EtcdKeys()) {
    EXPECT_TRUE(key == "current" || key == "generations/" + current ||
                absl::StartsWith(key, "gen/" + current + "/"))
        << "left over: " << key;
  }
  ExpectVerified(*a);
}

// An etcd member killed while a restore stages and switches: the restore
// completes or fails, and either way every mirror holds one state whole.
TEST_F(SharedRestoreTest, AMemberKilledDuringARestoreMixesNothing) {
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  ASSERT_THAT(a->Put(Holding("old", "old-dev")), IsOk());
  testing::EtcdCluster& cluster = TestCluster();
  int round = 0;
  std::vector<std::string> before = Contents(*a);
  for (const char* when : {"staging", "switching"}) {
    SCOPED_TRACE(when);
    const int leader = cluster.Leader();
    ASSERT_GE(leader, 0);
    std::atomic<bool> killed{false};
    absl::StatusOr<std::unique_ptr<BulkLoad>> load =
        a->StartBulkLoad({.replace_all = true, .progress = [&](const BulkLoadProgress& p) {
                            if (std::string(p.phase) == when && !killed.exchange(true))
                              cluster.Kill(leader);
                          }});
    ASSERT_THAT(load.status(), IsOk());
    for (int i = 0; i < 5000; ++i) {
      ASSERT_THAT(
          (*load)->Add(Holding(absl::StrCat(when, "-", i), absl::StrCat(when, "-dev-", i)), i),
          IsOk());
    }
    absl::StatusOr<BulkLoadResult> result = (*load)->Commit();
    EXPECT_TRUE(killed.load());
    ASSERT_THAT(cluster.Restart(leader), IsOk());
    auto fresh = OpenMirror(20 + round++);
    ASSERT_TRUE(fresh);
    if (result.ok()) {
      EXPECT_EQ(Names(*fresh).size(), 5000u);
      EXPECT_THAT(fresh->Get(Key(absl::StrCat(when, "-4999"))).status(), IsOk());
      before = Contents(*fresh);
    } else {
      EXPECT_THAT(result.status().code(),
                  ::testing::AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kAborted))
          << result.status();
      EXPECT_EQ(Contents(*fresh), before) << "a failed restore shows";
    }
    ExpectVerified(*fresh);
    ASSERT_THAT(a->Refresh(), IsOk());
    EXPECT_EQ(Contents(*a), Contents(*fresh));
  }
}

// The switch's Txn and a hold's Txn with unknown outcomes (the reply
// lost after etcd committed it, or the Txn never sent): the restore finds
// out from etcd which, and completes either way, the live generation
// intact.
TEST_F(SharedRestoreTest, UnknownOutcomesOfTheSwitchAndTheHoldAreResolved) {
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  int n = 0;
  for (bool replace_all : {true, false}) {
    for (bool sent : {true, false}) {
      SCOPED_TRACE(absl::StrCat(replace_all ? "the switch" : "the hold", sent ? ", sent" : ""));
      // The first Txn comparing PREFIX/current first: with replace_all the
      // switch, else the hold.
      bool failed = false;
      internal::FailNextTxnForTesting(prefix_ + "current", sent, [&] { failed = true; });
      absl::StatusOr<std::unique_ptr<BulkLoad>> load =
          a->StartBulkLoad({.replace_all = replace_all});
      ASSERT_THAT(load.status(), IsOk());
      const std::string name = absl::StrCat("u-", ++n);
      ASSERT_THAT((*load)->Add(Holding(name, absl::StrCat(name, "-dev")), 1), IsOk());
      absl::StatusOr<BulkLoadResult> result = (*load)->Commit();
      ASSERT_THAT(result.status(), IsOk());
      EXPECT_TRUE(failed);
      EXPECT_THAT(a->Get(Key(name)).status(), IsOk());
      auto fresh = OpenMirror(10 + n);
      ASSERT_TRUE(fresh);
      EXPECT_EQ(Contents(*fresh), Contents(*a));
      ExpectVerified(*fresh);
    }
  }
  EXPECT_EQ(Names(*a).size(), 3u);  // u-2 (the last replace), then u-3 and u-4 kept
}

// Two restores at once from two machines: each ends OK or Aborted, and the
// claims are exactly the load of the one that switched last, whole.
TEST_F(SharedRestoreTest, ConcurrentRestoresLeaveOneLoadWhole) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  ASSERT_THAT(a->Put(Holding("old", "old-dev")), IsOk());
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    absl::StatusOr<BulkLoadResult> results[2];
    auto restore = [&](Store& store, const std::string& tag, absl::StatusOr<BulkLoadResult>* out) {
      absl::StatusOr<std::unique_ptr<BulkLoad>> load = store.StartBulkLoad({.replace_all = true});
      if (!load.ok()) {
        *out = load.status();
        return;
      }
      for (int i = 0; i < 400; ++i) {
        const std::string name = absl::StrCat(tag, "-", round, "-", i);
        if (absl::Status s = (*load)->Add(Holding(name, name), i); !s.ok()) {
          *out = s;
          return;
        }
      }
      *out = (*load)->Commit();
    };
    std::thread ta([&] { restore(*a, "a", &results[0]); });
    std::thread tb([&] { restore(*b, "b", &results[1]); });
    ta.join();
    tb.join();
    int last = -1;
    for (int i = 0; i < 2; ++i) {
      if (results[i].ok()) {
        if (last < 0 || results[i]->revision > results[last]->revision) last = i;
      } else {
        EXPECT_THAT(results[i].status(), StatusIs(absl::StatusCode::kAborted, "nothing was"));
      }
    }
    ASSERT_GE(last, 0) << results[0].status() << " / " << results[1].status();
    auto fresh = OpenMirror(10 + round);
    ASSERT_TRUE(fresh);
    const std::vector<std::string> names = Names(*fresh);
    ASSERT_EQ(names.size(), 400u);
    for (const std::string& name : names) {
      EXPECT_TRUE(absl::StartsWith(name, absl::StrCat(last == 0 ? "a-" : "b-", round, "-")))
          << name;
    }
    ExpectVerified(*fresh);
  }
}

}  // namespace
}  // namespace claimstore
