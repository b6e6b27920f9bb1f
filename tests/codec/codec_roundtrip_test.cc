// Lossless round trips: the upstream fixture, and many generated claims.
#include <simdjson.h>

#include <algorithm>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "k8s/rfc3339.h"
#include "testutil/test_util.h"
#include "util/json_text.h"

namespace claimstore {
namespace {

using ::claimstore::testing::IsOk;
using ::claimstore::testing::K8sPath;
using ::claimstore::testing::ReadFile;

std::string Minify(simdjson::dom::element e) { return simdjson::minify(e); }

// Members of an object as (key, minified value), in order.
std::vector<std::pair<std::string, std::string>> Members(simdjson::dom::object o) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto [key, value] : o) out.emplace_back(std::string(key), Minify(value));
  return out;
}

TEST(CodecRoundTripTest, FixtureKeepsIdentityAndStatusFieldForField) {
  const std::string input = ReadFile(K8sPath("fixtures/ResourceClaim.roundtrip.json"));
  absl::StatusOr<ClaimRecord> record = DecodeClaim(input);
  ASSERT_THAT(record, IsOk());
  const std::string output = EncodeClaim(*record);

  simdjson::dom::parser in_parser, out_parser;
  simdjson::dom::element in = in_parser.parse(input);
  simdjson::dom::element out = out_parser.parse(output);

  EXPECT_EQ(Minify(in["kind"]), Minify(out["kind"]));
  EXPECT_EQ(Minify(in["apiVersion"]), Minify(out["apiVersion"]));
  // status: every field, in the same order.
  EXPECT_EQ(Minify(in["status"]), Minify(out["status"]));
  // identity: the kept metadata fields, in the input's order.
  const std::vector<std::string> kept = {"name",
                                         "namespace",
                                         "uid",
                                         "resourceVersion",
                                         "generation",
                                         "creationTimestamp",
                                         "deletionTimestamp"};
  auto in_meta = Members(in["metadata"]);
  in_meta.erase(std::remove_if(in_meta.begin(), in_meta.end(),
                               [&](const auto& m) {
                                 return std::find(kept.begin(), kept.end(), m.first) == kept.end();
                               }),
                in_meta.end());
  EXPECT_EQ(in_meta.size(), kept.size());
  EXPECT_EQ(in_meta, Members(out["metadata"]));
  // spec: reduced to the request names.
  EXPECT_EQ(
      Minify(out["spec"]),
      R"({"devices":{"requests":[{"name":"nameValue","firstAvailable":[{"name":"nameValue"}]}]}})");
}

TEST(CodecRoundTripTest, FixtureStatusIsByteIdenticalWhenIndentedLikeTheFixture) {
  const std::string input = ReadFile(K8sPath("fixtures/ResourceClaim.roundtrip.json"));
  absl::StatusOr<ClaimRecord> record = DecodeClaim(input);
  ASSERT_THAT(record, IsOk());
  const std::string output = EncodeClaim(*record, {.indent = "  "});
  const auto status_text = [](absl::string_view s) {
    s = s.substr(s.find("\n  \"status\": {"));
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
    return std::string(s);
  };
  EXPECT_EQ(status_text(input), status_text(output));
}

TEST(CodecRoundTripTest, EncodingIsAFixedPoint) {
  const std::string input = ReadFile(K8sPath("fixtures/ResourceClaim.roundtrip.json"));
  absl::StatusOr<ClaimRecord> first = DecodeClaim(input);
  ASSERT_THAT(first, IsOk());
  const std::string once = EncodeClaim(*first);
  absl::StatusOr<ClaimRecord> second = DecodeClaim(once);
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(EncodeClaim(*second), once);
  EXPECT_EQ(first->bytes(), second->bytes());
}

TEST(CodecRoundTripTest, FixtureFieldsReadInPlace) {
  absl::StatusOr<ClaimRecord> record =
      DecodeClaim(ReadFile(K8sPath("fixtures/ResourceClaim.roundtrip.json")));
  ASSERT_THAT(record, IsOk());
  EXPECT_EQ(record->claim_namespace(), "namespaceValue");
  EXPECT_EQ(record->name(), "nameValue");
  EXPECT_EQ(record->uid(), "uidValue");
  const fb::ClaimRecord& c = record->table();
  EXPECT_EQ(c.generation(), 7);
  ASSERT_TRUE(c.deletion_timestamp().has_value());
  EXPECT_EQ(*c.deletion_timestamp(), 1230771661);  // 2009-01-01T01:01:01Z
  const fb::DeviceRequestAllocationResult* r = c.status()->allocation()->results()->Get(0);
  EXPECT_EQ(r->share_id()->str(), "shareIDValue");
  EXPECT_EQ(r->admin_access(), flatbuffers::Optional<bool>(true));
  EXPECT_EQ(r->tolerations()->Get(0)->toleration_seconds(), flatbuffers::Optional<int64_t>(5));
  EXPECT_EQ(r->consumed_capacity()->Get(0)->value()->str(), "0");
  EXPECT_EQ(r->skip_node_operations()->Get(0)->str(), "skipNodeOperationsValue");
  EXPECT_EQ(c.status()->reserved_for()->Get(0)->uid()->str(), "uidValue");
  EXPECT_EQ(c.status()->devices()->Get(0)->network_data()->ips()->Get(0)->str(), "ipsValue");
}

// ---------------------------------------------------------------------------
// Property test: random claims written in the API form (Go field order and
// omitempty rules, compact) decode and encode back to the same bytes, and
// survive kubectl's form (sorted keys, 4-space indent) too.

class ClaimGenerator {
 public:
  explicit ClaimGenerator(uint64_t seed) : rng_(seed) {}

  std::string Claim() {
    out_.clear();
    Open('{');
    Field("kind", [&] { Str("ResourceClaim"); });
    Field("apiVersion", [&] { Str("resource.k8s.io/v1"); });
    Field("metadata", [&] { Metadata(); });
    Field("spec", [&] { Spec(); });
    Field("status", [&] { Status(); });
    Close('}');
    return out_;
  }

 private:
  bool Coin(uint64_t percent = 50) { return Uniform(100) < percent; }
  uint64_t Uniform(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

  std::string AnyString() {
    static const char* kPool[] = {"",
                                  "a",
                                  "gpu-0",
                                  "dra.example.com",
                                  "pool/a/b",
                                  "\xE6\x97\xA5\xE6\x9C\xAC",
                                  "<tag>&amp;",
                                  "quote\"back\\slash",
                                  "tab\tnl\n",
                                  "\x01"
                                  "ctl",
                                  "\xE2\x80\xA8"
                                  "sep",
                                  "\xF0\x9F\x98\x80",
                                  "550e8400-e29b-41d4-a716-446655440000",
                                  "/",
                                  "'single'"};
    return kPool[Uniform(std::size(kPool))];
  }
  std::string NonEmptyString() {
    std::string s;
    while (s.empty()) s = AnyString();
    return s;
  }

  // Output primitives.
  void Open(char c) {
    Comma();
    out_.push_back(c);
    first_ = true;
  }
  void Close(char c) {
    out_.push_back(c);
    first_ = false;
  }
  void Comma() {
    if (!first_) out_.push_back(',');
    first_ = false;
  }
  template <typename F>
  void Field(absl::string_view key, F&& value) {
    Comma();
    internal::AppendGoJsonString(key, &out_);
    out_.push_back(':');
    first_ = true;
    value();
  }
  void Str(absl::string_view s) {
    Comma();
    internal::AppendGoJsonString(s, &out_);
  }
  void Raw(absl::string_view s) {
    Comma();
    out_.append(s.data(), s.size());
  }
  void Time() {
    Comma();
    out_.push_back('"');
    // Between years 0001 and 9999, avoiding Go's zero time.
    internal::AppendRfc3339(-62135596799 + static_cast<int64_t>(Uniform(315537897598ull)), &out_);
    out_.push_back('"');
  }
  template <typename F>
  void List(F&& element, size_t max = 3) {
    Open('[');
    const size_t n = 1 + Uniform(max);
    for (size_t i = 0; i < n; ++i) element();
    Close(']');
  }
  void Strings() {
    List([&] { Str(AnyString()); });
  }
  template <typename F>
  void Maybe(absl::string_view key, F&& value, uint64_t percent = 50) {
    if (Coin(percent)) Field(key, value);
  }
  void OmitEmptyString(absl::string_view key) {
    if (Coin()) Field(key, [&] { Str(NonEmptyString()); });
  }
  void Int() {
    static const int64_t kValues[] = {0, 1, -1, 7, INT64_MAX, INT64_MIN, 1234567890123};
    Raw(absl::StrCat(kValues[Uniform(std::size(kValues))]));
  }
  void RawJson() {
    static const char* kRaw[] = {
        R"({})",
        R"({"apiVersion":"example.com/v1","kind":"CustomType","spec":{"replicas":1}})",
        R"({"z":1.50,"a":[1e2,-0,true,null],"z":"dup"})",
        R"({"html":"\u003c\u0026\u003e"})",
        R"({"esc":"\/\n\u00e9"})",
        R"([1,2])",
        R"("text")",
        R"(12)"};
    Raw(kRaw[Uniform(std::size(kRaw))]);
  }
  void Quantity() {
    static const char* kCanonical[] = {"0",    "1",      "100m", "1Gi", "1536Mi", "5G",
                                       "12e6", "-1500m", "2048", "1n",  "+1Gi",   "05"};
    Str(kCanonical[Uniform(std::size(kCanonical))]);
  }

  void Metadata() {
    Open('{');
    OmitEmptyString("name");
    OmitEmptyString("namespace");
    OmitEmptyString("uid");
    OmitEmptyString("resourceVersion");
    Maybe("generation", [&] { Raw(absl::StrCat(1 + Uniform(1000))); });
    Field("creationTimestamp", [&] {
      if (Coin()) {
        Time();
      } else {
        Raw("null");
      }
    });
    Maybe("deletionTimestamp", [&] { Time(); });
    Close('}');
  }

  void Spec() {
    Open('{');
    Field("devices", [&] {
      Open('{');
      Field("requests", [&] {
        if (Coin(20)) return Raw("null");
        List([&] {
          Open('{');
          Field("name", [&] { Str(AnyString()); });
          Maybe("firstAvailable", [&] {
            List([&] {
              Open('{');
              Field("name", [&] { Str(AnyString()); });
              Close('}');
            });
          });
          Close('}');
        });
      });
      Close('}');
    });
    Close('}');
  }

  void Toleration() {
    Open('{');
    for (const char* key : {"key", "operator", "value", "effect"}) OmitEmptyString(key);
    Maybe("tolerationSeconds", [&] { Int(); });
    Close('}');
  }

  void Result() {
    Open('{');
    for (const char* key : {"request", "driver", "pool", "device"}) {
      Field(key, [&] { Str(AnyString()); });
    }
    Maybe("adminAccess", [&] { Raw(Coin() ? "true" : "false"); });
    Maybe("tolerations", [&] { List([&] { Toleration(); }); });
    Maybe("bindingConditions", [&] { Strings(); });
    Maybe("bindingFailureConditions", [&] { Strings(); });
    Maybe("shareID", [&] { Str(AnyString()); });
    Maybe("consumedCapacity", [&] {
      Open('{');
      static const char* kKeys[] = {"cores", "dra.example.com/memory", "memory", "z"};
      for (const char* key : kKeys) {
        if (Coin()) continue;
        Field(key, [&] { Quantity(); });
      }
      Field("zz-last", [&] { Quantity(); });  // never empty
      Close('}');
    });
    Maybe("skipNodeOperations", [&] { Strings(); });
    Close('}');
  }

  void Config() {
    Open('{');
    Field("source", [&] { Str(AnyString()); });
    Maybe("requests", [&] { Strings(); });
    Maybe("opaque", [&] {
      Open('{');
      Field("driver", [&] { Str(AnyString()); });
      Field("parameters", [&] {
        if (Coin(20)) {
          Raw("null");
        } else {
          RawJson();
        }
      });
      Close('}');
    });
    Close('}');
  }

  void Requirement() {
    Open('{');
    Field("key", [&] { Str(AnyString()); });
    Field("operator", [&] { Str(AnyString()); });
    Maybe("values", [&] { Strings(); });
    Close('}');
  }

  void NodeSelector() {
    Open('{');
    Field("nodeSelectorTerms", [&] {
      const uint64_t shape = Uniform(4);
      if (shape == 0) return Raw("null");
      if (shape == 1) return Raw("[]");
      List([&] {
        Open('{');
        Maybe("matchExpressions", [&] { List([&] { Requirement(); }); });
        Maybe("matchFields", [&] { List([&] { Requirement(); }); });
        Close('}');
      });
    });
    Close('}');
  }

  void Allocation() {
    Open('{');
    Field("devices", [&] {
      Open('{');
      Maybe("results", [&] { List([&] { Result(); }, 4); });
      Maybe("config", [&] { List([&] { Config(); }); });
      Close('}');
    });
    Maybe("nodeSelector", [&] { NodeSelector(); });
    Maybe("allocationTimestamp", [&] { Time(); });
    Close('}');
  }

  void Condition() {
    Open('{');
    Field("type", [&] { Str(AnyString()); });
    Field("status", [&] { Str(AnyString()); });
    Maybe("observedGeneration", [&] { Raw(absl::StrCat(1 + Uniform(99))); });
    Field("lastTransitionTime", [&] {
      if (Coin(80)) {
        Time();
      } else {
        Raw("null");
      }
    });
    Field("reason", [&] { Str(AnyString()); });
    Field("message", [&] { Str(AnyString()); });
    Close('}');
  }

  void DeviceStatus() {
    Open('{');
    for (const char* key : {"driver", "pool", "device"}) Field(key, [&] { Str(AnyString()); });
    Maybe("shareID", [&] { Str(AnyString()); });
    Field("conditions", [&] {
      const uint64_t shape = Uniform(3);
      if (shape == 0) return Raw("null");
      if (shape == 1) return Raw("[]");
      List([&] { Condition(); });
    });
    Maybe("data", [&] { RawJson(); });
    Maybe("networkData", [&] {
      Open('{');
      OmitEmptyString("interfaceName");
      Maybe("ips", [&] { Strings(); });
      OmitEmptyString("hardwareAddress");
      Close('}');
    });
    Close('}');
  }

  void Status() {
    Open('{');
    Maybe(
        "allocation", [&] { Allocation(); }, 70);
    Maybe("reservedFor", [&] {
      List([&] {
        Open('{');
        OmitEmptyString("apiGroup");
        for (const char* key : {"resource", "name", "uid"}) Field(key, [&] { Str(AnyString()); });
        Close('}');
      });
    });
    Maybe("devices", [&] { List([&] { DeviceStatus(); }); });
    Close('}');
  }

  std::mt19937_64 rng_;
  std::string out_;
  bool first_ = true;
};

// kubectl's form of a JSON text: every object's keys sorted, 4-space indent.
void WriteSorted(simdjson::dom::element e, std::string* out) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      std::vector<std::pair<std::string_view, simdjson::dom::element>> members;
      for (auto [k, v] : simdjson::dom::object(e)) members.emplace_back(k, v);
      std::stable_sort(members.begin(), members.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      out->push_back('{');
      for (size_t i = 0; i < members.size(); ++i) {
        if (i > 0) out->push_back(',');
        internal::AppendGoJsonString(
            absl::string_view(members[i].first.data(), members[i].first.size()), out);
        out->push_back(':');
        WriteSorted(members[i].second, out);
      }
      out->push_back('}');
      return;
    }
    case simdjson::dom::element_type::ARRAY: {
      out->push_back('[');
      bool first = true;
      for (simdjson::dom::element v : simdjson::dom::array(e)) {
        if (!first) out->push_back(',');
        first = false;
        WriteSorted(v, out);
      }
      out->push_back(']');
      return;
    }
    case simdjson::dom::element_type::STRING: {
      std::string_view s = e;
      internal::AppendGoJsonString(absl::string_view(s.data(), s.size()), out);
      return;
    }
    default:
      out->append(simdjson::minify(e));
  }
}

std::string Kubectlify(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.parse(json);
  std::string sorted;
  WriteSorted(root, &sorted);
  std::string indented;
  internal::IndentJson(sorted, "    ", &indented);
  return indented;
}

TEST(CodecRoundTripTest, GeneratedClaimsInApiFormRoundTripByteForByte) {
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    const std::string input = ClaimGenerator(seed).Claim();
    absl::StatusOr<ClaimRecord> record = DecodeClaim(input);
    ASSERT_THAT(record, IsOk()) << "seed " << seed << ": " << input;
    ASSERT_EQ(EncodeClaim(*record), input) << "seed " << seed;
  }
}

TEST(CodecRoundTripTest, GeneratedClaimsInKubectlFormLoseNothing) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const std::string kubectl = Kubectlify(ClaimGenerator(seed).Claim());
    absl::StatusOr<ClaimRecord> record = DecodeClaim(kubectl);
    ASSERT_THAT(record, IsOk()) << "seed " << seed << ": " << kubectl;
    ASSERT_EQ(Kubectlify(EncodeClaim(*record)), kubectl) << "seed " << seed;
  }
}

TEST(CodecRoundTripTest, ListsRoundTripThroughEncodeClaimList) {
  std::vector<ClaimRecord> records;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    absl::StatusOr<ClaimRecord> r = DecodeClaim(ClaimGenerator(seed).Claim());
    ASSERT_THAT(r, IsOk());
    records.push_back(*std::move(r));
  }
  for (const std::string& indent : {std::string(), std::string("  ")}) {
    const std::string list = EncodeClaimList(records, "42", {.indent = indent});
    std::vector<ClaimRecord> decoded;
    ASSERT_THAT(DecodeClaims(list,
                             [&](DecodedClaim c) {
                               EXPECT_EQ(c.item, static_cast<int64_t>(decoded.size()));
                               decoded.push_back(std::move(c.record));
                               return absl::OkStatus();
                             }),
                IsOk());
    ASSERT_EQ(decoded.size(), records.size());
    for (size_t i = 0; i < records.size(); ++i) {
      EXPECT_EQ(decoded[i].bytes(), records[i].bytes()) << "item " << i;
    }
  }
  EXPECT_EQ(
      EncodeClaimList({}, "7"),
      R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1","metadata":{"resourceVersion":"7"},"items":[]})");
}

}  // namespace
}  // namespace claimstore
