// Each write of the store as a pure function of the current record
// (mutations.h), on its own: no store, no RocksDB.
#include "write/mutations.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "k8s/claim_limits.h"
#include "testutil/store_test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::AllocationOf;
using ::claimstore::testing::ClaimJson;
using ::claimstore::testing::IsOk;
using ::claimstore::testing::Pod;
using ::claimstore::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const ClaimKey kKey{"ns", "claim"};

constexpr char kAllocated[] =
    R"({"allocation":{"devices":{"results":[{"request":"req","driver":"gpu.example.com",)"
    R"("pool":"pool-a","device":"gpu-0"}]}}})";

// An allocated claim reserved for `uids`.
ClaimRecord Reserved(const std::vector<std::string>& uids, const std::string& metadata = "") {
  std::string reserved;
  for (const std::string& uid : uids) {
    absl::StrAppend(&reserved, reserved.empty() ? "" : ",", R"({"resource":"pods","name":"pod-)",
                    uid, R"(","uid":")", uid, R"("})");
  }
  std::string status(kAllocated);
  status.insert(status.size() - 1, absl::StrCat(R"(,"reservedFor":[)", reserved, "]"));
  return ClaimJson("ns", "claim", status, metadata);
}

// The record a kWrite mutation wrote.
ClaimRecord Written(const absl::StatusOr<Mutation>& m) {
  EXPECT_THAT(m, IsOk());
  EXPECT_EQ(m->kind, Mutation::Kind::kWrite);
  absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(m->bytes);
  EXPECT_THAT(record, IsOk());
  return *record;
}

std::vector<std::string> Uids(const ClaimRecord& r) {
  std::vector<std::string> uids;
  const auto* status = r.table().status();
  if (status == nullptr || status->reserved_for() == nullptr) return uids;
  for (const auto* c : *status->reserved_for()) uids.push_back(c->uid()->str());
  return uids;
}

bool IsNoop(const absl::StatusOr<Mutation>& m) {
  return m.ok() && m->kind == Mutation::Kind::kNoop;
}

TEST(PutRecordTest, WritesTheRecordWhateverIsThere) {
  const ClaimRecord record = ClaimJson("ns", "claim", kAllocated);
  const ClaimRecord other = ClaimJson("ns", "claim");
  EXPECT_EQ(Written(PutRecord(record, nullptr)).bytes(), record.bytes());
  EXPECT_EQ(Written(PutRecord(record, &other)).bytes(), record.bytes());
}

TEST(DeleteClaimTest, DeletesWhatExistsAndNotFoundOtherwise) {
  EXPECT_THAT(DeleteClaim(kKey, nullptr), StatusIs(absl::StatusCode::kNotFound, "ns/claim"));
  const ClaimRecord record = ClaimJson("ns", "claim");
  absl::StatusOr<Mutation> m = DeleteClaim(kKey, &record);
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(m->kind, Mutation::Kind::kDelete);
}

TEST(AddConsumerTest, AppendsTheConsumerAndKeepsTheRest) {
  const ClaimRecord before = Reserved({"u1"});
  const ClaimRecord after = Written(AddConsumer(kKey, Pod("u2"), &before));
  EXPECT_THAT(Uids(after), ElementsAre("u1", "u2"));
  EXPECT_EQ(after.uid(), before.uid());
  ASSERT_NE(after.table().status()->allocation(), nullptr);
  const auto* added = after.table().status()->reserved_for()->Get(1);
  EXPECT_EQ(added->resource()->str(), "pods");
  EXPECT_EQ(added->name()->str(), "pod-u2");
}

TEST(AddConsumerTest, AConsumerAlreadyThereIsANoOpEvenWhileDeleting) {
  const ClaimRecord record = Reserved({"u1"});
  EXPECT_TRUE(IsNoop(AddConsumer(kKey, Pod("u1"), &record)));
  const ClaimRecord dying = Reserved({"u1"}, R"("deletionTimestamp":"2026-01-01T00:00:00Z")");
  EXPECT_TRUE(IsNoop(AddConsumer(kKey, Pod("u1"), &dying)));
}

TEST(AddConsumerTest, RefusesWhatTheRulesForbid) {
  EXPECT_THAT(AddConsumer(kKey, Pod("u"), nullptr),
              StatusIs(absl::StatusCode::kNotFound, "claim ns/claim not found"));
  const ClaimRecord pending = ClaimJson("ns", "claim");
  EXPECT_THAT(AddConsumer(kKey, Pod("u"), &pending),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is not allocated"));
  const ClaimRecord dying = Reserved({}, R"("deletionTimestamp":"2026-01-01T00:00:00Z")");
  EXPECT_THAT(AddConsumer(kKey, Pod("u"), &dying),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is being deleted"));
}

TEST(AddConsumerTest, StopsAtTheLimit) {
  std::vector<std::string> uids;
  for (size_t i = 0; i + 1 < kMaxReservedFor; ++i) uids.push_back(absl::StrCat("u", i));
  const ClaimRecord one_left = Reserved(uids);
  const ClaimRecord full = Written(AddConsumer(kKey, Pod("last"), &one_left));
  EXPECT_EQ(Uids(full).size(), kMaxReservedFor);
  EXPECT_THAT(AddConsumer(kKey, Pod("more"), &full),
              StatusIs(absl::StatusCode::kResourceExhausted, "256 consumers already"));
}

TEST(RemoveConsumerTest, RemovesOnlyThatUidInOrder) {
  const ClaimRecord before = Reserved({"u1", "u2", "u3"});
  EXPECT_THAT(Uids(Written(RemoveConsumer(kKey, "u2", &before))), ElementsAre("u1", "u3"));
}

TEST(RemoveConsumerTest, AnAbsentUidIsANoOp) {
  const ClaimRecord reserved = Reserved({"u1"});
  EXPECT_TRUE(IsNoop(RemoveConsumer(kKey, "u9", &reserved)));
  const ClaimRecord pending = ClaimJson("ns", "claim");
  EXPECT_TRUE(IsNoop(RemoveConsumer(kKey, "u1", &pending)));
  EXPECT_THAT(RemoveConsumer(kKey, "u1", nullptr), StatusIs(absl::StatusCode::kNotFound, ""));
}

TEST(SetAllocationTest, SetsTheAllocationOnce) {
  const ClaimRecord pending = ClaimJson("ns", "claim");
  const ClaimRecord allocated =
      Written(SetAllocation(kKey, AllocationOf({{.device = "gpu-7"}}), &pending));
  const auto* results = allocated.table().status()->allocation()->results();
  ASSERT_EQ(results->size(), 1u);
  EXPECT_EQ(results->Get(0)->device()->str(), "gpu-7");
  EXPECT_THAT(SetAllocation(kKey, AllocationOf({{.device = "gpu-8"}}), &allocated),
              StatusIs(absl::StatusCode::kFailedPrecondition, "already allocated"));
  EXPECT_THAT(SetAllocation(kKey, AllocationOf({}), nullptr),
              StatusIs(absl::StatusCode::kNotFound, ""));
}

TEST(ClearAllocationTest, ClearsAllocationAndDeviceStatusesWhenNotReserved) {
  const ClaimRecord reserved = Reserved({"u1"});
  EXPECT_THAT(ClearAllocation(kKey, &reserved),
              StatusIs(absl::StatusCode::kFailedPrecondition, "still reserved for 1 consumer"));
  const ClaimRecord allocated = ClaimJson(
      "ns", "claim",
      R"({"allocation":{"devices":{"results":[{"request":"req","driver":"gpu.example.com",)"
      R"("pool":"pool-a","device":"gpu-0"}]}},"devices":[{"driver":"gpu.example.com",)"
      R"("pool":"pool-a","device":"gpu-0"}]})");
  const ClaimRecord cleared = Written(ClearAllocation(kKey, &allocated));
  EXPECT_EQ(cleared.table().status()->allocation(), nullptr);
  EXPECT_EQ(cleared.table().status()->devices(), nullptr);
  EXPECT_TRUE(IsNoop(ClearAllocation(kKey, &cleared)));
}

TEST(MergeDeviceStatusesTest, ReplacesByDeviceAndShareAndAppendsTheRest) {
  const ClaimRecord before = ClaimJson("ns", "claim",
                                       R"({"devices":[{"driver":"d","pool":"p","device":"a"},)"
                                       R"({"driver":"d","pool":"p","device":"b","shareID":"s1"},)"
                                       R"({"driver":"d","pool":"p","device":"c"}]})");
  absl::StatusOr<DeviceStatuses> updates = DeviceStatuses::FromJson(
      R"([{"driver":"d","pool":"p","device":"b","shareID":"s1","data":{"v":2}},)"
      R"({"driver":"d","pool":"p","device":"c","shareID":"s2"}])");
  ASSERT_THAT(updates, IsOk());
  const ClaimRecord after = Written(MergeDeviceStatuses(kKey, *updates, &before));
  std::vector<std::string> entries;
  for (const auto* d : *after.table().status()->devices()) {
    entries.push_back(absl::StrCat(d->device()->str(), d->share_id() ? "/" : "",
                                   d->share_id() ? d->share_id()->str() : ""));
  }
  // b/s1 replaced (moved after the kept ones), c without a shareID kept,
  // c/s2 (a different shareID) added.
  EXPECT_THAT(entries, ElementsAre("a", "c", "b/s1", "c/s2"));
  EXPECT_THAT(MergeDeviceStatuses(kKey, *updates, nullptr),
              StatusIs(absl::StatusCode::kNotFound, ""));
}

TEST(InputChecksTest, NameTheMissingFields) {
  EXPECT_THAT(RequireClaimKey(ClaimJson("ns", "claim")), IsOk());
  absl::StatusOr<ClaimRecord> nameless = DecodeClaim(
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"namespace":"ns"}})");
  ASSERT_THAT(nameless, IsOk());
  EXPECT_THAT(RequireClaimKey(*nameless),
              StatusIs(absl::StatusCode::kInvalidArgument, "metadata.namespace and metadata.name"));
  EXPECT_THAT(RequireConsumer(Pod("u")), IsOk());
  EXPECT_THAT(RequireConsumer(ConsumerRef{"", "pods", "p", ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, "uid are required"));
}

TEST(PrepareRecordTest, DropsStaleDeviceStatusesValidatesAndIndexes) {
  const ClaimRecord old = ClaimJson(
      "ns", "claim",
      R"({"allocation":{"devices":{"results":[{"request":"req","driver":"gpu.example.com",)"
      R"("pool":"pool-a","device":"gpu-0"}]}},"devices":[{"driver":"gpu.example.com",)"
      R"("pool":"pool-a","device":"gpu-0"}]})");
  // The update drops the allocation but keeps the device's status: the
  // status goes, as the API server drops it.
  std::string bytes(
      ClaimJson("ns", "claim",
                R"({"devices":[{"driver":"gpu.example.com","pool":"pool-a","device":"gpu-0"}]})")
          .bytes());
  IndexEntries index;
  ASSERT_THAT(PrepareRecord(&old.table(), &bytes, &index), IsOk());
  EXPECT_EQ(fb::GetClaimRecord(bytes.data())->status()->devices(), nullptr);
  EXPECT_THAT(index.devices, IsEmpty());

  std::string allocated(Reserved({"u1"}).bytes());
  ASSERT_THAT(PrepareRecord(nullptr, &allocated, &index), IsOk());
  EXPECT_EQ(index.consumers.size(), 1u);
  EXPECT_EQ(index.devices.size(), 1u);

  std::string duplicate(Reserved({"u1", "u1"}).bytes());
  EXPECT_THAT(PrepareRecord(nullptr, &duplicate, &index),
              StatusIs(absl::StatusCode::kInvalidArgument, "status.reservedFor[1]"));
}

}  // namespace
}  // namespace claimstore::internal
