// The device index (store/src/state/device_index.h): exact at every revision a
// table serves, or saying it does not know; tables kept by older snapshots
// keep answering as the index grows and drops devices nobody holds; a
// writer and readers at once (under tsan too); Verify's check of it.
#include "state/device_index.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "state/allocated_state.h"

namespace claimstore {
namespace {

using internal::AllocatedVersion;
using internal::DeviceId;
using internal::DeviceIndex;
using internal::DevicePtr;
using internal::DeviceSet;
using internal::DeviceTable;

constexpr size_t kVersions = DeviceTable::kVersions;

// Devices named by a number: n/1000 picks the driver, n/10 the pool.
struct Names {
  std::string driver, pool, device;
  DeviceId id() const { return {driver, pool, device}; }
};
Names NameOf(int n) {
  return {absl::StrCat("d", n / 1000, ".example.com"), absl::StrCat("node-", n / 10),
          absl::StrCat("gpu-", n % 10)};
}

// Devices the tests hand to the index, kept alive for the whole test (as
// the snapshots' trees would keep them).
class Devices {
 public:
  const AllocatedDevice* New(int n, int holder) {
    auto d = std::make_shared<AllocatedDevice>();
    const Names names = NameOf(n);
    d->driver = names.driver;
    d->pool = names.pool;
    d->device = names.device;
    d->exclusive = ClaimKey{"ns", absl::StrCat(holder)};
    all_.push_back(d);
    return d.get();
  }
  std::vector<DevicePtr> Sorted(const std::map<int, const AllocatedDevice*>& held) const {
    std::vector<DevicePtr> out;
    for (const auto& [n, d] : held) {
      for (const DevicePtr& p : all_) {
        if (p.get() == d) out.push_back(p);
      }
    }
    std::sort(out.begin(), out.end(), [](const DevicePtr& a, const DevicePtr& b) {
      return internal::IdOf(*a) < internal::IdOf(*b);
    });
    return out;
  }

 private:
  std::vector<DevicePtr> all_;
};

using Held = std::map<int, const AllocatedDevice*>;  // device number -> holder

// A table handed out at one revision, with what was held then and how
// often each device was set after it.
struct Kept {
  uint64_t revision;
  std::shared_ptr<const DeviceTable> table;
  Held held;
  std::map<int, size_t> sets_after;
};

TEST(DeviceIndexTest, ExactAtEveryRevisionATableServesOrSaysItDoesNotKnow) {
  constexpr int kUniverse = 600;  // grows the table from 64 slots, several times
  std::mt19937 rng(3);
  Devices devices;
  Held held;
  for (int n = 0; n < 40; ++n) held[n] = devices.New(n, 0);
  AllocatedVersion version = *internal::BuildVersion(5, devices.Sorted(held));
  DeviceIndex index(version);
  std::deque<Kept> kept;
  kept.push_back({5, index.table(), held, {}});
  size_t unknown = 0, answered = 0, grew = 0, dropped_then_held = 0;
  std::set<int> ever_dropped;
  for (uint64_t revision = 6; revision < 1500; ++revision) {
    // One commit: a few devices set, sometimes one twice; most in a small
    // hot range so that some change many times between kept tables.
    std::vector<DeviceSet> changes;
    std::vector<Names> names;  // keeps the ids' strings
    names.reserve(8);
    std::set<int> set_now;
    const int count = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < count; ++i) {
      const int n =
          rng() % 2 == 0 ? static_cast<int>(rng() % 30) : static_cast<int>(rng() % kUniverse);
      const AllocatedDevice* d =
          rng() % 3 == 0 ? nullptr : devices.New(n, static_cast<int>(revision));
      names.push_back(NameOf(n));
      changes.push_back({names.back().id(), d});
      if (d != nullptr) {
        if (ever_dropped.contains(n) && !held.contains(n)) ++dropped_then_held;
        held[n] = d;
      } else if (held.erase(n) > 0) {
        ever_dropped.insert(n);
      }
      set_now.insert(n);
    }
    const DeviceTable* before = index.table().get();
    index.Apply(revision, changes);
    grew += index.table().get() != before;
    for (Kept& k : kept) {
      for (int n : set_now) ++k.sets_after[n];
    }
    EXPECT_EQ(index.live(), held.size());
    kept.push_back({revision, index.table(), held, {}});
    if (kept.size() > 40) kept.pop_front();
    // Every kept table, at its revision, for every device name.
    if (revision % 7 != 0) continue;
    for (const Kept& k : kept) {
      for (int n = 0; n < kUniverse; ++n) {
        const Names name = NameOf(n);
        const DeviceTable::Answer a = k.table->Find(k.revision, name.id());
        auto want = k.held.find(n);
        const size_t after = k.sets_after.contains(n) ? k.sets_after.at(n) : 0;
        if (!a.known) {
          ++unknown;
          // Only a device set kVersions times since may be forgotten.
          EXPECT_GE(after, kVersions) << "device " << n << " at revision " << k.revision;
          continue;
        }
        ++answered;
        EXPECT_EQ(a.device, want == k.held.end() ? nullptr : want->second)
            << "device " << n << " at revision " << k.revision;
      }
    }
  }
  // The run met what it is about.
  EXPECT_GT(grew, 2u);
  EXPECT_GT(unknown, 100u);
  EXPECT_GT(answered, 100000u);
  EXPECT_GT(dropped_then_held, 10u);
}

TEST(DeviceIndexTest, ACommitThatSetsADeviceTwiceKeepsTheLast) {
  Devices devices;
  AllocatedVersion empty;
  DeviceIndex index(empty);
  const Names name = NameOf(1);
  const AllocatedDevice* first = devices.New(1, 1);
  const AllocatedDevice* second = devices.New(1, 2);
  const std::vector<DeviceSet> commit = {{name.id(), first}, {name.id(), second}};
  index.Apply(1, commit);
  EXPECT_EQ(index.table()->Find(1, name.id()).device, second);
  // Still kVersions pairs to go: three more commits are remembered.
  for (uint64_t r = 2; r < 1 + kVersions; ++r) {
    const std::vector<DeviceSet> next = {{name.id(), devices.New(1, static_cast<int>(r))}};
    index.Apply(r, next);
  }
  const DeviceTable::Answer at1 = index.table()->Find(1, name.id());
  EXPECT_TRUE(at1.known);
  EXPECT_EQ(at1.device, second);
  EXPECT_EQ(index.table()->Find(0, name.id()).device, nullptr);  // before it was held
  EXPECT_TRUE(index.table()->Find(0, name.id()).known);
  // One more: revision 1's pair goes, and so does what came before it.
  const std::vector<DeviceSet> last = {{name.id(), nullptr}};
  index.Apply(1 + kVersions, last);
  EXPECT_FALSE(index.table()->Find(1, name.id()).known);
  EXPECT_FALSE(index.table()->Find(0, name.id()).known);
  EXPECT_TRUE(index.table()->Find(2, name.id()).known);
  EXPECT_EQ(index.table()->Find(1 + kVersions, name.id()).device, nullptr);
  EXPECT_EQ(index.live(), 0u);
}

// A writer (the leader) applies commits while readers take the latest
// table and revision under a lock, as snapshots are taken, and read it
// without one: every answer is the one of its revision, and the index says
// it does not know only about a device set kVersions times since.
TEST(DeviceIndexTest, ReadersAnswerExactlyWhileTheWriterGoesOn) {
  constexpr int kUniverse = 300, kCommits = 20000, kReaders = 3, kLookups = 200;
  // Every so many commits the writer waits for each reader to read twice
  // more, so that reads and writes overlap whatever the scheduler does.
  constexpr int kHandshakeEvery = 1000;
  Devices devices;
  AllocatedVersion empty;
  DeviceIndex index(empty);
  // How many commits set each device: counted before the index is told, so
  // that a reader who met an unknown answer then reads at least the sets
  // that used up the pairs.
  std::vector<std::atomic<uint64_t>> sets(kUniverse);
  struct Published {
    uint64_t revision = 0;
    std::shared_ptr<const DeviceTable> table;
    // By device number, at the revision: what held it, and `sets`.
    std::shared_ptr<const std::vector<const AllocatedDevice*>> held;
    std::shared_ptr<const std::vector<uint64_t>> sets;
  };
  const auto counts = [&] {
    auto out = std::make_shared<std::vector<uint64_t>>();
    for (const std::atomic<uint64_t>& c : sets) out->push_back(c.load());
    return out;
  };
  std::mutex mu;
  Published published{0, index.table(),
                      std::make_shared<std::vector<const AllocatedDevice*>>(kUniverse, nullptr),
                      counts()};
  std::atomic<bool> done{false};
  std::atomic<size_t> answered{0}, unknown{0};
  std::vector<std::atomic<int>> batches(kReaders);
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937 rng(t);
      // The latest, and the one before (kept longer: the index forgets
      // more of it).
      Published latest, before;
      while (!done.load()) {
        before = std::move(latest);
        {
          std::lock_guard<std::mutex> lock(mu);
          latest = published;
        }
        for (int i = 0; i < kLookups; ++i) {
          const Published& p = i % 2 == 0 || before.table == nullptr ? latest : before;
          const int n = static_cast<int>(rng() % kUniverse);
          const Names name = NameOf(n);
          const DeviceTable::Answer a = p.table->Find(p.revision, name.id());
          if (!a.known) {
            ++unknown;
            ASSERT_GE(sets[n].load() - (*p.sets)[n], kVersions)
                << "device " << n << " at revision " << p.revision;
            continue;
          }
          ++answered;
          ASSERT_EQ(a.device, (*p.held)[n]) << "device " << n << " at revision " << p.revision;
          if (a.device != nullptr) {
            ASSERT_EQ(a.device->device, name.device);
          }
        }
        ++batches[t];
      }
    });
  }
  const auto handshake = [&] {
    for (std::atomic<int>& b : batches) {
      const int seen = b.load();
      while (b.load() < seen + 2) std::this_thread::yield();
    }
  };
  std::mt19937 rng(99);
  auto held = std::make_shared<std::vector<const AllocatedDevice*>>(kUniverse, nullptr);
  for (uint64_t revision = 1; revision <= kCommits; ++revision) {
    if (revision % kHandshakeEvery == 0) handshake();
    std::vector<Names> names;
    std::vector<DeviceSet> changes;
    names.reserve(3);
    for (int i = 0; i < 3; ++i) {
      // A hot few, changed often, and the rest.
      const int n = static_cast<int>(rng() % 2 == 0 ? rng() % 8 : rng() % kUniverse);
      const AllocatedDevice* d =
          rng() % 3 == 0 ? nullptr : devices.New(n, static_cast<int>(revision));
      names.push_back(NameOf(n));
      changes.push_back({names.back().id(), d});
      (*held)[n] = d;
      ++sets[n];
    }
    index.Apply(revision, changes);
    auto next = std::make_shared<std::vector<const AllocatedDevice*>>(*held);
    auto next_sets = counts();
    std::lock_guard<std::mutex> lock(mu);
    published = {revision, index.table(), std::move(next), std::move(next_sets)};
  }
  handshake();
  done = true;
  for (std::thread& t : readers) t.join();
  // Each reader read at least twice between handshakes.
  EXPECT_GE(answered.load() + unknown.load(),
            size_t{kReaders} * 2 * (kCommits / kHandshakeEvery + 1) * kLookups);
  EXPECT_GT(answered.load(), unknown.load());
}

// Names of every length from 0 to 40 in each part (around the hash's and
// the compare's 4-, 8- and 16-byte steps), each against the same name with
// one byte changed at each place (to a NUL and to another letter), with a
// NUL after, and with its bytes split between the parts another way: only
// the name itself is found.
TEST(DeviceIndexTest, FindsANameOnlyByAllItsBytesWhateverTheirLength) {
  Devices devices;
  AllocatedVersion empty;
  DeviceIndex index(empty);
  const auto text = [](size_t length) {
    std::string s;
    for (size_t i = 0; i < length; ++i) s.push_back(static_cast<char>('a' + i % 26));
    return s;
  };
  struct Name {
    std::string parts[3];
    DeviceId id() const { return {parts[0], parts[1], parts[2]}; }
  };
  std::vector<Name> names;
  for (int part = 0; part < 3; ++part) {
    for (size_t length = 0; length <= 40; ++length) {
      Name n{{"dr", "po", "de"}};
      n.parts[part] = text(length);
      names.push_back(n);
    }
  }
  std::vector<DeviceSet> changes;
  std::vector<const AllocatedDevice*> held;
  for (size_t i = 0; i < names.size(); ++i) {
    held.push_back(devices.New(static_cast<int>(i), 1));
    changes.push_back({names[i].id(), held.back()});
  }
  index.Apply(1, changes);
  const DeviceTable& table = *index.table();
  size_t misses = 0;
  const auto absent = [&](const Name& n, const std::string& why) {
    const DeviceTable::Answer a = table.Find(1, n.id());
    EXPECT_TRUE(a.known && a.device == nullptr) << why;
    ++misses;
  };
  for (size_t i = 0; i < names.size(); ++i) {
    const Name& n = names[i];
    const DeviceTable::Answer a = table.Find(1, n.id());
    ASSERT_TRUE(a.known);
    EXPECT_EQ(a.device, held[i]) << "name " << i;
    const int part = static_cast<int>(i / 41);
    const std::string& varied = n.parts[part];
    for (size_t at = 0; at < varied.size(); ++at) {
      for (char to : {'\0', static_cast<char>(varied[at] ^ 1)}) {
        Name other = n;
        other.parts[part][at] = to;
        absent(other, absl::StrCat("name ", i, " with byte ", at, " changed"));
      }
    }
    Name longer = n;
    longer.parts[part].push_back('\0');
    absent(longer, absl::StrCat("name ", i, " with a NUL after"));
    if (part < 2 && !varied.empty()) {
      // Its last byte moved to the start of the next part.
      Name moved = n;
      moved.parts[part + 1] = varied.back() + moved.parts[part + 1];
      moved.parts[part].pop_back();
      absent(moved, absl::StrCat("name ", i, " split another way"));
    }
  }
  EXPECT_GT(misses, 2000u);
}

// The compare behind a slot whose hash matched: every length from 0 to 40
// (its 4-, 8- and 16-byte steps, and memcmp past 16), one byte changed at
// each place, to a NUL or another letter, is a different name.
TEST(DeviceIndexTest, NameBytesCompareEqualOnlyWhenEveryByteIs) {
  using internal::device_index_detail::SameBytes;
  for (size_t n = 0; n <= 40; ++n) {
    std::string a;
    for (size_t i = 0; i < n; ++i) a.push_back(static_cast<char>('a' + i % 26));
    const std::string same = a;
    EXPECT_TRUE(SameBytes(a.data(), same.data(), n)) << n;
    for (size_t at = 0; at < n; ++at) {
      for (char to : {'\0', static_cast<char>(a[at] ^ 1), static_cast<char>(a[at] ^ 0x80)}) {
        std::string b = a;
        b[at] = to;
        EXPECT_FALSE(SameBytes(a.data(), b.data(), n)) << "length " << n << ", byte " << at;
      }
    }
  }
}

// The hash takes each part's length: the same bytes split another way
// between driver, pool and device hash differently.
TEST(DeviceIndexTest, TheHashTellsHowANameIsSplitIntoParts) {
  using internal::device_index_detail::HashOf;
  const uint64_t h = HashOf({"ab", "c", "d"});
  EXPECT_NE(h, HashOf({"a", "bc", "d"}));
  EXPECT_NE(h, HashOf({"ab", "", "cd"}));
  EXPECT_NE(h, HashOf({"", "abc", "d"}));
  EXPECT_NE(HashOf({"", "", ""}), HashOf({"", "", std::string(1, '\0')}));
  EXPECT_EQ(h, HashOf({"ab", "c", "d"}));
}

TEST(DeviceIndexTest, CheckIndexNamesADeviceTheIndexHasWrong) {
  Devices devices;
  Held held;
  for (int n = 0; n < 20; ++n) held[n] = devices.New(n, 0);
  auto version =
      std::make_shared<AllocatedVersion>(*internal::BuildVersion(3, devices.Sorted(held)));
  DeviceIndex index(*version);
  version->index = index.table();
  EXPECT_TRUE(internal::CheckIndex(*version).empty());
  // The index told of a change the tree never had, at the version's
  // revision: device 4 freed, device 100 held.
  const Names freed = NameOf(4), extra = NameOf(100);
  const std::vector<DeviceSet> wrong = {{freed.id(), nullptr}, {extra.id(), devices.New(100, 1)}};
  index.Apply(3, wrong);
  const std::vector<std::string> problems = internal::CheckIndex(*version);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_TRUE(absl::StrContains(problems[0], "d0.example.com/node-0/gpu-4 is missing"))
      << problems[0];
  EXPECT_TRUE(absl::StrContains(problems[1], "d0.example.com/node-10/gpu-0 is held"))
      << problems[1];
}

}  // namespace
}  // namespace claimstore
