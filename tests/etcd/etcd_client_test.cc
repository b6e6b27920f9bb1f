// The etcd client against a real 3-member etcd cluster on loopback:
// exactly one of racing creates wins, Txn compares over ranges, a watch
// sees every change in order and reports compaction, fail-over when
// members (the leader too) are killed, and bounded failure without a
// quorum.
#include "etcd/etcd_client.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "etcd/etcd_layout.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testutil/etcd_cluster.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::EtcdCluster;
using ::testing::HasSubstr;

EtcdCluster& Cluster() { return ::claimstore::testing::TestCluster(); }

class EtcdClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<EtcdClient> Client(absl::Duration timeout = absl::Seconds(5)) {
    EtcdOptions options;
    options.endpoints = Cluster().Endpoints();
    options.request_timeout = timeout;
    auto c = EtcdClient::Connect(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }
};

// A Txn that creates `key` with `value` only if it does not exist.
etcdserverpb::TxnRequest CreateIfAbsent(const std::string& key, const std::string& value) {
  etcdserverpb::TxnRequest txn;
  auto* cmp = txn.add_compare();
  cmp->set_key(key);
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  return txn;
}

absl::StatusOr<std::string> ValueOf(EtcdClient* client, const std::string& key) {
  etcdserverpb::RangeRequest r;
  r.set_key(key);
  auto got = client->Range(r);
  if (!got.ok()) return got.status();
  if (got->kvs_size() == 0) return absl::NotFoundError(key);
  return got->kvs(0).value();
}

TEST_F(EtcdClientTest, EndpointsAreChecked) {
  EtcdOptions options;
  EXPECT_THAT(EtcdClient::Connect(options).status().message(),
              HasSubstr("etcd endpoints: Required value"));
  options.endpoints = {"127.0.0.1:2379", "https://127.0.0.1:2379"};
  EXPECT_THAT(EtcdClient::Connect(options).status().message(),
              HasSubstr("endpoints[1]: Invalid value: \"https://127.0.0.1:2379\": endpoints[0] "
                        "is not https://: all use TLS or none does"));
  options.endpoints = {"localhost"};
  EXPECT_EQ(EtcdClient::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.endpoints = {"http://127.0.0.1:2379/"};
  EXPECT_TRUE(EtcdClient::Connect(options).ok());
  // TLS: https:// endpoints only, a certificate with its key.
  options.endpoints = {"https://127.0.0.1:2379/"};
  EXPECT_TRUE(EtcdClient::Connect(options).ok());  // gRPC's default roots
  options.cert_file = "/nonexistent/cert.pem";
  EXPECT_THAT(EtcdClient::Connect(options).status().message(), HasSubstr("both or neither"));
  options.key_file = "/nonexistent/key.pem";
  EXPECT_THAT(EtcdClient::Connect(options).status().message(),
              HasSubstr("etcd certificate file: Invalid value: \"/nonexistent/cert.pem\": cannot "
                        "be opened: No such file or directory"));
  options.endpoints = {"http://127.0.0.1:2379/"};
  EXPECT_THAT(EtcdClient::Connect(options).status().message(),
              HasSubstr("TLS needs https:// endpoints"));
}

TEST_F(EtcdClientTest, ExactlyOneOfRacingCreatesWins) {
  auto client = Client();
  for (int round = 0; round < 10; ++round) {
    const std::string key = absl::StrCat("race/", round);
    std::atomic<int> won{0}, lost{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
      threads.emplace_back([&, t] {
        auto r = client->Txn(CreateIfAbsent(key, absl::StrCat("t", t)));
        ASSERT_TRUE(r.ok()) << r.status();
        (r->succeeded() ? won : lost)++;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(won.load(), 1) << key;
    EXPECT_EQ(lost.load(), 15) << key;
  }
}

TEST_F(EtcdClientTest, RangeCompareSeesAnyKeyOfAPrefix) {
  auto client = Client();
  // "no key under dev/a/" as one compare: create_revision == 0 over the range.
  auto absent_under = [](const std::string& prefix) {
    etcdserverpb::TxnRequest txn;
    auto* cmp = txn.add_compare();
    cmp->set_key(prefix);
    cmp->set_range_end(PrefixRangeEnd(prefix));
    cmp->set_target(etcdserverpb::Compare::CREATE);
    cmp->set_result(etcdserverpb::Compare::EQUAL);
    cmp->set_create_revision(0);
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(prefix + "x");
    put->set_value("v");
    return txn;
  };
  auto first = client->Txn(absent_under("dev/a/"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->succeeded());
  auto second = client->Txn(absent_under("dev/a/"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->succeeded());
  auto other = client->Txn(absent_under("dev/b/"));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_TRUE(other->succeeded());
  EXPECT_EQ(PrefixRangeEnd("a/"), "a0");
  EXPECT_EQ(PrefixRangeEnd(std::string("a\xff", 2)), "b");
}

TEST_F(EtcdClientTest, EtcdRefusalsAreInvalidArgumentAndNamed) {
  auto client = Client();
  etcdserverpb::TxnRequest txn;
  for (int i = 0; i < 129; ++i) {
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(absl::StrCat("many/", i));
  }
  auto r = client->Txn(txn);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("too many operations in txn request"));
  EXPECT_FALSE(OutcomeUnknown(r.status()));
}

TEST_F(EtcdClientTest, WatchSeesEveryChangeInOrderAndReportsCompaction) {
  auto client = Client();
  auto start = client->Txn(CreateIfAbsent("w/start", "s"));
  ASSERT_TRUE(start.ok()) << start.status();
  const int64_t from = start->header().revision() + 1;
  for (int i = 0; i < 50; ++i) {
    etcdserverpb::TxnRequest txn;
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(absl::StrCat("w/k", i % 5));
    put->set_value(absl::StrCat(i));
    ASSERT_TRUE(client->Txn(txn).ok());
  }
  etcdserverpb::WatchCreateRequest create;
  create.set_key("w/k");
  create.set_range_end(PrefixRangeEnd("w/k"));
  create.set_start_revision(from);
  auto watch = client->Watch(create);
  ASSERT_TRUE(watch.ok()) << watch.status();
  int seen = 0;
  int64_t last = 0;
  while (seen < 50) {
    auto r = (*watch)->Next();
    ASSERT_TRUE(r.ok()) << r.status();
    for (const auto& e : r->events()) {
      EXPECT_GT(e.kv().mod_revision(), last);
      last = e.kv().mod_revision();
      EXPECT_EQ(e.kv().value(), absl::StrCat(seen));
      ++seen;
    }
  }
  // Compact past `from`: a new watch from it is refused with the compact
  // revision; one from the compact revision on is not.
  auto compacted_to = client->Txn(CreateIfAbsent("w/end", "e"));
  ASSERT_TRUE(compacted_to.ok());
  const int64_t compact = compacted_to->header().revision();
  ASSERT_TRUE(client->Compact(compact).ok());
  // etcd confirms the watch, then cancels it with the compact revision.
  auto refused = client->Watch(create);
  ASSERT_TRUE(refused.ok()) << refused.status();
  auto next = (*refused)->Next();
  ASSERT_EQ(next.status().code(), absl::StatusCode::kOutOfRange) << next.status();
  EXPECT_EQ(CompactRevisionOf(next.status()), static_cast<uint64_t>(compact));
  create.set_start_revision(compact + 1);
  EXPECT_TRUE(client->Watch(create).ok());
}

TEST_F(EtcdClientTest, WritesGoOnWhenAMemberOrTheLeaderIsKilled) {
  auto client = Client();
  EtcdCluster& cluster = Cluster();
  for (int victim_round = 0; victim_round < 2; ++victim_round) {
    // First a follower, then the leader.
    const int leader = cluster.Leader();
    ASSERT_GE(leader, 0);
    const int victim = victim_round == 0 ? (leader + 1) % cluster.size() : leader;
    cluster.Kill(victim);
    int committed = 0, unknown = 0;
    for (int i = 0; i < 40; ++i) {
      const std::string key = absl::StrCat("kill/", victim_round, "/", i);
      auto r = client->Txn(CreateIfAbsent(key, "v"));
      if (r.ok()) {
        EXPECT_TRUE(r->succeeded()) << key;
        ++committed;
        EXPECT_EQ(ValueOf(client.get(), key).value_or(""), "v");
      } else {
        // Only an outcome left open, never a plain failure: the write
        // either landed or did not, and a read says which.
        ASSERT_TRUE(OutcomeUnknown(r.status())) << r.status();
        ++unknown;
      }
    }
    EXPECT_GE(committed, 30) << "unknown outcomes: " << unknown;
    const absl::Status restarted = cluster.Restart(victim);
    ASSERT_TRUE(restarted.ok()) << restarted;
  }
}

TEST_F(EtcdClientTest, WithoutAQuorumWritesFailWithinTheDeadline) {
  EtcdCluster& cluster = Cluster();
  auto client = Client(absl::Seconds(2));
  cluster.Kill(1);
  cluster.Kill(2);
  const absl::Time start = absl::Now();
  auto w = client->Txn(CreateIfAbsent("noquorum/w", "v"));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(w.status().code(), absl::StatusCode::kUnavailable) << w.status();
  EXPECT_LT(took, absl::Seconds(5));
  auto r = ValueOf(client.get(), "noquorum/w");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  const absl::Status started = cluster.StartStopped();
  ASSERT_TRUE(started.ok()) << started;
  // The write either landed or not; with a quorum back, writes go on.
  auto again = client->Txn(CreateIfAbsent("noquorum/x", "v"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->succeeded());
}

// The layouts of etcd's keys and values (no cluster needed).
TEST(EtcdLayoutTest, KeysAndValuesRoundTrip) {
  for (const std::string& c : {std::string("plain-name.x"), std::string("a/b%c d"),
                               std::string("\t\n\x01\xff"), std::string()}) {
    std::string back;
    ASSERT_TRUE(UnescapeComponent(EscapeComponent(c), &back)) << c;
    EXPECT_EQ(back, c);
    EXPECT_EQ(EscapeComponent(c).find('/'), std::string::npos);
  }
  std::string out;
  EXPECT_FALSE(UnescapeComponent("%2", &out));
  EXPECT_FALSE(UnescapeComponent("%41", &out));  // 'A' is never escaped
  const EtcdLayout layout("/p");
  EXPECT_EQ(layout.Claim({"ns", "a.b"}), "/p/claims/ns/a.b");
  ClaimKey key;
  ASSERT_TRUE(layout.ParseClaim(layout.Claim({"ns", "x/y"}), &key));
  EXPECT_EQ(key, (ClaimKey{"ns", "x/y"}));
  EXPECT_FALSE(layout.ParseClaim("/p/claims/ns", &key));
  EXPECT_FALSE(layout.ParseClaim(layout.Claim({"ns", "n"}) + std::string(1, '\0') + "s", &key));
  EXPECT_EQ(layout.Exclusive("d", "pool/1", "dev"), "/p/devices/d/pool%2F1/dev/exclusive");
  // Shares: any bytes in a field survive, '=' and tabs included, and the
  // encoding does not depend on the order given.
  std::vector<DeviceShare> shares = {
      {"s2", {"ns", "b"}, {{"mem=x", "1Gi"}, {"a\tb", "2"}}},
      {"s1", {"ns", "a"}, {{"=a", "=3da"}}},
  };
  const std::string encoded = EncodeShares(shares);
  std::reverse(shares.begin(), shares.end());
  EXPECT_EQ(EncodeShares(shares), encoded);
  absl::StatusOr<std::vector<DeviceShare>> decoded = DecodeShares(encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), 2u);
  EXPECT_EQ((*decoded)[0].share_id, "s1");
  EXPECT_EQ((*decoded)[0].consumed_capacity[0].name, "=a");
  EXPECT_EQ((*decoded)[0].consumed_capacity[0].quantity, "=3da");
  EXPECT_EQ((*decoded)[1].consumed_capacity[0].name, "a\tb");  // sorted by name
  EXPECT_EQ((*decoded)[1].consumed_capacity[1].name, "mem=x");
  absl::string_view token, record;
  const std::string value = EncodeClaimValue("tok", "REC");  // the views point into it
  ASSERT_TRUE(DecodeClaimValue(value, &token, &record).ok());
  EXPECT_EQ(token, "tok");
  EXPECT_EQ(record, "REC");
  EXPECT_EQ(DecodeClaimValue("x", &token, &record).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace claimstore::internal
