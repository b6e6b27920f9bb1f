// The shared mode (Options::etcd_endpoints) against a real 3-member etcd
// cluster on loopback: stores of separate mirrors race through etcd as
// schedulers on separate machines would, and exactly one wins each race.
#include <atomic>
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
#include "claimstore/allocation.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "claimstore/store.h"
#include "etcd/etcd_client.h"
#include "etcd/etcd_layout.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testutil/etcd_cluster.h"
#include "testutil/shared_store_fixture.h"
#include "testutil/store_test_util.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::EtcdCluster;
using ::claimstore::testing::EtcdTls;
using ::claimstore::testing::Exclusive;
using ::claimstore::testing::FollowError;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::Key;
using ::claimstore::testing::MakeTestTls;
using ::claimstore::testing::Of;
using ::claimstore::testing::Pod;
using ::claimstore::testing::RaceThreads;
using ::claimstore::testing::ScopedTempDir;
using ::claimstore::testing::Share;
using ::claimstore::testing::SharedStoreTest;
using ::claimstore::testing::StatusIs;
using ::claimstore::testing::TestCluster;
using ::testing::HasSubstr;

constexpr char kDriver[] = "gpu.example.com";

TEST_F(SharedStoreTest, WritesAreReadBackAtOnceAndSeenByOtherMirrors) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  absl::StatusOr<WriteResult> put = a->Put(ClaimJson("ns", "c1"));
  ASSERT_THAT(put.status(), IsOk());
  EXPECT_TRUE(put->changed);
  // Read-your-writes: the writer's mirror has it when the write returns,
  // with etcd's revisions.
  absl::StatusOr<ClaimRead> read = a->Get(Key("c1"));
  ASSERT_THAT(read.status(), IsOk());
  EXPECT_EQ(read->record.mod_revision(), put->revision);
  EXPECT_EQ(read->record.create_revision(), put->revision);
  EXPECT_EQ(read->record.version(), 1u);
  // Another mirror, once caught up (Refresh), holds the same claim at the
  // same revisions: revisions mean the same on every machine.
  ASSERT_THAT(b->Refresh(), IsOk());
  absl::StatusOr<ClaimRead> other = b->Get(Key("c1"));
  ASSERT_THAT(other.status(), IsOk());
  EXPECT_EQ(other->record.mod_revision(), put->revision);
  EXPECT_EQ(other->record.bytes(), read->record.bytes());

  // A write from b on a's claim, then a's write on the revision it saw:
  // compare-and-set across mirrors.
  ASSERT_THAT(b->Allocate(Key("c1"), Of({Exclusive("gpu-0")})), IsOk());
  EXPECT_THAT(a->Reserve(Key("c1"), Pod("pod-a"), {.mod_revision = put->revision}),
              StatusIs(absl::StatusCode::kAborted, "has changed"));
  ASSERT_THAT(a->Refresh(), IsOk());
  const uint64_t seen = a->Get(Key("c1"))->record.mod_revision();
  EXPECT_GT(seen, put->revision);
  absl::StatusOr<WriteResult> reserved =
      a->Reserve(Key("c1"), Pod("pod-a"), {.mod_revision = seen});
  ASSERT_THAT(reserved.status(), IsOk());
  EXPECT_EQ(a->Get(Key("c1"))->record.version(), 3u);
  // b's mirror is behind; its write with the current revision still wins
  // (a refusal is only made on what etcd holds).
  EXPECT_THAT(b->Unreserve(Key("c1"), "pod-a", {.mod_revision = reserved->revision}), IsOk());
  // An idempotent no-op changes nothing.
  absl::StatusOr<WriteResult> again = b->Unreserve(Key("c1"), "pod-a");
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_FALSE(again->changed);
  // etcd's holding keys are what the claims hold (the no-op changed none).
  ASSERT_THAT(a->Refresh(), IsOk());
  absl::StatusOr<VerifyReport> verified = a->Verify(false);
  ASSERT_THAT(verified.status(), IsOk());
  EXPECT_THAT(verified->problems, ::testing::IsEmpty());
  // Indexes of the mirror follow.
  ASSERT_THAT(a->Refresh(), IsOk());
  absl::StatusOr<DeviceHoldings> held = a->ClaimsUsingDevice({kDriver, "pool-a", "gpu-0"});
  ASSERT_THAT(held.status(), IsOk());
  ASSERT_EQ(held->holdings.size(), 1u);
  EXPECT_EQ(held->holdings[0].claim, Key("c1"));
  ASSERT_THAT(a->Deallocate(Key("c1")), IsOk());
  ASSERT_THAT(a->Delete(Key("c1")), IsOk());
  EXPECT_THAT(a->Get(Key("c1")).status(), StatusIs(absl::StatusCode::kNotFound, "c1"));
  ASSERT_THAT(b->Refresh(), IsOk());
  EXPECT_THAT(b->Get(Key("c1")).status(), StatusIs(absl::StatusCode::kNotFound, "c1"));
  EXPECT_EQ(Contents(*a), Contents(*b));
}

TEST_F(SharedStoreTest, ExactlyOneOfRacingStoresTakesTheLastConsumerSlot) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  constexpr int kThreads = 8;
  for (int round = 0; round < 3; ++round) {
    const ClaimKey key = Key(absl::StrCat("slot-", round));
    ASSERT_THAT(a->Put(ClaimJson("ns", key.name)), IsOk());
    ASSERT_THAT(a->Allocate(key, Of({Exclusive(key.name)})), IsOk());
    for (int i = 0; i < 255; ++i) {
      ASSERT_THAT((i % 2 == 0 ? a : b)->Reserve(key, Pod(absl::StrCat("taken-", i))), IsOk());
    }
    std::vector<absl::Status> results(kThreads);
    RaceThreads(kThreads, [&](int t) {
      results[t] = (t % 2 == 0 ? a : b)->Reserve(key, Pod(absl::StrCat("racer-", t))).status();
    });
    int won = 0, exhausted = 0;
    for (const absl::Status& s : results) {
      if (s.ok()) ++won;
      if (absl::IsResourceExhausted(s)) ++exhausted;
    }
    EXPECT_EQ(won, 1) << "round " << round;
    EXPECT_EQ(exhausted, kThreads - 1) << "round " << round;
    ASSERT_THAT(b->Refresh(), IsOk());
    EXPECT_EQ(b->Get(key)->record.table().status()->reserved_for()->size(), 256u);
  }
}

TEST_F(SharedStoreTest, ExactlyOneOfRacingStoresTakesADeviceAndLosersAreToldWhoHoldsIt) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  constexpr int kThreads = 8;
  for (int t = 0; t < kThreads; ++t)
    ASSERT_THAT(a->Put(ClaimJson("ns", absl::StrCat("c", t))), IsOk());
  ASSERT_THAT(b->Refresh(), IsOk());
  for (int round = 0; round < 4; ++round) {
    const std::string device = absl::StrCat("gpu-", round);
    std::vector<absl::Status> results(kThreads);
    RaceThreads(kThreads, [&](int t) {
      // Half ask for it exclusively, half for a share with one shareID:
      // any winner excludes every other.
      DeviceResult r = t % 2 == 0 ? Exclusive(device) : Share(device, 1, {});
      results[t] = (t % 2 == 0 ? a : b)->Allocate(Key(absl::StrCat("c", t)), Of({r})).status();
    });
    int winner = -1;
    for (int t = 0; t < kThreads; ++t) {
      if (results[t].ok()) {
        EXPECT_EQ(winner, -1) << "two winners in round " << round;
        winner = t;
      }
    }
    ASSERT_NE(winner, -1) << "no winner in round " << round;
    for (int t = 0; t < kThreads; ++t) {
      if (t == winner) continue;
      EXPECT_THAT(results[t], StatusIs(absl::StatusCode::kAborted,
                                       absl::StrCat("is allocated to claim ns/c", winner)));
      EXPECT_EQ(ClaimsOf(results[t]), std::vector<ClaimKey>{Key(absl::StrCat("c", winner))});
    }
    ASSERT_THAT((winner % 2 == 0 ? b : a)->Deallocate(Key(absl::StrCat("c", winner))), IsOk());
  }
}

TEST_F(SharedStoreTest, RacingSharesNeverOverCommitADeviceAcrossStores) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  constexpr int kThreads = 8, kFit = 3;
  for (int t = 0; t < kThreads; ++t)
    ASSERT_THAT(a->Put(ClaimJson("ns", absl::StrCat("c", t))), IsOk());
  const std::vector<DeviceCapacity> limit = {
      {kDriver, "pool-a", "gpu-0", {{"memory", absl::StrCat(kFit, "Gi")}}}};
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> won{0}, lost{0};
    RaceThreads(kThreads, [&](int t) {
      static const char* kForms[] = {"1Gi", "1024Mi", "1073741824", "1048576Ki"};
      absl::StatusOr<WriteResult> r =
          (t % 2 == 0 ? a : b)
              ->Allocate(Key(absl::StrCat("c", t)),
                         Of({Share("gpu-0", t, {{"memory", kForms[t % 4]}})}), {}, limit);
      if (r.ok()) {
        ++won;
      } else {
        EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kAborted, "over-committed"));
        ++lost;
      }
    });
    EXPECT_EQ(won.load(), kFit) << "round " << round;
    EXPECT_EQ(lost.load(), kThreads - kFit);
    ASSERT_THAT(a->Refresh(), IsOk());
    absl::StatusOr<AllocatedState> state = a->AllocatedDevices();
    ASSERT_THAT(state.status(), IsOk());
    const AllocatedDevice* d = state->Find(kDriver, "pool-a", "gpu-0");
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->shares.size(), static_cast<size_t>(kFit));
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_THAT((t % 2 == 0 ? b : a)->Deallocate(Key(absl::StrCat("c", t))), IsOk());
    }
  }
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_EQ(a->AllocatedDevices()->Find(kDriver, "pool-a", "gpu-0"), nullptr);
  absl::StatusOr<VerifyReport> report = a->Verify(false);
  ASSERT_THAT(report.status(), IsOk());
  EXPECT_THAT(report->problems, ::testing::IsEmpty());
}

TEST_F(SharedStoreTest, AMirrorResumesAfterARestartAndRelistsWhenEtcdCompactedPastIt) {
  auto b = OpenMirror(1);
  ASSERT_TRUE(b);
  {
    auto a = OpenMirror(0);
    ASSERT_TRUE(a);
    ASSERT_THAT(a->Put(ClaimJson("ns", "kept")), IsOk());
    ASSERT_THAT(a->Put(ClaimJson("ns", "deleted-later")), IsOk());
  }
  // While a is closed: writes, a delete, and (second round) a compaction.
  for (int round = 0; round < 2; ++round) {
    ASSERT_THAT(b->Put(ClaimJson("ns", absl::StrCat("new-", round))), IsOk());
    ASSERT_THAT(b->Allocate(Key("kept"), Of({Exclusive(absl::StrCat("dev-", round))})), IsOk());
    ASSERT_THAT(b->Deallocate(Key("kept")), IsOk());
    if (round == 0) {
      ASSERT_THAT(b->Delete(Key("deleted-later")), IsOk());
    }
    if (round == 1) {
      auto etcd = BareEtcd();
      ASSERT_TRUE(etcd);
      ASSERT_THAT(etcd->Compact(static_cast<int64_t>(b->Stats()->revision)), IsOk());
    }
    auto a = OpenMirror(0);
    ASSERT_TRUE(a);
    ASSERT_THAT(b->Refresh(), IsOk());
    EXPECT_EQ(Contents(*a), Contents(*b)) << "round " << round;
    absl::StatusOr<VerifyReport> report = a->Verify(false);
    ASSERT_THAT(report.status(), IsOk());
    EXPECT_THAT(report->problems, ::testing::IsEmpty());
  }
}

// etcd takes a watch from its compact revision itself, but a deletion at
// that revision went with the compaction: a mirror resuming right after
// its last revision, which etcd compacted at a deletion, must re-list
// rather than keep the deleted claim.
TEST_F(SharedStoreTest, AMirrorResumingAtACompactedDeletionRelists) {
  auto b = OpenMirror(1);
  ASSERT_TRUE(b);
  uint64_t left_at = 0;
  {
    auto a = OpenMirror(0);
    ASSERT_TRUE(a);
    ASSERT_THAT(a->Put(ClaimJson("ns", "kept")), IsOk());
    absl::StatusOr<WriteResult> doomed = a->Put(ClaimJson("ns", "doomed"));
    ASSERT_THAT(doomed.status(), IsOk());
    left_at = a->Stats()->revision;
    ASSERT_EQ(left_at, doomed->revision);
  }
  absl::StatusOr<WriteResult> deleted = b->Delete(Key("doomed"));
  ASSERT_THAT(deleted.status(), IsOk());
  ASSERT_EQ(deleted->revision, left_at + 1);  // nothing else wrote between
  auto etcd = BareEtcd();
  ASSERT_TRUE(etcd);
  ASSERT_THAT(etcd->Compact(static_cast<int64_t>(deleted->revision)), IsOk());
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  EXPECT_THAT(a->Get(Key("doomed")).status(), StatusIs(absl::StatusCode::kNotFound, ""));
  ASSERT_THAT(b->Refresh(), IsOk());
  EXPECT_EQ(Contents(*a), Contents(*b));
}

TEST_F(SharedStoreTest, WhatTheModeDoesNotTakeIsRefusedClearly) {
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  // A mirror follows one cluster and prefix; a local store is no mirror.
  a.reset();
  Options other = SharedOptions();
  other.etcd_prefix = prefix_ + "other/";
  EXPECT_THAT(Store::Open(MirrorPath(0), other).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "this database mirrors"));
  {
    auto local = Store::Open(MirrorPath(2), Options{});
    ASSERT_THAT(local.status(), IsOk());
    ASSERT_THAT((*local)->Put(ClaimJson("ns", "x")), IsOk());
  }
  EXPECT_THAT(Store::Open(MirrorPath(2), SharedOptions()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is a local store"));
  Options bad = SharedOptions();
  bad.etcd_endpoints.push_back("https://127.0.0.1:1");
  EXPECT_THAT(Store::Open(MirrorPath(3), bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "etcd endpoints[3]: Invalid value: \"https://127.0.0.1:1\": endpoints[0] "
                       "is not https://: all use TLS or none does"));
  bad = SharedOptions();
  bad.etcd_timeout = absl::ZeroDuration();
  EXPECT_THAT(Store::Open(MirrorPath(3), bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "Options.etcd_timeout: Invalid value: 0: must be more than 0"));
  bad = SharedOptions();
  bad.etcd_ca_file = "/nonexistent/ca.pem";
  EXPECT_THAT(Store::Open(MirrorPath(3), bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "TLS needs https:// endpoints"));
}

// A Kubernetes watch stream applied through etcd (claimstore follow): as
// state, not newer events change nothing, the position is etcd's (every
// mirror's Stats), only moves forward, and an invalid event is refused
// before anything is written.
TEST_F(SharedStoreTest, ClusterEventsApplyThroughEtcdAndThePositionIsEtcds) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  auto event = [](const std::string& name, int rv, const std::string& status, bool deleted) {
    return ClusterEvent{
        ClaimJson("ns", name, status, absl::StrCat(R"("resourceVersion":")", rv, R"(")")), deleted};
  };
  const std::string held =
      R"({"allocation":{"devices":{"results":[{"request":"req","driver":"gpu.example.com",)"
      R"("pool":"pool-a","device":"gpu-1"}]}}})";
  const std::vector<ClusterEvent> events = {
      event("c1", 10, held, false), event("c2", 11, "{}", false), event("c1", 12, "{}", false),
      event("c2", 13, "{}", true)};
  absl::StatusOr<std::vector<WriteResult>> applied = a->ApplyClusterEvents(events, 13);
  ASSERT_THAT(applied.status(), IsOk());
  ASSERT_EQ(applied->size(), 4u);
  for (const WriteResult& r : *applied) {
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.revision, (*applied)[0].revision);  // one Txn, the position in it
  }
  EXPECT_EQ(a->Stats()->follow_resource_version, 13u);
  ASSERT_THAT(b->Refresh(), IsOk());
  EXPECT_FALSE(b->Get(Key("c1"))->record.table().status()->allocation());
  EXPECT_THAT(b->Get(Key("c2")).status(), StatusIs(absl::StatusCode::kNotFound, "c2"));
  EXPECT_EQ(b->Stats()->follow_resource_version, 13u);
  // A replay changes nothing of the claims it is not newer than (c1; a
  // deleted claim is not remembered: c2 comes back until its replayed
  // deletion, as locally); the position moves forward only.
  applied = b->ApplyClusterEvents(events, 12);
  ASSERT_THAT(applied.status(), IsOk());
  EXPECT_FALSE((*applied)[0].changed);
  EXPECT_FALSE((*applied)[2].changed);
  EXPECT_THAT(b->Get(Key("c2")).status(), StatusIs(absl::StatusCode::kNotFound, "c2"));
  EXPECT_EQ(a->Stats()->follow_resource_version, 13u);
  ASSERT_THAT(a->ApplyClusterEvents({}, 20).status(), IsOk());  // a bookmark
  EXPECT_EQ(a->Stats()->follow_resource_version, 20u);          // its mirror has it
  ASSERT_THAT(b->Refresh(), IsOk());                            // another once caught up
  EXPECT_EQ(b->Stats()->follow_resource_version, 20u);
  // An invalid event refuses the batch before any of it is written.
  const std::vector<ClusterEvent> invalid = {
      event("c3", 21, "{}", false),
      event("c4", 22,
            R"({"allocation":{"devices":{"results":[{"request":"req",)"
            R"("driver":"gpu.example.com","pool":"pool-a","device":"Not_A_Device"}]}}})",
            false)};
  EXPECT_THAT(a->ApplyClusterEvents(invalid, 22).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "item 1 (ns/c4): status.allocation"));
  ASSERT_THAT(b->Refresh(), IsOk());
  EXPECT_THAT(b->Get(Key("c3")).status(), StatusIs(absl::StatusCode::kNotFound, "c3"));
  EXPECT_EQ(b->Stats()->follow_resource_version, 20u);
  // A batch's Txn that never landed while another store deleted a claim the
  // batch deletes: told by the claim it puts, not by that deletion (which
  // looks like the batch's own), and run again.
  internal::FailNextTxnForTesting("current", /*sent=*/false,
                                  [&] { ASSERT_THAT(b->Delete(Key("c1")), IsOk()); });
  applied = a->ApplyClusterEvents({event("c1", 40, "{}", true), event("c5", 41, "{}", false)}, 41);
  ASSERT_THAT(applied.status(), IsOk());
  EXPECT_FALSE((*applied)[0].changed);  // the other store's delete came first
  EXPECT_TRUE((*applied)[1].changed);
  EXPECT_THAT(a->Get(Key("c5")).status(), IsOk());
  EXPECT_EQ(a->Stats()->follow_resource_version, 41u);
}

// PutAll through etcd: one Txn, all or none, with the local path's checks
// and errors (the device rule across the batch's own items too); exactly
// one of racing batches takes a device; a batch beyond one Txn is refused
// with nothing written; an unknown outcome is resolved.
TEST_F(SharedStoreTest, PutAllIsOneTxnAllOrNoneWithTheLocalChecks) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  auto holding = [](const std::string& device, bool share = false) {
    return absl::StrCat(
        R"({"allocation":{"devices":{"results":[{"request":"req","driver":"gpu.example.com",)",
        R"("pool":"pool-a","device":")", device, R"(")",
        share ? R"(,"shareID":"00000001-0000-4000-8000-000000000000")" : "", "}]}}}");
  };
  auto absent = [&](Store& s, const std::string& name) {
    EXPECT_THAT(s.Get(Key(name)).status(), StatusIs(absl::StatusCode::kNotFound, name))
        << name << " was written";
  };
  absl::StatusOr<std::vector<WriteResult>> put =
      a->PutAll({ClaimJson("ns", "p1", holding("gpu-1")),
                 ClaimJson("ns", "p2", holding("gpu-2", true)), ClaimJson("ns", "p3")});
  ASSERT_THAT(put.status(), IsOk());
  ASSERT_EQ(put->size(), 3u);
  for (const WriteResult& r : *put) {
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.revision, (*put)[0].revision);
  }
  ASSERT_THAT(b->Refresh(), IsOk());
  for (const char* name : {"p1", "p2", "p3"}) {
    absl::StatusOr<ClaimRead> read = b->Get(Key(name));
    ASSERT_THAT(read.status(), IsOk());
    EXPECT_EQ(read->record.mod_revision(), (*put)[0].revision) << name;
  }
  EXPECT_EQ(b->ClaimsUsingDevice({kDriver, "pool-a", "gpu-1"})->holdings.size(), 1u);

  // Refused, nothing written: a device the batch's own earlier item takes,
  // a device a stored claim holds, an invalid item.
  EXPECT_THAT(a->PutAll({ClaimJson("ns", "q1", holding("gpu-3")),
                         ClaimJson("ns", "q2", holding("gpu-3", true))})
                  .status(),
              StatusIs(absl::StatusCode::kAborted,
                       "item 1 (ns/q2): device gpu.example.com/pool-a/gpu-3 is allocated to "
                       "claim ns/q1"));
  EXPECT_THAT(b->PutAll({ClaimJson("ns", "q3"), ClaimJson("ns", "q4", holding("gpu-1"))}).status(),
              StatusIs(absl::StatusCode::kAborted,
                       "item 1 (ns/q4): device gpu.example.com/pool-a/gpu-1 "
                       "is allocated to claim ns/p1"));
  EXPECT_THAT(
      a->PutAll({ClaimJson("ns", "q5"), ClaimJson("ns", "q6", holding("Not_A_Device"))}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "item 1 (ns/q6): status.allocation"));
  EXPECT_THAT(a->PutAll({ClaimJson("ns", "q7"), ClaimJson("", "q8")}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "item 1: metadata.namespace"));
  ASSERT_THAT(b->Refresh(), IsOk());
  for (const char* name : {"q1", "q2", "q3", "q4", "q5", "q6", "q7"}) absent(*b, name);

  // In order: a device the batch frees is taken by a later item, and a
  // later item of one claim wins.
  put = b->PutAll({ClaimJson("ns", "p1"), ClaimJson("ns", "p4", holding("gpu-1")),
                   ClaimJson("ns", "p5", holding("gpu-5")), ClaimJson("ns", "p5")});
  ASSERT_THAT(put.status(), IsOk());
  ASSERT_THAT(a->Refresh(), IsOk());
  absl::StatusOr<DeviceHoldings> gpu1 = a->ClaimsUsingDevice({kDriver, "pool-a", "gpu-1"});
  ASSERT_THAT(gpu1.status(), IsOk());
  ASSERT_EQ(gpu1->holdings.size(), 1u);
  EXPECT_EQ(gpu1->holdings[0].claim, Key("p4"));
  EXPECT_TRUE(a->ClaimsUsingDevice({kDriver, "pool-a", "gpu-5"})->holdings.empty());
  EXPECT_EQ(a->Get(Key("p5"))->record.version(), 1u);
  // The other order refuses the batch.
  EXPECT_THAT(a->PutAll({ClaimJson("ns", "p6", holding("gpu-1")), ClaimJson("ns", "p4")}).status(),
              StatusIs(absl::StatusCode::kAborted, "item 0 (ns/p6)"));

  // Beyond one Txn (128 operations): refused, nothing written.
  std::vector<ClaimRecord> many;
  for (int i = 0; i < 130; ++i) many.push_back(ClaimJson("ns", absl::StrCat("m", i)));
  EXPECT_THAT(a->PutAll(many).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, "more than one etcd Txn takes"));
  many.erase(many.begin() + 100, many.end());
  ASSERT_THAT(a->PutAll(many).status(), IsOk());
  ASSERT_THAT(b->Refresh(), IsOk());
  absent(*b, "m100");
  EXPECT_THAT(b->Get(Key("m99")).status(), IsOk());

  // Racing batches of two stores that want one device: exactly one lands
  // whole; each loser is told who holds it and wrote nothing.
  for (int round = 0; round < 3; ++round) {
    const std::string device = absl::StrCat("gpu-race-", round);
    constexpr int kThreads = 6;
    std::vector<absl::Status> results(kThreads);
    RaceThreads(kThreads, [&](int t) {
      const std::string me = absl::StrCat("r", round, "-", t);
      results[t] = (t % 2 == 0 ? a : b)
                       ->PutAll({ClaimJson("ns", me + "-plain"),
                                 ClaimJson("ns", me, holding(device, t % 3 == 0))})
                       .status();
    });
    ASSERT_THAT(a->Refresh(), IsOk());
    int winner = -1;
    for (int t = 0; t < kThreads; ++t) {
      const std::string me = absl::StrCat("r", round, "-", t);
      if (results[t].ok()) {
        EXPECT_EQ(winner, -1) << "two winners in round " << round;
        winner = t;
        EXPECT_THAT(a->Get(Key(me + "-plain")).status(), IsOk());
      } else {
        EXPECT_THAT(results[t], StatusIs(absl::StatusCode::kAborted, "is allocated to claim"));
        absent(*a, me + "-plain");
        absent(*a, me);
      }
    }
    EXPECT_NE(winner, -1) << "no winner in round " << round;
  }

  // An unknown outcome: landed with its reply lost, then never sent.
  internal::FailNextTxnForTesting("current", /*sent=*/true, nullptr);
  put = a->PutAll({ClaimJson("ns", "u1"), ClaimJson("ns", "u2", holding("gpu-u"))});
  ASSERT_THAT(put.status(), IsOk());
  EXPECT_TRUE((*put)[1].changed);
  EXPECT_EQ(a->Get(Key("u2"))->record.version(), 1u);
  internal::FailNextTxnForTesting("current", /*sent=*/false, nullptr);
  put = a->PutAll({ClaimJson("ns", "u1", holding("gpu-v")), ClaimJson("ns", "u3")});
  ASSERT_THAT(put.status(), IsOk());
  EXPECT_EQ(a->Get(Key("u1"))->record.version(), 2u);
  for (Store* s : {a.get(), b.get()}) {
    ASSERT_THAT(s->Refresh(), IsOk());
    absl::StatusOr<VerifyReport> report = s->Verify(false);
    ASSERT_THAT(report.status(), IsOk());
    EXPECT_THAT(report->problems, ::testing::IsEmpty());
  }
  EXPECT_EQ(Contents(*a), Contents(*b));
}

// TLS to etcd, with client certificates (etcd's --client-cert-auth), as
// etcdctl's --cacert, --cert and --key: a store and the tool write, read
// and watch through it; a wrong CA, a missing client certificate and bad
// files are refused, naming what is wrong.
TEST_F(SharedStoreTest, TlsWithClientCertificates) {
  ScopedTempDir certs;
  absl::StatusOr<EtcdTls> tls = MakeTestTls(certs.path());
  ASSERT_THAT(tls.status(), IsOk());
  absl::StatusOr<std::unique_ptr<EtcdCluster>> cluster = EtcdCluster::Start(1, *tls);
  ASSERT_THAT(cluster.status(), IsOk());
  Options o;
  o.etcd_endpoints = (*cluster)->Endpoints();
  ASSERT_TRUE(absl::StartsWith(o.etcd_endpoints[0], "https://"));
  o.etcd_prefix = prefix_;
  o.etcd_timeout = absl::Seconds(2);
  o.etcd_ca_file = tls->ca_file;
  o.etcd_cert_file = tls->client_cert_file;
  o.etcd_key_file = tls->client_key_file;
  {
    absl::StatusOr<std::unique_ptr<Store>> a = Store::Open(MirrorPath(10), o);
    ASSERT_THAT(a.status(), IsOk());
    absl::StatusOr<std::unique_ptr<Watcher>> w = (*a)->Watch(0);
    ASSERT_THAT(w.status(), IsOk());
    absl::StatusOr<WriteResult> put = (*a)->Put(ClaimJson("ns", "tls"));
    ASSERT_THAT(put.status(), IsOk());
    ASSERT_THAT((*a)->Allocate(Key("tls"), Of({Exclusive("gpu-tls")})), IsOk());
    EXPECT_THAT((*a)->Get(Key("tls")).status(), IsOk());
    absl::StatusOr<WatchEvent> e = (*w)->Next(absl::Seconds(10));
    ASSERT_THAT(e.status(), IsOk());
    EXPECT_EQ(e->revision, put->revision);
    absl::StatusOr<VerifyReport> report = (*a)->Verify(false);
    ASSERT_THAT(report.status(), IsOk());
    EXPECT_THAT(report->problems, ::testing::IsEmpty());
  }
  // The tool, with etcdctl's flags under their --etcd- names.
  const std::string tool = absl::StrCat(
      CLAIMSTORE_CLI, " get tls -n ns -o json --db ", MirrorPath(11), " --etcd ",
      o.etcd_endpoints[0], " --etcd-prefix ", prefix_, " --etcd-cacert ", tls->ca_file,
      " --etcd-cert ", tls->client_cert_file, " --etcd-key ", tls->client_key_file, " 2>&1");
  FILE* out = popen(tool.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string printed;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), out)) > 0;) printed.append(buf, n);
  EXPECT_EQ(pclose(out), 0) << printed;
  EXPECT_THAT(printed, ::testing::HasSubstr("tls"));
  EXPECT_THAT(printed, ::testing::HasSubstr("gpu-tls"));

  // A CA that did not sign etcd's certificate: etcd is not trusted.
  Options wrong = o;
  wrong.etcd_ca_file = tls->other_ca_file;
  const absl::Time start = absl::Now();
  EXPECT_THAT(Store::Open(MirrorPath(12), wrong).status(),
              StatusIs(absl::StatusCode::kUnavailable, "certificate verify failed"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  // No client certificate: etcd does not take the client.
  wrong = o;
  wrong.etcd_cert_file.clear();
  wrong.etcd_key_file.clear();
  EXPECT_THAT(Store::Open(MirrorPath(13), wrong).status(),
              StatusIs(absl::StatusCode::kUnavailable, ""));
  // Files that cannot be used, named.
  wrong = o;
  wrong.etcd_key_file.clear();
  EXPECT_THAT(Store::Open(MirrorPath(14), wrong).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "both or neither"));
  wrong = o;
  wrong.etcd_ca_file = certs.path() + "/missing.pem";
  EXPECT_THAT(Store::Open(MirrorPath(14), wrong).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "etcd CA file: Invalid value: \"" +
                                                               certs.path() +
                                                               "/missing.pem\": cannot be opened"));
  wrong = o;
  wrong.etcd_cert_file = certs.path() + "/server.ext";
  EXPECT_THAT(Store::Open(MirrorPath(14), wrong).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "server.ext\": not a PEM file"));
}

// The change feed in the shared mode is etcd's history of the claims: a
// watcher on one mirror sees every change made through any, in revision
// order, at the revisions the writes returned, with the claim as written
// (a deletion: as it was), whatever its own mirror has applied.
TEST_F(SharedStoreTest, AWatcherSeesEveryChangeOfEveryMirrorAtEtcdsRevisions) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  ASSERT_THAT(a->Put(ClaimJson("ns", "before")), IsOk());
  ASSERT_THAT(b->Refresh(), IsOk());
  // From a List's revision + 1, as from a local store.
  absl::StatusOr<ListPage> listed = b->List({});
  ASSERT_THAT(listed.status(), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> all = b->Watch(listed->revision + 1);
  ASSERT_THAT(all.status(), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> only_c2 =
      b->Watch(listed->revision + 1, {.key_prefix = "ns/c2"});
  ASSERT_THAT(only_c2.status(), IsOk());
  EXPECT_EQ((*all)->next_revision(), listed->revision + 1);
  std::vector<std::pair<WatchEventType, uint64_t>> want;
  std::vector<uint64_t> last_write;  // of the event's claim before it
  std::map<std::string, uint64_t> written;
  auto wrote = [&](WatchEventType type, const absl::StatusOr<WriteResult>& r,
                   const std::string& name) {
    ASSERT_THAT(r.status(), IsOk());
    want.push_back({type, r->revision});
    last_write.push_back(written[name]);
    written[name] = r->revision;
  };
  wrote(WatchEventType::kAdded, a->Put(ClaimJson("ns", "c1")), "c1");
  wrote(WatchEventType::kModified, b->Allocate(Key("c1"), Of({Exclusive("gpu-w")})), "c1");
  wrote(WatchEventType::kAdded, b->Put(ClaimJson("ns", "c2")), "c2");
  wrote(WatchEventType::kModified, a->Reserve(Key("c1"), Pod("p1")), "c1");
  wrote(WatchEventType::kModified, a->Unreserve(Key("c1"), "p1"), "c1");
  wrote(WatchEventType::kModified, b->Deallocate(Key("c1")), "c1");
  wrote(WatchEventType::kDeleted, b->Delete(Key("c1")), "c1");
  wrote(WatchEventType::kDeleted, a->Delete(Key("c2")), "c2");
  ASSERT_THAT(a->Refresh(), IsOk());  // a sync key: not a claim, no event
  for (size_t i = 0; i < want.size(); ++i) {
    absl::StatusOr<WatchEvent> e = (*all)->Next(absl::Seconds(10));
    ASSERT_THAT(e.status(), IsOk()) << "event " << i;
    EXPECT_EQ(e->type, want[i].first) << "event " << i;
    EXPECT_EQ(e->revision, want[i].second) << "event " << i;
    ASSERT_TRUE(e->record.has_value());
    if (e->type == WatchEventType::kDeleted) {
      // The claim as it was: its last write's revisions.
      EXPECT_EQ(e->record->mod_revision(), last_write[i]) << "event " << i;
      ASSERT_TRUE(e->before.has_value());
      EXPECT_EQ(e->before->bytes(), e->record->bytes());
    } else {
      EXPECT_EQ(e->record->mod_revision(), e->revision) << "event " << i;
    }
    EXPECT_EQ((*all)->next_revision(), e->revision + 1);
  }
  EXPECT_THAT((*all)->Next(absl::Milliseconds(200)).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded, "no event"));
  // The other watcher selects c2's two events alone.
  for (uint64_t revision : {want[2].second, want[7].second}) {
    absl::StatusOr<WatchEvent> e = (*only_c2)->Next(absl::Seconds(10));
    ASSERT_THAT(e.status(), IsOk());
    EXPECT_EQ(e->key, Key("c2"));
    EXPECT_EQ(e->revision, revision);
  }
  // From 0: the changes after the call only.
  absl::StatusOr<std::unique_ptr<Watcher>> from_now = a->Watch(0);
  ASSERT_THAT(from_now.status(), IsOk());
  wrote(WatchEventType::kAdded, b->Put(ClaimJson("ns", "c3")), "c3");
  absl::StatusOr<WatchEvent> e = (*from_now)->Next(absl::Seconds(10));
  ASSERT_THAT(e.status(), IsOk());
  EXPECT_EQ(e->key, Key("c3"));
  EXPECT_EQ(e->revision, want.back().second);
  // Cancel from another thread wakes a waiting Next.
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(200));
    (*from_now)->Cancel();
  });
  const absl::Time waited = absl::Now();
  EXPECT_THAT((*from_now)->Next(absl::Seconds(30)).status(),
              StatusIs(absl::StatusCode::kCancelled, ""));
  EXPECT_LT(absl::Now() - waited, absl::Seconds(10));
  canceller.join();
}

// A watcher goes on through the loss of each member in turn (its stream
// breaks; it watches again from the next revision, through another
// member), and a watch of revisions etcd compacted is told so, as a local
// one is: OutOfRange with the compact revision.
TEST_F(SharedStoreTest, AWatcherGoesOnThroughMemberKillsAndIsToldOfCompaction) {
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  absl::StatusOr<WriteResult> first = a->Put(ClaimJson("ns", "w"));
  ASSERT_THAT(first.status(), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> watcher = a->Watch(first->revision);
  ASSERT_THAT(watcher.status(), IsOk());
  std::vector<uint64_t> want = {first->revision};
  EtcdCluster& cluster = TestCluster();
  for (int i = 0; i < cluster.size(); ++i) {
    cluster.Kill(i);
    absl::StatusOr<WriteResult> w;
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    do {
      w = a->Allocate(Key("w"), Of({Exclusive(absl::StrCat("gpu-k", i))}));
    } while (absl::IsUnavailable(w.status()) && absl::Now() < give_up);
    ASSERT_THAT(w.status(), IsOk()) << "member " << i << " down";
    want.push_back(w->revision);
    do {
      w = a->Deallocate(Key("w"));
    } while (absl::IsUnavailable(w.status()) && absl::Now() < give_up);
    ASSERT_THAT(w.status(), IsOk());
    want.push_back(w->revision);
    ASSERT_THAT(cluster.Restart(i), IsOk());
  }
  for (uint64_t revision : want) {
    absl::StatusOr<WatchEvent> e = (*watcher)->Next(absl::Seconds(30));
    ASSERT_THAT(e.status(), IsOk());
    EXPECT_EQ(e->revision, revision);
  }
  // Compacted: a watch from before the compaction is refused at once...
  auto etcd = BareEtcd();
  ASSERT_TRUE(etcd);
  const int64_t compact = static_cast<int64_t>(want.back());
  ASSERT_THAT(etcd->Compact(compact), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> old = a->Watch(first->revision);
  EXPECT_THAT(old.status(), StatusIs(absl::StatusCode::kOutOfRange, ""));
  EXPECT_EQ(CompactRevision(old.status()), std::optional<uint64_t>(compact));
  // ...and one that had read past it goes on.
  ASSERT_THAT(a->Put(ClaimJson("ns", "after")), IsOk());
  absl::StatusOr<WatchEvent> e = (*watcher)->Next(absl::Seconds(10));
  ASSERT_THAT(e.status(), IsOk());
  EXPECT_EQ(e->key, Key("after"));
  // A watch from the compact revision itself is refused too (its
  // deletions are gone), and promptly: etcd would take that watch and
  // never cancel it. One from the revision after is taken.
  absl::StatusOr<std::unique_ptr<Watcher>> at = a->Watch(static_cast<uint64_t>(compact));
  EXPECT_THAT(at.status(), StatusIs(absl::StatusCode::kOutOfRange, ""));
  EXPECT_EQ(CompactRevision(at.status()), std::optional<uint64_t>(compact));
  absl::StatusOr<std::unique_ptr<Watcher>> next = a->Watch(static_cast<uint64_t>(compact) + 1);
  ASSERT_THAT(next.status(), IsOk());
  e = (*next)->Next(absl::Seconds(10));
  ASSERT_THAT(e.status(), IsOk());
  EXPECT_EQ(e->key, Key("after"));
}

// A watcher whose stream broke resumes after the last event it read: when
// etcd compacted at a deletion right after it meanwhile, the watcher hands
// over that deletion (the member it resumes on had not compacted yet) or
// is told of the compaction (what a restarted member, which serves once it
// has caught up, says); it never goes on without it.
TEST_F(SharedStoreTest, AWatcherResumingAtACompactedDeletionIsToldOfIt) {
  EtcdCluster& cluster = TestCluster();
  const int leader = cluster.Leader();
  ASSERT_GE(leader, 0);
  const int member = (leader + 1) % cluster.size();
  // The writer and the compacting client reach the other members only: a
  // write to the member being killed would be an unknown outcome, resolved
  // with writes of its own (revisions the test counts).
  std::vector<std::string> others;
  for (int i = 0; i < cluster.size(); ++i) {
    if (i != member) others.push_back(cluster.Endpoint(i));
  }
  Options rest = SharedOptions();
  rest.etcd_endpoints = others;
  absl::StatusOr<std::unique_ptr<Store>> b = Store::Open(MirrorPath(1), rest);
  ASSERT_THAT(b.status(), IsOk());
  Options one = SharedOptions();  // a watcher that reaches one member only
  one.etcd_endpoints = {cluster.Endpoint(member)};
  absl::StatusOr<std::unique_ptr<Store>> a = Store::Open(MirrorPath(0), one);
  ASSERT_THAT(a.status(), IsOk());
  absl::StatusOr<WriteResult> put = (*b)->Put(ClaimJson("ns", "doomed"));
  ASSERT_THAT(put.status(), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> watcher = (*a)->Watch(put->revision);
  ASSERT_THAT(watcher.status(), IsOk());
  absl::StatusOr<WatchEvent> e = (*watcher)->Next(absl::Seconds(10));
  ASSERT_THAT(e.status(), IsOk());
  ASSERT_EQ(e->revision, put->revision);

  cluster.Kill(member);  // the watcher's stream breaks
  absl::StatusOr<WriteResult> deleted = (*b)->Delete(Key("doomed"));
  ASSERT_THAT(deleted.status(), IsOk());
  ASSERT_EQ(deleted->revision, put->revision + 1);  // nothing else wrote between
  internal::EtcdOptions eo;
  eo.endpoints = others;
  absl::StatusOr<std::unique_ptr<internal::EtcdClient>> etcd = internal::EtcdClient::Connect(eo);
  ASSERT_THAT(etcd.status(), IsOk());
  ASSERT_THAT((*etcd)->Compact(static_cast<int64_t>(deleted->revision)), IsOk());
  ASSERT_THAT((*b)->Put(ClaimJson("ns", "after")), IsOk());
  ASSERT_THAT(cluster.Restart(member), IsOk());

  e = (*watcher)->Next(absl::Seconds(30));
  if (e.ok()) {
    EXPECT_EQ(e->key, Key("doomed"));
    EXPECT_EQ(e->type, WatchEventType::kDeleted);
    EXPECT_EQ(e->revision, deleted->revision);
  } else {
    EXPECT_THAT(e.status(), StatusIs(absl::StatusCode::kOutOfRange, ""));
    EXPECT_EQ(CompactRevision(e.status()), std::optional<uint64_t>(deleted->revision));
  }
  // The mirror behind the same member re-listed or applied the deletion.
  ASSERT_THAT((*a)->Refresh(), IsOk());
  EXPECT_THAT((*a)->Get(Key("doomed")).status(), StatusIs(absl::StatusCode::kNotFound, ""));
}

// A watcher whose reader stopped on a full queue (4,096 events nobody
// took) is cancelled and destroyed cleanly (AddressSanitizer watches the
// reader's watch, gone with its thread).
TEST_F(SharedStoreTest, AWatcherCancelledWithAFullQueueIsDestroyedCleanly) {
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  absl::StatusOr<std::unique_ptr<Watcher>> watcher = a->Watch(0);
  ASSERT_THAT(watcher.status(), IsOk());
  auto etcd = BareEtcd();
  ASSERT_TRUE(etcd);
  // 4,200 claims, 100 to a Txn.
  const internal::EtcdLayout layout(prefix_);
  for (int t = 0; t < 42; ++t) {
    etcdserverpb::TxnRequest txn;
    for (int i = 0; i < 100; ++i) {
      const std::string name = absl::StrCat("q-", t * 100 + i);
      auto* op = txn.add_success()->mutable_request_put();
      op->set_key(layout.Claim(Key(name)));
      op->set_value(internal::EncodeClaimValue("token", ClaimJson("ns", name).bytes()));
    }
    ASSERT_THAT(etcd->Txn(txn).status(), IsOk());
  }
  absl::StatusOr<WatchEvent> first = (*watcher)->Next(absl::Seconds(10));
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_EQ(first->key, Key("q-0"));
  absl::SleepFor(absl::Milliseconds(500));  // the reader fills the queue and waits
  (*watcher)->Cancel();
  absl::SleepFor(absl::Milliseconds(100));  // the reader is gone
  EXPECT_THAT((*watcher)->Next(absl::Seconds(1)).status(),
              StatusIs(absl::StatusCode::kCancelled, ""));
  watcher->reset();  // cancels again, with the reader gone
}

// Writes whose Txn's outcome etcd did not report (the reply lost after the
// commit, or the connection broken before sending) are resolved from etcd's
// history of the claim: never reported failed when they landed, never
// written twice, and not fooled by another writer acting meanwhile.
TEST_F(SharedStoreTest, UnknownOutcomesAreResolvedFromEtcdsHistory) {
  auto a = OpenMirror(0);
  auto b = OpenMirror(1);
  ASSERT_TRUE(a && b);
  ASSERT_THAT(a->Put(ClaimJson("ns", "u1")), IsOk());
  ASSERT_THAT(a->Allocate(Key("u1"), Of({Exclusive("gpu-u")})), IsOk());
  auto version = [&]() { return a->Get(Key("u1"))->record.version(); };
  const uint64_t v0 = version();
  // Landed, the reply lost: reported as the write it was, once.
  internal::FailNextTxnForTesting("claims/ns/u1", /*sent=*/true, nullptr);
  absl::StatusOr<WriteResult> r1 = a->Reserve(Key("u1"), Pod("p1"));
  ASSERT_THAT(r1.status(), IsOk());
  EXPECT_TRUE(r1->changed);
  EXPECT_EQ(version(), v0 + 1);
  // Never sent: run again, once.
  internal::FailNextTxnForTesting("claims/ns/u1", /*sent=*/false, nullptr);
  ASSERT_THAT(a->Reserve(Key("u1"), Pod("p2")), IsOk());
  EXPECT_EQ(version(), v0 + 2);
  // Landed, and another store changed the claim before the reply would
  // have come: the history's first change after the compared revision is
  // this write's.
  internal::FailNextTxnForTesting("claims/ns/u1", /*sent=*/true,
                                  [&] { ASSERT_THAT(b->Reserve(Key("u1"), Pod("p4")), IsOk()); });
  absl::StatusOr<WriteResult> r3 = a->Reserve(Key("u1"), Pod("p3"));
  ASSERT_THAT(r3.status(), IsOk());
  EXPECT_TRUE(r3->changed);
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_EQ(version(), v0 + 4);
  const auto* reserved = a->Get(Key("u1"))->record.table().status()->reserved_for();
  ASSERT_EQ(reserved->size(), 4u);
  EXPECT_EQ(reserved->Get(2)->uid()->str(), "p3");
  EXPECT_EQ(reserved->Get(3)->uid()->str(), "p4");
  // A delete that landed unreported while the claim was made again: it is
  // not run again (the new claim stays).
  for (const char* uid : {"p1", "p2", "p3", "p4"})
    ASSERT_THAT(a->Unreserve(Key("u1"), uid), IsOk());
  ASSERT_THAT(a->Deallocate(Key("u1")), IsOk());
  internal::FailNextTxnForTesting("claims/ns/u1", /*sent=*/true,
                                  [&] { ASSERT_THAT(b->Put(ClaimJson("ns", "u1")), IsOk()); });
  ASSERT_THAT(a->Delete(Key("u1")), IsOk());
  ASSERT_THAT(a->Refresh(), IsOk());
  absl::StatusOr<ClaimRead> again = a->Get(Key("u1"));
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(again->record.version(), 1u);
  // A create that landed unreported, then was changed by another.
  internal::FailNextTxnForTesting("claims/ns/u2", /*sent=*/true, [&] {
    ASSERT_THAT(b->Refresh(), IsOk());
    ASSERT_THAT(b->Allocate(Key("u2"), Of({Exclusive("gpu-u2")})), IsOk());
  });
  absl::StatusOr<WriteResult> created = a->Put(ClaimJson("ns", "u2"));
  ASSERT_THAT(created.status(), IsOk());
  EXPECT_TRUE(created->changed);
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_EQ(a->Get(Key("u2"))->record.version(), 2u);
  absl::StatusOr<VerifyReport> report = a->Verify(false);
  ASSERT_THAT(report.status(), IsOk());
  EXPECT_THAT(report->problems, ::testing::IsEmpty());
}

// A value under the claims prefix that this store did not write (an
// etcdctl put) is left out of every mirror and named in Stats; the mirror
// goes on following.
TEST_F(SharedStoreTest, AValueThatIsNoClaimIsLeftOutAndNamed) {
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  absl::StatusOr<std::unique_ptr<Watcher>> watcher = a->Watch(0);
  ASSERT_THAT(watcher.status(), IsOk());
  auto etcd = BareEtcd();
  ASSERT_TRUE(etcd);
  etcdserverpb::TxnRequest put;
  auto* op = put.add_success()->mutable_request_put();
  op->set_key(internal::EtcdLayout(prefix_).Claim(Key("foreign")));
  op->set_value("{\"not\": \"a claim\"}");
  ASSERT_THAT(etcd->Txn(put).status(), IsOk());
  ASSERT_THAT(a->Put(ClaimJson("ns", "after")), IsOk());
  EXPECT_THAT(a->Get(Key("foreign")).status(), StatusIs(absl::StatusCode::kNotFound, ""));
  EXPECT_THAT(a->Get(Key("after")).status(), IsOk());
  absl::StatusOr<StoreStats> stats = a->Stats();
  ASSERT_THAT(stats.status(), IsOk());
  EXPECT_TRUE(stats->etcd_following);
  EXPECT_THAT(stats->etcd_error, HasSubstr("is no claim and is not mirrored"));
  // A new mirror (a re-list) leaves it out too.
  auto b = OpenMirror(1);
  ASSERT_TRUE(b);
  EXPECT_THAT(b->Get(Key("foreign")).status(), StatusIs(absl::StatusCode::kNotFound, ""));
  EXPECT_THAT(b->Stats()->etcd_error, HasSubstr("is no claim and is not mirrored"));
  // A watcher passes over it, and over its deletion.
  etcdserverpb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key(
      internal::EtcdLayout(prefix_).Claim(Key("foreign")));
  ASSERT_THAT(etcd->Txn(del).status(), IsOk());
  ASSERT_THAT(a->Put(ClaimJson("ns", "after-delete")), IsOk());
  for (const char* name : {"after", "after-delete"}) {
    absl::StatusOr<WatchEvent> e = (*watcher)->Next(absl::Seconds(10));
    ASSERT_THAT(e.status(), IsOk());
    EXPECT_EQ(e->key, Key(name));
  }
}

// The tool in the shared mode: --etcd URL,URL,... and --etcd-prefix, with
// --db naming this machine's mirror.
TEST_F(SharedStoreTest, TheToolTakesEtcdEndpoints) {
  auto a = OpenMirror(0);
  ASSERT_TRUE(a);
  ASSERT_THAT(a->Put(ClaimJson("ns", "c1")), IsOk());
  ASSERT_THAT(a->Allocate(Key("c1"), Of({Exclusive("gpu-9")})), IsOk());
  const std::string out = dir_.path() + "/out", err = dir_.path() + "/err";
  auto tool = [&](const std::string& args) {
    const std::string command =
        absl::StrCat(CLAIMSTORE_CLI, " --db ", dir_.path(), "/tool-mirror --etcd ",
                     absl::StrJoin(TestCluster().Endpoints(), ","), " --etcd-prefix ", prefix_, " ",
                     args, " >", out, " 2>", err, " </dev/null");
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  ASSERT_EQ(tool("reserve ns/c1 --consumer pods/web-0/uid-web-0"), 0) << testing::ReadFile(err);
  EXPECT_THAT(testing::ReadFile(out), HasSubstr("reserved for"));
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_EQ(a->Get(Key("c1"))->record.table().status()->reserved_for()->size(), 1u);
  ASSERT_EQ(tool("get ns/c1 -o jsonpath={.status.reservedFor[0].uid}"), 0)
      << testing::ReadFile(err);
  EXPECT_EQ(testing::ReadFile(out), "uid-web-0");
  // A restore through etcd: refused input names the file, item and field
  // and changes nothing; a good one replaces what etcd holds, for every
  // mirror.
  EXPECT_NE(tool("restore --replace " + testing::K8sPath("fixtures/ResourceClaim.roundtrip.json")),
            0);
  EXPECT_THAT(testing::ReadFile(err),
              HasSubstr("ResourceClaim.roundtrip.json: document 0 (namespaceValue/nameValue): "
                        "status.devices[0].pool: Invalid value"));
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_THAT(a->Get(Key("c1")).status(), IsOk());
  const std::string input = dir_.path() + "/claims.json";
  {
    std::ofstream f(input);
    f << "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":["
      << EncodeClaim(ClaimJson("ns", "r1")) << "," << EncodeClaim(ClaimJson("ns", "r2")) << "]}";
  }
  ASSERT_EQ(tool("restore --replace " + input), 0) << testing::ReadFile(err);
  EXPECT_THAT(testing::ReadFile(out), HasSubstr("restored 2 claim(s) from 2 item(s)"));
  EXPECT_THAT(testing::ReadFile(out), HasSubstr("0 replaced, 1 deleted"));
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_THAT(a->Get(Key("c1")).status(), StatusIs(absl::StatusCode::kNotFound, "c1"));
  EXPECT_THAT(a->Get(Key("r2")).status(), IsOk());
  // follow: a watch stream through etcd; the position is etcd's, so
  // another machine's tool (a mirror of its own) prints it.
  const std::string stream = dir_.path() + "/stream.json";
  {
    std::ofstream f(stream);
    f << R"({"type":"ADDED","object":)"
      << EncodeClaim(ClaimJson("ns", "f1", "{}", R"("resourceVersion":"30")")) << "}\n"
      << R"({"type":"BOOKMARK","object":{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1",)"
      << R"("metadata":{"resourceVersion":"31"}}})"
      << "\n";
  }
  ASSERT_EQ(tool("follow " + stream), 0) << testing::ReadFile(err);
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_THAT(a->Get(Key("f1")).status(), IsOk());
  const std::string other =
      absl::StrCat(CLAIMSTORE_CLI, " --db ", dir_.path(), "/tool-mirror-2 --etcd ",
                   absl::StrJoin(TestCluster().Endpoints(), ","), " --etcd-prefix ", prefix_,
                   " follow --show-resource-version >", out, " 2>", err, " </dev/null");
  ASSERT_EQ(std::system(other.c_str()), 0) << testing::ReadFile(err);
  EXPECT_EQ(testing::ReadFile(out), "31\n");
  // apply -f through etcd: one Txn, kubectl's lines; a clash with a claim
  // another mirror wrote refuses it whole, naming where the claim stood.
  ASSERT_THAT(a->Put(ClaimJson("ns", "held",
                               R"({"allocation":{"devices":{"results":[)"
                               R"({"request":"req","driver":"gpu.example.com",)"
                               R"("pool":"pool-a","device":"gpu-h"}]}}})")),
              IsOk());
  {
    std::ofstream f(input);
    f << EncodeClaim(ClaimJson("ns", "r1")) << "\n" << EncodeClaim(ClaimJson("ns", "a1")) << "\n";
  }
  ASSERT_EQ(tool("apply -f " + input), 0) << testing::ReadFile(err);
  EXPECT_EQ(testing::ReadFile(out),
            "resourceclaim.resource.k8s.io/r1 unchanged\nresourceclaim.resource.k8s.io/a1 "
            "created\n");
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_THAT(a->Get(Key("a1")).status(), IsOk());
  {
    std::ofstream f(input);
    f << EncodeClaim(ClaimJson("ns", "a2")) << "\n"
      << EncodeClaim(ClaimJson("ns", "a3",
                               R"({"allocation":{"devices":{"results":[)"
                               R"({"request":"req","driver":"gpu.example.com",)"
                               R"("pool":"pool-a","device":"gpu-h"}]}}})"))
      << "\n";
  }
  EXPECT_EQ(tool("apply -f " + input), 3);
  EXPECT_THAT(testing::ReadFile(err),
              HasSubstr("claims.json: document 1 (ns/a3): device gpu.example.com/pool-a/gpu-h is "
                        "allocated to claim ns/held"));
  ASSERT_THAT(a->Refresh(), IsOk());
  EXPECT_THAT(a->Get(Key("a2")).status(), StatusIs(absl::StatusCode::kNotFound, "a2"));
}

// Last in the binary: it stops two members.
// A mirror whose disk fills: once its follower has met the full disk, its
// writes are refused with the no-space error before they reach etcd; its
// reads go on; when space returns it catches up from etcd with what another
// mirror wrote meanwhile, and takes writes again.
TEST_F(SharedStoreTest, AMirrorWhoseDiskFillsRefusesWritesReadsOnAndCatchesUpFromEtcd) {
  ::claimstore::testing::Tmpfs fs(16 << 20);
  CLAIMSTORE_REQUIRE_TMPFS(fs);
  Options options = SharedOptions();
  options.write_buffer_bytes = 256 << 10;
  options.etcd_timeout = absl::Seconds(1);
  const std::string path = fs.path() + "/mirror";
  absl::StatusOr<std::unique_ptr<Store>> full = Store::Open(path, options);
  ASSERT_THAT(full.status(), IsOk());
  std::unique_ptr<Store> other = OpenMirror(1);
  ASSERT_NE(other, nullptr);
  const auto claim = [](uint64_t i) {
    absl::StatusOr<ClaimRecord> r = DecodeClaim(GenerateClaimJson(i));
    EXPECT_THAT(r.status(), IsOk());
    return *std::move(r);
  };
  const auto key = [](const ClaimRecord& r) {
    return ClaimKey{std::string(r.claim_namespace()), std::string(r.name())};
  };
  ASSERT_THAT((*full)->Put(claim(0)).status(), IsOk());
  fs.FillLeaving(fs.path() + "/ballast", 0);
  // The other mirror writes on until the full one's follower cannot apply
  // what it writes (the full mirror's log has some room preallocated).
  // Before the follower meets the full disk, a write of the full mirror
  // lands, or reaches etcd and times out waiting for the mirror
  // (Unavailable, naming why); after, it is refused before etcd.
  uint64_t next = 1;
  absl::Status refused;
  for (int round = 0; round < 200 && !IsNoSpace(refused); ++round) {
    for (int i = 0; i < 10; ++i, ++next) ASSERT_THAT(other->Put(claim(next)).status(), IsOk());
    refused = (*full)->Put(claim(100000 + round)).status();
    if (!refused.ok() && !IsNoSpace(refused)) {
      EXPECT_THAT(refused.message(), ::testing::HasSubstr("no space left on device")) << refused;
    }
  }
  EXPECT_TRUE(IsNoSpace(refused)) << refused;
  EXPECT_THAT(refused.message(), ::testing::HasSubstr(path + ": no space left on device"));
  EXPECT_THAT((*full)->Get(key(claim(0))).status(), IsOk());
  EXPECT_THAT((*full)->AllocatedDevices().status(), IsOk());

  std::filesystem::remove(fs.path() + "/ballast");
  const ClaimKey last = key(claim(next - 1));
  absl::Status caught_up;
  for (int attempt = 0; attempt < 200; ++attempt) {
    caught_up = (*full)->Get(last).status();
    if (caught_up.ok()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_THAT(caught_up, IsOk()) << "the mirror did not catch up once space returned: "
                                 << FollowError(**full);
  ASSERT_THAT((*full)->Put(claim(2000)).status(), IsOk());
  ASSERT_THAT(other->Put(claim(2001)).status(), IsOk());
  for (int attempt = 0; attempt < 200 && !(*full)->Get(key(claim(2001))).ok(); ++attempt) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(Contents(**full), Contents(*other));
  absl::StatusOr<VerifyReport> report = (*full)->Verify(false);
  ASSERT_THAT(report.status(), IsOk());
  EXPECT_TRUE(report->problems.empty()) << absl::StrJoin(report->problems, "\n");
}

TEST_F(SharedStoreTest, WithoutAQuorumWritesFailInBoundedTimeAndReadsGoOnSayingHowStale) {
  Options options = SharedOptions();
  options.etcd_timeout = absl::Seconds(2);
  auto opened = Store::Open(MirrorPath(0), options);
  ASSERT_THAT(opened.status(), IsOk());
  Store& a = **opened;
  ASSERT_THAT(a.Put(ClaimJson("ns", "c1")), IsOk());
  absl::StatusOr<StoreStats> before = a.Stats();
  ASSERT_THAT(before.status(), IsOk());
  EXPECT_TRUE(before->shared);
  EXPECT_TRUE(before->etcd_following);
  EtcdCluster& cluster = TestCluster();
  const int lead = cluster.Leader();
  cluster.Kill(lead);
  cluster.Kill((lead + 1) % cluster.size());
  const absl::Time start = absl::Now();
  absl::StatusOr<WriteResult> w = a.Reserve(Key("c1"), Pod("p"));
  EXPECT_THAT(w.status(), StatusIs(absl::StatusCode::kUnavailable, ""));
  EXPECT_LT(absl::Now() - start, absl::Seconds(8)) << w.status();
  // Reads go on, from the mirror.
  EXPECT_THAT(a.Get(Key("c1")).status(), IsOk());
  // And the mirror says it is not following, since when, and why.
  absl::StatusOr<StoreStats> stats;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  do {
    absl::SleepFor(absl::Milliseconds(100));
    stats = a.Stats();
    ASSERT_THAT(stats.status(), IsOk());
  } while (stats->etcd_following && absl::Now() < deadline);
  EXPECT_FALSE(stats->etcd_following);
  EXPECT_GE(stats->etcd_unreachable_since, start - absl::Seconds(1));
  EXPECT_FALSE(stats->etcd_error.empty());
  EXPECT_EQ(stats->revision, before->revision);
  ASSERT_THAT(cluster.StartStopped(), IsOk());
  // With the quorum back the mirror follows again and writes go on.
  absl::StatusOr<WriteResult> again;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  do {
    again = a.Reserve(Key("c1"), Pod("p"));
  } while (absl::IsUnavailable(again.status()) && absl::Now() < give_up);
  EXPECT_THAT(again.status(), StatusIs(absl::StatusCode::kFailedPrecondition, "not allocated"));
  do {
    absl::SleepFor(absl::Milliseconds(100));
    stats = a.Stats();
  } while (!stats->etcd_following && absl::Now() < give_up);
  EXPECT_TRUE(stats->etcd_following);
}

}  // namespace
}  // namespace claimstore
