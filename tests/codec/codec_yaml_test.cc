// YAML input (issue 41): every form the JSON input has, read as Kubernetes
// reads YAML, round trips through the tool's own YAML output, and errors
// at the YAML's line and column.
#include <simdjson.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "kubectl_yaml.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::IsOk;
using ::claimstore::testing::K8sPath;
using ::claimstore::testing::ReadFile;
using ::claimstore::testing::StatusIs;

std::string Yaml(const std::string& json) {
  std::string out;
  EXPECT_TRUE(cli::AppendYaml(json, &out)) << json;
  return out;
}

// `json` with every object's keys sorted: kubectl's YAML (go-yaml) writes
// maps sorted, so the opaque `data` and `parameters` come back from YAML
// with their keys in order; everything else keeps its place.
void AppendCanonical(simdjson::dom::element e, std::string* out) {
  if (e.type() == simdjson::dom::element_type::OBJECT) {
    std::vector<std::pair<std::string, simdjson::dom::element>> members;
    for (auto [key, value] : e.get_object()) members.emplace_back(std::string(key), value);
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    out->push_back('{');
    for (size_t i = 0; i < members.size(); ++i) {
      if (i > 0) out->push_back(',');
      absl::StrAppend(out, "\"", members[i].first, "\":");
      AppendCanonical(members[i].second, out);
    }
    out->push_back('}');
  } else if (e.type() == simdjson::dom::element_type::ARRAY) {
    out->push_back('[');
    bool first = true;
    for (simdjson::dom::element v : e.get_array()) {
      if (!first) out->push_back(',');
      first = false;
      AppendCanonical(v, out);
    }
    out->push_back(']');
  } else {
    out->append(simdjson::minify(e));
  }
}

std::string Canonical(const std::string& json) {
  simdjson::dom::parser parser;
  std::string out;
  AppendCanonical(parser.parse(json), &out);
  return out;
}

std::vector<DecodedClaim> DecodeAll(absl::string_view input, absl::Status* status) {
  std::vector<DecodedClaim> out;
  *status = DecodeClaims(input, [&](DecodedClaim c) {
    out.push_back(std::move(c));
    return absl::OkStatus();
  });
  return out;
}

absl::Status DecodeError(absl::string_view input) {
  return DecodeClaims(input, [](DecodedClaim) { return absl::OkStatus(); });
}

TEST(CodecYamlTest, TheFixtureRoundTripsThroughYaml) {
  absl::StatusOr<ClaimRecord> from_json =
      DecodeClaim(ReadFile(K8sPath("fixtures/ResourceClaim.roundtrip.json")));
  ASSERT_THAT(from_json, IsOk());
  const std::string json = EncodeClaim(*from_json);
  absl::StatusOr<ClaimRecord> from_yaml = DecodeClaim(Yaml(json));
  ASSERT_THAT(from_yaml, IsOk());
  EXPECT_EQ(Canonical(EncodeClaim(*from_yaml)), Canonical(json));
}

TEST(CodecYamlTest, AListRoundTripsItemByItem) {
  std::vector<ClaimRecord> records;
  for (uint64_t i = 0; i < 300; ++i) {
    absl::StatusOr<ClaimRecord> r = DecodeClaim(GenerateClaimJson(i));
    ASSERT_THAT(r, IsOk());
    records.push_back(*std::move(r));
  }
  const std::string list = EncodeClaimList(records, "42");
  absl::Status s;
  const std::vector<DecodedClaim> got = DecodeAll(Yaml(list), &s);
  ASSERT_THAT(s, IsOk());
  ASSERT_EQ(got.size(), records.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(Canonical(EncodeClaim(got[i].record)), Canonical(EncodeClaim(records[i]))) << i;
    EXPECT_EQ(got[i].document, 0u);
    EXPECT_EQ(got[i].item, static_cast<int64_t>(i));
    if (i > 0) {
      EXPECT_GT(got[i].ordinal, got[i - 1].ordinal);
    }
  }
}

TEST(CodecYamlTest, DocumentsAndWatchEventsAsKubectlWritesThem) {
  const std::string a = EncodeClaim(*DecodeClaim(GenerateClaimJson(1)));
  const std::string b = EncodeClaim(*DecodeClaim(GenerateClaimJson(2)));
  // Several documents, an empty one among them (skipped, as Kubernetes
  // does), with a byte-order mark and comments.
  const std::string stream =
      absl::StrCat("\xEF\xBB\xBF# a backup\n---\n", Yaml(a), "---\n---\n", Yaml(b), "...\n");
  absl::Status s;
  std::vector<DecodedClaim> got = DecodeAll(stream, &s);
  ASSERT_THAT(s, IsOk());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(Canonical(EncodeClaim(got[0].record)), Canonical(a));
  EXPECT_EQ(Canonical(EncodeClaim(got[1].record)), Canonical(b));
  EXPECT_EQ(got[1].document, 1u);
  // kubectl get -w -o yaml --output-watch-events.
  const std::string events =
      absl::StrCat(Yaml(absl::StrCat(R"({"type":"ADDED","object":)", a, "}")), "---\n",
                   Yaml(absl::StrCat(R"({"type":"DELETED","object":)", a, "}")));
  got = DecodeAll(events, &s);
  ASSERT_THAT(s, IsOk());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].event, WatchEventType::kAdded);
  EXPECT_EQ(got[1].event, WatchEventType::kDeleted);
}

// sigs.k8s.io/yaml reads YAML 1.1 plain scalars (go-yaml v2): yes is true,
// 0x10 is 16, 010 is 8; quoted scalars are strings whatever they look like.
TEST(CodecYamlTest, ScalarsAreWhatKubernetesMakesOfThem) {
  const std::string head =
      "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: c\n"
      "  namespace: ns\n";
  const auto decoded = [&](const std::string& extra) { return DecodeClaim(head + extra); };
  for (const auto& [yaml, generation] : std::vector<std::pair<std::string, int64_t>>{
           {"  generation: 0x10\n", 16},
           {"  generation: 010\n", 8},
           {"  generation: 1_000\n", 1000},
           {"  generation: +7\n", 7},
       }) {
    absl::StatusOr<ClaimRecord> r = decoded(yaml);
    ASSERT_THAT(r, IsOk()) << yaml;
    EXPECT_EQ(r->table().generation(), generation) << yaml;
  }
  EXPECT_THAT(decoded("  generation: \"7\"\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "metadata.generation: expected an integer, got a string"));
  EXPECT_THAT(decoded("  generation: yes\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "metadata.generation: expected an integer, got a boolean"));
  EXPECT_THAT(decoded("  generation: .inf\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "the number .inf has no JSON form"));
  // A plain scalar that is text stays text; ~ is null (absent).
  absl::StatusOr<ClaimRecord> r = decoded("  resourceVersion: 0x1G\n  generation: ~\n");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->table().resource_version()->str(), "0x1G");
  EXPECT_EQ(r->table().generation(), 0);
  // Anchors and aliases are expanded.
  r = decoded("  uid: &v abc\n  resourceVersion: *v\n");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->table().uid()->str(), "abc");
  EXPECT_EQ(r->table().resource_version()->str(), "abc");
}

TEST(CodecYamlTest, ErrorsNameTheLineAndColumnInPlainWords) {
  // A YAML syntax error: at its character.
  EXPECT_THAT(DecodeError("kind: ResourceClaim\nmetadata:\n  name: a\n bad: [\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "line 4, column "));
  EXPECT_THAT(DecodeError("kind: ResourceClaim\nmetadata: {name: a\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "malformed YAML: "));
  // What was expected, and found.
  EXPECT_THAT(DecodeError("- a\n- b\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "line 1, column 1 (document 0, byte 0): expected a ResourceClaim object, a "
                       "List or a watch event; found a YAML sequence"));
  EXPECT_THAT(DecodeError("just some words\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "expected a ResourceClaim object, a List or a watch event; found a YAML "
                       "scalar (\"just some words\")"));
  EXPECT_THAT(DecodeError("# nothing here\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "no YAML document in the input"));
  // A claim that does not decode: at its list item, with the field path.
  std::vector<ClaimRecord> records;
  for (uint64_t i = 0; i < 3; ++i) records.push_back(*DecodeClaim(GenerateClaimJson(i)));
  std::string list = Yaml(EncodeClaimList(records, "1"));
  const size_t third = list.find("\n- ", list.find("\n- ", list.find("\n- ") + 1) + 1) + 1;
  ASSERT_NE(third, std::string::npos);
  const size_t name = list.find("    name: ", third);
  list.replace(name, 10, "    name: [x]\n    x: ");
  // The item's mapping starts after its "- ".
  const size_t line = 1 + std::count(list.begin(), list.begin() + third, '\n');
  EXPECT_THAT(DecodeError(list),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("line ", line, ", column 3 (document 0, byte ", third + 2,
                                    "): items[2].metadata.name: expected a string")));
}

// Large YAML through DecodeClaimsConcurrently: converted on a thread of its
// own, decoded on the caller's, in input order; errors as DecodeClaims has
// them (the conversion's, and the decoder's, whichever comes first).
TEST(CodecYamlTest, ALargeInputIsConvertedBesideItsDecodingInOrder) {
  std::vector<ClaimRecord> records;
  for (uint64_t i = 0; i < 3000; ++i) records.push_back(*DecodeClaim(GenerateClaimJson(i)));
  const std::string yaml = Yaml(EncodeClaimList(records, "1"));
  ASSERT_GT(yaml.size(), size_t{1} << 20);
  std::vector<std::string> sequential, pipelined;
  ASSERT_THAT(DecodeClaims(yaml,
                           [&](DecodedClaim c) {
                             sequential.push_back(EncodeClaim(c.record));
                             return absl::OkStatus();
                           }),
              IsOk());
  uint64_t last = 0;
  ASSERT_THAT(DecodeClaimsConcurrently(yaml, 2,
                                       [&](DecodedClaim c) {
                                         EXPECT_TRUE(pipelined.empty() || c.ordinal > last);
                                         last = c.ordinal;
                                         EXPECT_EQ(c.item, static_cast<int64_t>(pipelined.size()));
                                         pipelined.push_back(EncodeClaim(c.record));
                                         return absl::OkStatus();
                                       }),
              IsOk());
  EXPECT_EQ(pipelined, sequential);
  // A bad item early, a YAML syntax error late: the item's error.
  std::string bad = yaml;
  const size_t at = bad.find("    name: ", bad.size() / 10);
  bad.replace(at, 10, "    name: [x]\n    x: ");
  bad += "oops: [\n";
  const absl::Status s1 = DecodeError(bad);
  EXPECT_THAT(s1, StatusIs(absl::StatusCode::kInvalidArgument, "metadata.name: expected a string"));
  EXPECT_EQ(DecodeClaimsConcurrently(bad, 2, [](DecodedClaim) { return absl::OkStatus(); }), s1);
  // The sink's error stops both threads.
  int seen = 0;
  EXPECT_THAT(DecodeClaimsConcurrently(yaml, 2,
                                       [&](DecodedClaim) {
                                         return ++seen == 100 ? absl::AbortedError("enough")
                                                              : absl::OkStatus();
                                       }),
              StatusIs(absl::StatusCode::kAborted, "enough"));
  EXPECT_EQ(seen, 100);
}

// Every refusal of YAML input says where (line and column) and carries no
// JSON parser wording, though the JSON decoder reads the converted text.
TEST(CodecYamlTest, EveryRefusalIsPlacedAndInTheUsersWords) {
  const std::vector<std::string> inputs = {
      "kind: ResourceClaim\nmetadata: [\n",
      "kind: ResourceClaim\n  metadata: x\n bad\n",
      "kind: ResourceClaim\nmetadata:\n  name: \"a\n",
      "kind: ResourceClaim\nmetadata: {name: a, namespace: b}\nstatus: {reservedFor: 3}\n",
      "kind: ResourceClaim\nmetadata: *nowhere\n",
      "kind: ResourceClaim\n<<: {a: b}\n",
      "kind: ResourceClaim\nmetadata: !!binary aGVsbG8=\n",
      "kind: Pod\n",
      "apiVersion: v1\nkind: List\nitems:\n- 42\n",
      "apiVersion: v1\nkind: List\nitems:\n- kind: ResourceClaim\n  metadata: {name: [1]}\n",
      "type: ADDED\nobject: [1]\n",
      "- a\n",
      "words\n",
      "key: \t\x01\n",
  };
  for (const std::string& input : inputs) {
    const absl::Status s = DecodeError(input);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << input << ": " << s;
    EXPECT_TRUE(absl::StartsWith(s.message(), "line ")) << input << ": " << s;
    for (const char* word : {"simdjson", "get_", "tape", "TAPE", "JSON document"}) {
      EXPECT_THAT(std::string(s.message()), ::testing::Not(::testing::HasSubstr(word))) << input;
    }
  }
}

}  // namespace
}  // namespace claimstore
