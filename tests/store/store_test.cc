// The Store's API, one behaviour at a time.
#include "claimstore/store.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "index/keys.h"
#include "rocksdb/db.h"
#include "testutil/store_test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::AllocationOf;
using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::Dev;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::Pod;
using ::claimstore::testing::StatusIs;
using ::claimstore::testing::StoreFixture;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using StoreTest = StoreFixture;

const ClaimKey kKey{"ns", "claim"};

// Puts an unallocated claim ns/<name>.
void PutClaim(Store& store, const std::string& name, const std::string& ns = "ns") {
  ASSERT_THAT(store.Put(ClaimJson(ns, name)), IsOk());
}

std::vector<std::string> Uids(const ClaimRecord& record) {
  std::vector<std::string> uids;
  const auto* reserved = record.table().status()->reserved_for();
  if (reserved != nullptr) {
    for (const auto* r : *reserved) uids.push_back(r->uid()->str());
  }
  return uids;
}

std::vector<std::string> Names(const ClaimKeys& keys) {
  std::vector<std::string> out;
  for (const ClaimKey& k : keys.claims) out.push_back(k.ToString());
  return out;
}

// The database opened with plain RocksDB, behind the store's back (the store
// must be closed): handles in the order default, records, consumers,
// devices, meta.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const char* name : {"default", "records", "consumers", "devices", "meta", "feed"}) {
      families.emplace_back(name, rocksdb::ColumnFamilyOptions());
    }
    rocksdb::DB* raw = nullptr;
    status_ = rocksdb::DB::Open(rocksdb::DBOptions(), path, families, &handles_, &raw);
    db_.reset(raw);
  }
  ~RawDb() {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
  }
  bool ok() const { return status_.ok(); }
  rocksdb::DB* db() { return db_.get(); }
  rocksdb::ColumnFamilyHandle* family(int i) { return handles_[i]; }

 private:
  rocksdb::Status status_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

// --- Open ------------------------------------------------------------------------

TEST_F(StoreTest, ReopenKeepsClaimsAndRevisions) {
  PutClaim(*store_, "a");
  PutClaim(*store_, "b");
  ASSERT_THAT(store_->Allocate({"ns", "a"}, AllocationOf({{.device = "gpu-0"}})), IsOk());
  const std::string before = EncodeClaim(store_->Get({"ns", "a"})->record);
  Reopen();
  absl::StatusOr<ClaimRead> a = store_->Get({"ns", "a"});
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(EncodeClaim(a->record), before);
  EXPECT_EQ(a->revision, 3u);
  EXPECT_EQ(a->record.create_revision(), 1u);
  EXPECT_EQ(a->record.mod_revision(), 3u);
  EXPECT_EQ(a->record.version(), 2u);
  // The next write continues the revision sequence.
  EXPECT_EQ(store_->Reserve({"ns", "a"}, Pod("p"))->revision, 4u);
}

TEST_F(StoreTest, OpenRefusesADatabaseOfANewerFormat) {
  store_.reset();
  {
    RawDb raw(db_path());
    ASSERT_TRUE(raw.ok());
    std::string version;
    internal::AppendUint64(internal::kFormatVersion + 1, &version);
    ASSERT_TRUE(
        raw.db()->Put(rocksdb::WriteOptions(), raw.family(4), "format_version", version).ok());
  }
  EXPECT_THAT(Store::Open(db_path(), {}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("format version ", internal::kFormatVersion + 1)));
}

TEST_F(StoreTest, OpenRefusesARocksDBThatIsNotClaimstore) {
  const std::string path = dir_.path() + "/other";
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, path, &raw).ok());
  delete raw;
  EXPECT_THAT(Store::Open(path, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "is not a claimstore database"));
}

TEST_F(StoreTest, OpenWithoutCreateNeedsAnExistingDatabase) {
  EXPECT_THAT(Store::Open(dir_.path() + "/missing", {.create_if_missing = false}),
              StatusIs(absl::StatusCode::kNotFound, "no claimstore database"));
}

// Regression: a process killed while Open was creating the database left a
// RocksDB with only some column families, which every later Open refused
// (found by crash_test). Creation now happens aside and is renamed into place.
TEST_F(StoreTest, AnInterruptedCreationLeavesNothingBehind) {
  const std::string path = dir_.path() + "/fresh";
  const std::string leftover = path + ".creating.424242";
  std::filesystem::create_directories(leftover);
  std::ofstream(leftover + "/CURRENT") << "half made\n";
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, {});
  ASSERT_THAT(store, IsOk());
  EXPECT_FALSE(std::filesystem::exists(leftover));
  EXPECT_THAT((*store)->Put(ClaimJson("ns", "c")), IsOk());
}

TEST_F(StoreTest, OpenDoesNotCreateADatabaseInsideOtherFiles) {
  const std::string path = dir_.path() + "/not-empty";
  std::filesystem::create_directories(path);
  std::ofstream(path + "/notes.txt") << "an operator's file\n";
  EXPECT_THAT(Store::Open(path, {}), StatusIs(absl::StatusCode::kFailedPrecondition, "not empty"));
  EXPECT_TRUE(std::filesystem::exists(path + "/notes.txt"));
  // An empty directory is fine.
  std::filesystem::create_directories(dir_.path() + "/empty");
  EXPECT_THAT(Store::Open(dir_.path() + "/empty", {}), IsOk());
}

TEST_F(StoreTest, ASecondWriterIsRefusedWhileTheFirstHasItOpen) {
  EXPECT_THAT(Store::Open(db_path(), {}),
              StatusIs(absl::StatusCode::kUnavailable, "another process"));
}

// --- Put, Get, List ---------------------------------------------------------------

TEST_F(StoreTest, PutStampsRevisionsAndGetReturnsTheRecord) {
  const ClaimRecord claim = ClaimJson("ns", "claim");
  absl::StatusOr<WriteResult> first = store_->Put(claim);
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->revision, 1u);
  EXPECT_TRUE(first->changed);
  ASSERT_THAT(store_->Put(claim), IsOk());
  absl::StatusOr<ClaimRead> read = store_->Get(kKey);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->revision, 2u);
  EXPECT_EQ(read->record.create_revision(), 1u);
  EXPECT_EQ(read->record.mod_revision(), 2u);
  EXPECT_EQ(read->record.version(), 2u);
  EXPECT_EQ(EncodeClaim(read->record), EncodeClaim(claim));
  // Records handed out are aligned for FlatBuffers' in-place reads.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(read->record.bytes().data()) % 8, 0u);
}

TEST_F(StoreTest, PutNeedsNamespaceAndName) {
  absl::StatusOr<ClaimRecord> nameless = DecodeClaim(R"({"metadata":{"name":"x"},"status":{}})");
  ASSERT_THAT(nameless, IsOk());
  EXPECT_THAT(store_->Put(*nameless),
              StatusIs(absl::StatusCode::kInvalidArgument, "metadata.namespace"));
}

// Keys that can name no claim are refused, naming the field, rather than
// answered NotFound (reads) or queued (writes).
TEST_F(StoreTest, AnEmptyKeyIsInvalidArgumentNamingTheField) {
  EXPECT_THAT(store_->Get({"", "x"}), StatusIs(absl::StatusCode::kInvalidArgument,
                                               "ClaimKey.claim_namespace: Required value"));
  EXPECT_THAT(store_->Get({"ns", ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, "ClaimKey.name: Required value"));
  const std::vector<ClaimKey> keys = {{"ns", "a"}, {"ns", ""}};
  EXPECT_THAT(store_->GetMany(keys),
              StatusIs(absl::StatusCode::kInvalidArgument, "keys[1].name: Required value"));
  EXPECT_THAT(store_->Reserve({"", "x"}, Pod("u")),
              StatusIs(absl::StatusCode::kInvalidArgument, "ClaimKey.claim_namespace"));
  EXPECT_THAT(store_->Delete({"ns", ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, "ClaimKey.name"));
}

TEST_F(StoreTest, GetOfAMissingClaimIsNotFound) {
  EXPECT_THAT(store_->Get(kKey), StatusIs(absl::StatusCode::kNotFound, "ns/claim not found"));
  int calls = 0;
  const auto count = [&](const ClaimRecord&, uint64_t) { ++calls; };
  EXPECT_THAT(store_->GetInPlace("ns", "claim", count),
              StatusIs(absl::StatusCode::kNotFound, "ns/claim not found"));
  EXPECT_THAT(
      store_->GetInPlace("", "claim", count),
      StatusIs(absl::StatusCode::kInvalidArgument, "ClaimKey.claim_namespace: Required value"));
  EXPECT_EQ(calls, 0);
}

// GetInPlace lends the cached record itself, the one Get hands a reference
// to: no copy.
TEST_F(StoreTest, GetInPlaceLendsTheCachedRecord) {
  ASSERT_THAT(store_->Put(ClaimJson("ns", "claim")), IsOk());
  absl::StatusOr<ClaimRead> read = store_->Get(kKey);
  ASSERT_THAT(read, IsOk());
  const char* lent = nullptr;
  uint64_t revision = 0;
  ASSERT_THAT(store_->GetInPlace("ns", "claim",
                                 [&](const ClaimRecord& r, uint64_t at) {
                                   lent = r.bytes().data();
                                   revision = at;
                                 }),
              IsOk());
  EXPECT_EQ(lent, read->record.bytes().data());
  EXPECT_EQ(revision, read->revision);
}

TEST_F(StoreTest, GetManyReadsOneSnapshot) {
  PutClaim(*store_, "a");
  PutClaim(*store_, "c");
  absl::StatusOr<ClaimReads> reads =
      store_->GetMany(std::vector<ClaimKey>{{"ns", "a"}, {"ns", "b"}, {"ns", "c"}});
  ASSERT_THAT(reads, IsOk());
  ASSERT_EQ(reads->records.size(), 3u);
  EXPECT_EQ(reads->records[0]->name(), "a");
  EXPECT_FALSE(reads->records[1].has_value());
  EXPECT_EQ(reads->records[2]->name(), "c");
  EXPECT_EQ(reads->revision, 2u);
}

TEST_F(StoreTest, ListPagesInKeyOrderAndFiltersByNamespace) {
  for (const char* ns : {"b", "a"}) {
    for (const char* name : {"z", "x", "y"}) PutClaim(*store_, name, ns);
  }
  PutClaim(*store_, "q", "ab");  // "a" must not match "ab"
  std::vector<std::string> seen;
  ListOptions options{.limit = 2};
  for (int pages = 0;; ++pages) {
    ASSERT_LT(pages, 10);
    absl::StatusOr<ListPage> page = store_->List(options);
    ASSERT_THAT(page, IsOk());
    EXPECT_LE(page->records.size(), 2u);
    EXPECT_EQ(page->revision, 7u);
    for (const ClaimRecord& r : page->records) {
      seen.push_back(absl::StrCat(r.claim_namespace(), "/", r.name()));
    }
    if (page->continue_token.empty()) break;
    options.continue_token = page->continue_token;
  }
  EXPECT_THAT(seen, ElementsAre("a/x", "a/y", "a/z", "ab/q", "b/x", "b/y", "b/z"));
  absl::StatusOr<ListPage> only_a = store_->List({.claim_namespace = "a"});
  ASSERT_THAT(only_a, IsOk());
  EXPECT_EQ(only_a->records.size(), 3u);
  EXPECT_THAT(store_->List({.continue_token = "not base64!"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "continue token"));
}

// --- Reserve, Unreserve ---------------------------------------------------------------

TEST_F(StoreTest, ReserveAddsTheConsumerOnceAndIndexesIt) {
  PutClaim(*store_, "claim");
  ASSERT_THAT(store_->Allocate(kKey, AllocationOf({{.device = "gpu-0"}})), IsOk());
  absl::StatusOr<WriteResult> first = store_->Reserve(kKey, Pod("u1"));
  ASSERT_THAT(first, IsOk());
  EXPECT_TRUE(first->changed);
  absl::StatusOr<WriteResult> again = store_->Reserve(kKey, Pod("u1"));
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE(again->changed);  // idempotent: no new revision
  EXPECT_EQ(again->revision, first->revision);
  ASSERT_THAT(store_->Reserve(kKey, Pod("u2")), IsOk());
  EXPECT_THAT(Uids(store_->Get(kKey)->record), ElementsAre("u1", "u2"));
  EXPECT_THAT(Names(*store_->ClaimsReservedFor("u1")), ElementsAre("ns/claim"));
  EXPECT_THAT(Names(*store_->ClaimsReservedFor("u")), ElementsAre());  // no prefix match
}

TEST_F(StoreTest, UnreserveRemovesTheConsumerAndItsIndexEntry) {
  PutClaim(*store_, "claim");
  ASSERT_THAT(store_->Allocate(kKey, AllocationOf({{.device = "gpu-0"}})), IsOk());
  ASSERT_THAT(store_->Reserve(kKey, Pod("u1")), IsOk());
  ASSERT_THAT(store_->Reserve(kKey, Pod("u2")), IsOk());
  absl::StatusOr<WriteResult> removed = store_->Unreserve(kKey, "u1");
  ASSERT_THAT(removed, IsOk());
  EXPECT_TRUE(removed->changed);
  EXPECT_THAT(Uids(store_->Get(kKey)->record), ElementsAre("u2"));
  EXPECT_THAT(Names(*store_->ClaimsReservedFor("u1")), ElementsAre());
  absl::StatusOr<WriteResult> absent = store_->Unreserve(kKey, "u1");
  ASSERT_THAT(absent, IsOk());
  EXPECT_FALSE(absent->changed);
}

TEST_F(StoreTest, ReserveRefusesWhatTheRulesForbid) {
  EXPECT_THAT(store_->Reserve(kKey, Pod("u")), StatusIs(absl::StatusCode::kNotFound, "ns/claim"));
  PutClaim(*store_, "claim");
  EXPECT_THAT(store_->Reserve(kKey, Pod("u")),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is not allocated"));
  EXPECT_THAT(store_->Reserve(kKey, ConsumerRef{"", "pods", "p", ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, "uid are required"));
  ASSERT_THAT(store_->Put(ClaimJson("ns", "dying", R"({"allocation":{"devices":{}}})",
                                    R"("deletionTimestamp":"2026-01-01T00:00:00Z")")),
              IsOk());
  EXPECT_THAT(store_->Reserve({"ns", "dying"}, Pod("u")),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is being deleted"));
}

TEST_F(StoreTest, AClaimBeingDeletedWhileReservedIsStateWhenNotHeldBefore) {
  // What the store itself reaches (Put, then Put with deletionTimestamp) and
  // what a dump of it holds: a Put of it into an empty store is state, not
  // an update, so no rule about adding consumers applies.
  const std::string reserved =
      R"({"allocation":{"devices":{}},"reservedFor":[{"resource":"pods","name":"a","uid":"u1"}]})";
  const std::string dying = R"("deletionTimestamp":"2026-01-01T00:00:00Z")";
  ASSERT_THAT(store_->Put(ClaimJson("ns", "dying", reserved, dying)), IsOk());
  // Once held, the rule applies to updates: no consumer may be added.
  const std::string more =
      R"({"allocation":{"devices":{}},"reservedFor":[{"resource":"pods","name":"a","uid":"u1"},)"
      R"({"resource":"pods","name":"b","uid":"u2"}]})";
  EXPECT_THAT(store_->Put(ClaimJson("ns", "dying", more, dying)),
              StatusIs(absl::StatusCode::kFailedPrecondition, "new entries may not be added"));
  EXPECT_THAT(Uids(store_->Get({"ns", "dying"})->record), ElementsAre("u1"));
}

TEST_F(StoreTest, ReserveStopsAt256Consumers) {
  PutClaim(*store_, "claim");
  ASSERT_THAT(store_->Allocate(kKey, AllocationOf({{.device = "gpu-0"}})), IsOk());
  for (int i = 0; i < 256; ++i) {
    ASSERT_THAT(store_->Reserve(kKey, Pod(absl::StrCat("u", i))), IsOk()) << i;
  }
  const uint64_t revision = store_->Get(kKey)->revision;
  EXPECT_THAT(store_->Reserve(kKey, Pod("one-too-many")),
              StatusIs(absl::StatusCode::kResourceExhausted, "256"));
  EXPECT_EQ(store_->Get(kKey)->revision, revision);
  EXPECT_EQ(Uids(store_->Get(kKey)->record).size(), 256u);
  // An existing consumer is still a no-op, not an error.
  EXPECT_THAT(store_->Reserve(kKey, Pod("u7")), IsOk());
}

// --- Allocate, Deallocate ---------------------------------------------------------------

TEST_F(StoreTest, AllocateIndexesDevicesByKindOfHolding) {
  PutClaim(*store_, "claim");
  ASSERT_THAT(
      store_->Allocate(kKey, AllocationOf({{.device = "gpu-0"},
                                           {.device = "gpu-1", .share_id = testing::kShare1},
                                           {.device = "gpu-2", .admin = true},
                                           {.pool = "pool-b", .device = "gpu-0"}})),
      IsOk());
  absl::StatusOr<DeviceHoldings> pool_a =
      store_->ClaimsUsingDevice({.driver = "gpu.example.com", .pool = "pool-a"});
  ASSERT_THAT(pool_a, IsOk());
  ASSERT_EQ(pool_a->holdings.size(), 3u);
  EXPECT_EQ(pool_a->holdings[0].device, "gpu-0");
  EXPECT_EQ(pool_a->holdings[0].kind, HoldingKind::kExclusive);
  EXPECT_EQ(pool_a->holdings[1].kind, HoldingKind::kShare);
  EXPECT_EQ(pool_a->holdings[1].share_id, testing::kShare1);
  EXPECT_EQ(pool_a->holdings[2].kind, HoldingKind::kAdminAccess);
  EXPECT_EQ(pool_a->holdings[2].claim, kKey);
  EXPECT_EQ(store_->ClaimsUsingDevice({.driver = "gpu.example.com"})->holdings.size(), 4u);
  EXPECT_EQ(
      store_->ClaimsUsingDevice({.driver = "gpu.example.com", .pool = "pool-b", .device = "gpu-0"})
          ->holdings.size(),
      1u);
  EXPECT_EQ(store_
                ->ClaimsUsingDevice({.driver = "gpu.example.com",
                                     .pool = "pool-a",
                                     .device = "gpu-1",
                                     .share_id = testing::kShare9})
                ->holdings.size(),
            0u);
  EXPECT_TRUE(store_->ClaimsUsingDevice({.driver = "gpu"})->holdings.empty());
  EXPECT_THAT(store_->ClaimsUsingDevice({.driver = "d", .device = "x"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "requiring the one before"));
  // Queries that can mean nothing are refused, naming the field.
  EXPECT_THAT(store_->ClaimsUsingDevice({}),
              StatusIs(absl::StatusCode::kInvalidArgument, "DeviceQuery.driver: Required value"));
  EXPECT_THAT(store_->ClaimsUsingDevice({.driver = "gpu.example.com", .pool = ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, "DeviceQuery.pool: Required value"));
  EXPECT_THAT(store_->ClaimsReservedFor(""),
              StatusIs(absl::StatusCode::kInvalidArgument, "consumer uid: Required value"));
}

TEST_F(StoreTest, AllocateRefusesDevicesHeldByAnotherClaim) {
  for (const char* name : {"a", "b"}) PutClaim(*store_, name);
  ASSERT_THAT(store_->Allocate({"ns", "a"},
                               AllocationOf({{.device = "gpu-0"},
                                             {.device = "gpu-1", .share_id = testing::kShare1}})),
              IsOk());
  const ClaimKey b{"ns", "b"};
  EXPECT_THAT(
      store_->Allocate(b, AllocationOf({{.device = "gpu-0"}})),
      StatusIs(absl::StatusCode::kAborted,
               "device gpu.example.com/pool-a/gpu-0 is allocated to claim ns/a exclusively"));
  EXPECT_THAT(
      store_->Allocate(b, AllocationOf({{.device = "gpu-0", .share_id = testing::kShare9}})),
      StatusIs(absl::StatusCode::kAborted, "ns/a exclusively"));
  EXPECT_THAT(
      store_->Allocate(b, AllocationOf({{.device = "gpu-1"}})),
      StatusIs(absl::StatusCode::kAborted, absl::StrCat("ns/a as share ", testing::kShare1)));
  EXPECT_THAT(
      store_->Allocate(b, AllocationOf({{.device = "gpu-1", .share_id = testing::kShare1}})),
      StatusIs(absl::StatusCode::kAborted, absl::StrCat("ns/a as share ", testing::kShare1)));
  // One conflicting device refuses the whole allocation: nothing was taken.
  EXPECT_THAT(store_->Allocate(b, AllocationOf({{.device = "gpu-5"}, {.device = "gpu-0"}})),
              StatusIs(absl::StatusCode::kAborted, "gpu-0"));
  EXPECT_TRUE(
      store_->ClaimsUsingDevice({.driver = "gpu.example.com", .pool = "pool-a", .device = "gpu-5"})
          ->holdings.empty());
  // Another share of a shared device, and admin access, are fine.
  EXPECT_THAT(store_->Allocate(b, AllocationOf({{.device = "gpu-1", .share_id = testing::kShare2},
                                                {.device = "gpu-0", .admin = true}})),
              IsOk());
  // Admin access never blocks: a third claim can take gpu-5 despite b's admin
  // holding elsewhere, and b's admin holding of gpu-0 does not stop a.
  PutClaim(*store_, "c");
  EXPECT_THAT(store_->Allocate({"ns", "c"}, AllocationOf({{.device = "gpu-5"}})), IsOk());
}

TEST_F(StoreTest, AllocateRefusesAnAllocatedClaim) {
  PutClaim(*store_, "claim");
  ASSERT_THAT(store_->Allocate(kKey, AllocationOf({{.device = "gpu-0"}})), IsOk());
  EXPECT_THAT(store_->Allocate(kKey, AllocationOf({{.device = "gpu-1"}})),
              StatusIs(absl::StatusCode::kFailedPrecondition, "already allocated"));
}

TEST_F(StoreTest, DeallocateNeedsNoReservationsAndFreesTheDevices) {
  PutClaim(*store_, "a");
  PutClaim(*store_, "b");
  const ClaimKey a{"ns", "a"};
  ASSERT_THAT(store_->Allocate(a, AllocationOf({{.device = "gpu-0"}})), IsOk());
  ASSERT_THAT(
      store_->SetDeviceStatus(
          a,
          *DeviceStatuses::FromJson(
              R"([{"driver":"gpu.example.com","pool":"pool-a","device":"gpu-0","conditions":[]}])")),
      IsOk());
  ASSERT_THAT(store_->Reserve(a, Pod("u")), IsOk());
  EXPECT_THAT(store_->Deallocate(a),
              StatusIs(absl::StatusCode::kFailedPrecondition, "still reserved for 1"));
  ASSERT_THAT(store_->Unreserve(a, "u"), IsOk());
  ASSERT_THAT(store_->Deallocate(a), IsOk());
  const ClaimRead read = *store_->Get(a);  // keeps the record alive
  const fb::ResourceClaimStatus* status = read.record.table().status();
  EXPECT_EQ(status->allocation(), nullptr);
  EXPECT_EQ(status->devices(), nullptr);  // stale device statuses dropped
  EXPECT_TRUE(store_->ClaimsUsingDevice({.driver = "gpu.example.com"})->holdings.empty());
  EXPECT_THAT(store_->Allocate({"ns", "b"}, AllocationOf({{.device = "gpu-0"}})), IsOk());
  EXPECT_FALSE(store_->Deallocate(a)->changed);  // already deallocated: no-op
}

TEST_F(StoreTest, SetDeviceStatusReplacesEntriesByDeviceKey) {
  PutClaim(*store_, "claim");
  ASSERT_THAT(store_->Allocate(kKey, AllocationOf({{.device = "gpu-0"}, {.device = "gpu-1"}})),
              IsOk());
  const auto set = [&](const char* json) {
    absl::StatusOr<DeviceStatuses> entries = DeviceStatuses::FromJson(json);
    EXPECT_THAT(entries, IsOk());
    return store_->SetDeviceStatus(kKey, *entries);
  };
  ASSERT_THAT(set(R"([{"driver":"gpu.example.com","pool":"pool-a","device":"gpu-0",
                       "conditions":[{"type":"Ready","status":"False","lastTransitionTime":"2026-01-01T00:00:00Z",
                                      "reason":"Init","message":""}]},
                      {"driver":"gpu.example.com","pool":"pool-a","device":"gpu-1"}])"),
              IsOk());
  ASSERT_THAT(set(R"([{"driver":"gpu.example.com","pool":"pool-a","device":"gpu-0",
                       "conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:01Z",
                                      "reason":"Up","message":""}]}])"),
              IsOk());
  const ClaimRead read = *store_->Get(kKey);
  const auto* devices = read.record.table().status()->devices();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ(devices->Get(0)->device()->str(), "gpu-1");  // untouched entry kept
  EXPECT_EQ(devices->Get(1)->conditions()->Get(0)->status()->str(), "True");
  EXPECT_THAT(DeviceStatuses::FromJson(R"([{"driver":7}])"),
              StatusIs(absl::StatusCode::kInvalidArgument, "status.devices[0].driver"));
  EXPECT_THAT(DeviceStatuses::FromJson(R"([] , "x")"),
              StatusIs(absl::StatusCode::kInvalidArgument, "status.devices: invalid JSON"));
}

// --- Compare-and-set -------------------------------------------------------------------

TEST_F(StoreTest, StaleRevisionIsAbortedWithTheCurrentRevision) {
  PutClaim(*store_, "claim");
  ASSERT_THAT(store_->Allocate(kKey, AllocationOf({{.device = "gpu-0"}})), IsOk());
  const uint64_t seen = store_->Get(kKey)->record.mod_revision();
  ASSERT_THAT(store_->Reserve(kKey, Pod("first"), {.mod_revision = seen}), IsOk());
  absl::StatusOr<WriteResult> loser = store_->Reserve(kKey, Pod("second"), {.mod_revision = seen});
  EXPECT_THAT(loser,
              StatusIs(absl::StatusCode::kAborted, absl::StrCat("expected revision ", seen)));
  EXPECT_EQ(CurrentRevision(loser.status()), seen + 1);
  EXPECT_THAT(Uids(store_->Get(kKey)->record), ElementsAre("first"));
  EXPECT_THAT(store_->Reserve(kKey, Pod("second"), {.mod_revision = seen + 1}), IsOk());
}

TEST_F(StoreTest, UidPreconditionPinsTheIncarnation) {
  PutClaim(*store_, "claim");  // uid "uid-claim"
  EXPECT_THAT(store_->Unreserve(kKey, "u", {.uid = "uid-other"}),
              StatusIs(absl::StatusCode::kAborted, "expected uid uid-other, found uid-claim"));
  EXPECT_THAT(store_->Unreserve(kKey, "u", {.uid = "uid-claim"}), IsOk());
  EXPECT_THAT(store_->Delete({"ns", "missing"}, {.uid = "x"}),
              StatusIs(absl::StatusCode::kNotFound, "ns/missing"));
}

TEST_F(StoreTest, RevisionZeroMeansCreateOnly) {
  EXPECT_THAT(store_->Put(ClaimJson("ns", "claim"), {.mod_revision = 0}), IsOk());
  EXPECT_THAT(store_->Put(ClaimJson("ns", "claim"), {.mod_revision = 0}),
              StatusIs(absl::StatusCode::kAborted, "expected revision 0"));
}

TEST_F(StoreTest, ARefusedWriteChangesNothing) {
  PutClaim(*store_, "claim");
  const ClaimRead before = *store_->Get(kKey);
  EXPECT_THAT(store_->Put(ClaimJson(
                  "ns", "claim", R"({"reservedFor":[{"resource":"pods","name":"p","uid":"u"}]})")),
              StatusIs(absl::StatusCode::kInvalidArgument, "status.reservedFor: Forbidden"));
  const ClaimRead after = *store_->Get(kKey);
  EXPECT_EQ(after.revision, before.revision);
  EXPECT_EQ(after.record.bytes(), before.record.bytes());
  EXPECT_TRUE(store_->ClaimsReservedFor("u")->claims.empty());
}

TEST_F(StoreTest, DeleteRemovesTheRecordAndItsIndexEntries) {
  PutClaim(*store_, "claim");
  ASSERT_THAT(store_->Allocate(kKey, AllocationOf({{.device = "gpu-0"}})), IsOk());
  ASSERT_THAT(store_->Reserve(kKey, Pod("u")), IsOk());
  absl::StatusOr<WriteResult> deleted = store_->Delete(kKey);
  ASSERT_THAT(deleted, IsOk());
  EXPECT_EQ(deleted->revision, 4u);
  EXPECT_THAT(store_->Get(kKey), StatusIs(absl::StatusCode::kNotFound, ""));
  EXPECT_TRUE(store_->ClaimsReservedFor("u")->claims.empty());
  EXPECT_TRUE(store_->ClaimsUsingDevice({.driver = "gpu.example.com"})->holdings.empty());
  EXPECT_THAT(store_->Delete(kKey), StatusIs(absl::StatusCode::kNotFound, ""));
  // A claim created again starts a new incarnation.
  PutClaim(*store_, "claim");
  EXPECT_EQ(store_->Get(kKey)->record.create_revision(), 5u);
  EXPECT_EQ(store_->Get(kKey)->record.version(), 1u);
}

TEST_F(StoreTest, PutAllWritesEverythingOrNothing) {
  std::vector<ClaimRecord> good = {ClaimJson("ns", "a"), ClaimJson("ns", "b"),
                                   ClaimJson("other", "c")};
  absl::StatusOr<std::vector<WriteResult>> written = store_->PutAll(good);
  ASSERT_THAT(written, IsOk());
  ASSERT_EQ(written->size(), 3u);
  EXPECT_EQ((*written)[0].revision, 1u);
  EXPECT_EQ((*written)[2].revision, 3u);
  EXPECT_EQ(store_->Get({"other", "c"})->revision, 3u);

  const std::string gpu0 =
      R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"gpu-0"}]}}})";
  // A refused record (reservedFor without allocation) refuses the batch.
  std::vector<ClaimRecord> bad = {
      ClaimJson("ns", "d"), ClaimJson("ns", "e", gpu0),
      ClaimJson("ns", "f", R"({"reservedFor":[{"resource":"pods","name":"p","uid":"u"}]})")};
  EXPECT_THAT(store_->PutAll(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, "item 2 (ns/f): status.reservedFor"));
  // Two records of one batch taking one device exclusively: refused too.
  std::vector<ClaimRecord> clash = {ClaimJson("ns", "g", gpu0), ClaimJson("ns", "h", gpu0)};
  EXPECT_THAT(store_->PutAll(clash),
              StatusIs(absl::StatusCode::kAborted,
                       "item 1 (ns/h): device d/p/gpu-0 is allocated to claim ns/g"));
  for (const char* name : {"d", "e", "f", "g", "h"}) {
    EXPECT_THAT(store_->Get({"ns", name}), StatusIs(absl::StatusCode::kNotFound, "")) << name;
  }
  EXPECT_EQ(store_->Get({"ns", "a"})->revision, 3u);
  EXPECT_TRUE(store_->ClaimsUsingDevice({.driver = "d"})->holdings.empty());
}

TEST_F(StoreTest, PutAllSeesItsOwnEarlierItems) {
  const std::string gpu0 =
      R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"gpu-0"}]}}})";
  // x takes gpu-0, then (a later item of the same batch) lets it go; then y
  // may take it, and the last record of x wins.
  std::vector<ClaimRecord> moves = {ClaimJson("ns", "x", gpu0), ClaimJson("ns", "x"),
                                    ClaimJson("ns", "y", gpu0)};
  ASSERT_THAT(store_->PutAll(moves), IsOk());
  absl::StatusOr<DeviceHoldings> holders = store_->ClaimsUsingDevice({.driver = "d"});
  ASSERT_THAT(holders, IsOk());
  ASSERT_EQ(holders->holdings.size(), 1u);
  EXPECT_EQ(holders->holdings[0].claim.name, "y");
  absl::StatusOr<ClaimRead> x = store_->Get({"ns", "x"});
  ASSERT_THAT(x, IsOk());
  EXPECT_EQ(x->record.version(), 2u);
  EXPECT_EQ(x->record.table().status()->allocation(), nullptr);
  // A refused batch leaves nothing behind for the next one to see: gpu-1 is
  // free after it.
  const std::string gpu1 =
      R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"gpu-1"}]}}})";
  std::vector<ClaimRecord> refused = {ClaimJson("ns", "z", gpu1), ClaimJson("ns", "v", gpu1)};
  EXPECT_THAT(store_->PutAll(refused), StatusIs(absl::StatusCode::kAborted, "item 1"));
  EXPECT_THAT(store_->PutAll({ClaimJson("ns", "w", gpu1)}), IsOk());
  absl::StatusOr<VerifyReport> report = store_->Verify(false);
  ASSERT_THAT(report, IsOk());
  EXPECT_TRUE(report->problems.empty());
}

// --- Maintenance ----------------------------------------------------------------------

TEST_F(StoreTest, VerifyFindsAndRepairsDamagedIndexes) {
  PutClaim(*store_, "a");
  PutClaim(*store_, "b");
  ASSERT_THAT(store_->Allocate({"ns", "a"}, AllocationOf({{.device = "gpu-0"}})), IsOk());
  ASSERT_THAT(store_->Reserve({"ns", "a"}, Pod("u")), IsOk());
  absl::StatusOr<VerifyReport> clean = store_->Verify(false);
  ASSERT_THAT(clean, IsOk());
  EXPECT_TRUE(clean->problems.empty());
  EXPECT_EQ(clean->records, 2u);
  EXPECT_EQ(clean->index_entries, 2u);

  // Damage the indexes behind the store's back: drop a's consumer entry, add a
  // stray one, and record b as a second exclusive holder of gpu-0.
  store_.reset();
  {
    RawDb raw(db_path());
    ASSERT_TRUE(raw.ok());
    const rocksdb::WriteOptions w;
    ASSERT_TRUE(raw.db()->Delete(w, raw.family(2), internal::ConsumerKey("u", "ns", "a")).ok());
    ASSERT_TRUE(
        raw.db()->Put(w, raw.family(2), internal::ConsumerKey("ghost", "ns", "b"), "").ok());
    ASSERT_TRUE(raw.db()
                    ->Put(w, raw.family(3),
                          internal::DeviceKey("gpu.example.com", "pool-a", "gpu-0",
                                              internal::HoldingKind::kExclusive, "", "ns", "b"),
                          "")
                    .ok());
  }
  Reopen();
  absl::StatusOr<VerifyReport> damaged = store_->Verify(false);
  ASSERT_THAT(damaged, IsOk());
  ASSERT_EQ(damaged->problems.size(), 4u) << absl::StrJoin(damaged->problems, "\n");
  EXPECT_THAT(absl::StrJoin(damaged->problems, "\n"),
              ::testing::AllOf(HasSubstr("consumers index: missing entry"),
                               HasSubstr("has no record holding it"),
                               HasSubstr("is held by both ns/a and ns/b (one exclusively)")));
  absl::StatusOr<VerifyReport> repaired = store_->Verify(true);
  ASSERT_THAT(repaired, IsOk());
  EXPECT_TRUE(repaired->repaired);
  EXPECT_TRUE(store_->Verify(false)->problems.empty());
  EXPECT_THAT(Names(*store_->ClaimsReservedFor("u")), ElementsAre("ns/a"));
}

// The allocated state is built from the device index at the first
// AllocatedDevices (its records read only for shares): a damaged index
// shows there, and Verify, which builds it from every record, names the
// difference; a share whose claim has no record is an error naming it.
// Repair makes both agree again.
TEST_F(StoreTest, AllocatedStateFromADamagedDeviceIndexIsCaughtAndRepaired) {
  PutClaim(*store_, "a");
  ASSERT_THAT(store_->Allocate({"ns", "a"}, AllocationOf({{.device = "gpu-0"}})), IsOk());
  store_.reset();
  {
    RawDb raw(db_path());
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw.db()
                    ->Put(rocksdb::WriteOptions(), raw.family(3),
                          internal::DeviceKey("gpu.example.com", "pool-a", "gpu-1",
                                              internal::HoldingKind::kExclusive, "", "ns", "b"),
                          "")
                    .ok());
  }
  Reopen();
  absl::StatusOr<AllocatedState> shown = store_->AllocatedDevices();
  ASSERT_THAT(shown, IsOk());
  ASSERT_NE(shown->Find("gpu.example.com", "pool-a", "gpu-1"), nullptr);
  absl::StatusOr<VerifyReport> damaged = store_->Verify(false);
  ASSERT_THAT(damaged, IsOk());
  EXPECT_THAT(absl::StrJoin(damaged->problems, "\n"),
              ::testing::AllOf(HasSubstr("has no record holding it"), HasSubstr("gpu-1")));
  ASSERT_THAT(store_->Verify(true), IsOk());
  EXPECT_TRUE(store_->Verify(false)->problems.empty());
  EXPECT_EQ(store_->AllocatedDevices()->Find("gpu.example.com", "pool-a", "gpu-1"), nullptr);

  store_.reset();
  {
    RawDb raw(db_path());
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw.db()
                    ->Put(rocksdb::WriteOptions(), raw.family(3),
                          internal::DeviceKey("gpu.example.com", "pool-a", "gpu-2",
                                              internal::HoldingKind::kShare, testing::kShare1, "ns",
                                              "ghost"),
                          "")
                    .ok());
  }
  Reopen();
  EXPECT_THAT(store_->AllocatedDevices(),
              StatusIs(absl::StatusCode::kDataLoss,
                       "the device index names claim ns/ghost, which has no record"));
  ASSERT_THAT(store_->Verify(true), IsOk());
  absl::StatusOr<AllocatedState> repaired = store_->AllocatedDevices();
  ASSERT_THAT(repaired, IsOk());
  EXPECT_EQ(repaired->size(), 1u);
  EXPECT_NE(repaired->Find("gpu.example.com", "pool-a", "gpu-0"), nullptr);
}

// Opens with nothing written in between leave no write-ahead log behind
// each (RocksDB 7.8 kept an empty one per open); what was written and not
// yet flushed is still there after them.
TEST_F(StoreTest, OpensWithoutWritesDoNotGatherEmptyLogs) {
  PutClaim(*store_, "a");
  const auto logs = [this] {
    size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(db_path())) {
      n += entry.path().extension() == ".log";
    }
    return n;
  };
  for (int i = 0; i < 8; ++i) Reopen();
  EXPECT_LE(logs(), 2u);
  ASSERT_THAT(store_->Get({"ns", "a"}), IsOk());
  PutClaim(*store_, "b");
  for (int i = 0; i < 3; ++i) Reopen();
  EXPECT_LE(logs(), 3u);
  EXPECT_THAT(store_->Get({"ns", "a"}), IsOk());
  EXPECT_THAT(store_->Get({"ns", "b"}), IsOk());
}

// Options::defer_index_load: the same answers as an eager open, whichever
// call comes first.
TEST_F(StoreTest, DeferredIndexesAnswerAsLoadedOnesWhateverComesFirst) {
  const auto fill = [this] {
    for (const char* name : {"a", "b", "c"}) PutClaim(*store_, name);
    ASSERT_THAT(store_->Allocate({"ns", "a"}, AllocationOf({{.device = "gpu-0"}})), IsOk());
    ASSERT_THAT(store_->Allocate({"ns", "b"}, AllocationOf({{.device = "gpu-1"}})), IsOk());
    ASSERT_THAT(store_->Reserve({"ns", "a"}, Pod("u")), IsOk());
  };
  fill();
  const Options deferred{.defer_index_load = true};
  // A write that needs no index first: published without loading; the
  // load that follows reads at its revision.
  Reopen(deferred);
  ASSERT_THAT(store_->Reserve({"ns", "b"}, Pod("v")), IsOk());
  EXPECT_THAT(Names(*store_->ClaimsReservedFor("v")), ElementsAre("ns/b"));
  EXPECT_THAT(Names(*store_->ClaimsReservedFor("u")), ElementsAre("ns/a"));
  ASSERT_THAT(store_->Unreserve({"ns", "b"}, "v"), IsOk());  // now edited in memory
  EXPECT_TRUE(store_->ClaimsReservedFor("v")->claims.empty());
  // A device conflict first: the write path loads the device index.
  Reopen(deferred);
  EXPECT_THAT(store_->Allocate({"ns", "c"}, AllocationOf({{.device = "gpu-0"}})),
              StatusIs(absl::StatusCode::kAborted, "allocated to claim ns/a exclusively"));
  EXPECT_EQ(store_->ClaimsUsingDevice({.driver = "gpu.example.com"})->holdings.size(), 2u);
  // Verify first: the stored indexes checked, none in memory yet; then the
  // loaded ones too.
  Reopen(deferred);
  absl::StatusOr<VerifyReport> report = store_->Verify(false);
  ASSERT_THAT(report, IsOk());
  EXPECT_TRUE(report->problems.empty());
  EXPECT_EQ(report->index_entries, 3u);
  EXPECT_THAT(Names(*store_->ClaimsReservedFor("u")), ElementsAre("ns/a"));
  report = store_->Verify(false);
  ASSERT_THAT(report, IsOk());
  EXPECT_TRUE(report->problems.empty());
  // A bulk load that keeps stored claims checks devices against them.
  Reopen(deferred);
  absl::StatusOr<std::unique_ptr<BulkLoad>> load = store_->StartBulkLoad({});
  ASSERT_THAT(load, IsOk());
  const std::string taken =
      R"({"allocation":{"devices":{"results":[{"request":"req","driver":"gpu.example.com","pool":"pool-a","device":"gpu-0"}]}}})";
  ASSERT_THAT((*load)->Add(ClaimJson("ns", "d", taken), 1), IsOk());
  EXPECT_THAT((*load)->Commit(), StatusIs(absl::StatusCode::kAborted, "ns/a"));
  // A rebuild (replace_all) builds no indexes in memory: they are read back
  // from what it wrote when asked.
  load = store_->StartBulkLoad({.replace_all = true});
  ASSERT_THAT(load, IsOk());
  ASSERT_THAT((*load)->Add(ClaimJson("ns", "d", taken), 1), IsOk());
  ASSERT_THAT((*load)->Commit(), IsOk());
  absl::StatusOr<DeviceHoldings> held = store_->ClaimsUsingDevice({.driver = "gpu.example.com"});
  ASSERT_THAT(held, IsOk());
  ASSERT_EQ(held->holdings.size(), 1u);
  EXPECT_EQ(held->holdings[0].claim, (ClaimKey{"ns", "d"}));
  EXPECT_TRUE(store_->ClaimsReservedFor("u")->claims.empty());
  EXPECT_TRUE(store_->Verify(false)->problems.empty());
}

TEST_F(StoreTest, StatsCountClaimsAndIndexEntries) {
  PutClaim(*store_, "a");
  PutClaim(*store_, "b");
  ASSERT_THAT(
      store_->Allocate({"ns", "a"}, AllocationOf({{.device = "gpu-0"}, {.device = "gpu-1"}})),
      IsOk());
  ASSERT_THAT(store_->Reserve({"ns", "a"}, Pod("u")), IsOk());
  absl::StatusOr<StoreStats> stats = store_->Stats();
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->claims, 2u);
  EXPECT_EQ(stats->allocated, 1u);
  EXPECT_EQ(stats->reserved, 1u);
  EXPECT_EQ(stats->consumer_entries, 1u);
  EXPECT_EQ(stats->device_entries, 2u);
  EXPECT_EQ(stats->revision, 4u);
  EXPECT_GT(stats->size_on_disk_bytes, 0u);
}

TEST_F(StoreTest, CompactKeepsEverything) {
  for (int i = 0; i < 50; ++i) PutClaim(*store_, absl::StrCat("c", i));
  ASSERT_THAT(store_->Allocate({"ns", "c7"}, AllocationOf({{.device = "gpu-0"}})), IsOk());
  ASSERT_THAT(store_->Compact(), IsOk());
  EXPECT_EQ(store_->Stats()->claims, 50u);
  EXPECT_EQ(store_->Get({"ns", "c7"})->revision, 51u);
  EXPECT_TRUE(store_->Verify(false)->problems.empty());
}

TEST_F(StoreTest, BackupOpensAsADatabase) {
  PutClaim(*store_, "claim");
  const std::string backup = dir_.path() + "/backup";
  ASSERT_THAT(store_->Backup(backup), IsOk());
  PutClaim(*store_, "later");
  absl::StatusOr<std::unique_ptr<Store>> copy = Store::Open(backup, {});
  ASSERT_THAT(copy, IsOk());
  EXPECT_THAT((*copy)->Get(kKey), IsOk());
  EXPECT_THAT((*copy)->Get({"ns", "later"}), StatusIs(absl::StatusCode::kNotFound, ""));
  EXPECT_TRUE((*copy)->Verify(false)->problems.empty());
}

TEST_F(StoreTest, ReadOnlyStoreReadsWhileTheWriterRuns) {
  PutClaim(*store_, "claim");
  absl::StatusOr<std::unique_ptr<Store>> reader = Store::Open(db_path(), {.read_only = true});
  ASSERT_THAT(reader, IsOk());
  EXPECT_THAT((*reader)->Get(kKey), IsOk());
  PutClaim(*store_, "later");
  ASSERT_THAT(store_->Allocate({"ns", "later"}, AllocationOf({{.device = "gpu-0"}})), IsOk());
  ASSERT_THAT(store_->Reserve({"ns", "later"}, Pod("u")), IsOk());
  ASSERT_THAT((*reader)->Refresh(), IsOk());
  EXPECT_THAT((*reader)->Get({"ns", "later"}), IsOk());
  // Every kind of read works on a read-only store.
  EXPECT_EQ((*reader)->List({})->records.size(), 2u);
  EXPECT_EQ((*reader)->ClaimsReservedFor("u")->claims.size(), 1u);
  EXPECT_EQ((*reader)->ClaimsUsingDevice({.driver = "gpu.example.com"})->holdings.size(), 1u);
  EXPECT_EQ((*reader)->Stats()->claims, 2u);
  absl::StatusOr<VerifyReport> report = (*reader)->Verify(false);
  ASSERT_THAT(report, IsOk());
  EXPECT_TRUE(report->problems.empty());
  EXPECT_THAT((*reader)->Put(ClaimJson("ns", "x")),
              StatusIs(absl::StatusCode::kFailedPrecondition, "read-only"));
  EXPECT_THAT(Store::Open(dir_.path() + "/none", {.read_only = true}),
              StatusIs(absl::StatusCode::kNotFound, ""));
}

TEST(ClaimKeyTest, ParsesNamespaceSlashName) {
  EXPECT_EQ(*ClaimKey::Parse("ns/name"), (ClaimKey{"ns", "name"}));
  for (const char* bad : {"", "ns", "/name", "ns/", "a/b/c"}) {
    EXPECT_THAT(ClaimKey::Parse(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, "NAMESPACE/NAME"))
        << bad;
  }
}

}  // namespace
}  // namespace claimstore
