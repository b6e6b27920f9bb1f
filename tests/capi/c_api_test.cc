// The C ABI (claimstore/c.h): every family of calls, their status codes and
// error details, ownership (the sanitizer builds check that nothing leaks
// or is used after it is freed), and a snapshot that outlives its store.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "claimstore/c.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testutil/test_util.h"

namespace {

using ::testing::HasSubstr;

claimstore_slice_t S(const std::string& s) { return {s.data(), s.size()}; }
std::string Str(claimstore_slice_t s) { return std::string(s.data, s.size); }
// A key of two literals (static storage: a key may outlive the expression).
claimstore_key_t K(const char* ns, const char* name) {
  return {claimstore_str(ns), claimstore_str(name)};
}
std::string KeyString(claimstore_key_t k) { return Str(k.claim_namespace) + "/" + Str(k.name); }

// A claim's JSON with the given status.
std::string ClaimJson(const std::string& ns, const std::string& name,
                      const std::string& status = "{}") {
  return R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":")" +
         name + R"(","namespace":")" + ns + R"(","uid":"uid-)" + name + R"("},"status":)" + status +
         "}";
}

constexpr char kShareA[] = "11111111-1111-4111-8111-111111111111";
constexpr char kShareB[] = "22222222-2222-4222-8222-222222222222";

// An error's code and message, freeing it.
struct Error {
  int code = 0;
  std::string message;
};
Error Take(claimstore_error_t* err) {
  Error e;
  if (err == nullptr) return e;
  e.code = claimstore_error_code(err);
  size_t size = 0;
  const char* m = claimstore_error_message(err, &size);
  e.message.assign(m, size);
  claimstore_error_destroy(err);
  return e;
}

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.path() + "/db";
    claimstore_error_t* err = nullptr;
    ASSERT_EQ(claimstore_open(nullptr, S(path_), &db_, &err), CLAIMSTORE_OK) << Take(err).message;
  }
  void TearDown() override { claimstore_close(db_); }

  uint64_t PutJson(const std::string& json) {
    claimstore_write_result_t r{};
    claimstore_error_t* err = nullptr;
    EXPECT_EQ(claimstore_put_json(db_, S(json), {}, &r, &err), CLAIMSTORE_OK) << Take(err).message;
    EXPECT_EQ(r.changed, 1);
    return r.revision;
  }

  claimstore::testing::ScopedTempDir dir_;
  std::string path_;
  claimstore_t* db_ = nullptr;
};

TEST_F(CApiTest, PutGetEncodeAndNotFound) {
  const uint64_t rev = PutJson(ClaimJson("ns", "a"));
  char* bytes = nullptr;
  size_t size = 0;
  uint64_t read_revision = 0;
  ASSERT_EQ(claimstore_get(db_, K("ns", "a"), &bytes, &size, &read_revision, nullptr),
            CLAIMSTORE_OK);
  EXPECT_EQ(read_revision, rev);
  absl::StatusOr<claimstore::ClaimRecord> record =
      claimstore::ClaimRecord::FromBytes(std::string(bytes, size));
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->name(), "a");
  EXPECT_EQ(record->mod_revision(), rev);

  char* json = nullptr;
  size_t json_size = 0;
  ASSERT_EQ(claimstore_encode_json({bytes, size}, claimstore_str(""), &json, &json_size, nullptr),
            CLAIMSTORE_OK);
  EXPECT_EQ(std::string(json, json_size), claimstore::EncodeClaim(*record));
  EXPECT_EQ(json[json_size], '\0');
  claimstore_free(json);
  claimstore_free(bytes);

  // Into a buffer: too small copies nothing and says how much is needed.
  std::string buffer(4, 'x');
  size_t needed = 0;
  ASSERT_EQ(claimstore_get_into(db_, K("ns", "a"), buffer.data(), buffer.size(), &needed, nullptr,
                                nullptr),
            CLAIMSTORE_OK);
  EXPECT_EQ(needed, record->bytes().size());
  EXPECT_EQ(buffer, "xxxx");
  buffer.resize(needed);
  uint64_t into_revision = 0;
  ASSERT_EQ(claimstore_get_into(db_, K("ns", "a"), buffer.data(), buffer.size(), &needed,
                                &into_revision, nullptr),
            CLAIMSTORE_OK);
  EXPECT_EQ(buffer, record->bytes());
  EXPECT_EQ(into_revision, rev);
  EXPECT_EQ(claimstore_get_into(db_, K("ns", "missing"), buffer.data(), buffer.size(), &needed,
                                nullptr, nullptr),
            CLAIMSTORE_NOT_FOUND);

  claimstore_error_t* err = nullptr;
  bytes = nullptr;
  EXPECT_EQ(claimstore_get(db_, K("ns", "missing"), &bytes, &size, nullptr, &err),
            CLAIMSTORE_NOT_FOUND);
  EXPECT_EQ(bytes, nullptr);  // outputs are written only on success
  Error e = Take(err);
  EXPECT_EQ(e.code, CLAIMSTORE_NOT_FOUND);
  EXPECT_THAT(e.message, HasSubstr("ns/missing"));

  // Without an error out-parameter the code alone comes back.
  EXPECT_EQ(claimstore_get(db_, K("ns", "missing"), &bytes, &size, nullptr, nullptr),
            CLAIMSTORE_NOT_FOUND);
  // The empty key names no claim.
  err = nullptr;
  EXPECT_EQ(claimstore_get(db_, K("", "a"), &bytes, &size, nullptr, &err),
            CLAIMSTORE_INVALID_ARGUMENT);
  Take(err);
}

TEST_F(CApiTest, BadInputNamesTheFieldAndWritesNothing) {
  claimstore_error_t* err = nullptr;
  const std::string bad = ClaimJson("ns", "a", R"({"reservedFor":[{"resource":"pods"}]})");
  EXPECT_EQ(claimstore_put_json(db_, S(bad), {}, nullptr, &err), CLAIMSTORE_INVALID_ARGUMENT);
  const claimstore_field_error_t* fields = nullptr;
  ASSERT_GE(claimstore_error_fields(err, &fields), 1u);
  EXPECT_EQ(Str(fields[0].type), "Required value");
  EXPECT_THAT(Str(fields[0].field), HasSubstr("status.reservedFor[0]."));
  EXPECT_THAT(Take(err).message, HasSubstr("status.reservedFor[0]"));
  claimstore_stats_t stats{};
  ASSERT_EQ(claimstore_stats(db_, &stats, sizeof(stats), nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(stats.claims, 0u);
  EXPECT_EQ(stats.revision, 0u);

  err = nullptr;
  const std::string not_json = "{\"kind\":";
  EXPECT_EQ(claimstore_put_json(db_, S(not_json), {}, nullptr, &err), CLAIMSTORE_INVALID_ARGUMENT);
  EXPECT_EQ(claimstore_error_fields(err, nullptr), 0u);
  Take(err);
  err = nullptr;
  const std::string not_a_record = "not a record";
  EXPECT_EQ(claimstore_put(db_, S(not_a_record), {}, nullptr, &err), CLAIMSTORE_DATA_LOSS);
  Take(err);

  err = nullptr;
  claimstore_options_t* options = claimstore_options_create();
  claimstore_options_set_compression(options, 7);
  claimstore_t* other = nullptr;
  EXPECT_EQ(claimstore_open(options, S(dir_.path() + "/other"), &other, &err),
            CLAIMSTORE_INVALID_ARGUMENT);
  EXPECT_THAT(Take(err).message, HasSubstr("compression 7"));
  EXPECT_EQ(other, nullptr);
  claimstore_options_destroy(options);

  // A second writer of the same database.
  err = nullptr;
  EXPECT_EQ(claimstore_open(nullptr, S(path_), &other, &err), CLAIMSTORE_UNAVAILABLE);
  Take(err);
}

// claimstore follow's write: watch events applied as the cluster has them,
// one result per claim, the stream's position stored; refused input
// changes nothing.
TEST_F(CApiTest, ApplyClusterEventsTakesTheClustersClaimsAtomically) {
  auto with_rv = [](const std::string& name, const std::string& rv, const std::string& status) {
    std::string json = ClaimJson("ns", name, status);
    json.insert(json.find(R"("uid")"), R"("resourceVersion":")" + rv + R"(",)");
    return json;
  };
  const std::string allocated =
      R"({"allocation":{"devices":{"results":[{"request":"req","driver":"d.example.com","pool":"p","device":"gpu-0"}]}}})";
  // The allocation names request "req": the spec has it.
  auto with_spec = [](std::string json) {
    json.insert(json.find(R"("status")"), R"("spec":{"devices":{"requests":[{"name":"req"}]}},)");
    return json;
  };
  const std::string events = R"({"type":"ADDED","object":)" + with_rv("a", "10", "{}") + "}\n" +
                             R"({"type":"MODIFIED","object":)" +
                             with_spec(with_rv("a", "12", allocated)) + "}\n" +
                             R"({"type":"ADDED","object":)" + with_rv("b", "11", "{}") + "}\n";
  claimstore_write_result_t* results = nullptr;
  size_t count = 0;
  claimstore_error_t* err = nullptr;
  ASSERT_EQ(
      claimstore_apply_cluster_events_json(db_, S(events), nullptr, 0, 12, &results, &count, &err),
      CLAIMSTORE_OK)
      << Take(err).message;
  ASSERT_EQ(count, 3u);
  EXPECT_EQ(results[0].changed, 1);
  EXPECT_EQ(results[1].changed, 1);
  EXPECT_GT(results[1].revision, results[0].revision);
  claimstore_free(results);
  claimstore_stats_t stats{};
  ASSERT_EQ(claimstore_stats(db_, &stats, sizeof(stats), nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(stats.claims, 2u);
  EXPECT_EQ(stats.follow_resource_version, 12u);

  // A replay of an older version is skipped (unchanged), and the
  // position only moves forward; results may be left out.
  const std::string replay = with_rv("a", "10", "{}");
  ASSERT_EQ(claimstore_apply_cluster_events_json(db_, S(replay), nullptr, 0, 5, &results, &count,
                                                 nullptr),
            CLAIMSTORE_OK);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(results[0].changed, 0);
  claimstore_free(results);
  // Deallocation without the API's transition rules (as the cluster has it).
  const std::string deleted = R"({"type":"DELETED","object":)" + with_rv("b", "13", "{}") + "}\n" +
                              with_rv("a", "14", "{}");
  ASSERT_EQ(
      claimstore_apply_cluster_events_json(db_, S(deleted), nullptr, 0, 14, nullptr, nullptr, &err),
      CLAIMSTORE_OK)
      << Take(err).message;
  ASSERT_EQ(claimstore_stats(db_, &stats, sizeof(stats), nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(stats.claims, 1u);
  EXPECT_EQ(stats.follow_resource_version, 14u);

  // A bookmark: no claims, the position alone.
  ASSERT_EQ(
      claimstore_apply_cluster_events_json(db_, S(""), nullptr, 0, 15, &results, &count, &err),
      CLAIMSTORE_OK)
      << Take(err).message;
  EXPECT_EQ(count, 0u);
  claimstore_free(results);
  ASSERT_EQ(claimstore_stats(db_, &stats, sizeof(stats), nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(stats.follow_resource_version, 15u);
  const uint64_t revision = stats.revision;

  // One bad claim: nothing of the batch is written, the item and field named.
  const std::string bad = with_rv("c", "15", "{}") + "\n" +
                          with_rv("d", "16", R"({"reservedFor":[{"resource":"pods"}]})");
  err = nullptr;
  EXPECT_EQ(
      claimstore_apply_cluster_events_json(db_, S(bad), nullptr, 0, 16, &results, &count, &err),
      CLAIMSTORE_INVALID_ARGUMENT);
  EXPECT_THAT(Take(err).message, HasSubstr("status.reservedFor[0]"));
  ASSERT_EQ(claimstore_stats(db_, &stats, sizeof(stats), nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(stats.claims, 1u);
  EXPECT_EQ(stats.revision, revision);
  EXPECT_EQ(stats.follow_resource_version, 15u);

  // Objects kept with the claims: read back from the record, kept by a
  // status write, and refused (naming the item) when too large.
  const std::string kept = with_spec(with_rv("e", "17", allocated));
  const std::string object = std::string(
      "\x0a\x03"
      "abc",
      5);
  const claimstore_slice_t objects[] = {S(object)};
  ASSERT_EQ(
      claimstore_apply_cluster_events_json(db_, S(kept), objects, 1, 17, nullptr, nullptr, &err),
      CLAIMSTORE_OK)
      << Take(err).message;
  claimstore_consumer_t pod{claimstore_str(""), claimstore_str("pods"), claimstore_str("p"),
                            claimstore_str("pod-uid")};
  ASSERT_EQ(claimstore_reserve(db_, K("ns", "e"), pod, {}, nullptr, &err), CLAIMSTORE_OK)
      << Take(err).message;
  char* bytes = nullptr;
  size_t size = 0;
  ASSERT_EQ(claimstore_get(db_, K("ns", "e"), &bytes, &size, nullptr, nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(Str(claimstore_record_object({bytes, size})), object);
  claimstore_free(bytes);
  const std::string huge(claimstore::kMaxObjectBytes + 1, 'x');
  const claimstore_slice_t too_large[] = {S(huge)};
  const std::string again = with_spec(with_rv("e", "18", allocated));
  err = nullptr;
  EXPECT_EQ(
      claimstore_apply_cluster_events_json(db_, S(again), too_large, 1, 18, nullptr, nullptr, &err),
      CLAIMSTORE_INVALID_ARGUMENT);
  EXPECT_THAT(Take(err).message, HasSubstr("item 0 (ns/e): the kept object is"));
  err = nullptr;
  EXPECT_EQ(
      claimstore_apply_cluster_events_json(db_, S(events), objects, 1, 18, nullptr, nullptr, &err),
      CLAIMSTORE_INVALID_ARGUMENT);
  EXPECT_THAT(Take(err).message, HasSubstr("objects: 1 for 3 claims"));
}

TEST_F(CApiTest, ReservationsWithPreconditionsAndTheirErrors) {
  PutJson(ClaimJson("ns", "a",
                    R"({"allocation":{"devices":{"results":[{"request":"req",)"
                    R"("driver":"gpu.example.com","pool":"p","device":"gpu-0"}]}}})"));
  char* bytes = nullptr;
  size_t size = 0;
  uint64_t revision = 0;
  ASSERT_EQ(claimstore_get(db_, K("ns", "a"), &bytes, &size, &revision, nullptr), CLAIMSTORE_OK);
  claimstore_free(bytes);

  claimstore_consumer_t pod{claimstore_str(""), claimstore_str("pods"), claimstore_str("pod-a"),
                            claimstore_str("uid-a")};
  claimstore_preconditions_t pre{};
  pre.has_mod_revision = 1;
  pre.mod_revision = revision;
  const std::string uid = "uid-a";
  pre.has_uid = 1;
  pre.uid = S(uid);
  claimstore_write_result_t r{};
  ASSERT_EQ(claimstore_reserve(db_, K("ns", "a"), pod, pre, &r, nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(r.changed, 1);
  EXPECT_EQ(r.revision, revision + 1);

  // The same seen revision again: Aborted, with the current revision.
  claimstore_consumer_t pod_b = pod;
  pod_b.uid = claimstore_str("uid-b");
  claimstore_error_t* err = nullptr;
  EXPECT_EQ(claimstore_reserve(db_, K("ns", "a"), pod_b, pre, &r, &err), CLAIMSTORE_ABORTED);
  uint64_t current = 0;
  ASSERT_EQ(claimstore_error_current_revision(err, &current), 1);
  EXPECT_EQ(current, revision + 1);
  EXPECT_EQ(claimstore_error_claims(err, nullptr), 0u);
  Take(err);

  // The wrong incarnation.
  err = nullptr;
  const std::string other_uid = "uid-other";
  claimstore_preconditions_t wrong_uid{};
  wrong_uid.has_uid = 1;
  wrong_uid.uid = S(other_uid);
  EXPECT_EQ(claimstore_reserve(db_, K("ns", "a"), pod_b, wrong_uid, &r, &err), CLAIMSTORE_ABORTED);
  Take(err);

  // ClaimsReservedFor, an idempotent Reserve, Unreserve.
  claimstore_keys_t* keys = nullptr;
  ASSERT_EQ(claimstore_claims_reserved_for(db_, claimstore_str("uid-a"), &keys, nullptr),
            CLAIMSTORE_OK);
  size_t count = 0;
  const claimstore_key_t* items = claimstore_keys_items(keys, &count);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(KeyString(items[0]), "ns/a");
  EXPECT_EQ(claimstore_keys_revision(keys), revision + 1);
  claimstore_keys_destroy(keys);

  ASSERT_EQ(claimstore_reserve(db_, K("ns", "a"), pod, {}, &r, nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(r.changed, 0);
  EXPECT_EQ(r.revision, revision + 1);
  ASSERT_EQ(claimstore_unreserve(db_, K("ns", "a"), claimstore_str("uid-a"), {}, &r, nullptr),
            CLAIMSTORE_OK);
  EXPECT_EQ(r.changed, 1);

  // 256 consumers, then ResourceExhausted.
  for (int i = 0; i < 256; ++i) {
    const std::string u = "u-" + std::to_string(i);
    claimstore_consumer_t c{claimstore_str(""), claimstore_str("pods"), S(u), S(u)};
    ASSERT_EQ(claimstore_reserve(db_, K("ns", "a"), c, {}, nullptr, nullptr), CLAIMSTORE_OK) << i;
  }
  err = nullptr;
  EXPECT_EQ(claimstore_reserve(db_, K("ns", "a"), pod, {}, &r, &err),
            CLAIMSTORE_RESOURCE_EXHAUSTED);
  EXPECT_EQ(claimstore_error_no_space(err), 0);  // a rule's, not a full disk's
  Take(err);
  // Deallocate while reserved: a rule forbids it.
  err = nullptr;
  EXPECT_EQ(claimstore_deallocate(db_, K("ns", "a"), {}, &r, &err), CLAIMSTORE_FAILED_PRECONDITION);
  Take(err);
}

TEST_F(CApiTest, AllocateSharesCapacityAndTheAllocatedSnapshot) {
  PutJson(ClaimJson("ns", "a"));
  PutJson(ClaimJson("ns", "b"));
  PutJson(ClaimJson("ns", "c"));
  PutJson(ClaimJson("ns", "admin"));

  const std::string share_a = kShareA, share_b = kShareB;
  claimstore_capacity_t four_gi{claimstore_str("memory"), claimstore_str("4Gi")};
  claimstore_device_result_t shared{};
  shared.request = claimstore_str("req");
  shared.driver = claimstore_str("gpu.example.com");
  shared.pool = claimstore_str("p");
  shared.device = claimstore_str("gpu-0");
  shared.has_share_id = 1;
  shared.share_id = S(share_a);
  shared.admin_access = -1;
  shared.consumed_capacity = &four_gi;
  shared.consumed_capacity_count = 1;
  claimstore_device_result_t exclusive = shared;
  exclusive.device = claimstore_str("gpu-1");
  exclusive.has_share_id = 0;
  exclusive.consumed_capacity = nullptr;
  exclusive.consumed_capacity_count = 0;
  claimstore_device_result_t results[] = {shared, exclusive};
  claimstore_allocation_t allocation{};
  allocation.results = results;
  allocation.result_count = 2;
  allocation.node_name = claimstore_str("node-1");
  claimstore_capacity_t limit_value{claimstore_str("memory"), claimstore_str("6Gi")};
  claimstore_device_capacity_t limit{claimstore_str("gpu.example.com"), claimstore_str("p"),
                                     claimstore_str("gpu-0"), &limit_value, 1};
  claimstore_write_result_t r{};
  claimstore_error_t* err = nullptr;
  ASSERT_EQ(claimstore_allocate(db_, K("ns", "a"), &allocation, &limit, 1, {}, &r, &err),
            CLAIMSTORE_OK)
      << Take(err).message;
  EXPECT_EQ(r.changed, 1);

  // b takes gpu-1 exclusively: held by a, Aborted naming it.
  claimstore_allocation_t take_gpu1{};
  take_gpu1.results = &exclusive;
  take_gpu1.result_count = 1;
  err = nullptr;
  EXPECT_EQ(claimstore_allocate(db_, K("ns", "b"), &take_gpu1, nullptr, 0, {}, &r, &err),
            CLAIMSTORE_ABORTED);
  const claimstore_key_t* holders = nullptr;
  ASSERT_EQ(claimstore_error_claims(err, &holders), 1u);
  EXPECT_EQ(KeyString(holders[0]), "ns/a");
  Error e = Take(err);
  EXPECT_THAT(e.message, HasSubstr("gpu-1"));

  // b asks another 4Gi of gpu-0: past the 6Gi limit.
  claimstore_device_result_t share_of_b = shared;
  share_of_b.share_id = S(share_b);
  claimstore_allocation_t take_share{};
  take_share.results = &share_of_b;
  take_share.result_count = 1;
  err = nullptr;
  EXPECT_EQ(claimstore_allocate(db_, K("ns", "b"), &take_share, &limit, 1, {}, &r, &err),
            CLAIMSTORE_ABORTED);
  EXPECT_THAT(Take(err).message, HasSubstr("limit 6Gi"));
  // From JSON, 2Gi fits.
  const std::string json =
      std::string(R"({"devices":{"results":[{"request":"req","driver":"gpu.example.com",)") +
      R"("pool":"p","device":"gpu-0","shareID":")" + share_b +
      R"(","consumedCapacity":{"memory":"2Gi"}}]}})";
  err = nullptr;
  ASSERT_EQ(claimstore_allocate_json(db_, K("ns", "b"), S(json), &limit, 1, {}, &r, &err),
            CLAIMSTORE_OK)
      << Take(err).message;
  const std::string admin_json =
      R"({"devices":{"results":[{"request":"req","driver":"gpu.example.com",)"
      R"("pool":"p","device":"gpu-1","adminAccess":true}]}})";
  ASSERT_EQ(
      claimstore_allocate_json(db_, K("ns", "admin"), S(admin_json), nullptr, 0, {}, &r, nullptr),
      CLAIMSTORE_OK);
  const std::string bad_json = R"({"devices":{"results":[{"request":1}]}})";
  err = nullptr;
  EXPECT_EQ(claimstore_allocate_json(db_, K("ns", "c"), S(bad_json), nullptr, 0, {}, &r, &err),
            CLAIMSTORE_INVALID_ARGUMENT);
  EXPECT_THAT(Take(err).message, HasSubstr("status.allocation.devices.results[0].request"));

  claimstore_allocated_t* snapshot = nullptr;
  ASSERT_EQ(claimstore_allocated_devices(db_, &snapshot, nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(claimstore_allocated_revision(snapshot), r.revision);
  EXPECT_EQ(claimstore_allocated_size(snapshot), 2u);
  EXPECT_EQ(claimstore_allocated_taken(snapshot, claimstore_str("gpu.example.com"),
                                       claimstore_str("p"), claimstore_str("gpu-1")),
            1);
  EXPECT_EQ(claimstore_allocated_taken(snapshot, claimstore_str("gpu.example.com"),
                                       claimstore_str("p"), claimstore_str("gpu-9")),
            0);
  // A pod's candidates in one call: the names back to back.
  const std::string names = "gpu-9gpu-1gpu-10";
  const uint32_t lengths[] = {5, 5, 6};
  uint8_t taken[] = {7, 7, 7};
  claimstore_allocated_taken_many(snapshot, claimstore_str("gpu.example.com"), claimstore_str("p"),
                                  names.data(), lengths, 3, taken);
  EXPECT_EQ(taken[0], 0);
  EXPECT_EQ(taken[1], 1);
  EXPECT_EQ(taken[2], 0);

  // Deallocations after the snapshot do not change it.
  ASSERT_EQ(claimstore_deallocate(db_, K("ns", "b"), {}, &r, nullptr), CLAIMSTORE_OK);
  claimstore_holdings_t* holdings = nullptr;
  claimstore_device_query_t query{claimstore_str("gpu.example.com"),
                                  claimstore_str("p"),
                                  claimstore_str("gpu-0"),
                                  {nullptr, 0}};
  ASSERT_EQ(claimstore_claims_using_device(db_, query, &holdings, nullptr), CLAIMSTORE_OK);
  size_t count = 0;
  const claimstore_holding_t* h = claimstore_holdings_items(holdings, &count);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(h[0].kind, CLAIMSTORE_HOLDING_SHARE);
  EXPECT_EQ(Str(h[0].share_id), share_a);
  EXPECT_EQ(KeyString(h[0].claim), "ns/a");
  EXPECT_EQ(claimstore_holdings_revision(holdings), r.revision);
  claimstore_holdings_destroy(holdings);
  claimstore_device_query_t no_driver{};
  err = nullptr;
  EXPECT_EQ(claimstore_claims_using_device(db_, no_driver, &holdings, &err),
            CLAIMSTORE_INVALID_ARGUMENT);
  Take(err);

  // The snapshot outlives its store.
  claimstore_close(db_);
  db_ = nullptr;
  claimstore_device_t d{};
  ASSERT_EQ(claimstore_allocated_find(snapshot, claimstore_str("gpu.example.com"),
                                      claimstore_str("p"), claimstore_str("gpu-0"), &d),
            1);
  EXPECT_EQ(d.has_exclusive, 0);
  ASSERT_EQ(d.share_count, 2u);
  claimstore_share_t s0 = claimstore_device_share(&d, 0), s1 = claimstore_device_share(&d, 1);
  EXPECT_EQ(Str(s0.share_id), share_a);
  EXPECT_EQ(KeyString(s0.claim), "ns/a");
  EXPECT_EQ(Str(s1.share_id), share_b);
  EXPECT_EQ(KeyString(s1.claim), "ns/b");
  ASSERT_EQ(s1.consumed_capacity_count, 1u);
  EXPECT_EQ(Str(claimstore_device_share_consumed_capacity(&d, 1, 0).quantity), "2Gi");
  ASSERT_EQ(d.consumed_capacity_count, 1u);
  claimstore_capacity_t sum = claimstore_device_consumed_capacity(&d, 0);
  EXPECT_EQ(Str(sum.name), "memory");
  EXPECT_EQ(Str(sum.quantity), "6Gi");

  ASSERT_EQ(claimstore_allocated_find(snapshot, claimstore_str("gpu.example.com"),
                                      claimstore_str("p"), claimstore_str("gpu-1"), &d),
            1);
  EXPECT_EQ(d.has_exclusive, 1);
  EXPECT_EQ(KeyString(d.exclusive), "ns/a");
  ASSERT_EQ(d.admin_access_count, 1u);
  EXPECT_EQ(KeyString(claimstore_device_admin_access(&d, 0)), "ns/admin");
  EXPECT_EQ(claimstore_allocated_find(snapshot, claimstore_str("gpu.example.com"),
                                      claimstore_str("p"), claimstore_str("gpu-2"), &d),
            0);

  claimstore_devices_t* all = claimstore_allocated_list(snapshot, {nullptr, 0}, {nullptr, 0});
  ASSERT_NE(all, nullptr);
  const claimstore_device_t* items = claimstore_devices_items(all, &count);
  ASSERT_EQ(count, 2u);
  EXPECT_EQ(Str(items[0].device), "gpu-0");
  EXPECT_EQ(Str(items[1].device), "gpu-1");
  EXPECT_EQ(claimstore_device_share(&items[0], 1).consumed_capacity_count, 1u);
  claimstore_devices_destroy(all);
  claimstore_devices_t* other_pool =
      claimstore_allocated_list(snapshot, claimstore_str("gpu.example.com"), claimstore_str("q"));
  claimstore_devices_items(other_pool, &count);
  EXPECT_EQ(count, 0u);
  claimstore_devices_destroy(other_pool);
  claimstore_allocated_destroy(snapshot);
}

TEST_F(CApiTest, ListPagesGetManyAndDecode) {
  std::string input;
  for (int i = 0; i < 5; ++i) input += ClaimJson("ns", "c" + std::to_string(i)) + "\n";
  claimstore_records_t* decoded = nullptr;
  ASSERT_EQ(claimstore_decode(S(input), &decoded, nullptr), CLAIMSTORE_OK);
  ASSERT_EQ(claimstore_records_count(decoded), 5u);
  for (size_t i = 0; i < 5; ++i) {
    ASSERT_EQ(claimstore_put(db_, claimstore_records_at(decoded, i), {}, nullptr, nullptr),
              CLAIMSTORE_OK);
    EXPECT_EQ(claimstore_records_event(decoded, i), CLAIMSTORE_EVENT_NONE);
  }
  claimstore_records_destroy(decoded);

  const std::string events = R"({"type":"DELETED","object":)" + ClaimJson("ns", "gone") + "}\n";
  ASSERT_EQ(claimstore_decode(S(events), &decoded, nullptr), CLAIMSTORE_OK);
  ASSERT_EQ(claimstore_records_count(decoded), 1u);
  EXPECT_EQ(claimstore_records_event(decoded, 0), CLAIMSTORE_EVENT_DELETED);
  claimstore_records_destroy(decoded);
  claimstore_error_t* err = nullptr;
  const std::string bad = R"({"items":[{},)" + ClaimJson("ns", "x", R"({"devices":7})") + "]}";
  EXPECT_EQ(claimstore_decode(S(bad), &decoded, &err), CLAIMSTORE_INVALID_ARGUMENT);
  EXPECT_THAT(Take(err).message, HasSubstr("status.devices"));

  std::vector<std::string> names;
  std::string token;
  do {
    claimstore_records_t* page = nullptr;
    ASSERT_EQ(claimstore_list(db_, claimstore_str("ns"), 2, S(token), &page, nullptr),
              CLAIMSTORE_OK);
    EXPECT_EQ(claimstore_records_revision(page), 5u);
    const claimstore_slice_t* items = claimstore_records_items(page);
    for (size_t i = 0; i < claimstore_records_count(page); ++i) {
      names.push_back(std::string(claimstore::ClaimRecord::FromBytes(Str(items[i]))->name()));
    }
    token = Str(claimstore_records_continue(page));
    claimstore_records_destroy(page);
  } while (!token.empty());
  EXPECT_THAT(names, ::testing::ElementsAre("c0", "c1", "c2", "c3", "c4"));

  claimstore_key_t keys[] = {K("ns", "c3"), K("ns", "nope"), K("ns", "c0")};
  claimstore_records_t* many = nullptr;
  ASSERT_EQ(claimstore_get_many(db_, keys, 3, &many, nullptr), CLAIMSTORE_OK);
  ASSERT_EQ(claimstore_records_count(many), 3u);
  EXPECT_NE(claimstore_records_at(many, 0).data, nullptr);
  EXPECT_EQ(claimstore_records_at(many, 1).data, nullptr);
  EXPECT_EQ(claimstore::ClaimRecord::FromBytes(Str(claimstore_records_at(many, 2)))->name(), "c0");
  claimstore_records_destroy(many);

  claimstore_write_result_t r{};
  claimstore_preconditions_t stale{};
  stale.has_mod_revision = 1;
  stale.mod_revision = 1;
  err = nullptr;
  EXPECT_EQ(claimstore_delete(db_, K("ns", "c4"), stale, &r, &err), CLAIMSTORE_ABORTED);
  Take(err);
  ASSERT_EQ(claimstore_delete(db_, K("ns", "c4"), {}, &r, nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(r.revision, 6u);
}

TEST_F(CApiTest, WatchSeesEveryChangeAndIsCancelledFromAnotherThread) {
  claimstore_watcher_t* watcher = nullptr;
  ASSERT_EQ(claimstore_watch(db_, 1, claimstore_str(""), claimstore_str(""), &watcher, nullptr),
            CLAIMSTORE_OK);
  PutJson(ClaimJson("ns", "a"));
  PutJson(ClaimJson("ns", "b"));
  ASSERT_EQ(claimstore_delete(db_, K("ns", "a"), {}, nullptr, nullptr), CLAIMSTORE_OK);
  const int types[] = {CLAIMSTORE_EVENT_ADDED, CLAIMSTORE_EVENT_ADDED, CLAIMSTORE_EVENT_DELETED};
  const char* names[] = {"a", "b", "a"};
  for (int i = 0; i < 3; ++i) {
    claimstore_event_t e{};
    ASSERT_EQ(claimstore_watcher_next(watcher, 1000, &e, nullptr), CLAIMSTORE_OK);
    EXPECT_EQ(e.type, types[i]);
    EXPECT_EQ(e.revision, uint64_t(i + 1));
    EXPECT_EQ(KeyString(e.key), std::string("ns/") + names[i]);
    ASSERT_NE(e.record.data, nullptr);
    EXPECT_EQ(claimstore::ClaimRecord::FromBytes(Str(e.record))->name(), names[i]);
  }
  EXPECT_EQ(claimstore_watcher_next_revision(watcher), 4u);
  claimstore_event_t e{};
  claimstore_error_t* err = nullptr;
  EXPECT_EQ(claimstore_watcher_next(watcher, 10, &e, &err), CLAIMSTORE_DEADLINE_EXCEEDED);
  Take(err);

  std::atomic<int> code{-1};
  std::thread waiter([&] {
    claimstore_event_t ev{};
    code = claimstore_watcher_next(watcher, 60000, &ev, nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  claimstore_watcher_cancel(watcher);
  waiter.join();
  EXPECT_EQ(code.load(), CLAIMSTORE_CANCELLED);
  claimstore_watcher_destroy(watcher);

  // A watch of revisions the feed no longer holds: OutOfRange with the
  // compact revision.
  claimstore_close(db_);
  db_ = nullptr;
  claimstore_options_t* options = claimstore_options_create();
  claimstore_options_set_feed_history_revisions(options, 1);
  ASSERT_EQ(claimstore_open(options, S(path_), &db_, nullptr), CLAIMSTORE_OK);
  claimstore_options_destroy(options);
  for (int i = 0; i < 4; ++i) PutJson(ClaimJson("ns", "more" + std::to_string(i)));
  err = nullptr;
  EXPECT_EQ(claimstore_watch(db_, 1, claimstore_str(""), claimstore_str(""), &watcher, &err),
            CLAIMSTORE_OUT_OF_RANGE);
  uint64_t compact = 0;
  ASSERT_EQ(claimstore_error_compact_revision(err, &compact), 1);
  EXPECT_GE(compact, 1u);
  Take(err);
}

TEST_F(CApiTest, DeviceStatusVerifyStatsBackupAndReadOnly) {
  PutJson(ClaimJson("ns", "a",
                    R"({"allocation":{"devices":{"results":[{"request":"req",)"
                    R"("driver":"gpu.example.com","pool":"p","device":"gpu-0"}]}}})"));
  const std::string statuses =
      R"([{"driver":"gpu.example.com","pool":"p","device":"gpu-0","data":{"x":1}}])";
  claimstore_write_result_t r{};
  ASSERT_EQ(claimstore_set_device_status_json(db_, K("ns", "a"), S(statuses), {}, &r, nullptr),
            CLAIMSTORE_OK);
  EXPECT_EQ(r.revision, 2u);
  const std::string unknown = R"([{"driver":"gpu.example.com","pool":"p","device":"gpu-9"}])";
  claimstore_error_t* err = nullptr;
  EXPECT_EQ(claimstore_set_device_status_json(db_, K("ns", "a"), S(unknown), {}, &r, &err),
            CLAIMSTORE_INVALID_ARGUMENT);
  EXPECT_THAT(Take(err).message,
              HasSubstr("status.devices[1]: Invalid value: \"gpu.example.com/p/gpu-9\""));

  claimstore_verify_report_t* report = nullptr;
  ASSERT_EQ(claimstore_verify(db_, 0, &report, nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(claimstore_verify_report_records(report), 1u);
  EXPECT_EQ(claimstore_verify_report_index_entries(report), 1u);
  EXPECT_EQ(claimstore_verify_report_repaired(report), 0);
  size_t problems = 9;
  claimstore_verify_report_problems(report, &problems);
  EXPECT_EQ(problems, 0u);
  claimstore_verify_report_destroy(report);

  claimstore_stats_t stats{};
  ASSERT_EQ(claimstore_stats(db_, &stats, sizeof(stats), nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(stats.claims, 1u);
  EXPECT_EQ(stats.allocated, 1u);
  EXPECT_EQ(stats.device_entries, 1u);
  EXPECT_EQ(stats.revision, 2u);
  // A caller built against a shorter struct gets only what it knows.
  uint64_t first_two[3] = {7, 7, 7};
  ASSERT_EQ(claimstore_stats(db_, reinterpret_cast<claimstore_stats_t*>(first_two),
                             2 * sizeof(uint64_t), nullptr),
            CLAIMSTORE_OK);
  EXPECT_EQ(first_two[0], 1u);
  EXPECT_EQ(first_two[1], 1u);
  EXPECT_EQ(first_two[2], 7u);

  const std::string backup = dir_.path() + "/backup";
  ASSERT_EQ(claimstore_backup(db_, S(backup), nullptr), CLAIMSTORE_OK);
  err = nullptr;
  EXPECT_NE(claimstore_backup(db_, S(backup), &err), CLAIMSTORE_OK);
  Take(err);

  // A read-only store of the live database: reads, refresh, writes refused.
  claimstore_options_t* options = claimstore_options_create();
  claimstore_options_set_read_only(options, 1);
  claimstore_t* reader = nullptr;
  ASSERT_EQ(claimstore_open(options, S(path_), &reader, nullptr), CLAIMSTORE_OK);
  claimstore_options_destroy(options);
  PutJson(ClaimJson("ns", "b"));
  ASSERT_EQ(claimstore_refresh(reader, nullptr), CLAIMSTORE_OK);
  char* bytes = nullptr;
  size_t size = 0;
  ASSERT_EQ(claimstore_get(reader, K("ns", "b"), &bytes, &size, nullptr, nullptr), CLAIMSTORE_OK);
  claimstore_free(bytes);
  err = nullptr;
  EXPECT_EQ(claimstore_delete(reader, K("ns", "b"), {}, nullptr, &err),
            CLAIMSTORE_FAILED_PRECONDITION);
  Take(err);
  claimstore_close(reader);

  // The backup opens as a database with the state of its revision.
  claimstore_t* copy = nullptr;
  ASSERT_EQ(claimstore_open(nullptr, S(backup), &copy, nullptr), CLAIMSTORE_OK);
  ASSERT_EQ(claimstore_stats(copy, &stats, sizeof(stats), nullptr), CLAIMSTORE_OK);
  EXPECT_EQ(stats.claims, 1u);
  EXPECT_EQ(stats.revision, 2u);
  claimstore_close(copy);
}

// Racing threads through the C ABI: exactly one takes the last consumer
// slot, the rest are told ResourceExhausted.
TEST_F(CApiTest, RaceForTheLastConsumerSlot) {
  PutJson(ClaimJson("ns", "a",
                    R"({"allocation":{"devices":{"results":[{"request":"req",)"
                    R"("driver":"gpu.example.com","pool":"p","device":"gpu-0"}]}}})"));
  for (int i = 0; i < 255; ++i) {
    const std::string u = "u-" + std::to_string(i);
    claimstore_consumer_t c{claimstore_str(""), claimstore_str("pods"), S(u), S(u)};
    ASSERT_EQ(claimstore_reserve(db_, K("ns", "a"), c, {}, nullptr, nullptr), CLAIMSTORE_OK);
  }
  std::atomic<int> won{0}, exhausted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::string u = "racer-" + std::to_string(t);
      claimstore_consumer_t c{claimstore_str(""), claimstore_str("pods"), S(u), S(u)};
      claimstore_error_t* err = nullptr;
      const int code = claimstore_reserve(db_, K("ns", "a"), c, {}, nullptr, &err);
      if (code == CLAIMSTORE_OK) ++won;
      if (code == CLAIMSTORE_RESOURCE_EXHAUSTED) ++exhausted;
      Take(err);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(exhausted.load(), 7);
}

// A full disk through the C ABI: RESOURCE_EXHAUSTED with
// claimstore_error_no_space, a message that names the database, reads that
// go on, and writes that resume once space is freed (full_disk_test has the
// C++ side).
TEST(CApiFullDisk, AFullDiskIsNoSpaceAndWritesResume) {
  claimstore::testing::Tmpfs fs(16 << 20);
  CLAIMSTORE_REQUIRE_TMPFS(fs);
  const std::string path = fs.path() + "/db";
  claimstore_options_t* options = claimstore_options_create();
  claimstore_options_set_sync_writes(options, 1);
  claimstore_options_set_write_buffer_bytes(options, 256 << 10);
  claimstore_t* db = nullptr;
  claimstore_error_t* err = nullptr;
  ASSERT_EQ(claimstore_open(options, S(path), &db, &err), CLAIMSTORE_OK) << Take(err).message;
  claimstore_options_destroy(options);
  const auto put = [&](int i, claimstore_error_t** e) {
    const std::string json = claimstore::GenerateClaimJson(i);
    claimstore_write_result_t r{};
    return claimstore_put_json(db, S(json), {}, &r, e);
  };
  ASSERT_EQ(put(0, &err), CLAIMSTORE_OK) << Take(err).message;
  fs.FillLeaving(fs.path() + "/ballast", 64 << 10);
  int code = CLAIMSTORE_OK;
  int i = 1;
  for (; i < 100000 && code == CLAIMSTORE_OK; ++i) {
    err = nullptr;
    code = put(i, &err);
  }
  ASSERT_EQ(code, CLAIMSTORE_RESOURCE_EXHAUSTED);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(claimstore_error_no_space(err), 1);
  const Error full = Take(err);
  EXPECT_THAT(full.message, HasSubstr(path + ": no space left on device"));
  char* record = nullptr;
  size_t size = 0;
  absl::StatusOr<claimstore::ClaimRecord> first =
      claimstore::DecodeClaim(claimstore::GenerateClaimJson(0));
  ASSERT_TRUE(first.ok());
  const std::string ns(first->claim_namespace()), name(first->name());
  ASSERT_EQ(claimstore_get(db, {S(ns), S(name)}, &record, &size, nullptr, &err), CLAIMSTORE_OK)
      << Take(err).message;
  claimstore_free(record);
  std::filesystem::remove(fs.path() + "/ballast");
  code = CLAIMSTORE_RESOURCE_EXHAUSTED;
  for (int attempt = 0; attempt < 250 && code != CLAIMSTORE_OK; ++attempt) {
    err = nullptr;
    code = put(i, &err);
    if (code != CLAIMSTORE_OK) {
      Take(err);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_EQ(code, CLAIMSTORE_OK);
  claimstore_close(db);
}

}  // namespace
