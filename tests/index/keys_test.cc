#include "index/keys.h"

#include <algorithm>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "testutil/test_util.h"

namespace claimstore::internal {
namespace {

std::string Tuple(const std::vector<std::string>& parts) {
  std::string key;
  for (const std::string& p : parts) AppendComponent(p, &key);
  return key;
}

TEST(KeysTest, ComponentsRoundTripWithAnyBytes) {
  const std::vector<std::string> parts = {
      "",        std::string("\0", 1), std::string("a\0\xff\x01", 4), "\xff\xff",
      "ns/name", std::string(3, '\0')};
  std::string key = Tuple(parts);
  absl::string_view rest = key;
  std::string out;
  for (const std::string& p : parts) {
    ASSERT_TRUE(ConsumeComponent(&rest, &out));
    EXPECT_EQ(out, p);
  }
  EXPECT_TRUE(rest.empty());
}

TEST(KeysTest, MalformedComponentsAreRejected) {
  std::string out;
  for (const std::string& bad :
       {std::string("abc"), std::string("a\0", 2), std::string("a\0\x02", 3)}) {
    absl::string_view rest = bad;
    EXPECT_FALSE(ConsumeComponent(&rest, &out)) << absl::CHexEscape(bad);
  }
}

// Encoded keys sort exactly as their tuples, and distinct tuples never
// encode alike, whatever bytes the components hold.
TEST(KeysTest, EncodingPreservesTupleOrderAndNeverCollides) {
  std::mt19937 rng(7);
  const std::string alphabet(
      "\0\x01\xfe\xff"
      "a/b",
      7);
  std::vector<std::vector<std::string>> tuples;
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::string> t(1 + rng() % 3);
    for (std::string& c : t) {
      const size_t len = rng() % 4;
      for (size_t j = 0; j < len; ++j) c.push_back(alphabet[rng() % alphabet.size()]);
    }
    tuples.push_back(t);
  }
  std::sort(tuples.begin(), tuples.end());
  tuples.erase(std::unique(tuples.begin(), tuples.end()), tuples.end());
  std::vector<std::string> keys;
  for (const auto& t : tuples) keys.push_back(Tuple(t));
  // Sorted tuples give strictly increasing keys (byte order).
  for (size_t i = 1; i < keys.size(); ++i) {
    ASSERT_LT(keys[i - 1], keys[i]) << "tuples " << i - 1 << " and " << i;
  }
}

TEST(KeysTest, WholeComponentPrefixesSelectExactlyTheirKeys) {
  const std::string driver_a =
      DeviceKey("gpu", "pool", "dev", HoldingKind::kExclusive, "", "ns", "c");
  const std::string driver_ab =
      DeviceKey("gpu2", "pool", "dev", HoldingKind::kExclusive, "", "ns", "c");
  std::string prefix;
  AppendComponent("gpu", &prefix);
  EXPECT_TRUE(absl::StartsWith(driver_a, prefix));
  EXPECT_FALSE(absl::StartsWith(driver_ab, prefix));  // "gpu" is no prefix of "gpu2" here
  std::string pool_prefix = prefix;
  AppendComponent("poo", &pool_prefix);
  EXPECT_FALSE(absl::StartsWith(driver_a, pool_prefix));
}

TEST(KeysTest, DeviceKeysParseBack) {
  const std::string key =
      DeviceKey("d", std::string("p\0q", 3), "x", HoldingKind::kShare, "share", "ns", "name");
  DeviceKeyParts parts;
  ASSERT_TRUE(ParseDeviceKey(key, &parts));
  EXPECT_EQ(parts.driver, "d");
  EXPECT_EQ(parts.pool, std::string("p\0q", 3));
  EXPECT_EQ(parts.device, "x");
  EXPECT_EQ(parts.kind, HoldingKind::kShare);
  EXPECT_EQ(parts.share_id, "share");
  EXPECT_EQ(parts.claim_namespace, "ns");
  EXPECT_EQ(parts.name, "name");
  EXPECT_FALSE(ParseDeviceKey(key.substr(0, key.size() - 1), &parts));
  EXPECT_FALSE(ParseDeviceKey(key + "x", &parts));
}

TEST(KeysTest, Uint64IsBigEndianSoItSortsNumerically) {
  std::string a, b;
  AppendUint64(255, &a);
  AppendUint64(256, &b);
  EXPECT_LT(a, b);
  uint64_t v = 0;
  ASSERT_TRUE(ParseUint64(b, &v));
  EXPECT_EQ(v, 256u);
  EXPECT_FALSE(ParseUint64("short", &v));
}

}  // namespace
}  // namespace claimstore::internal
