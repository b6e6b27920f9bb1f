// The in-memory published state of a writable store (store/src/state/published_state.h).
#include "state/published_state.h"

#include <future>
#include <random>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "claimstore/codec.h"
#include "gtest/gtest.h"
#include "index/keys.h"
#include "record/record_factory.h"

namespace claimstore::internal {
namespace {

std::string Bytes(const std::string& name) {
  return std::string(DecodeClaim(R"({"metadata":{"namespace":"ns","name":")" + name +
                                 R"(","uid":"u"},"status":{}})")
                         ->bytes());
}

ClaimRecord Rec(const std::string& name) { return RecordFactory::FromBuilt(Bytes(name)); }

std::vector<std::optional<ClaimRecord>> Look(const PublishedState& state,
                                             const std::vector<std::string>& keys, Pin* pin) {
  std::vector<std::optional<ClaimRecord>> out;
  *pin = state.Lookup(keys, &out);
  return out;
}

TEST(PublishedStateTest, PublishedRecordsAreReadBackAndDeletesForgotten) {
  PublishedState state(1 << 20);
  state.Reset(5, nullptr, PublishedState::NewConsumerIndex(), PublishedState::NewDeviceIndex());
  state.Publish(6, nullptr, std::vector<RecordChange>{{RecordKey("ns", "a"), Rec("a"), {}, {}}});
  Pin pin;
  auto got = Look(state, {RecordKey("ns", "a"), RecordKey("ns", "b")}, &pin);
  EXPECT_EQ(pin.revision, 6u);
  ASSERT_TRUE(got[0].has_value());
  EXPECT_EQ(got[0]->name(), "a");
  EXPECT_FALSE(got[1].has_value());
  state.Publish(7, nullptr,
                std::vector<RecordChange>{{RecordKey("ns", "a"), std::nullopt, {}, {}}});
  got = Look(state, {RecordKey("ns", "a")}, &pin);
  EXPECT_FALSE(got[0].has_value());
  EXPECT_EQ(pin.revision, 7u);
}

TEST(PublishedStateTest, AFillReadBeforeANewerCommitIsDropped) {
  PublishedState state(1 << 20);
  state.Reset(5, nullptr, PublishedState::NewConsumerIndex(), PublishedState::NewDeviceIndex());
  // A reader read "a" at revision 5; meanwhile revision 6 deleted it.
  state.Publish(6, nullptr,
                std::vector<RecordChange>{{RecordKey("ns", "a"), std::nullopt, {}, {}}});
  state.Fill(5, {{RecordKey("ns", "a"), RecordFactory::FromBuilt(Bytes("a"))}});
  Pin pin;
  EXPECT_FALSE(Look(state, {RecordKey("ns", "a")}, &pin)[0].has_value());
  // Read at the current revision: kept.
  state.Fill(6, {{RecordKey("ns", "b"), RecordFactory::FromBuilt(Bytes("b"))}});
  EXPECT_TRUE(Look(state, {RecordKey("ns", "b")}, &pin)[0].has_value());
}

TEST(PublishedStateTest, TheCacheStaysWithinItsBudgetAndKeepsWhatIsRead) {
  const size_t one = Bytes("c0").size() + 200;
  PublishedState state(8 * one);
  state.Reset(0, nullptr, PublishedState::NewConsumerIndex(), PublishedState::NewDeviceIndex());
  std::vector<RecordChange> changes;
  for (int i = 0; i < 4; ++i) {
    changes.push_back(
        {RecordKey("ns", "c" + std::to_string(i)), Rec("c" + std::to_string(i)), {}, {}});
  }
  state.Publish(1, nullptr, changes);
  Pin pin;
  // c0 is read (its second chance) while 40 more come in.
  for (int round = 0; round < 10; ++round) {
    ASSERT_TRUE(Look(state, {RecordKey("ns", "c0")}, &pin)[0].has_value()) << round;
    changes.clear();
    for (int i = 0; i < 4; ++i) {
      const std::string name = "d" + std::to_string(round * 4 + i);
      changes.push_back({RecordKey("ns", name), Rec(name), {}, {}});
    }
    state.Publish(2 + round, nullptr, changes);
  }
  int cached = 0;
  for (int i = 0; i < 40; ++i) {
    cached += Look(state, {RecordKey("ns", "d" + std::to_string(i))}, &pin)[0].has_value();
  }
  EXPECT_LE(state.CachedBytes(), 8 * one);
  EXPECT_LT(cached, 40);  // evicted
  EXPECT_GT(cached, 0);
  EXPECT_TRUE(Look(state, {RecordKey("ns", "c0")}, &pin)[0].has_value());
  EXPECT_FALSE(Look(state, {RecordKey("ns", "c1")}, &pin)[0].has_value());
}

TEST(PublishedStateTest, IndexesFollowThePublishedChanges) {
  PublishedState state(0);
  BucketedKeys consumers = PublishedState::NewConsumerIndex();
  consumers.Insert(ConsumerKey("pod-1", "ns", "a"));
  state.Reset(0, nullptr, std::move(consumers), PublishedState::NewDeviceIndex());
  IndexEntries before{{ConsumerKey("pod-1", "ns", "a")}, {}};
  IndexEntries after{{ConsumerKey("pod-2", "ns", "a")}, {}};
  state.Publish(1, nullptr,
                std::vector<RecordChange>{{RecordKey("ns", "a"), Rec("a"), before, after}});
  std::string prefix;
  AppendComponent("pod-2", &prefix);
  std::vector<std::string> keys;
  const auto collect = [&keys](absl::string_view k) { keys.emplace_back(k); };
  EXPECT_EQ(state.ScanConsumers(prefix, collect)->revision, 1u);
  EXPECT_EQ(keys, after.consumers);
  keys.clear();
  prefix.clear();
  AppendComponent("pod-1", &prefix);
  ASSERT_TRUE(state.ScanConsumers(prefix, collect).ok());
  EXPECT_TRUE(keys.empty());
  // With the cache off, records are never kept.
  Pin pin;
  EXPECT_FALSE(Look(state, {RecordKey("ns", "a")}, &pin)[0].has_value());
}

TEST(PublishedStateTest, DeferredIndexesLoadOnceAtFirstUseAndAFailedLoadIsRetried) {
  PublishedState state(1 << 20);
  int loads = 0;
  absl::Status fail = absl::UnavailableError("disk gone");
  state.ResetDeferred(7, nullptr, [&](const Pin& at, BucketedKeys* consumers, BucketedKeys*) {
    ++loads;
    EXPECT_EQ(at.revision, 7u);  // at the published state
    if (!fail.ok()) return fail;
    consumers->AppendSorted(ConsumerKey("pod-1", "ns", "a"));
    return absl::OkStatus();
  });
  EXPECT_FALSE(state.IndexesLoaded());
  EXPECT_EQ(loads, 0);  // not at the reset
  std::string prefix;
  AppendComponent("pod-1", &prefix);
  std::vector<std::string> keys;
  const auto collect = [&keys](absl::string_view k) { keys.emplace_back(k); };
  absl::StatusOr<Pin> scanned = state.ScanConsumers(prefix, collect);
  EXPECT_EQ(scanned.status(), fail);  // the load's error, nothing visited
  EXPECT_TRUE(keys.empty());
  EXPECT_FALSE(state.IndexesLoaded());
  fail = absl::OkStatus();
  scanned = state.ScanConsumers(prefix, collect);
  ASSERT_TRUE(scanned.ok()) << scanned.status();
  EXPECT_EQ(scanned->revision, 7u);
  EXPECT_EQ(keys, std::vector<std::string>{ConsumerKey("pod-1", "ns", "a")});
  EXPECT_TRUE(state.IndexesLoaded());
  std::vector<std::string> consumers, devices;
  ASSERT_TRUE(state.CopyIndexes(&consumers, &devices).ok());
  EXPECT_TRUE(state.ScanDevices("", collect).ok());
  EXPECT_EQ(loads, 2);  // once more after the failure, then never again
  EXPECT_EQ(consumers, keys);
}

TEST(PublishedStateTest, AResetReplacesADeferredLoadThatNeverRuns) {
  PublishedState state(1 << 20);
  bool loaded = false;
  state.ResetDeferred(3, nullptr, [&](const Pin&, BucketedKeys*, BucketedKeys*) {
    loaded = true;
    return absl::OkStatus();
  });
  BucketedKeys consumers = PublishedState::NewConsumerIndex();
  consumers.Insert(ConsumerKey("pod-2", "ns", "b"));
  state.Reset(9, nullptr, std::move(consumers), PublishedState::NewDeviceIndex());
  EXPECT_TRUE(state.IndexesLoaded());
  std::vector<std::string> keys;
  absl::StatusOr<Pin> scanned =
      state.ScanConsumers("", [&keys](absl::string_view k) { keys.emplace_back(k); });
  ASSERT_TRUE(scanned.ok());
  EXPECT_EQ(scanned->revision, 9u);
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_FALSE(loaded);
}

}  // namespace
}  // namespace claimstore::internal

namespace claimstore::internal {
namespace {

// A claim holding `device` exclusively (pool "p" of driver "d").
ClaimRecord Holding(const std::string& name, const std::string& device) {
  return RecordFactory::FromBuilt(
      std::string(DecodeClaim(R"({"metadata":{"namespace":"ns","name":")" + name +
                              R"(","uid":"u"},"status":{"allocation":{"devices":{"results":[)"
                              R"({"request":"r","driver":"d","pool":"p","device":")" +
                              device + R"("}]}}}})")
                      ->bytes()));
}

TEST(PublishedStateTest, AnAllocatedBuildTakesInTheCommitsPublishedWhileItRan) {
  PublishedState state(1 << 20);
  state.Reset(5, nullptr, PublishedState::NewConsumerIndex(), PublishedState::NewDeviceIndex());
  std::promise<void> entered, release;
  std::shared_future<void> go = release.get_future().share();
  int loads = 0;
  std::vector<uint64_t> pins;
  state.SetAllocatedLoader([&](const Pin& at, const std::vector<std::string>*)
                               -> absl::StatusOr<std::shared_ptr<const AllocatedVersion>> {
    ++loads;
    pins.push_back(at.revision);
    entered.set_value();
    go.wait();
    AllocatedBuilder builder;
    builder.Add(Holding("a", "x0"));  // the state at revision 5
    return std::move(builder).Finish(at.revision);
  });
  std::thread first([&] {
    absl::StatusOr<AllocatedState> s = state.Allocated();
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->revision(), 7u);
    EXPECT_NE(s->Find("d", "p", "x0"), nullptr);
    EXPECT_NE(s->Find("d", "p", "x1"), nullptr);
    EXPECT_EQ(s->Find("d", "p", "x2"), nullptr);
  });
  entered.get_future().wait();
  // Commits while the build reads: b takes x1, then x2, then gives x2 back.
  state.Publish(6, nullptr,
                std::vector<RecordChange>{
                    {RecordKey("ns", "b"), Holding("b", "x1"), {}, {}, 6, std::nullopt}});
  state.Publish(
      7, nullptr,
      std::vector<RecordChange>{{RecordKey("ns", "c"), Holding("c", "x2"), {}, {}, 7, std::nullopt},
                                {RecordKey("ns", "c"), Rec("c"), {}, {}, 7, Holding("c", "x2")}});
  release.set_value();
  first.join();
  // Later calls share the built state, which the next commits update.
  state.Publish(8, nullptr,
                std::vector<RecordChange>{
                    {RecordKey("ns", "a"), std::nullopt, {}, {}, 8, Holding("a", "x0")}});
  absl::StatusOr<AllocatedState> after = state.Allocated();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->revision(), 8u);
  EXPECT_EQ(after->Find("d", "p", "x0"), nullptr);
  EXPECT_EQ(after->size(), 1u);
  EXPECT_EQ(loads, 1);
  // A bulk load drops it: the next call builds again.
  state.PublishBulk(9, nullptr, {});
  release = std::promise<void>();
  entered = std::promise<void>();
  go = release.get_future().share();
  release.set_value();
  absl::StatusOr<AllocatedState> rebuilt = state.Allocated();
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_EQ(rebuilt->revision(), 9u);
  EXPECT_EQ(pins, (std::vector<uint64_t>{5, 9}));
}

TEST(PublishedStateTest, AnAllocatedBuildThatABulkLoadOvertookStartsAgain) {
  PublishedState state(1 << 20);
  state.Reset(5, nullptr, PublishedState::NewConsumerIndex(), PublishedState::NewDeviceIndex());
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::vector<uint64_t> pins;
  state.SetAllocatedLoader([&](const Pin& at, const std::vector<std::string>*)
                               -> absl::StatusOr<std::shared_ptr<const AllocatedVersion>> {
    pins.push_back(at.revision);
    AllocatedBuilder builder;
    if (pins.size() == 1) {
      entered.set_value();
      go.wait();
      builder.Add(Holding("a", "stale"));  // the state before the load
    } else {
      builder.Add(Holding("a", "loaded"));
    }
    return std::move(builder).Finish(at.revision);
  });
  std::thread first([&] {
    absl::StatusOr<AllocatedState> s = state.Allocated();
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->revision(), 7u);
    EXPECT_EQ(s->Find("d", "p", "stale"), nullptr);
    EXPECT_NE(s->Find("d", "p", "loaded"), nullptr);
    // The commit queued before the load went with the dropped build (the
    // records the second build reads hold it).
    EXPECT_EQ(s->Find("d", "p", "x0"), nullptr);
  });
  entered.get_future().wait();
  state.Publish(6, nullptr,
                std::vector<RecordChange>{
                    {RecordKey("ns", "b"), Holding("b", "x0"), {}, {}, 6, std::nullopt}});
  state.PublishBulk(7, nullptr, {});  // drops what was built and queued
  release.set_value();
  first.join();
  EXPECT_EQ(pins, (std::vector<uint64_t>{5, 7}));
}

TEST(BucketedKeysTest, ScansEveryPrefixInKeyOrder) {
  BucketedKeys devices = PublishedState::NewDeviceIndex();
  std::vector<std::string> all;
  for (const char* driver : {"gpu", "nic"}) {
    for (const char* pool : {"node-1", "node-2"}) {
      for (const char* device : {"d0", "d1", "d10"}) {
        for (const char* claim : {"b", "a"}) {
          all.push_back(DeviceKey(driver, pool, device, HoldingKind::kExclusive, "", "ns", claim));
          devices.Insert(all.back());
        }
      }
    }
  }
  devices.Insert(all[0]);  // again: a set
  std::sort(all.begin(), all.end());
  std::vector<std::string> copy;
  devices.CopyTo(&copy);
  EXPECT_EQ(copy, all);
  const auto scan = [&](std::initializer_list<const char*> components) {
    std::string prefix;
    for (const char* c : components) AppendComponent(c, &prefix);
    std::vector<std::string> got;
    devices.Scan(prefix, [&](absl::string_view k) { got.emplace_back(k); });
    std::vector<std::string> want;
    for (const std::string& k : all) {
      if (absl::StartsWith(k, prefix)) want.push_back(k);
    }
    EXPECT_EQ(got, want) << "prefix of " << components.size() << " components";
    return got.size();
  };
  EXPECT_EQ(scan({"gpu"}), 12u);                 // shorter than a bucket
  EXPECT_EQ(scan({"gpu", "node-2"}), 6u);        // one bucket
  EXPECT_EQ(scan({"gpu", "node-2", "d1"}), 2u);  // within a bucket: not d10
  EXPECT_EQ(scan({"gpu", "node-3"}), 0u);
  EXPECT_EQ(scan({"tpu"}), 0u);
  for (const std::string& k : all) devices.Erase(k);
  devices.CopyTo(&copy);
  EXPECT_TRUE(copy.empty());
  all.clear();
  EXPECT_EQ(scan({"gpu"}), 0u);
  EXPECT_EQ(scan({"gpu", "node-2"}), 0u);
}

}  // namespace
// Apply (many changes, each bucket once) leaves what the same changes
// made by Insert and Erase one at a time leave, on random sequences.
TEST(BucketedKeysTest, ApplyEqualsInsertsAndErasesOneByOne) {
  std::mt19937 rng(42);
  for (int round = 0; round < 50; ++round) {
    BucketedKeys one = PublishedState::NewDeviceIndex();
    BucketedKeys many = PublishedState::NewDeviceIndex();
    for (int batch = 0; batch < 4; ++batch) {
      absl::flat_hash_map<std::string, bool> present;
      const int n = 1 + static_cast<int>(rng() % 200);
      for (int i = 0; i < n; ++i) {
        const std::string key =
            DeviceKey(rng() % 2 ? "gpu" : "nic", absl::StrCat("node-", rng() % 3),
                      absl::StrCat("d", rng() % 20), HoldingKind::kExclusive, "", "ns",
                      absl::StrCat("c", rng() % 5));
        const bool there = rng() % 3 != 0;
        present[key] = there;  // the last change of a key wins
        if (there) {
          one.Insert(key);
        } else {
          one.Erase(key);
        }
      }
      // One by one, a key changed twice ends as its last change says:
      // replay the net changes too.
      for (const auto& [key, there] : present) {
        if (there) {
          one.Insert(key);
        } else {
          one.Erase(key);
        }
      }
      many.Apply(present);
      std::vector<std::string> a, b;
      one.CopyTo(&a);
      many.CopyTo(&b);
      ASSERT_EQ(a, b) << "round " << round << " batch " << batch;
    }
  }
}

}  // namespace claimstore::internal
