// Store::AllocatedDevices (claimstore/allocated.h) and Allocate's capacity
// limits: the snapshot's contents, its persistence, its equality with what
// a List at the same revision implies (after random concurrent workloads,
// built incrementally and built from the records), and capacity races.
#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "claimstore/claim_generated.h"
#include "claimstore/store.h"
#include "k8s/quantity.h"
#include "state/allocated_state.h"
#include "state/device_index.h"
#include "testutil/store_test_util.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

using ::claimstore::internal::Quantity;
using ::claimstore::testing::Admin;
using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::Exclusive;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::Of;
using ::claimstore::testing::Pod;
using ::claimstore::testing::ScopedTempDir;
using ::claimstore::testing::Share;
using ::claimstore::testing::StatusIs;
using ::claimstore::testing::StoreFixture;
using ::claimstore::testing::Uuid;

constexpr char kDriver[] = "gpu.example.com";

ClaimKey Key(const std::string& name) { return ClaimKey{"ns", name}; }

bool IsAllocated(Store& store, const ClaimKey& key) {
  absl::StatusOr<ClaimRead> read = store.Get(key);
  EXPECT_THAT(read.status(), IsOk());
  if (!read.ok()) return false;
  const fb::ResourceClaimStatus* status = read->record.table().status();
  return status != nullptr && status->allocation() != nullptr;
}

// Whether two quantities' texts are the same number.
bool SameQuantity(absl::string_view a, absl::string_view b) {
  absl::StatusOr<Quantity> qa = Quantity::Parse(a), qb = Quantity::Parse(b);
  return qa.ok() && qb.ok() && qa->Compare(*qb) == 0;
}

class AllocatedTest : public StoreFixture {
 protected:
  void Claim(const std::string& name) { ASSERT_THAT(store_->Put(ClaimJson("ns", name)), IsOk()); }
  AllocatedState Snapshot() {
    absl::StatusOr<AllocatedState> s = store_->AllocatedDevices();
    EXPECT_THAT(s.status(), IsOk());
    return s.ok() ? *std::move(s) : AllocatedState();
  }
};

TEST_F(AllocatedTest, ShowsWhoHoldsEachDeviceAndHow) {
  for (const char* name : {"a", "b", "c", "d"}) Claim(name);
  ASSERT_THAT(store_->Allocate(Key("a"), Of({Exclusive("gpu-0"), Admin("gpu-1")})), IsOk());
  ASSERT_THAT(
      store_->Allocate(Key("b"), Of({Share("gpu-1", 2, {{"memory", "4Gi"}, {"sm", "10"}})})),
      IsOk());
  ASSERT_THAT(store_->Allocate(Key("c"), Of({Share("gpu-1", 1, {{"memory", "2048Mi"}})})), IsOk());
  ASSERT_THAT(store_->Allocate(Key("d"), Of({Exclusive("nic-0", "pool-b"), Admin("gpu-1")})),
              IsOk());

  const AllocatedState state = Snapshot();
  EXPECT_EQ(state.revision(), store_->Stats()->revision);
  EXPECT_EQ(state.size(), 3u);
  const AllocatedDevice* gpu0 = state.Find(kDriver, "pool-a", "gpu-0");
  ASSERT_NE(gpu0, nullptr);
  EXPECT_EQ(gpu0->exclusive, Key("a"));
  EXPECT_TRUE(gpu0->Taken());
  EXPECT_TRUE(gpu0->shares.empty());

  const AllocatedDevice* gpu1 = state.Find(kDriver, "pool-a", "gpu-1");
  ASSERT_NE(gpu1, nullptr);
  EXPECT_FALSE(gpu1->exclusive.has_value());
  EXPECT_TRUE(gpu1->Taken());
  ASSERT_EQ(gpu1->shares.size(), 2u);  // by shareID
  EXPECT_EQ(gpu1->shares[0].share_id, Uuid(1));
  EXPECT_EQ(gpu1->shares[0].claim, Key("c"));
  EXPECT_EQ(gpu1->shares[1].claim, Key("b"));
  ASSERT_NE(gpu1->FindShare(Uuid(2)), nullptr);
  EXPECT_EQ(gpu1->FindShare(Uuid(2))->claim, Key("b"));
  EXPECT_EQ(gpu1->FindShare(Uuid(3)), nullptr);
  EXPECT_EQ(gpu1->admin_access, (std::vector<ClaimKey>{Key("a"), Key("d")}));
  // Exact sums, canonical: 4Gi + 2048Mi; a capacity one share names.
  EXPECT_EQ(gpu1->Consumed("memory"), "6Gi");
  EXPECT_EQ(gpu1->Consumed("sm"), "10");
  EXPECT_EQ(gpu1->Consumed("nothing"), "0");
  EXPECT_EQ(gpu1->consumed_capacity, (std::vector<CapacityValue>{{"memory", "6Gi"}, {"sm", "10"}}));

  EXPECT_EQ(state.Find(kDriver, "pool-a", "gpu-9"), nullptr);
  EXPECT_EQ(state.Find(kDriver, "pool-b", "gpu-0"), nullptr);
  EXPECT_EQ(state.Find("other.example.com", "pool-a", "gpu-0"), nullptr);

  // Iteration: all, a driver, a pool, in order; stopping early.
  auto names = [&](absl::string_view driver, std::optional<absl::string_view> pool) {
    std::vector<std::string> out;
    state.ForEach(driver, pool, [&](const AllocatedDevice& d) {
      out.push_back(absl::StrCat(d.pool, "/", d.device));
      return true;
    });
    return out;
  };
  const std::vector<std::string> all = {"pool-a/gpu-0", "pool-a/gpu-1", "pool-b/nic-0"};
  EXPECT_EQ(names("", std::nullopt), all);
  EXPECT_EQ(names(kDriver, std::nullopt), all);
  EXPECT_EQ(names(kDriver, "pool-b"), (std::vector<std::string>{"pool-b/nic-0"}));
  EXPECT_EQ(names(kDriver, "pool-c"), std::vector<std::string>{});
  EXPECT_EQ(names("a.example.com", std::nullopt), std::vector<std::string>{});
  int visited = 0;
  state.ForEach("", std::nullopt, [&](const AllocatedDevice&) { return ++visited < 2; });
  EXPECT_EQ(visited, 2);

  // A kept snapshot does not change; a new one shows the writes after it.
  ASSERT_THAT(store_->Deallocate(Key("b")), IsOk());
  ASSERT_THAT(store_->Delete(Key("a")), IsOk());
  EXPECT_EQ(state.Find(kDriver, "pool-a", "gpu-1")->Consumed("memory"), "6Gi");
  EXPECT_NE(state.Find(kDriver, "pool-a", "gpu-0"), nullptr);
  const AllocatedState after = Snapshot();
  EXPECT_GT(after.revision(), state.revision());
  EXPECT_EQ(after.Find(kDriver, "pool-a", "gpu-0"), nullptr);
  const AllocatedDevice* shared = after.Find(kDriver, "pool-a", "gpu-1");
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->Consumed("memory"), "2Gi");
  EXPECT_EQ(shared->Consumed("sm"), "0");
  EXPECT_EQ(shared->admin_access, std::vector<ClaimKey>{Key("d")});

  // Reservations and device statuses leave it as it was.
  ASSERT_THAT(store_->Reserve(Key("c"), Pod("u1")), IsOk());
  EXPECT_EQ(Snapshot().Find(kDriver, "pool-a", "gpu-1")->shares.size(), 1u);
}

TEST_F(AllocatedTest, EmptyStoreAndRebuildAfterReopen) {
  AllocatedState empty = Snapshot();
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.Find(kDriver, "pool-a", "gpu-0"), nullptr);
  EXPECT_EQ(AllocatedState().size(), 0u);
  Claim("a");
  ASSERT_THAT(store_->Allocate(Key("a"), Of({Share("gpu-0", 1, {{"memory", "1.5Gi"}})})), IsOk());
  Reopen();  // the first call builds it from the records
  const AllocatedState state = Snapshot();
  EXPECT_EQ(state.revision(), 2u);
  ASSERT_NE(state.Find(kDriver, "pool-a", "gpu-0"), nullptr);
  EXPECT_EQ(state.Find(kDriver, "pool-a", "gpu-0")->Consumed("memory"), "1536Mi");
}

TEST_F(AllocatedTest, CapacityLimitsRefuseOverCommitNamingEverything) {
  for (const char* name : {"a", "b", "c", "x"}) Claim(name);
  const std::vector<DeviceCapacity> limit = {{kDriver, "pool-a", "gpu-0", {{"memory", "8Gi"}}}};
  ASSERT_THAT(store_->Allocate(Key("a"), Of({Share("gpu-0", 1, {{"memory", "4Gi"}})}), {}, limit),
              IsOk());
  ASSERT_THAT(store_->Allocate(Key("b"), Of({Share("gpu-0", 2, {{"memory", "3Gi"}})}), {}, limit),
              IsOk());
  const uint64_t revision = store_->Stats()->revision;
  EXPECT_THAT(store_->Allocate(Key("c"), Of({Share("gpu-0", 3, {{"memory", "2Gi"}})}), {}, limit),
              StatusIs(absl::StatusCode::kAborted,
                       "device gpu.example.com/pool-a/gpu-0: capacity \"memory\" would be "
                       "over-committed: limit 8Gi, consumed by other shares 7Gi, asked 2Gi"));
  EXPECT_EQ(store_->Stats()->revision, revision);  // nothing written
  EXPECT_FALSE(IsAllocated(*store_, Key("c")));
  // Exactly the limit fits; two shares of one claim count together.
  ASSERT_THAT(store_->Allocate(Key("c"),
                               Of({Share("gpu-0", 3, {{"memory", "512Mi"}}),
                                   Share("gpu-0", 4, {{"memory", "0.5Gi"}})}),
                               {}, limit),
              IsOk());
  EXPECT_EQ(Snapshot().Find(kDriver, "pool-a", "gpu-0")->Consumed("memory"), "8Gi");
  // Without limits nothing is checked (the caller did not say); a limit on
  // another capacity or device does not apply.
  ASSERT_THAT(store_->Deallocate(Key("c")), IsOk());
  EXPECT_THAT(store_->Allocate(Key("c"), Of({Share("gpu-0", 3, {{"memory", "1Gi"}})}), {},
                               {{{kDriver, "pool-a", "gpu-0", {{"cores", "1"}}},
                                 {kDriver, "pool-a", "gpu-1", {{"memory", "1"}}}}}),
              IsOk());
  // Bad limits: InvalidArgument naming the field; nothing is written.
  EXPECT_THAT(store_->Allocate(Key("x"), Of({Share("gpu-0", 5, {})}), {},
                               {{{kDriver, "pool-a", "gpu-0", {{"memory", "lots"}}}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "capacity[0].capacity[\"memory\"]: Invalid value: \"lots\""));
  EXPECT_THAT(store_->Allocate(Key("x"), Of({Share("gpu-0", 5, {})}), {},
                               {{{kDriver, "", "gpu-0", {{"memory", "1"}}}}}),
              StatusIs(absl::StatusCode::kInvalidArgument, "capacity[0].pool: Required value"));
  EXPECT_THAT(store_->Allocate(Key("x"), Of({Share("gpu-0", 5, {{"memory", "1Q"}})})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "status.allocation.devices.results[0].consumedCapacity[\"memory\"]: "
                       "Invalid value: \"1Q\""));
  EXPECT_THAT(store_->Allocate(Key("x"), Of({Share("gpu-0", 5, {{"memory", "-1Gi"}})})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "consumedCapacity[\"memory\"]: Invalid value: \"-1Gi\": must be greater "
                       "than or equal to 0"));
  EXPECT_FALSE(IsAllocated(*store_, Key("x")));
  // A quantity too far from the others to sum exactly fails the allocation
  // (as the scheduler's unrepresentable quantities do), without taking
  // gigabytes to find out.
  EXPECT_THAT(
      store_->Allocate(Key("x"), Of({Share("gpu-0", 5, {{"memory", "1e2000000000"}})}), {}, limit),
      StatusIs(absl::StatusCode::kAborted, "more than 1000 digits"));
  EXPECT_FALSE(IsAllocated(*store_, Key("x")));
}

TEST_F(AllocatedTest, RacingSharesNeverOverCommitADevice) {
  constexpr int kThreads = 16, kFit = 5, kRounds = 12;
  for (int t = 0; t < kThreads; ++t) Claim(absl::StrCat("c", t));
  const std::vector<DeviceCapacity> limit = {
      {kDriver, "pool-a", "gpu-0", {{"memory", absl::StrCat(kFit, "Gi")}}}};
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<int> won{0}, lost{0};
    testing::RaceThreads(kThreads, [&](int t) {
      // 1Gi in some form: the same value in different suffixes.
      static const char* kForms[] = {"1Gi", "1024Mi", "1073741824", "1048576Ki"};
      absl::StatusOr<WriteResult> r =
          store_->Allocate(Key(absl::StrCat("c", t)),
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
    const AllocatedState state = Snapshot();
    const AllocatedDevice* d = state.Find(kDriver, "pool-a", "gpu-0");
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->shares.size(), static_cast<size_t>(kFit));
    EXPECT_TRUE(SameQuantity(d->Consumed("memory"), absl::StrCat(kFit, "Gi")))
        << d->Consumed("memory");
    for (int t = 0; t < kThreads; ++t)
      ASSERT_THAT(store_->Deallocate(Key(absl::StrCat("c", t))), IsOk());
    EXPECT_EQ(Snapshot().Find(kDriver, "pool-a", "gpu-0"), nullptr);
  }
}

// Bytes [at, at + 16) of `key`, big-endian, zero-padded: a node's slice,
// worked out here without the tree's code.
internal::KeySlice ExpectedSlice(absl::string_view key, size_t at) {
  uint64_t half[2] = {0, 0};
  for (size_t i = 0; i < 16; ++i) {
    const uint64_t byte = at + i < key.size() ? static_cast<unsigned char>(key[at + i]) : 0;
    half[i / 8] = half[i / 8] << 8 | byte;
  }
  return {half[0], half[1]};
}

// What a node promises its searches (allocated_state.h), checked through
// the subtree of `node`, whose leaves are `height` levels down: its prefix
// starts every entry's key, each slice is the key's bytes after it, the
// entries ascend, a child's first device is its entry's, and a node of
// `epoch` (not 0) has a parent of that epoch. Returns the number of devices.
size_t CheckNode(const internal::AllocatedNode& node, int height, uint64_t epoch,
                 bool parent_of_epoch) {
  using internal::AllocatedNode;
  EXPECT_GE(node.size, 1u);
  EXPECT_LE(node.size, AllocatedNode::kMaxEntries);
  EXPECT_LE(node.lcp, AllocatedNode::kPrefixMax);
  EXPECT_EQ(node.leaf, height == 0);
  if (epoch != 0 && node.epoch == epoch) {
    EXPECT_TRUE(parent_of_epoch) << "a node of the version's epoch under one of another";
  }
  size_t devices = 0;
  std::string last;
  for (size_t i = 0; i < node.size; ++i) {
    const std::string key(internal::DeviceOrderKey(internal::IdOf(*node.firsts[i])).bytes());
    EXPECT_EQ(absl::string_view(key).substr(0, node.lcp), absl::string_view(node.prefix, node.lcp))
        << "entry " << i << " of " << node.size;
    EXPECT_EQ(node.slices[i], ExpectedSlice(key, node.lcp)) << "entry " << i << " of " << node.size;
    if (i > 0) {
      EXPECT_LT(last, key) << "entry " << i;
    }
    last = key;
    if (node.leaf) {
      EXPECT_EQ(node.owned[i].get(), node.firsts[i]);
      ++devices;
    } else {
      const AllocatedNode& child = *node.child(i);
      EXPECT_EQ(child.firsts[0], node.firsts[i]) << "entry " << i;
      devices += CheckNode(child, height - 1, epoch, epoch != 0 && node.epoch == epoch);
    }
  }
  return devices;
}

// The whole tree of `version` (CheckNode), and its count of devices.
void CheckStructure(const internal::AllocatedVersion& version) {
  if (version.root == nullptr) {
    EXPECT_EQ(version.devices, 0u);
    return;
  }
  int height = 0;
  for (const internal::AllocatedNode* n = version.root.get(); !n->leaf; n = n->child(0)) ++height;
  EXPECT_EQ(CheckNode(*version.root, height, version.epoch, /*parent_of_epoch=*/true),
            version.devices);
}

// The persistent tree against a std::map, through random edits (with a
// bottom-up rebuild midway), with old versions checked to stay as they
// were. `name_of(rng)` gives a (driver, pool, device). `in_place`: edits
// as the store's leader makes them while nobody took the version
// (ApplyDeviceChanges, in the version's epoch), with versions taken at
// random (a copy kept, the version given a new epoch, as PublishedState
// does) and checked to stay as they were when released.
using DeviceName = std::tuple<std::string, std::string, std::string>;
void CheckTreeAgainstAMap(const std::function<DeviceName(std::mt19937&)>& name_of, int steps,
                          const std::vector<std::string>& drivers, bool in_place = false) {
  using internal::AllocatedNode;
  using internal::AllocatedVersion;
  using internal::DeviceId;
  std::mt19937 rng(7);
  // In place, half the steps: the sanitizer builds run these for minutes.
  if (in_place) steps /= 2;
  AllocatedVersion version;
  if (in_place) version.epoch = internal::NewEpoch();
  std::map<DeviceName, int> model;
  std::vector<std::pair<AllocatedVersion, decltype(model)>> kept;
  // Versions taken, held for a while with a digest of what they held
  // then, each checked to hold the same as it goes.
  std::vector<std::pair<AllocatedVersion, uint64_t>> taken;
  const auto digest = [](const AllocatedVersion& v) {
    uint64_t h = v.devices;
    internal::AllocatedTracker::Wrap(std::make_shared<AllocatedVersion>(v))
        .ForEach("", std::nullopt, [&](const AllocatedDevice& d) {
          for (absl::string_view part :
               {absl::string_view(d.driver), absl::string_view(d.pool), absl::string_view(d.device),
                absl::string_view(d.exclusive->name)}) {
            h = h * 1000003 ^ std::hash<std::string_view>()({part.data(), part.size()});
          }
          return true;
        });
    return h;
  };
  const auto set = [&](const DeviceId& id, internal::DevicePtr device) {
    if (!in_place) return internal::SetDevice(&version, id, std::move(device));
    std::vector<std::shared_ptr<const void>> released;
    const internal::DeviceChange change(id, std::move(device));
    internal::ApplyDeviceChanges(&version, {&change, 1}, &released);
  };
  const auto take = [&] {
    if (in_place) version.epoch = internal::NewEpoch();  // the copy shares its nodes
  };
  const auto device_of = [](const DeviceName& key, int holder) {
    auto d = std::make_shared<AllocatedDevice>();
    d->driver = std::get<0>(key);
    d->pool = std::get<1>(key);
    d->device = std::get<2>(key);
    d->exclusive = ClaimKey{"ns", absl::StrCat(holder)};
    return d;
  };
  // Edits that changed the tree, and those of them that kept its root (in
  // place: edited there, not rebuilt).
  int edits = 0, kept_root = 0;
  for (int step = 0; step < steps; ++step) {
    const DeviceName key = name_of(rng);
    const DeviceId id{std::get<0>(key), std::get<1>(key), std::get<2>(key)};
    const AllocatedNode* root = version.root.get();
    const bool held = model.contains(key);
    if (rng() % 3 == 0) {
      set(id, nullptr);
      model.erase(key);
    } else {
      set(id, device_of(key, step));
      model[key] = step;
    }
    if (held || model.contains(key)) {
      ++edits;
      kept_root += root != nullptr && version.root.get() == root;
    }
    if (step % 5000 == 0) {
      kept.emplace_back(version, model);
      take();
    }
    if (in_place && rng() % 100 == 0) {
      taken.emplace_back(version, digest(version));
      take();
      if (taken.size() > 4) {
        EXPECT_EQ(digest(taken.front().first), taken.front().second) << "a version taken changed";
        taken.erase(taken.begin());
      }
    }
    if (step == steps / 2) {  // rebuilt bottom-up, as a first snapshot is
      std::vector<internal::DevicePtr> devices;
      for (const auto& [k, holder] : model) devices.push_back(device_of(k, holder));
      version = *internal::BuildVersion(version.revision, std::move(devices));
      take();
    }
  }
  for (const auto& t : taken) EXPECT_EQ(digest(t.first), t.second) << "a version taken changed";
  // In place, most edits keep the root (a path is copied only after a
  // version was taken, and nodes are rebuilt on a split or when emptied);
  // persistent edits never do.
  if (in_place) {
    EXPECT_GT(kept_root, edits * 9 / 10) << kept_root << " of " << edits;
  } else {
    EXPECT_EQ(kept_root, 0);
  }
  kept.emplace_back(version, model);
  take();
  for (const auto& entry : kept) {
    const AllocatedVersion& v = entry.first;
    const auto& m = entry.second;  // (clang 14 cannot capture structured bindings)
    ASSERT_EQ(v.devices, m.size());
    CheckStructure(v);
    const AllocatedState state =
        internal::AllocatedTracker::Wrap(std::make_shared<AllocatedVersion>(v));
    auto it = m.begin();
    size_t seen = 0;
    state.ForEach("", std::nullopt, [&](const AllocatedDevice& d) {
      EXPECT_NE(it, m.end());
      if (it == m.end()) return false;
      EXPECT_EQ(std::tie(d.driver, d.pool, d.device),
                std::tie(std::get<0>(it->first), std::get<1>(it->first), std::get<2>(it->first)));
      EXPECT_EQ(d.exclusive->name, absl::StrCat(it->second));
      ++it;
      ++seen;
      return true;
    });
    EXPECT_EQ(seen, m.size());
    for (const auto& [key, value] : m) {
      const AllocatedDevice* d = state.Find(std::get<0>(key), std::get<1>(key), std::get<2>(key));
      ASSERT_NE(d, nullptr);
      EXPECT_EQ(d->exclusive->name, absl::StrCat(value));
    }
    // Names not held (most of what name_of gives is not, in old versions):
    // not found.
    std::mt19937 probe(11);
    for (int i = 0; i < 2000; ++i) {
      const DeviceName key = name_of(probe);
      const AllocatedDevice* d = state.Find(std::get<0>(key), std::get<1>(key), std::get<2>(key));
      EXPECT_EQ(d != nullptr, m.contains(key))
          << absl::CEscape(std::get<1>(key)) << "/" << absl::CEscape(std::get<2>(key));
    }
    EXPECT_EQ(state.Find("m.example.com", "pool-1", "dev-1"), nullptr);
    // Each driver's devices, and each of a driver's pools, in order,
    // stopping at its end (inside internal nodes).
    for (const std::string& driver : drivers) {
      std::vector<std::string> got, want;
      std::map<std::string, size_t> pools;
      state.ForEach(driver, std::nullopt, [&](const AllocatedDevice& d) {
        got.push_back(absl::StrCat(d.driver, "/", d.pool, "/", d.device));
        return true;
      });
      for (const auto& [key, value] : m) {
        if (std::get<0>(key) == driver) {
          want.push_back(
              absl::StrCat(std::get<0>(key), "/", std::get<1>(key), "/", std::get<2>(key)));
          ++pools[std::get<1>(key)];
        }
      }
      EXPECT_EQ(got, want) << absl::CEscape(driver);
      for (const auto& pool_count : pools) {  // (clang 14: no captured bindings)
        const std::string& pool = pool_count.first;
        size_t in_pool = 0;
        state.ForEach(driver, pool, [&](const AllocatedDevice& d) {
          EXPECT_EQ(d.pool, pool);
          ++in_pool;
          return true;
        });
        EXPECT_EQ(in_pool, pool_count.second) << driver << "/" << absl::CEscape(pool);
      }
    }
  }
  // Everything removed: an empty tree.
  for (const auto& [key, value] : model) {
    set({std::get<0>(key), std::get<1>(key), std::get<2>(key)}, nullptr);
  }
  EXPECT_EQ(version.devices, 0u);
  EXPECT_EQ(version.root, nullptr);
}

// Persistent edits, then in place (as the store's leader makes them
// between versions taken).
TEST(AllocatedTreeTest, MatchesAMapThroughRandomEditsAndKeepsOldVersions) {
  static const char* kDrivers[] = {"a.example.com", kDriver, "z.example.com"};
  for (const bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "persistent");
    CheckTreeAgainstAMap(
        [](std::mt19937& rng) {
          return DeviceName(kDrivers[rng() % 3], absl::StrCat("pool-", rng() % 7),
                            absl::StrCat("dev-", rng() % 500));
        },
        30000, {kDrivers[0], kDriver, kDrivers[2]}, in_place);
  }
}

// Nodes compare keys by the prefix their entries share and 16 bytes after
// it: names that are prefixes of others, with NUL bytes, empty, longer than
// the prefix a node keeps (56 bytes), and alike for more than 16 bytes
// after it.
TEST(AllocatedTreeTest, MatchesAMapWithNamesOfEveryShape) {
  const std::string longer(70, 'n');
  const std::vector<std::string> drivers = {"", "d", std::string("d\0", 2), "d0", kDriver};
  const std::vector<std::string> pools = {"",
                                          "p",
                                          std::string("p\0", 2),
                                          std::string("p\0\x01", 3),
                                          "p0",
                                          longer,
                                          longer + "a",
                                          longer + "ab",
                                          "worker-node-0000000000000000-a",
                                          "worker-node-0000000000000000-b"};
  const auto name_of = [&](std::mt19937& rng) {
    std::string device;
    switch (rng() % 5) {
      case 0:
        device = absl::StrCat("gpu-", rng() % 40);
        break;
      case 1:
        device = absl::StrCat("gpu-00000000000000", rng() % 40, "-x");
        break;
      case 2:
        device = std::string(rng() % 3, '\0') + absl::StrCat(rng() % 10);
        break;
      case 3:
        device = absl::StrCat("gpu-0000000000000000000000", rng() % 40);
        break;
      default:
        device = std::string(rng() % 4, 'g');
    }
    return DeviceName(drivers[rng() % drivers.size()], pools[rng() % pools.size()], device);
  };
  // ForEach("") visits every driver. Persistent edits, then in place (as
  // the store's leader makes them between versions taken).
  for (const bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "persistent");
    CheckTreeAgainstAMap(name_of, 40000, {drivers.begin() + 1, drivers.end()}, in_place);
  }
}

// Device `name` of pool "p", held exclusively by ns/`holder`.
internal::DevicePtr DeviceInPool(const std::string& name, const std::string& holder) {
  auto d = std::make_shared<AllocatedDevice>();
  d->driver = kDriver;
  d->pool = "p";
  d->device = name;
  d->exclusive = ClaimKey{"ns", holder};
  return d;
}

TEST(AllocatedTreeTest, ComparingNamesEveryDeviceThatDiffers) {
  const auto device = DeviceInPool;
  const auto kept =
      internal::BuildVersion(3, {device("a", "x"), device("b", "x"), device("d", "x")});
  const auto records =
      internal::BuildVersion(3, {device("b", "y"), device("c", "x"), device("d", "x")});
  EXPECT_EQ(internal::CompareAllocated(*kept, *records),
            (std::vector<std::string>{
                "allocated state: device gpu.example.com/p/a is held in memory but by no record",
                "allocated state: device gpu.example.com/p/b differs from what the records hold",
                "allocated state: device gpu.example.com/p/c is held by a record but missing in "
                "memory"}));
  EXPECT_TRUE(internal::CompareAllocated(*records, *records).empty());
}

// Str(driver) Str(pool) Str(device), by keys.h's own code.
std::string EscapedKey(const internal::DeviceId& id) {
  std::string want;
  internal::AppendComponent(id.driver, &want);
  internal::AppendComponent(id.pool, &want);
  internal::AppendComponent(id.device, &want);
  return want;
}

// Whether kPadding zero bytes follow `key`'s bytes.
bool ZeroPadded(const internal::DeviceOrderKey& key) {
  return absl::string_view(key.data() + key.size(), internal::DeviceOrderKey::kPadding) ==
         std::string(internal::DeviceOrderKey::kPadding, '\0');
}

// A search reads a key's slices and prefix 8 bytes at a time through the
// zeros after it: the key is Str(driver) Str(pool) Str(device) (keys.h),
// with NUL bytes escaped, and 16 zero bytes follow it.
TEST(AllocatedTreeTest, DeviceOrderKeyIsTheDevicesFamilysPrefixFollowedByZeros) {
  const std::vector<std::string> names = {"", "gpu.example.com", std::string("a\0b", 3),
                                          std::string(1, '\0'), std::string(200, 'n')};
  for (const std::string& driver : names) {
    for (const std::string& pool : names) {
      for (const std::string& device : names) {
        const std::string want = EscapedKey({driver, pool, device});
        const internal::DeviceOrderKey key({driver, pool, device});
        ASSERT_EQ(key.bytes(), want)
            << absl::CEscape(driver) << "/" << absl::CEscape(pool) << "/" << absl::CEscape(device);
        ASSERT_EQ(key.data(), key.bytes().data());
        EXPECT_TRUE(ZeroPadded(key));
        // A copy (of a key in the object or on the heap) has the same bytes.
        internal::DeviceOrderKey assigned({"", "", ""});
        assigned = key;
        internal::DeviceOrderKey constructed(key);
        internal::DeviceOrderKey moved_from(key);
        internal::DeviceOrderKey moved(std::move(moved_from));
        for (const internal::DeviceOrderKey* k : {&assigned, &constructed, &moved}) {
          ASSERT_EQ(k->bytes(), want);
          EXPECT_TRUE(ZeroPadded(*k));
        }
        // Assigned over again, from a key in the object (the heap's let go).
        assigned = internal::DeviceOrderKey({"d", "p", "x"});
        EXPECT_EQ(assigned.bytes(), absl::string_view("d\0\1p\0\1x\0\1", 9));
      }
    }
  }
  // Names of every length up to 24 (copied a word, half a word or a byte
  // at a time), plain and with a NUL byte at each place.
  for (size_t n = 0; n <= 24; ++n) {
    std::vector<std::string> names = {std::string(n, 'x')};
    for (size_t at = 0; at < n; ++at) names.push_back(std::string(n, 'x').replace(at, 1, 1, '\0'));
    for (const std::string& name : names) {
      for (const internal::DeviceId& id :
           {internal::DeviceId{name, "p", "d"}, internal::DeviceId{"d", name, "x"},
            internal::DeviceId{"d", "p", name}}) {
        const internal::DeviceOrderKey key(id);
        ASSERT_EQ(key.bytes(), EscapedKey(id)) << absl::CEscape(name);
        EXPECT_TRUE(ZeroPadded(key));
      }
    }
  }
}

// A leaf decides a tie of slices without reading the device when the key
// ends within the slice: names of every length around that edge, held and
// not, and names that go on where another ends (x…x\0, escaped as
// x…x 00 FF, against x…x's terminator 00 01), in one leaf whose prefix
// ends with the pool's name, and with a name beside them.
TEST(AllocatedTreeTest, FindsNamesThatEndAroundTheEdgeOfASlice) {
  const auto device = [](const std::string& name) { return DeviceInPool(name, name); };
  for (const bool with_a_neighbour : {false, true}) {
    std::vector<internal::DevicePtr> devices;
    std::set<std::string> held;
    // x…x of even lengths, and x…x\0 of odd ones, up to 22: keys that end
    // at every byte around the slice's end; the others are probes not held.
    for (size_t n = 0; n <= 22; ++n) {
      held.insert(n % 2 == 0 ? std::string(n, 'x') : std::string(n, 'x') + '\0');
    }
    if (with_a_neighbour) held.insert("w");  // the prefix stops before the x's
    for (const std::string& name : held) devices.push_back(device(name));
    const auto version = internal::BuildVersion(1, std::move(devices));
    CheckStructure(*version);
    for (size_t n = 0; n <= 24; ++n) {
      for (const std::string& name :
           {std::string(n, 'x'), std::string(n, 'x') + '\0', std::string(n, 'y')}) {
        const AllocatedDevice* d = internal::FindDevice(*version, {kDriver, "p", name});
        EXPECT_EQ(d != nullptr, held.contains(name)) << absl::CEscape(name);
        if (d != nullptr) {
          EXPECT_EQ(d->device, name) << absl::CEscape(name);
        }
      }
    }
  }
}

// The same at an internal node, whose entries tie on their slices: a
// child's first slice equal to the key's decides only when the key ends
// within it. Here the key q x{14} 00 01 (the name "q" + 14 x's) and the
// root's second entry q x{14} 00 FF … (the same with a NUL byte after it)
// agree on the 16 bytes after the root's prefix (the pool), and so do the
// second leaf's prefix and first slice: the key is below that entry, and
// held in the first leaf.
TEST(AllocatedTreeTest, FindsANameThatEndsWhereTheFirstOfTheNextLeafGoesOn) {
  const std::string held = "q" + std::string(14, 'x');
  const std::string next = held + '\0' + "z";
  std::vector<internal::DevicePtr> devices;
  for (int i = 0; i < 23; ++i) devices.push_back(DeviceInPool(absl::StrCat("a", i + 10), "c"));
  devices.push_back(DeviceInPool(held, "c"));
  devices.push_back(DeviceInPool(next, "c"));
  for (int i = 0; i < 23; ++i) devices.push_back(DeviceInPool(absl::StrCat("r", i + 10), "c"));
  const auto version = internal::BuildVersion(1, devices);
  CheckStructure(*version);
  // The shape this is about: two leaves, the second starting at `next`;
  // the root's prefix and the second leaf's are the pool's, and the key
  // goes one byte past the 16 after them.
  ASSERT_FALSE(version->root->leaf);
  ASSERT_EQ(version->root->size, 2u);
  ASSERT_EQ(version->root->firsts[1]->device, next);
  const internal::DeviceOrderKey pool_key({kDriver, "p", ""});
  const size_t pool_bytes = pool_key.size() - 2;  // Str(driver) Str(pool)
  ASSERT_EQ(version->root->lcp, pool_bytes);
  ASSERT_EQ(version->root->child(1)->lcp, pool_bytes);
  ASSERT_EQ(internal::DeviceOrderKey({kDriver, "p", held}).size(),
            pool_bytes + internal::AllocatedNode::kSliceBytes + 1);
  for (const internal::DevicePtr& d : devices) {
    const AllocatedDevice* found = internal::FindDevice(*version, internal::IdOf(*d));
    ASSERT_NE(found, nullptr) << absl::CEscape(d->device);
    EXPECT_EQ(found->device, d->device);
  }
  EXPECT_EQ(internal::FindDevice(*version, {kDriver, "p", held + '\0'}), nullptr);
  EXPECT_EQ(internal::FindDevice(*version, {kDriver, "p", held + "x"}), nullptr);
}

// What a List implies: per device, holders and the exact consumed sums,
// computed from the records' allocation results without the tree's code.
struct Expected {
  std::optional<ClaimKey> exclusive;
  std::vector<std::pair<std::string, ClaimKey>> shares;
  std::vector<ClaimKey> admin;
  std::map<std::string, std::vector<std::string>> consumed;  // name -> the shares' quantities
};
using ExpectedState = std::map<std::tuple<std::string, std::string, std::string>, Expected>;

ExpectedState FromList(const std::vector<ClaimRecord>& records) {
  ExpectedState out;
  for (const ClaimRecord& r : records) {
    const ClaimKey claim{std::string(r.claim_namespace()), std::string(r.name())};
    const fb::ResourceClaimStatus* status = r.table().status();
    if (status == nullptr || status->allocation() == nullptr ||
        status->allocation()->results() == nullptr) {
      continue;
    }
    for (const fb::DeviceRequestAllocationResult* res : *status->allocation()->results()) {
      Expected& e = out[{res->driver()->str(), res->pool()->str(), res->device()->str()}];
      if (res->admin_access().has_value() && *res->admin_access()) {
        e.admin.push_back(claim);
      } else if (res->share_id() != nullptr) {
        e.shares.emplace_back(res->share_id()->str(), claim);
        if (res->consumed_capacity() != nullptr) {
          for (const fb::QuantityEntry* q : *res->consumed_capacity()) {
            e.consumed[q->key()->str()].push_back(q->value()->str());
          }
        }
      } else {
        e.exclusive = claim;
      }
    }
  }
  for (auto& [id, e] : out) {
    std::sort(e.shares.begin(), e.shares.end());
    std::sort(e.admin.begin(), e.admin.end());
  }
  return out;
}

// Consumed quantities of the workload are n * 1Mi in some form; their sum
// in bytes, exactly.
int64_t Bytes(const std::string& q) {
  if (absl::EndsWith(q, "Mi")) return std::stoll(q) << 20;
  if (absl::EndsWith(q, "Ki")) return std::stoll(q) << 10;
  if (absl::EndsWith(q, "Gi")) return std::stoll(q) << 30;
  return std::stoll(q);
}

void ExpectMatches(const AllocatedState& state, const ExpectedState& expected) {
  EXPECT_EQ(state.size(), expected.size());
  auto it = expected.begin();
  state.ForEach("", std::nullopt, [&](const AllocatedDevice& d) {
    if (it == expected.end()) {
      ADD_FAILURE() << "extra device " << d.device;
      return false;
    }
    const auto& [id, e] = *it++;
    EXPECT_EQ(std::tie(d.driver, d.pool, d.device),
              std::tie(std::get<0>(id), std::get<1>(id), std::get<2>(id)));
    EXPECT_EQ(state.Find(d.driver, d.pool, d.device), &d) << d.device;  // the device index
    EXPECT_EQ(d.exclusive, e.exclusive) << d.device;
    std::vector<std::pair<std::string, ClaimKey>> shares;
    for (const DeviceShare& s : d.shares) shares.emplace_back(s.share_id, s.claim);
    EXPECT_EQ(shares, e.shares) << d.device;
    EXPECT_EQ(d.admin_access, e.admin) << d.device;
    EXPECT_EQ(d.consumed_capacity.size(), e.consumed.size()) << d.device;
    for (const auto& [name, quantities] : e.consumed) {
      int64_t sum = 0;
      for (const std::string& q : quantities) sum += Bytes(q);
      EXPECT_TRUE(SameQuantity(d.Consumed(name), absl::StrCat(sum)))
          << d.device << " " << name << ": " << d.Consumed(name) << " vs " << sum;
    }
    return true;
  });
  EXPECT_EQ(it, expected.end());
}

// Random concurrent workloads (allocations exclusive, shared with consumed
// capacity and with admin access, deallocations, deletes, re-creations,
// bulk restores), in rounds: after each, the incrementally kept snapshot,
// and one built from the records after a reopen, equal what a List at the
// same revision implies. Each round's first call builds the snapshot while
// the writers run.
TEST_F(AllocatedTest, EqualsWhatAListImpliesAfterRandomConcurrentWorkloads) {
  constexpr int kClaims = 60, kThreads = 4, kRounds = 6, kOpsPerThread = 300;
  static const char* kForms[] = {"Mi", "Ki", "", "Gi"};
  size_t shares = 0, admin = 0, exclusive = 0;  // at the ends of the rounds
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<int> started{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(round * 100 + t);
        ++started;
        for (int op = 0; op < kOpsPerThread; ++op) {
          const ClaimKey key = Key(absl::StrCat("c", rng() % kClaims));
          const std::string device = absl::StrCat("gpu-", rng() % 8);
          const std::string pool = absl::StrCat("pool-", rng() % 2);
          switch (rng() % 7) {
            case 0:
              (void)store_->Put(ClaimJson(key.claim_namespace, key.name));
              break;
            case 1:
              (void)store_->Allocate(key, Of({Exclusive(device, pool)}));
              break;
            case 2:
            case 3: {
              const int n = 1 + static_cast<int>(rng() % 4);
              const char* form = kForms[rng() % 4];
              std::string q = std::string(form) == "Mi"   ? absl::StrCat(n, "Mi")
                              : std::string(form) == "Ki" ? absl::StrCat(n * 1024, "Ki")
                              : std::string(form) == "Gi" ? absl::StrCat(n * 1024, "Mi")
                                                          : absl::StrCat(n << 20);
              std::vector<DeviceResult> results = {
                  Share(device, static_cast<int>(rng() % 1000), {{"memory", q}}, pool)};
              if (rng() % 3 == 0) results.push_back(Admin(absl::StrCat("gpu-", rng() % 8), pool));
              (void)store_->Allocate(key, Of(std::move(results)));
              break;
            }
            case 4:
              (void)store_->Allocate(key, Of({Admin(device, pool)}));
              break;
            case 5:
              (void)store_->Deallocate(key);
              break;
            case 6:
              (void)store_->Delete(key);
              break;
          }
        }
      });
    }
    // The first call of the round builds the snapshot while writes go on.
    while (started.load() < kThreads) std::this_thread::yield();
    absl::StatusOr<AllocatedState> during = store_->AllocatedDevices();
    ASSERT_THAT(during.status(), IsOk());
    for (std::thread& t : threads) t.join();
    if (round % 2 == 1) {
      // A restore over the stored claims: some claims re-added with new
      // allocations (no clash: a pool of their own).
      absl::StatusOr<std::unique_ptr<BulkLoad>> load = store_->StartBulkLoad();
      ASSERT_THAT(load.status(), IsOk());
      for (int i = 0; i < 5; ++i) {
        const std::string name = absl::StrCat("restored-", round, "-", i);
        ASSERT_THAT(store_->Put(ClaimJson("ns", name)), IsOk());
        ASSERT_THAT(
            store_->Allocate(Key(name),
                             Of({Share("gpu-0", round * 10 + i, {{"memory", "1Mi"}}, "restored")})),
            IsOk());
        absl::StatusOr<ClaimRead> read = store_->Get(Key(name));
        ASSERT_THAT(read.status(), IsOk());
        ASSERT_THAT(store_->Delete(Key(name)), IsOk());
        ASSERT_THAT((*load)->Add(read->record), IsOk());
      }
      ASSERT_THAT((*load)->Commit().status(), IsOk());
    }
    absl::StatusOr<AllocatedState> kept = store_->AllocatedDevices();
    ASSERT_THAT(kept.status(), IsOk());
    absl::StatusOr<ListPage> list = store_->List({});
    ASSERT_THAT(list.status(), IsOk());
    ASSERT_EQ(kept->revision(), list->revision);
    const ExpectedState expected = FromList(list->records);
    for (const auto& [id, e] : expected) {
      shares += e.shares.size();
      admin += e.admin.size();
      exclusive += e.exclusive.has_value();
    }
    ExpectMatches(*kept, expected);
    absl::StatusOr<VerifyReport> report = store_->Verify(false);
    ASSERT_THAT(report.status(), IsOk());
    EXPECT_TRUE(report->problems.empty()) << report->problems[0];
    Reopen();
    absl::StatusOr<AllocatedState> built = store_->AllocatedDevices();
    ASSERT_THAT(built.status(), IsOk());
    EXPECT_EQ(built->revision(), list->revision);
    ExpectMatches(*built, expected);
  }
  // The workloads left every kind of holding.
  EXPECT_GT(shares, 20u);
  EXPECT_GT(admin, 0u);
  EXPECT_GT(exclusive, 0u);
}

// Thousands of claims holding shares, many per device, beside admin and
// exclusive holders: after a reopen, the state built from the device index
// (the share holders' records read by forward seeks) equals what a List
// implies, and Verify, which builds it from every record, finds nothing.
TEST_F(AllocatedTest, ABuildReadingThousandsOfSharesEqualsWhatAListImplies) {
  constexpr int kShared = 6000, kDevices = 700;
  for (int i = 0; i < kShared + 300; ++i) {
    const std::string name = absl::StrCat("c", i);
    Claim(name);
    const std::string pool = i % 2 == 0 ? "pool-a" : "pool-b";
    DeviceResult result = i < kShared  ? Share(absl::StrCat("gpu-", i % kDevices), i,
                                               {{"memory", absl::StrCat(i % 4 + 1, "Mi")}}, pool)
                          : i % 3 == 0 ? Admin(absl::StrCat("gpu-", i % kDevices), pool)
                                       : Exclusive(absl::StrCat("excl-", i), pool);
    ASSERT_THAT(store_->Allocate(Key(name), Of({std::move(result)})), IsOk());
  }
  Reopen();
  absl::StatusOr<AllocatedState> built = store_->AllocatedDevices();
  ASSERT_THAT(built.status(), IsOk());
  absl::StatusOr<ListPage> list = store_->List({});
  ASSERT_THAT(list.status(), IsOk());
  EXPECT_EQ(built->revision(), list->revision);
  ExpectMatches(*built, FromList(list->records));
  const AllocatedDevice* device = built->Find(kDriver, "pool-a", "gpu-0");
  ASSERT_NE(device, nullptr);
  EXPECT_GT(device->shares.size(), 4u);
  absl::StatusOr<VerifyReport> report = store_->Verify(false);
  ASSERT_THAT(report.status(), IsOk());
  EXPECT_TRUE(report->problems.empty()) << report->problems[0];
}

// What a snapshot holds, as text.
std::string Contents(const AllocatedState& state) {
  std::string out = absl::StrCat(state.revision(), ":");
  state.ForEach("", std::nullopt, [&](const AllocatedDevice& d) {
    absl::StrAppend(&out, d.driver, "/", d.pool, "/", d.device, "{",
                    d.exclusive.has_value() ? d.exclusive->name : "-");
    for (const DeviceShare& s : d.shares)
      absl::StrAppend(&out, " s:", s.share_id, "=", s.claim.name);
    for (const ClaimKey& k : d.admin_access) absl::StrAppend(&out, " a:", k.name);
    for (const CapacityValue& c : d.consumed_capacity)
      absl::StrAppend(&out, " ", c.name, "=", c.quantity);
    out += "}";
    return true;
  });
  return out;
}

// Find (through the device index, or the tree where the index no longer
// knows the snapshot's revision) agrees with ForEach (the tree) on every
// device of pool-a named gpu-0 ... gpu-(devices-1), held or not.
void ExpectFindAgreesWithForEach(const AllocatedState& s, int devices) {
  std::set<std::string> held;
  s.ForEach("", std::nullopt, [&](const AllocatedDevice& d) {
    EXPECT_EQ(s.Find(d.driver, d.pool, d.device), &d) << d.device << " at " << s.revision();
    if (d.pool == "pool-a") held.insert(d.device);
    return true;
  });
  for (int i = 0; i < devices; ++i) {
    const std::string device = absl::StrCat("gpu-", i);
    EXPECT_EQ(s.Find(kDriver, "pool-a", device) != nullptr, held.contains(device))
        << device << " at " << s.revision();
  }
}

// The leader changes the published version in place until somebody takes
// it (allocated_state.h): snapshots taken between commits, while writes go
// on, read the same whenever they are read again, and the last one equals
// what a List implies. (Under tsan too: the readers and the leader's
// changes in place.)
TEST_F(AllocatedTest, SnapshotsTakenBetweenCommitsNeverChange) {
  constexpr int kClaims = 24, kWriters = 2, kOps = 400;
  for (int i = 0; i < kClaims; ++i) Claim(absl::StrCat("c", i));
  std::atomic<int> writing{kWriters};
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937 rng(t + 1);
      for (int op = 0; op < kOps; ++op) {
        const ClaimKey key = Key(absl::StrCat("c", rng() % kClaims));
        const std::string device = absl::StrCat("gpu-", rng() % 40);
        switch (rng() % 4) {
          case 0:
            (void)store_->Allocate(key, Of({Exclusive(device)}));
            break;
          case 1:
            (void)store_->Allocate(key,
                                   Of({Share(device, static_cast<int>(rng() % 100),
                                             {{"memory", absl::StrCat(1 + rng() % 4, "Gi")}})}));
            break;
          default:
            (void)store_->Deallocate(key);
        }
      }
      --writing;
    });
  }
  std::vector<std::pair<AllocatedState, std::string>> held;
  size_t taken = 0;
  uint64_t last_revision = 0;
  bool changed = false;
  while (!changed && (writing.load() > 0 || taken < 10)) {
    const AllocatedState s = Snapshot();
    EXPECT_GE(s.revision(), last_revision);
    last_revision = s.revision();
    held.emplace_back(s, Contents(s));
    ++taken;
    for (const auto& h : held) {
      if (Contents(h.first) != h.second) {
        ADD_FAILURE() << "a snapshot at revision " << h.first.revision() << " changed";
        changed = true;
      }
      ExpectFindAgreesWithForEach(h.first, 40);
    }
    if (held.size() > 6) held.erase(held.begin());
  }
  for (std::thread& t : writers) t.join();
  for (const auto& h : held) EXPECT_EQ(Contents(h.first), h.second);
  absl::StatusOr<ListPage> list = store_->List({});
  ASSERT_THAT(list.status(), IsOk());
  const AllocatedState last = Snapshot();
  ASSERT_EQ(last.revision(), list->revision);
  ExpectMatches(last, FromList(list->records));
}

// A snapshot kept while one device changes hands many times (more times
// than the device index keeps: its lookups go to the tree) still finds what
// it held, and so does one kept while it changed a few times (the index's
// older pairs); each new snapshot finds the latest holder.
TEST_F(AllocatedTest, AKeptSnapshotFindsWhatItHeldWhileADeviceChangesHands) {
  for (int i = 0; i < 12; ++i) Claim(absl::StrCat("c", i));
  ASSERT_THAT(store_->Allocate(Key("c0"), Of({Exclusive("gpu-0")})), IsOk());
  ASSERT_THAT(store_->Allocate(Key("c11"), Of({Exclusive("gpu-1")})), IsOk());
  std::vector<AllocatedState> kept = {Snapshot()};
  std::vector<std::string> holders = {"c0"};
  for (int i = 1; i <= 10; ++i) {
    ASSERT_THAT(store_->Deallocate(Key(absl::StrCat("c", i - 1))), IsOk());
    ASSERT_THAT(store_->Allocate(Key(absl::StrCat("c", i)), Of({Exclusive("gpu-0")})), IsOk());
    kept.push_back(Snapshot());
    holders.push_back(absl::StrCat("c", i));
    for (size_t k = 0; k < kept.size(); ++k) {
      const AllocatedDevice* d = kept[k].Find(kDriver, "pool-a", "gpu-0");
      ASSERT_NE(d, nullptr) << "snapshot " << k << " after change " << i;
      ASSERT_TRUE(d->exclusive.has_value());
      EXPECT_EQ(d->exclusive->name, holders[k]) << "snapshot " << k << " after change " << i;
      EXPECT_EQ(kept[k].Find(kDriver, "pool-a", "gpu-1")->exclusive->name, "c11");
      EXPECT_EQ(kept[k].Find(kDriver, "pool-a", "gpu-2"), nullptr);
    }
  }
  absl::StatusOr<VerifyReport> report = store_->Verify(false);
  ASSERT_THAT(report.status(), IsOk());
  EXPECT_TRUE(report->problems.empty()) << report->problems[0];
}

// The device index grows (from 64 slots) while commits go on in place and
// through copies, leaving out devices nobody holds any more; every snapshot
// taken on the way, kept to the end, finds exactly what it held.
TEST_F(AllocatedTest, SnapshotsKeptWhileTheDeviceIndexGrowsFindWhatTheyHeld) {
  constexpr int kDevices = 300;
  for (int i = 0; i < kDevices; ++i) Claim(absl::StrCat("c", i));
  (void)Snapshot();  // built (empty), so that each commit below updates it
  std::vector<std::pair<AllocatedState, std::set<int>>> kept;
  std::set<int> held;
  std::mt19937 rng(5);
  const auto flip = [&](int n) {
    const ClaimKey key = Key(absl::StrCat("c", n));
    if (held.contains(n)) {
      ASSERT_THAT(store_->Deallocate(key), IsOk());
      held.erase(n);
    } else {
      ASSERT_THAT(store_->Allocate(key, Of({Exclusive(absl::StrCat("gpu-", n))})), IsOk());
      held.insert(n);
    }
  };
  for (int step = 0; step < 2 * kDevices; ++step) {
    // New devices first, every third step one freed (entries the growing
    // table leaves out), then devices at random, held or freed.
    flip(step < kDevices ? step : static_cast<int>(rng() % kDevices));
    if (step < kDevices && step % 3 == 0) flip(static_cast<int>(rng() % (step + 1)));
    if (step % 25 == 0) kept.emplace_back(Snapshot(), held);
  }
  kept.emplace_back(Snapshot(), held);
  // The index grew while snapshots were kept: the first and the last have
  // tables of their own.
  const auto table_of = [](const AllocatedState& s) {
    return internal::AllocatedTracker::Version(s)->index;
  };
  ASSERT_NE(table_of(kept.front().first), nullptr);
  EXPECT_NE(table_of(kept.front().first), table_of(kept.back().first));
  EXPECT_GT(table_of(kept.back().first)->capacity(), 64u);
  for (const auto& [state, want] : kept) {
    for (int n = 0; n < kDevices; ++n) {
      const AllocatedDevice* d = state.Find(kDriver, "pool-a", absl::StrCat("gpu-", n));
      ASSERT_EQ(d != nullptr, want.contains(n)) << "gpu-" << n << " at " << state.revision();
      if (d != nullptr) {
        EXPECT_EQ(d->exclusive->name, absl::StrCat("c", n));
      }
    }
  }
  absl::StatusOr<VerifyReport> report = store_->Verify(false);
  ASSERT_THAT(report.status(), IsOk());
  EXPECT_TRUE(report->problems.empty()) << report->problems[0];
}

// Commits too large to make in place under the published state's lock (an
// allocation of many devices, a PutAll of many claims) make a new version
// instead, also while nobody took the current one; small commits after
// them go in place again. Each time the snapshot equals what a List
// implies.
TEST_F(AllocatedTest, LargeCommitsMakeANewVersionAndSmallOnesGoOnInPlace) {
  for (int i = 0; i < 30; ++i) Claim(absl::StrCat("c", i));
  const auto check = [&] {
    absl::StatusOr<ListPage> list = store_->List({});
    ASSERT_THAT(list.status(), IsOk());
    const AllocatedState s = Snapshot();
    ASSERT_EQ(s.revision(), list->revision);
    ExpectMatches(s, FromList(list->records));
  };
  check();                                                                     // built, and taken
  ASSERT_THAT(store_->Allocate(Key("c0"), Of({Exclusive("gpu-0")})), IsOk());  // a new version
  // One claim, 20 devices: more than are changed in place.
  std::vector<DeviceResult> many;
  for (int d = 0; d < 20; ++d) many.push_back(Exclusive(absl::StrCat("gpu-1", d), "pool-b"));
  ASSERT_THAT(store_->Allocate(Key("c1"), Of(many)), IsOk());
  ASSERT_THAT(store_->Allocate(Key("c2"), Of({Exclusive("gpu-2")})), IsOk());  // in place
  check();
  ASSERT_THAT(store_->Deallocate(Key("c1")), IsOk());  // 20 devices freed
  // Twenty claims in one PutAll (allocated, each sharing one device).
  std::vector<ClaimRecord> records;
  for (int i = 10; i < 30; ++i) {
    ASSERT_THAT(store_->Allocate(Key(absl::StrCat("c", i)),
                                 Of({Share("gpu-9", i, {{"memory", "1Gi"}}, "pool-c")})),
                IsOk());
    absl::StatusOr<ClaimRead> read = store_->Get(Key(absl::StrCat("c", i)));
    ASSERT_THAT(read.status(), IsOk());
    records.push_back(read->record);
    ASSERT_THAT(store_->Deallocate(Key(absl::StrCat("c", i))), IsOk());
  }
  ASSERT_THAT(store_->Allocate(Key("c3"), Of({Exclusive("gpu-3")})), IsOk());
  ASSERT_THAT(store_->PutAll(records).status(), IsOk());
  ASSERT_THAT(store_->Deallocate(Key("c2")), IsOk());  // in place again
  check();
  const AllocatedDevice* shared = Snapshot().Find(kDriver, "pool-c", "gpu-9");
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->shares.size(), 20u);
  EXPECT_TRUE(SameQuantity(shared->Consumed("memory"), "20Gi")) << shared->Consumed("memory");
  absl::StatusOr<VerifyReport> report = store_->Verify(false);
  ASSERT_THAT(report.status(), IsOk());
  EXPECT_TRUE(report->problems.empty()) << report->problems[0];
}

TEST_F(AllocatedTest, ReadOnlyStoreShowsTheWritersStateAfterEachCatchUp) {
  Claim("a");
  ASSERT_THAT(store_->Allocate(Key("a"), Of({Exclusive("gpu-0")})), IsOk());
  Options options;
  options.read_only = true;
  absl::StatusOr<std::unique_ptr<Store>> reader = Store::Open(db_path(), options);
  ASSERT_THAT(reader.status(), IsOk());
  absl::StatusOr<AllocatedState> first = (*reader)->AllocatedDevices();
  ASSERT_THAT(first.status(), IsOk());
  ASSERT_NE(first->Find(kDriver, "pool-a", "gpu-0"), nullptr);
  ASSERT_THAT(store_->Deallocate(Key("a")), IsOk());
  EXPECT_NE((*reader)->AllocatedDevices()->Find(kDriver, "pool-a", "gpu-0"), nullptr);
  ASSERT_THAT((*reader)->Refresh(), IsOk());
  absl::StatusOr<AllocatedState> second = (*reader)->AllocatedDevices();
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_EQ(second->Find(kDriver, "pool-a", "gpu-0"), nullptr);
  EXPECT_EQ(second->revision(), store_->Stats()->revision);
  EXPECT_NE(first->Find(kDriver, "pool-a", "gpu-0"), nullptr);  // kept as it was
}

}  // namespace
}  // namespace claimstore
