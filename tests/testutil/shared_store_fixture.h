// SharedStoreTest: several stores ("machines"), each with a mirror of its
// own, sharing one etcd prefix of the test cluster (unique to the test).
#ifndef CLAIMSTORE_TESTS_TESTUTIL_SHARED_STORE_FIXTURE_H_
#define CLAIMSTORE_TESTS_TESTUTIL_SHARED_STORE_FIXTURE_H_

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "etcd/etcd_client.h"
#include "gtest/gtest.h"
#include "testutil/etcd_cluster.h"
#include "testutil/test_util.h"

namespace claimstore::testing {

inline ClaimKey Key(const std::string& name) { return ClaimKey{"ns", name}; }

// Why a mirror does not follow etcd, as its Stats say.
inline std::string FollowError(const Store& store) {
  absl::StatusOr<StoreStats> stats = store.Stats();
  if (!stats.ok()) return std::string(stats.status().message());
  return stats->etcd_following ? "it follows etcd" : stats->etcd_error;
}

// Several stores ("machines"), each with a mirror of its own, sharing one
// etcd prefix (unique to the test).
class SharedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    prefix_ = absl::StrCat("/test-", getpid(), "-", ++counter, "/");
  }
  Options SharedOptions() const {
    return ::claimstore::testing::SharedOptions(TestCluster().Endpoints(), prefix_);
  }
  std::string MirrorPath(int i) const { return absl::StrCat(dir_.path(), "/mirror-", i); }
  // A bare etcd client of the test cluster (to compact it, or to write
  // what no store would).
  static std::unique_ptr<internal::EtcdClient> BareEtcd() {
    internal::EtcdOptions eo;
    eo.endpoints = TestCluster().Endpoints();
    absl::StatusOr<std::unique_ptr<internal::EtcdClient>> etcd = internal::EtcdClient::Connect(eo);
    EXPECT_TRUE(etcd.ok()) << etcd.status();
    return etcd.ok() ? *std::move(etcd) : nullptr;
  }
  std::unique_ptr<Store> OpenMirror(int i) {
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(MirrorPath(i), SharedOptions());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  // The claims of a store as (key, mod revision, JSON), in key order.
  static std::vector<std::string> Contents(Store& store) {
    std::vector<std::string> out;
    ListOptions list;
    while (true) {
      absl::StatusOr<ListPage> page = store.List(list);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) return out;
      for (const ClaimRecord& r : page->records) {
        out.push_back(absl::StrCat(r.claim_namespace(), "/", r.name(), "@", r.create_revision(),
                                   "/", r.mod_revision(), "/", r.version(), " ", EncodeClaim(r)));
      }
      if (page->continue_token.empty()) return out;
      list.continue_token = page->continue_token;
    }
  }

  ScopedTempDir dir_;
  std::string prefix_;
};

}  // namespace claimstore::testing

#endif  // CLAIMSTORE_TESTS_TESTUTIL_SHARED_STORE_FIXTURE_H_
