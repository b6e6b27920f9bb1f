// The bulk load's parallel helpers (parallel.h).
#include "util/parallel.h"

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace claimstore::internal {
namespace {

TEST(RunConcurrentlyTest, RunsEveryTaskOnceTheLastOnTheCallersThread) {
  std::atomic<int> runs[5] = {};
  std::thread::id last_thread;
  std::vector<std::function<void()>> tasks;
  for (int i = 0; i < 4; ++i) tasks.push_back([&, i] { ++runs[i]; });
  tasks.push_back([&] {
    ++runs[4];
    last_thread = std::this_thread::get_id();
  });
  RunConcurrently(std::move(tasks));
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
  EXPECT_EQ(last_thread, std::this_thread::get_id());
  RunConcurrently({});  // nothing to run: returns
}

TEST(SortByKeyTest, SortsAsTheKeysCompareWhateverTheirPrefixes) {
  std::mt19937 rng(3);
  std::vector<std::string> keys;
  for (int i = 0; i < 2000; ++i) {
    // Shared 8-byte prefixes, short keys, empty keys and bytes above 0x7f.
    std::string k = i % 3 == 0 ? "prefix00" : "";
    for (int j = 0; j < static_cast<int>(rng() % 12); ++j)
      k.push_back(static_cast<char>(rng() % 256));
    keys.push_back(k);
  }
  std::vector<absl::string_view> views(keys.begin(), keys.end());
  SortByKey(&views, [](absl::string_view k) { return k; });
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(views.size(), sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(views[i], sorted[i]) << i;
}

TEST(KeyPrefixTest, OrdersLikeTheFirstEightBytes) {
  EXPECT_LT(KeyPrefix("a"), KeyPrefix("b"));
  EXPECT_LT(KeyPrefix(""), KeyPrefix(std::string(1, '\0') + "x"));
  EXPECT_LT(KeyPrefix("\x7f"), KeyPrefix("\x80"));            // unsigned bytes
  EXPECT_EQ(KeyPrefix("abcdefgh1"), KeyPrefix("abcdefgh2"));  // only 8 bytes
}

}  // namespace
}  // namespace claimstore::internal
