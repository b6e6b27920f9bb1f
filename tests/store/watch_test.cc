// The change feed: Store::Watch on writable and read-only stores, its
// history bounds and compaction, bulk loads, reopening, and watchers racing
// writers (store.h, feed.h).

#include <malloc.h>

#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testutil/store_test_util.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::AllocationOf;
using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::Pod;
using ::claimstore::testing::StatusIs;
using ::claimstore::testing::StoreFixture;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// What a test compares: type, revision, key, and the record as JSON.
struct Seen {
  WatchEventType type;
  uint64_t revision;
  std::string key;
  friend bool operator==(const Seen&, const Seen&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Seen& s) {
    return os << static_cast<int>(s.type) << "@" << s.revision << " " << s.key;
  }
};

Seen Brief(const WatchEvent& e) { return Seen{e.type, e.revision, e.key.ToString()}; }

// Every event the watcher has now (it stops at the first wait).
std::vector<WatchEvent> Drain(Watcher& w) {
  std::vector<WatchEvent> out;
  for (;;) {
    absl::StatusOr<WatchEvent> e = w.Next(absl::ZeroDuration());
    if (!e.ok()) {
      EXPECT_TRUE(absl::IsDeadlineExceeded(e.status())) << e.status();
      return out;
    }
    out.push_back(*std::move(e));
  }
}

std::vector<Seen> Briefs(const std::vector<WatchEvent>& events) {
  std::vector<Seen> out;
  for (const WatchEvent& e : events) out.push_back(Brief(e));
  return out;
}

// The claims of a List, as key → JSON.
std::map<std::string, std::string> ListAt(Store& store, uint64_t* revision) {
  absl::StatusOr<ListPage> page = store.List({});
  EXPECT_THAT(page, IsOk());
  std::map<std::string, std::string> out;
  for (const ClaimRecord& r : page->records) {
    out[absl::StrCat(r.claim_namespace(), "/", r.name())] = EncodeClaim(r);
  }
  if (revision != nullptr) *revision = page->revision;
  return out;
}

// Applies an event to a List's map, as a watcher following a List does.
void Apply(const WatchEvent& e, std::map<std::string, std::string>* state) {
  if (e.type == WatchEventType::kDeleted) {
    state->erase(e.key.ToString());
  } else {
    (*state)[e.key.ToString()] = EncodeClaim(*e.record);
  }
}

class WatchTest : public StoreFixture {};

TEST_F(WatchTest, EveryChangeIsOneEventInRevisionOrder) {
  ASSERT_THAT(store_->Put(ClaimJson("ns", "a")), IsOk());                                // 1
  ASSERT_THAT(store_->Allocate({"ns", "a"}, AllocationOf({{.device = "d0"}})), IsOk());  // 2
  ASSERT_THAT(store_->Reserve({"ns", "a"}, Pod("p")), IsOk());                           // 3
  ASSERT_THAT(store_->Reserve({"ns", "a"}, Pod("p")), IsOk());                           // no-op
  ASSERT_THAT(store_->PutAll({ClaimJson("ns", "b"), ClaimJson("other", "c")}), IsOk());  // 4, 5
  ASSERT_THAT(store_->Unreserve({"ns", "a"}, "p"), IsOk());                              // 6
  ASSERT_THAT(store_->Deallocate({"ns", "a"}), IsOk());                                  // 7
  ASSERT_THAT(store_->Delete({"ns", "b"}), IsOk());                                      // 8

  absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(1);
  ASSERT_THAT(w, IsOk());
  const std::vector<WatchEvent> events = Drain(**w);
  using T = WatchEventType;
  EXPECT_THAT(Briefs(events),
              ElementsAre(Seen{T::kAdded, 1, "ns/a"}, Seen{T::kModified, 2, "ns/a"},
                          Seen{T::kModified, 3, "ns/a"}, Seen{T::kAdded, 4, "ns/b"},
                          Seen{T::kAdded, 5, "other/c"}, Seen{T::kModified, 6, "ns/a"},
                          Seen{T::kModified, 7, "ns/a"}, Seen{T::kDeleted, 8, "ns/b"}));
  // The record as written; a deletion carries the claim's last state.
  EXPECT_EQ(events[2].record->mod_revision(), 3u);
  EXPECT_THAT(EncodeClaim(*events[2].record), HasSubstr(R"("reservedFor":[)"));
  EXPECT_THAT(EncodeClaim(*events[5].record), Not(HasSubstr(R"("reservedFor")")));
  EXPECT_FALSE(events[2].before.has_value());  // not kept by default
  EXPECT_EQ(events[7].record->mod_revision(), 4u);
  ASSERT_TRUE(events[7].before.has_value());
  EXPECT_EQ(events[7].before->bytes(), events[7].record->bytes());
  EXPECT_EQ((*w)->next_revision(), 9u);
}

TEST_F(WatchTest, FromZeroWatchesWhatComesNextAndWaitsForIt) {
  ASSERT_THAT(store_->Put(ClaimJson("ns", "a")), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(0);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ((*w)->next_revision(), 2u);
  EXPECT_THAT((*w)->Next(absl::Milliseconds(20)).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded, ""));
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    ASSERT_THAT(store_->Put(ClaimJson("ns", "b")), IsOk());
  });
  absl::StatusOr<WatchEvent> e = (*w)->Next(absl::Seconds(30));
  writer.join();
  ASSERT_THAT(e, IsOk());
  EXPECT_EQ(Brief(*e), (Seen{WatchEventType::kAdded, 2, "ns/b"}));
}

TEST_F(WatchTest, FiltersByNamespaceAndKeyPrefix) {
  for (const auto& [ns, name] : std::vector<std::pair<std::string, std::string>>{
           {"ns", "a1"}, {"ns2", "a1"}, {"ns", "b1"}, {"ns", "a2"}, {"n", "a1"}}) {
    ASSERT_THAT(store_->Put(ClaimJson(ns, name)), IsOk());
  }
  const auto keys = [&](const WatchOptions& options) {
    std::vector<std::string> out;
    auto w = store_->Watch(1, options);
    EXPECT_THAT(w, IsOk());
    for (const WatchEvent& e : Drain(**w)) out.push_back(e.key.ToString());
    return out;
  };
  EXPECT_THAT(keys({.claim_namespace = "ns"}), ElementsAre("ns/a1", "ns/b1", "ns/a2"));
  EXPECT_THAT(keys({.key_prefix = "ns/a"}), ElementsAre("ns/a1", "ns/a2"));
  EXPECT_THAT(keys({.key_prefix = "ns"}), ElementsAre("ns/a1", "ns2/a1", "ns/b1", "ns/a2"));
  EXPECT_THAT(keys({.key_prefix = "ns/"}), ElementsAre("ns/a1", "ns/b1", "ns/a2"));
  EXPECT_THAT(keys({.claim_namespace = "n", .key_prefix = "n/a"}), ElementsAre("n/a1"));
}

TEST_F(WatchTest, CancelWakesAWaitingNext) {
  absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(0);
  ASSERT_THAT(w, IsOk());
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(20));
    (*w)->Cancel();
  });
  EXPECT_THAT((*w)->Next(absl::Hours(1)).status(), StatusIs(absl::StatusCode::kCancelled, ""));
  canceller.join();
  ASSERT_THAT(store_->Put(ClaimJson("ns", "a")), IsOk());
  EXPECT_THAT((*w)->Next(absl::Seconds(1)).status(), StatusIs(absl::StatusCode::kCancelled, ""));
}

TEST_F(WatchTest, TheHistoryIsBoundedByRevisionsAndAnOlderStartIsOutOfRange) {
  Reopen({.feed_history_revisions = 100});
  for (int i = 0; i < 300; ++i)
    ASSERT_THAT(store_->Put(ClaimJson("ns", absl::StrCat("c", i % 7))), IsOk());
  absl::StatusOr<StoreStats> stats = store_->Stats();
  ASSERT_THAT(stats, IsOk());
  const uint64_t compact = stats->feed_compact_revision;
  // At least the latest 100, at most an eighth more.
  EXPECT_LE(compact, 200u);
  EXPECT_GE(compact, 300u - 100 - 100 / 8);
  absl::StatusOr<std::unique_ptr<Watcher>> old = store_->Watch(compact);
  EXPECT_THAT(old.status(), StatusIs(absl::StatusCode::kOutOfRange, "compacted"));
  EXPECT_EQ(CompactRevision(old.status()), compact);
  absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(compact + 1);
  ASSERT_THAT(w, IsOk());
  const std::vector<WatchEvent> events = Drain(**w);
  ASSERT_EQ(events.size(), 300 - compact);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].revision, compact + 1 + i);
  // The same after reopening, read from RocksDB.
  w->reset();
  Reopen({.feed_history_revisions = 100});
  ASSERT_EQ(store_->Stats()->feed_compact_revision, compact);
  w = store_->Watch(compact + 1);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(Drain(**w).size(), 300 - compact);
}

TEST_F(WatchTest, TheHistoryIsBoundedByBytes) {
  Reopen({.feed_history_bytes = 64 << 10});
  for (int i = 0; i < 1000; ++i)
    ASSERT_THAT(store_->Put(ClaimJson("ns", absl::StrCat("c", i % 7))), IsOk());
  const uint64_t compact = store_->Stats()->feed_compact_revision;
  EXPECT_GT(compact, 0u);
  absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(compact + 1);
  ASSERT_THAT(w, IsOk());
  size_t bytes = 0;
  const std::vector<WatchEvent> events = Drain(**w);
  for (const WatchEvent& e : events) bytes += e.record->bytes().size();
  EXPECT_EQ(events.size(), 1000 - compact);
  EXPECT_LE(bytes, (64u << 10) + (64u << 10) / 8);
  EXPECT_GE(bytes, (64u << 10) / 2);  // the bound is the bytes, not far fewer
}

TEST_F(WatchTest, AWatcherThatFallsBehindTheHistoryIsToldSoNeverSkippedAhead) {
  Reopen({.feed_history_revisions = 50});
  ASSERT_THAT(store_->Put(ClaimJson("ns", "a")), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(1);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT((*w)->Next(absl::Seconds(1)), IsOk());
  for (int i = 0; i < 200; ++i)
    ASSERT_THAT(store_->Put(ClaimJson("ns", absl::StrCat("c", i))), IsOk());
  absl::StatusOr<WatchEvent> e = (*w)->Next(absl::Seconds(1));
  EXPECT_THAT(e.status(), StatusIs(absl::StatusCode::kOutOfRange, ""));
  EXPECT_GE(CompactRevision(e.status()).value_or(0), 2u);
  // And stays so.
  EXPECT_THAT((*w)->Next(absl::Seconds(1)).status(), StatusIs(absl::StatusCode::kOutOfRange, ""));
}

TEST_F(WatchTest, CatchingUpFromFarBehindReadsTheFeedFromDisk) {
  constexpr int kWrites = 5000;  // more than the hub keeps in memory
  std::vector<ClaimRecord> claims;
  for (int i = 0; i < kWrites; ++i) claims.push_back(ClaimJson("ns", absl::StrCat("c", i)));
  ASSERT_THAT(store_->PutAll(claims), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(1);
  ASSERT_THAT(w, IsOk());
  const std::vector<WatchEvent> events = Drain(**w);
  ASSERT_EQ(events.size(), kWrites);
  for (int i = 0; i < kWrites; ++i) {
    ASSERT_EQ(events[i].revision, i + 1u);
    ASSERT_EQ(events[i].key.name, absl::StrCat("c", i));
  }
}

// A watcher that stops reading holds no writer up: the writes go on past
// what the hub keeps in memory, and the watcher, reading again, gets every
// event in order (from disk, then from memory), the ones it kept intact.
TEST_F(WatchTest, ASlowWatcherHoldsNoWriterUpAndLosesNothing) {
  ASSERT_THAT(store_->Put(ClaimJson("ns", "first")), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(1);
  ASSERT_THAT(w, IsOk());
  absl::StatusOr<WatchEvent> first = (*w)->Next(absl::Seconds(1));
  ASSERT_THAT(first, IsOk());
  constexpr int kWrites = 6000;  // past the hub's 4,096
  for (int i = 0; i < kWrites; ++i) {
    ASSERT_THAT(store_->Put(ClaimJson("ns", absl::StrCat("c", i % 50))), IsOk());
  }
  std::vector<WatchEvent> rest = Drain(**w);
  ASSERT_EQ(rest.size(), static_cast<size_t>(kWrites));
  for (int i = 0; i < kWrites; ++i) {
    ASSERT_EQ(rest[i].revision, i + 2u);
    ASSERT_EQ(rest[i].key.name, absl::StrCat("c", i % 50));
    ASSERT_EQ(rest[i].record->mod_revision(), i + 2u);
  }
  EXPECT_EQ(first->record->name(), "first");
}

// Reading the feed from disk and letting go of the events frees them (a
// batch of events whose records held the batch itself once leaked, 350
// bytes per event); LeakSanitizer checks the same under asan-ubsan.
TEST_F(WatchTest, ReadingTheFeedFromDiskKeepsNoMemory) {
#ifdef CLAIMSTORE_TEST_SANITIZED
  GTEST_SKIP() << "the sanitizers' allocators: LeakSanitizer checks this under asan-ubsan";
#endif
  std::vector<ClaimRecord> claims;
  for (int i = 0; i < 20000; ++i) claims.push_back(ClaimJson("ns", absl::StrCat("c", i % 100)));
  ASSERT_THAT(store_->PutAll(claims), IsOk());
  const auto round = [&] {
    absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(1);
    EXPECT_THAT(w, IsOk());
    size_t n = 0;
    while ((*w)->Next(absl::ZeroDuration()).ok()) ++n;
    EXPECT_EQ(n, 20000u);
  };
  round();
  const size_t base = mallinfo2().uordblks;
  for (int i = 0; i < 5; ++i) round();
  const size_t after = mallinfo2().uordblks;
  EXPECT_LT(after, base + (1u << 20)) << "grew by " << (after - base) << " bytes over 5 rounds";
}

// Events a caller keeps stay whole while the watcher reads on (and reuses
// its buffers).
TEST_F(WatchTest, EventsKeptFromDiskStayWholeWhileTheWatcherReadsOn) {
  std::vector<ClaimRecord> claims;
  for (int i = 0; i < 12000; ++i) claims.push_back(ClaimJson("ns", absl::StrCat("c", i)));
  ASSERT_THAT(store_->PutAll(claims), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(1);
  ASSERT_THAT(w, IsOk());
  std::vector<WatchEvent> kept;
  for (int i = 0; i < 12000; ++i) {
    absl::StatusOr<WatchEvent> e = (*w)->Next(absl::ZeroDuration());
    ASSERT_THAT(e, IsOk());
    if (i % 997 == 0) kept.push_back(*std::move(e));
  }
  for (const WatchEvent& e : kept) {
    EXPECT_EQ(e.record->name(), absl::StrCat("c", e.revision - 1));
    EXPECT_EQ(e.record->mod_revision(), e.revision);
  }
}

TEST_F(WatchTest, AReadOnlyWatcherPolledWithoutATimeoutSeesNewEvents) {
  absl::StatusOr<std::unique_ptr<Store>> reader = Store::Open(db_path(), {.read_only = true});
  ASSERT_THAT(reader, IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> w = (*reader)->Watch(0);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(store_->Put(ClaimJson("ns", "a")), IsOk());
  absl::StatusOr<WatchEvent> e = (*w)->Next(absl::ZeroDuration());
  for (int i = 0; i < 1000 && absl::IsDeadlineExceeded(e.status()); ++i) {
    absl::SleepFor(absl::Milliseconds(1));
    e = (*w)->Next(absl::ZeroDuration());
  }
  ASSERT_THAT(e, IsOk());
  EXPECT_EQ(e->key.name, "a");
}

TEST_F(WatchTest, ModifiedEventsCarryTheRecordBeforeWhenAskedTo) {
  Reopen({.feed_records_before = true});
  ASSERT_THAT(store_->Put(ClaimJson("ns", "a")), IsOk());
  ASSERT_THAT(store_->Allocate({"ns", "a"}, AllocationOf({{.device = "d0"}})), IsOk());
  for (int pass = 0; pass < 2; ++pass) {  // from memory, then from disk
    absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(1);
    ASSERT_THAT(w, IsOk());
    const std::vector<WatchEvent> events = Drain(**w);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_FALSE(events[0].before.has_value());
    ASSERT_TRUE(events[1].before.has_value());
    EXPECT_EQ(events[1].before->mod_revision(), 1u);
    EXPECT_EQ(events[1].record->mod_revision(), 2u);
    w->reset();
    Reopen({.feed_records_before = true});
  }
}

TEST_F(WatchTest, ABulkLoadCompactsTheFeedToItsRevision) {
  ASSERT_THAT(store_->Put(ClaimJson("ns", "a")), IsOk());
  absl::StatusOr<std::unique_ptr<Watcher>> before = store_->Watch(2);
  ASSERT_THAT(before, IsOk());
  auto load = store_->StartBulkLoad({});
  ASSERT_THAT(load, IsOk());
  for (int i = 0; i < 10; ++i)
    ASSERT_THAT((*load)->Add(ClaimJson("ns", absl::StrCat("b", i))), IsOk());
  absl::StatusOr<BulkLoadResult> result = (*load)->Commit();
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->revision, 11u);
  absl::StatusOr<WatchEvent> e = (*before)->Next(absl::Seconds(1));
  EXPECT_THAT(e.status(), StatusIs(absl::StatusCode::kOutOfRange, ""));
  EXPECT_EQ(CompactRevision(e.status()), 11u);
  EXPECT_EQ(store_->Stats()->feed_compact_revision, 11u);
  // A List at the load's revision, then a watch from the next one.
  uint64_t listed = 0;
  std::map<std::string, std::string> state = ListAt(*store_, &listed);
  EXPECT_EQ(listed, 11u);
  absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(listed + 1);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(store_->Delete({"ns", "b3"}), IsOk());
  ASSERT_THAT(store_->Reserve({"ns", "b4"}, Pod("p")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, ""));  // not allocated: no event
  ASSERT_THAT(store_->Put(ClaimJson("ns", "c")), IsOk());
  for (const WatchEvent& ev : Drain(**w)) Apply(ev, &state);
  EXPECT_EQ(state, ListAt(*store_, nullptr));
  // The events below the compact point are gone after a reopen.
  w->reset();
  before->reset();
  Reopen();
  EXPECT_THAT(store_->Watch(1).status(), StatusIs(absl::StatusCode::kOutOfRange, ""));
  auto after = store_->Watch(12);
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(Drain(**after).size(), 2u);
}

TEST_F(WatchTest, WithTheFeedOffAWatchIsRefusedAndTurningItOnStartsAtTheRevision) {
  ASSERT_THAT(store_->Put(ClaimJson("ns", "a")), IsOk());  // 1, in the feed
  Reopen({.feed_history_revisions = 0});
  EXPECT_THAT(store_->Watch(1).status(), StatusIs(absl::StatusCode::kFailedPrecondition, ""));
  {
    absl::StatusOr<std::unique_ptr<Store>> reader = Store::Open(db_path(), {.read_only = true});
    ASSERT_THAT(reader, IsOk());
    EXPECT_THAT((*reader)->Watch(0).status(),
                StatusIs(absl::StatusCode::kFailedPrecondition, "the writer keeps no change feed"));
  }
  ASSERT_THAT(store_->Put(ClaimJson("ns", "b")), IsOk());  // 2, no event
  Reopen();
  EXPECT_EQ(store_->Stats()->feed_compact_revision, 2u);
  EXPECT_THAT(store_->Watch(1).status(), StatusIs(absl::StatusCode::kOutOfRange, ""));
  auto w = store_->Watch(3);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(store_->Put(ClaimJson("ns", "c")), IsOk());
  EXPECT_THAT(Briefs(Drain(**w)), ElementsAre(Seen{WatchEventType::kAdded, 3, "ns/c"}));
}

TEST_F(WatchTest, AReadOnlyStoreFollowsTheWriter) {
  ASSERT_THAT(store_->Put(ClaimJson("ns", "a")), IsOk());
  absl::StatusOr<std::unique_ptr<Store>> reader = Store::Open(db_path(), {.read_only = true});
  ASSERT_THAT(reader, IsOk());
  uint64_t listed = 0;
  std::map<std::string, std::string> state = ListAt(**reader, &listed);
  absl::StatusOr<std::unique_ptr<Watcher>> w = (*reader)->Watch(listed + 1);
  ASSERT_THAT(w, IsOk());
  std::thread writer([&] {
    for (int i = 0; i < 50; ++i) {
      ASSERT_THAT(store_->Put(ClaimJson("ns", absl::StrCat("c", i % 5))), IsOk());
      if (i % 10 == 0) {
        ASSERT_THAT(store_->Delete({"ns", absl::StrCat("c", i % 5)}), IsOk());
      }
    }
  });
  uint64_t last = listed;
  while (last < 56) {
    absl::StatusOr<WatchEvent> e = (*w)->Next(absl::Seconds(30));
    ASSERT_THAT(e, IsOk());
    ASSERT_EQ(e->revision, last + 1);
    last = e->revision;
    Apply(*e, &state);
  }
  writer.join();
  EXPECT_EQ(state, ListAt(*store_, nullptr));
  EXPECT_THAT((*reader)->Watch(0), IsOk());
}

// A claim at cluster resourceVersion `rv` holding `device`.
ClaimRecord AtVersion(const std::string& name, int rv, const std::string& device) {
  return ClaimJson(
      "ns", name,
      absl::StrCat(R"({"allocation":{"devices":{"results":[{"request":"req",)",
                   R"("driver":"gpu.example.com","pool":"pool-a","device":")", device, R"("}]}}})"),
      absl::StrCat(R"("resourceVersion":")", rv, R"(")"));
}

TEST_F(WatchTest, ClusterEventsApplyAsStateSkipWhatIsNotNewerAndStoreThePosition) {
  ASSERT_THAT(store_->ApplyClusterEvents({{AtVersion("a", 5, "d1")}}, 5), IsOk());
  // A change of the allocation: refused as an update, applied as state.
  EXPECT_THAT(store_->Put(AtVersion("a", 6, "d2")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "field is immutable"));
  absl::StatusOr<std::vector<WriteResult>> r =
      store_->ApplyClusterEvents({{AtVersion("a", 6, "d2")}, {AtVersion("a", 6, "d3")}}, 6);
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE((*r)[0].changed);
  EXPECT_FALSE((*r)[1].changed);  // the same resourceVersion again: a duplicate
  EXPECT_EQ(store_->ClaimsUsingDevice({"gpu.example.com", "pool-a", "d2"})->holdings.size(), 1u);
  // An older one changes nothing, and the position only moves forward.
  r = store_->ApplyClusterEvents({{AtVersion("a", 4, "d9")}}, 4);
  ASSERT_THAT(r, IsOk());
  EXPECT_FALSE((*r)[0].changed);
  EXPECT_EQ(store_->Stats()->follow_resource_version, 6u);
  // A bookmark: the position alone, no revision.
  const uint64_t revision = store_->Stats()->revision;
  ASSERT_THAT(store_->ApplyClusterEvents({}, 9), IsOk());
  EXPECT_EQ(store_->Stats()->follow_resource_version, 9u);
  EXPECT_EQ(store_->Stats()->revision, revision);
  // A deletion older than the claim changes nothing; a newer one deletes.
  ASSERT_FALSE((*store_->ApplyClusterEvents({{AtVersion("a", 6, "d2"), true}}, 9))[0].changed);
  ASSERT_TRUE((*store_->ApplyClusterEvents({{AtVersion("a", 10, "d2"), true}}, 10))[0].changed);
  EXPECT_THAT(store_->Get({"ns", "a"}).status(), StatusIs(absl::StatusCode::kNotFound, ""));
  // The device rule holds: refused whole, the position too.
  ASSERT_THAT(store_->ApplyClusterEvents({{AtVersion("b", 11, "d5")}}, 11), IsOk());
  EXPECT_THAT(
      store_->ApplyClusterEvents({{AtVersion("c", 12, "d6")}, {AtVersion("e", 12, "d5")}}, 12)
          .status(),
      StatusIs(absl::StatusCode::kAborted, "ns/b"));
  EXPECT_EQ(store_->Stats()->follow_resource_version, 11u);
  EXPECT_THAT(store_->Get({"ns", "c"}).status(), StatusIs(absl::StatusCode::kNotFound, ""));
  // Kept across a reopen; read-only stores refuse.
  Reopen();
  EXPECT_EQ(store_->Stats()->follow_resource_version, 11u);
  absl::StatusOr<std::unique_ptr<Store>> reader = Store::Open(db_path(), {.read_only = true});
  ASSERT_THAT(reader, IsOk());
  EXPECT_EQ((*reader)->Stats()->follow_resource_version, 11u);
  EXPECT_THAT((*reader)->ApplyClusterEvents({}, 20).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "read-only"));
  EXPECT_THAT(
      store_->ApplyClusterEvents({{ClaimJson("ns", "x", "{}", R"("resourceVersion":"x1")")}}, 1)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "metadata.resourceVersion: Invalid value"));
}

// Writers on several threads; watchers started at random moments from a
// List (at its revision + 1) or from a random revision still in the feed:
// each sees exactly the committed changes after its start, once each, in
// order, and its List plus its events is the List at the end.
TEST_F(WatchTest, WatchersFromRandomRevisionsSeeExactlyTheCommittedChanges) {
  constexpr int kWriters = 4, kWatchers = 6, kOpsPerWriter = 400;
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kOpsPerWriter; ++i) {
        const ClaimKey key{"ns", absl::StrCat("c", rng() % 20)};
        switch (rng() % 5) {
          case 0:
            (void)store_->Put(ClaimJson(key.claim_namespace, key.name));
            break;
          case 1:
            (void)store_->Allocate(key, AllocationOf({{.device = key.name}}));
            break;
          case 2:
            (void)store_->Reserve(key, Pod(absl::StrCat("p", rng() % 3)));
            break;
          case 3:
            (void)store_->Unreserve(key, absl::StrCat("p", rng() % 3));
            break;
          case 4:
            (void)store_->Delete(key);
            break;
        }
      }
    });
  }
  struct Follower {
    std::map<std::string, std::string> state;
    uint64_t start = 0;
    std::vector<WatchEvent> events;
  };
  std::vector<Follower> followers(kWatchers);
  std::vector<std::thread> watchers;
  for (int t = 0; t < kWatchers; ++t) {
    watchers.emplace_back([&, t] {
      Follower& f = followers[t];
      absl::SleepFor(absl::Microseconds(t * 700));
      uint64_t listed = 0;
      f.state = ListAt(*store_, &listed);
      f.start = listed + 1;
      if (t % 2 == 1 && listed > 0) {
        // From a random revision still in the feed: no List to start from
        // (its events are checked against the whole feed, not replayed).
        f.start = 1 + std::mt19937(t)() % listed;
        f.state.clear();
      }
      absl::StatusOr<std::unique_ptr<Watcher>> w = store_->Watch(f.start);
      ASSERT_THAT(w, IsOk());
      for (;;) {
        absl::StatusOr<WatchEvent> e = (*w)->Next(absl::Milliseconds(50));
        if (absl::IsDeadlineExceeded(e.status()) && stop.load()) break;
        if (absl::IsDeadlineExceeded(e.status())) continue;
        ASSERT_THAT(e, IsOk());
        f.events.push_back(*std::move(e));
      }
    });
  }
  for (std::thread& w : writers) w.join();
  stop = true;
  for (std::thread& w : watchers) w.join();
  uint64_t end = 0;
  const std::map<std::string, std::string> final_state = ListAt(*store_, &end);
  // The reference: the whole feed, read after the fact from revision 1.
  absl::StatusOr<std::unique_ptr<Watcher>> all = store_->Watch(1);
  ASSERT_THAT(all, IsOk());
  const std::vector<WatchEvent> feed = Drain(**all);
  ASSERT_EQ(feed.size(), end);
  for (const Follower& f : followers) {
    ASSERT_EQ(f.events.size(), end + 1 - f.start);
    const bool from_list = !f.state.empty() || f.start == 1;
    std::map<std::string, std::string> state = f.state;
    for (size_t i = 0; i < f.events.size(); ++i) {
      const WatchEvent& e = f.events[i];
      ASSERT_EQ(e.revision, f.start + i);
      const WatchEvent& ref = feed[e.revision - 1];
      ASSERT_EQ(Brief(e), Brief(ref));
      ASSERT_EQ(e.record->bytes(), ref.record->bytes());
      if (e.type != WatchEventType::kDeleted) {
        ASSERT_EQ(e.record->mod_revision(), e.revision);
      }
      Apply(e, &state);
    }
    if (from_list) {
      EXPECT_EQ(state, final_state);
    }
  }
}

}  // namespace
}  // namespace claimstore
