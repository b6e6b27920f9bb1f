// Decoding: every input form, presence, and strict errors naming the path.
#include <simdjson.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "codec/codec_internal.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::IsOk;
using ::claimstore::testing::StatusIs;
using ::testing::ElementsAre;

// A claim with `status` spliced in.
std::string ClaimWithStatus(absl::string_view status, absl::string_view name = "c") {
  return absl::StrCat(
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":")", name,
      R"(","namespace":"ns","uid":"u"},"status":)", status, "}");
}

constexpr char kAllocated[] =
    R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d.example.com","pool":"p","device":"dev"}]}}})";

struct Seen {
  std::string name;
  WatchEventType event;
  size_t document;
  int64_t item;
  bool operator==(const Seen&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Seen& s) {
  return os << s.name << "/" << static_cast<int>(s.event) << "/" << s.document << "/" << s.item;
}

absl::StatusOr<std::vector<Seen>> DecodeAll(absl::string_view input) {
  std::vector<Seen> seen;
  absl::Status s = DecodeClaims(input, [&](DecodedClaim c) {
    seen.push_back({std::string(c.record.name()), c.event, c.document, c.item});
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return seen;
}

absl::Status DecodeError(absl::string_view input) {
  absl::StatusOr<std::vector<Seen>> r = DecodeAll(input);
  return r.ok() ? absl::OkStatus() : r.status();
}

// --- Input forms -----------------------------------------------------------

TEST(DecodeFormsTest, SingleClaim) {
  EXPECT_THAT(*DecodeAll(ClaimWithStatus("{}", "one")),
              ElementsAre(Seen{"one", WatchEventType::kNone, 0, -1}));
}

TEST(DecodeFormsTest, ResourceClaimListInApiForm) {
  const std::string list = R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1",
    "metadata":{"resourceVersion":"12","continue":"abc","remainingItemCount":3},
    "items":[{"metadata":{"name":"a"},"spec":{"devices":{"requests":null}},"status":{}},
             {"metadata":{"name":"b"},"status":{}}]})";
  EXPECT_THAT(*DecodeAll(list), ElementsAre(Seen{"a", WatchEventType::kNone, 0, 0},
                                            Seen{"b", WatchEventType::kNone, 0, 1}));
}

TEST(DecodeFormsTest, KubectlListWithSortedKeys) {
  // kubectl get resourceclaims -A -o json: items before kind, sorted keys.
  const std::string list = R"({
    "apiVersion": "v1",
    "items": [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "a", "namespace": "ns"}, "spec": {}, "status": {}}
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
})";
  EXPECT_THAT(*DecodeAll(list), ElementsAre(Seen{"a", WatchEventType::kNone, 0, 0}));
}

TEST(DecodeFormsTest, JsonLines) {
  const std::string lines =
      absl::StrCat(ClaimWithStatus("{}", "a"), "\n", ClaimWithStatus("{}", "b"), "\n\n",
                   ClaimWithStatus("{}", "c"), "\n");
  EXPECT_THAT(*DecodeAll(lines), ElementsAre(Seen{"a", WatchEventType::kNone, 0, -1},
                                             Seen{"b", WatchEventType::kNone, 1, -1},
                                             Seen{"c", WatchEventType::kNone, 2, -1}));
}

TEST(DecodeFormsTest, WatchEventsInBothKeyOrders) {
  const std::string events = absl::StrCat(
      R"({"type":"ADDED","object":)", ClaimWithStatus("{}", "a"), "}\n",
      // kubectl sorts keys: object before type.
      R"({"object":)", ClaimWithStatus(kAllocated, "a"), R"(,"type":"MODIFIED"})", "\n",
      R"({"type":"BOOKMARK","object":{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1",
          "metadata":{"resourceVersion":"99","annotations":{"k8s.io/initial-events-end":"true"}}}})",
      "\n", R"({"type":"DELETED","object":)", ClaimWithStatus("{}", "a"), "}\n");
  EXPECT_THAT(*DecodeAll(events), ElementsAre(Seen{"a", WatchEventType::kAdded, 0, -1},
                                              Seen{"a", WatchEventType::kModified, 1, -1},
                                              Seen{"a", WatchEventType::kDeleted, 3, -1}));
}

TEST(DecodeFormsTest, ErrorEventStopsWithItsMessage) {
  const std::string first =
      absl::StrCat(R"({"type":"ADDED","object":)", ClaimWithStatus("{}", "a"), "}\n");
  const std::string events = absl::StrCat(
      first,
      R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",
          "message":"too old resource version: 1, oldest 2","reason":"Expired","code":410}})");
  EXPECT_THAT(DecodeError(events),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat(
                           "line 2, column 1 (document 1, byte ", first.size(),
                           "): the watch stream carries an ERROR event: ", R"({"kind":"Status")")));
}

TEST(DecodeFormsTest, OlderApiVersionsWithTheSameStatusShape) {
  for (const char* version : {"resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"}) {
    std::string claim = ClaimWithStatus(kAllocated);
    absl::StrReplaceAll({{"resource.k8s.io/v1", version}}, &claim);
    EXPECT_THAT(DecodeClaim(claim), IsOk()) << version;
  }
}

TEST(DecodeFormsTest, RefusesOtherKindsAndVersions) {
  EXPECT_THAT(
      DecodeClaim(R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},"status":{}})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "kind \"Pod\" is not supported: expected ResourceClaim"));
  EXPECT_THAT(DecodeClaim(R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1alpha3",
                               "metadata":{"name":"c"},"status":{}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "apiVersion \"resource.k8s.io/v1alpha3\" is not supported"));
  EXPECT_THAT(DecodeError(R"({"kind":"PodList","apiVersion":"v1","items":[]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "list kind \"PodList\""));
  EXPECT_THAT(
      DecodeError(R"({"kind":"List","apiVersion":"v1","items":[
          {"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"a"}},
          {"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}]})"),
      StatusIs(absl::StatusCode::kInvalidArgument, "items[1]: kind \"Pod\" is not supported"));
  EXPECT_THAT(DecodeError(R"({"type":"ADDED","object":{"kind":"Pod","metadata":{}}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "object: kind \"Pod\""));
  EXPECT_THAT(
      DecodeError(R"({"type":"SYNC","object":{}})"),
      StatusIs(absl::StatusCode::kInvalidArgument, "unsupported watch event type \"SYNC\""));
}

TEST(DecodeFormsTest, DecodeClaimWantsExactlyOneClaim) {
  EXPECT_THAT(DecodeClaim(R"({"kind":"ResourceClaimList","items":[]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "exactly one ResourceClaim"));
  EXPECT_THAT(DecodeClaim(absl::StrCat(ClaimWithStatus("{}"), ClaimWithStatus("{}"))),
              StatusIs(absl::StatusCode::kInvalidArgument, "exactly one ResourceClaim"));
}

TEST(DecodeFormsTest, SinkErrorsStopDecoding) {
  int calls = 0;
  absl::Status s =
      DecodeClaims(absl::StrCat(ClaimWithStatus("{}"), ClaimWithStatus("{}")), [&](DecodedClaim) {
        ++calls;
        return absl::AbortedError("enough");
      });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kAborted, "enough"));
  EXPECT_EQ(calls, 1);
}

// --- What is kept ------------------------------------------------------------

std::string RoundTrip(absl::string_view json) {
  absl::StatusOr<ClaimRecord> r = DecodeClaim(json);
  return r.ok() ? EncodeClaim(*r) : std::string(r.status().message());
}

std::string StatusOf(absl::string_view status) {
  const std::string out = RoundTrip(ClaimWithStatus(status));
  const size_t at = out.find(R"("status":)");
  return at == std::string::npos ? out : out.substr(at + 9, out.size() - at - 10);
}

TEST(DecodePresenceTest, NullMeansAbsentEverywhere) {
  EXPECT_EQ(StatusOf("null"), "{}");
  EXPECT_EQ(StatusOf(R"({"allocation":null,"reservedFor":null,"devices":null})"), "{}");
  EXPECT_EQ(
      StatusOf(R"({"reservedFor":[{"apiGroup":null,"resource":"pods","name":"p","uid":"u"}]})"),
      R"({"reservedFor":[{"resource":"pods","name":"p","uid":"u"}]})");
  // A null element of a list of structs is a zero struct, as in Go.
  EXPECT_EQ(StatusOf(R"({"reservedFor":[null]})"),
            R"({"reservedFor":[{"resource":"","name":"","uid":""}]})");
}

TEST(DecodePresenceTest, PointerFieldsKeepUnsetApartFromZero) {
  const auto result = [](absl::string_view extra) {
    return StatusOf(absl::StrCat(
        R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x")",
        extra, "}]}}}"));
  };
  EXPECT_THAT(result(""), ::testing::Not(::testing::HasSubstr("adminAccess")));
  EXPECT_THAT(result(R"(,"adminAccess":false)"), ::testing::HasSubstr(R"("adminAccess":false)"));
  EXPECT_THAT(result(R"(,"shareID":"")"), ::testing::HasSubstr(R"("shareID":"")"));
  EXPECT_THAT(result(R"(,"tolerations":[{"key":"k"}])"),
              ::testing::HasSubstr(R"("tolerations":[{"key":"k"}])"));
  EXPECT_THAT(result(R"(,"tolerations":[{"tolerationSeconds":0}])"),
              ::testing::HasSubstr(R"("tolerations":[{"tolerationSeconds":0}])"));
  // Empty lists with omitempty disappear, as Go writes them.
  EXPECT_THAT(result(R"(,"bindingConditions":[],"consumedCapacity":{})"),
              ::testing::Not(::testing::HasSubstr("binding")));
}

TEST(DecodePresenceTest, NodeSelectorAndConditionsKeepNullApartFromEmpty) {
  EXPECT_EQ(StatusOf(R"({"allocation":{"devices":{},"nodeSelector":{}}})"),
            R"({"allocation":{"devices":{},"nodeSelector":{"nodeSelectorTerms":null}}})");
  EXPECT_EQ(StatusOf(R"({"allocation":{"devices":{},"nodeSelector":{"nodeSelectorTerms":[]}}})"),
            R"({"allocation":{"devices":{},"nodeSelector":{"nodeSelectorTerms":[]}}})");
  const auto device = [](absl::string_view conditions) {
    return StatusOf(
        absl::StrCat(R"({"devices":[{"driver":"d","pool":"p","device":"x")", conditions, "}]}"));
  };
  EXPECT_THAT(device(""), ::testing::HasSubstr(R"("conditions":null)"));
  EXPECT_THAT(device(R"(,"conditions":[])"), ::testing::HasSubstr(R"("conditions":[])"));
  EXPECT_THAT(device(R"(,"networkData":{})"), ::testing::HasSubstr(R"("networkData":{})"));
}

TEST(DecodePresenceTest, TimesAreTruncatedToUtcSecondsAndGoZeroTimeIsNull) {
  const std::string out = RoundTrip(R"({"kind":"ResourceClaim","metadata":{"name":"c",
      "creationTimestamp":"0001-01-01T00:00:00Z","deletionTimestamp":"2026-01-02T03:04:05.678+01:00"},
      "status":{"allocation":{"devices":{},"allocationTimestamp":"2026-01-02T03:04:05.999999Z"}}})");
  EXPECT_THAT(out, ::testing::HasSubstr(
                       R"("creationTimestamp":null,"deletionTimestamp":"2026-01-02T02:04:05Z")"));
  EXPECT_THAT(out, ::testing::HasSubstr(R"("allocationTimestamp":"2026-01-02T03:04:05Z")"));
}

TEST(DecodePresenceTest, QuantitiesAreCanonicalAndMapKeysSorted) {
  const std::string out = StatusOf(
      R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x",
          "consumedCapacity":{"memory":"1024Mi","cores":1.5,"bw":" 2000 ","z<":"1Gi"}}]}}})");
  EXPECT_THAT(
      out, ::testing::HasSubstr(
               R"("consumedCapacity":{"bw":"2k","cores":"1500m","memory":"1Gi","z\u003c":"1Gi"})"));
}

TEST(DecodePresenceTest, RawExtensionsAreKeptCompactedAsWritten) {
  const std::string out = StatusOf(
      R"({"devices":[{"driver":"d","pool":"p","device":"x","data": { "b" : 1.50, "a" : [ 1e2 ], "h":"<>" } }]})");
  EXPECT_THAT(out, ::testing::HasSubstr(R"("data":{"b":1.50,"a":[1e2],"h":"\u003c\u003e"})"));
}

TEST(DecodePresenceTest, MetadataAndSpecKeepOnlyWhatTheStoreNeeds) {
  const std::string out =
      RoundTrip(R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1beta1",
      "metadata":{"name":"c","namespace":"ns","labels":{"a":"b"},"managedFields":[{"x":[1,{}]}],
                  "generation":3,"uid":"u","resourceVersion":"5"},
      "spec":{"devices":{"requests":[{"name":"gpu","deviceClassName":"x","selectors":[]},
                                     {"name":"any","firstAvailable":[{"name":"a","count":2},{"name":"b"}]}],
                         "constraints":[{"matchAttribute":"x"}]}},
      "status":{}})");
  EXPECT_EQ(
      out,
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"c",)"
      R"("namespace":"ns","uid":"u","resourceVersion":"5","generation":3,"creationTimestamp":null},)"
      R"("spec":{"devices":{"requests":[{"name":"gpu"},{"name":"any","firstAvailable":[{"name":"a"},)"
      R"({"name":"b"}]}]}},"status":{}})");
}

// --- Strict errors -------------------------------------------------------------

struct ErrorCase {
  std::string status;    // spliced into a claim's status
  std::string expected;  // substring of the error message
};

TEST(DecodeErrorsTest, BadStatusNamesTheFieldPath) {
  const std::string results =
      R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x",)";
  const ErrorCase cases[] = {
      {R"({"reservedFor":[{"uid":"a","resource":"pods","name":"p"},{"uid":7}]})",
       "status.reservedFor[1].uid: expected a string, got a number"},
      {R"({"reservedFor":[{"uid":"a","uid":"b"}]})",
       R"(status.reservedFor[0]: duplicate field "uid")"},
      {R"({"reservedFor":{"uid":"a"}})", "status.reservedFor: expected an array, got an object"},
      {R"({"bogus":1})", R"(status: unknown field "bogus")"},
      {R"({"Allocation":{}})", R"(status: unknown field "Allocation")"},  // case-sensitive
      {results + R"("adminAccess":"yes"}]}}})",
       "status.allocation.devices.results[0].adminAccess: expected a boolean, got a string"},
      {results + R"("consumedCapacity":{"memory":"16K"}}]}}})",
       "status.allocation.devices.results[0].consumedCapacity[memory]: unable to parse quantity's "
       "suffix"},
      {results + R"("consumedCapacity":{"memory":true}}]}}})",
       "consumedCapacity[memory]: expected a quantity string, got a boolean"},
      {results + R"("consumedCapacity":{"m":"1","m":"2"}}]}}})",
       R"(consumedCapacity: duplicate key "m")"},
      {results + R"("tolerations":[{"tolerationSeconds":1.5}]}]}}})",
       "results[0].tolerations[0].tolerationSeconds: expected an integer, got a fractional number"},
      {results + R"("tolerations":[{"tolerationSeconds":9223372036854775808}]}]}}})",
       "tolerations[0].tolerationSeconds: integer out of the int64 range"},
      {results + R"("bindingConditions":["a",1]}]}}})",
       "results[0].bindingConditions[1]: expected a string, got a number"},
      {R"({"allocation":{"devices":{},"allocationTimestamp":"yesterday"}})",
       R"(status.allocation.allocationTimestamp: invalid time "yesterday")"},
      {R"({"allocation":{"devices":{"config":[{"source":"FromClaim","opaque":{"driver":"d","parameters":{"a":01}}}]}}})",
       "status.allocation.devices.config[0].opaque.parameters: invalid JSON"},
      {R"({"devices":[{"driver":"d","networkData":{"ips":["10.0.0.1/8","::1/128",3]}}]})",
       "status.devices[0].networkData.ips[2]: expected a string, got a number"},
      {R"({"devices":[{"conditions":[{"type":"Ready","lastTransitionTime":5}]}]})",
       "status.devices[0].conditions[0].lastTransitionTime: expected a string, got a number"},
      {R"({"devices":[{"conditions":[{"observedGeneration":-9223372036854775809}]}]})",
       "status.devices[0].conditions[0].observedGeneration: integer out of the int64 range"},
      {R"({"allocation":{"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"values":"x"}]}]}}})",
       "status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].values: expected an "
       "array"},
  };
  for (const ErrorCase& c : cases) {
    EXPECT_THAT(DecodeClaim(ClaimWithStatus(c.status)),
                StatusIs(absl::StatusCode::kInvalidArgument, c.expected))
        << c.status;
  }
}

TEST(DecodeErrorsTest, BadMetadataAndSpec) {
  EXPECT_THAT(DecodeClaim(R"({"metadata":{"name":5},"status":{}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "metadata.name: expected a string"));
  EXPECT_THAT(
      DecodeClaim(R"({"metadata":{"generation":"7"},"status":{}})"),
      StatusIs(absl::StatusCode::kInvalidArgument, "metadata.generation: expected an integer"));
  EXPECT_THAT(DecodeClaim(R"({"metadata":{"name":"a","name":"b"},"status":{}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, R"(metadata: duplicate field "name")"));
  // Unknown metadata is read past, but must still be well-formed JSON.
  for (const char* bad :
       {R"({"a":01})", R"({"a":1,})", R"({"a" 1})", R"({"a":tru})", R"({"a":[1,]})",
        R"({"a":[1 2]})", R"({"\q":1})", R"({"a":"\x"})", R"({"a":-})", R"({"a":1.})"}) {
    EXPECT_THAT(DecodeClaim(absl::StrCat(R"({"metadata":{"labels":)", bad, R"(},"status":{}})")),
                StatusIs(absl::StatusCode::kInvalidArgument, "malformed JSON"))
        << bad;
  }
  // Deeper than the walk: checked by the compactor, still within the limit.
  const std::string deep = std::string(100, '[') + "1," + std::string(100, ']');
  EXPECT_THAT(DecodeClaim(absl::StrCat(R"({"metadata":{"labels":)", deep, R"(},"status":{}})")),
              StatusIs(absl::StatusCode::kInvalidArgument, "invalid JSON"));
  const std::string deep_ok = std::string(100, '[') + "1" + std::string(100, ']');
  EXPECT_THAT(DecodeClaim(absl::StrCat(R"({"metadata":{"labels":)", deep_ok, R"(},"status":{}})")),
              IsOk());
  EXPECT_THAT(DecodeClaim(R"({"spec":{"devices":{"requests":[{"name":["x"]}]}},"status":{}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "spec.devices.requests[0].name: expected a string, got an array"));
}

TEST(DecodeErrorsTest, MalformedJson) {
  const std::string claim = ClaimWithStatus(kAllocated);
  // Every truncation of a valid claim is an error, never a partial result.
  for (size_t n = 1; n < claim.size(); ++n) {
    EXPECT_FALSE(DecodeClaim(claim.substr(0, n)).ok()) << "truncated at " << n;
  }
  EXPECT_THAT(DecodeClaim(""), StatusIs(absl::StatusCode::kInvalidArgument, "no JSON value"));
  EXPECT_THAT(DecodeClaim("   \n"), StatusIs(absl::StatusCode::kInvalidArgument, "no JSON value"));
  EXPECT_THAT(DecodeClaim("[]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "expected a ResourceClaim object, a List or a watch event; found a JSON "
                       "array"));
  EXPECT_THAT(DecodeClaim("42"), StatusIs(absl::StatusCode::kInvalidArgument, "document 0"));
  EXPECT_THAT(DecodeClaim(R"({"status":{"reservedFor":[{"uid":"a"} {"uid":"b"}]}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "status.reservedFor"));
  EXPECT_THAT(DecodeClaim(R"({"status":{},})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "malformed"));
  EXPECT_THAT(DecodeClaim("{\"metadata\":{\"name\":\"a\xff\"}}"),
              StatusIs(absl::StatusCode::kInvalidArgument, "UTF-8"));
  EXPECT_THAT(DecodeClaim("{\"metadata\":{\"name\":\"a\x01\"}}"),
              StatusIs(absl::StatusCode::kInvalidArgument, "malformed JSON"));
  EXPECT_THAT(DecodeClaim(R"({"metadata":{"name":"a\q"}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "metadata.name: malformed JSON"));
}

// Issue 13, finding 8: invalid UTF-8 was reported at byte 0; it names the
// offset of the bad byte (and the list item, where it is in one), on both
// paths.
TEST(DecodeErrorsTest, InvalidUtf8NamesTheByte) {
  const std::string claim = "{\"metadata\":{\"name\":\"a\xff\"}}";  // 0xff at byte 22
  EXPECT_THAT(DecodeClaim(claim),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "line 1, column 23 (document 0, byte 22): malformed JSON: invalid UTF-8 "
                       "(byte 0xff begins no "
                       "character)"));
  const std::string good = ClaimWithStatus("{}");
  const std::string lines = absl::StrCat(good, "\n", good, "\n", claim, "\n");
  const std::string at_line =
      absl::StrCat("line 3, column 23 (document 2, byte ", 2 * (good.size() + 1) + 22, "): ");
  EXPECT_THAT(DecodeError(lines), StatusIs(absl::StatusCode::kInvalidArgument, at_line));
  EXPECT_EQ(internal::DecodeClaimsStreaming(lines, [](DecodedClaim) { return absl::OkStatus(); }),
            DecodeError(lines));
  const std::string list =
      absl::StrCat(R"({"kind":"List","apiVersion":"v1","items":[)", good, ",", claim, "]}");
  const size_t bad = list.find('\xff');
  EXPECT_THAT(DecodeError(list),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("line 1, column ", bad + 1, " (document 0, byte ", bad,
                                    "): items[1]: malformed JSON: invalid UTF-8")));
  EXPECT_EQ(internal::DecodeClaimsStreaming(list, [](DecodedClaim) { return absl::OkStatus(); }),
            DecodeError(list));
}

// Issue 41: what a refusal says is in the user's words, at a line and
// column: what was expected and what was found, never the parser's.
TEST(DecodeErrorsTest, ATopLevelValueThatIsNoObjectIsNamed) {
  const std::string expected = "expected a ResourceClaim object, a List or a watch event; found ";
  for (const auto& [input, found] : std::vector<std::pair<std::string, std::string>>{
           {"42", "a JSON number"},
           {"\"a claim\"", "a JSON string"},
           {"true", "a JSON boolean"},
           {"null", "null"},
           {"[{}]", "a JSON array"},
       }) {
    EXPECT_THAT(DecodeError(input),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         absl::StrCat("line 1, column 1 (document 0, byte 0): ", expected, found)))
        << input;
  }
  const std::string good = ClaimWithStatus("{}");
  EXPECT_THAT(DecodeError(absl::StrCat(good, "\n  [1]\n")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("line 2, column 3 (document 1, byte ", good.size() + 3,
                                    "): ", expected, "a JSON array")));
}

TEST(DecodeErrorsTest, PlainTextIsNotJsonInPlainWords) {
  for (const char* text : {"hello world\n", "claims:\n  - name: a\n", "- a\n"}) {
    const absl::Status s = DecodeError(text);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_TRUE(absl::StartsWith(s.message(), "line 1, column 1 (document 0, byte 0): ")) << s;
  }
}

TEST(DecodeErrorsTest, AUtf8ByteOrderMarkIsSkipped) {
  const std::string bom = "\xEF\xBB\xBF";
  const std::string claim = ClaimWithStatus("{}", "with-bom");
  absl::StatusOr<ClaimRecord> one = DecodeClaim(bom + claim);
  ASSERT_THAT(one, IsOk());
  EXPECT_EQ(one->name(), "with-bom");
  const std::string list =
      absl::StrCat(bom, R"({"kind":"List","apiVersion":"v1","items":[)", claim, ",", claim, "]}");
  int seen = 0;
  ASSERT_THAT(DecodeClaims(list,
                           [&](DecodedClaim) {
                             ++seen;
                             return absl::OkStatus();
                           }),
              IsOk());
  EXPECT_EQ(seen, 2);
  // Errors after it count its bytes, not its column.
  EXPECT_THAT(DecodeError(bom + "[]"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                "line 1, column 1 (document 0, byte 3)"));
}

TEST(DecodeErrorsTest, Utf16InputIsNamedAsSuch) {
  const std::string claim = ClaimWithStatus("{}");
  std::string le = "\xFF\xFE", be = "\xFE\xFF", le_no_bom;
  for (char c : claim) {
    le += {c, '\0'};
    be += {'\0', c};
    le_no_bom += {c, '\0'};
  }
  EXPECT_THAT(DecodeError(le), StatusIs(absl::StatusCode::kInvalidArgument,
                                        "the input is UTF-16 (little-endian); claims are read "
                                        "as UTF-8: convert it first, e.g. iconv -f UTF-16 -t "
                                        "UTF-8"));
  EXPECT_THAT(DecodeError(be),
              StatusIs(absl::StatusCode::kInvalidArgument, "the input is UTF-16 (big-endian)"));
  EXPECT_THAT(DecodeError(le_no_bom),
              StatusIs(absl::StatusCode::kInvalidArgument, "the input is UTF-16 (little-endian)"));
}

// No refusal of the decoder carries the parser's own wording (simdjson's
// messages name its API: "get_bool()", "tape", ...): every kind of broken
// input, on the whole-input and the piecewise paths.
TEST(DecodeErrorsTest, NoRefusalUsesTheParsersWords) {
  const std::string good = ClaimWithStatus("{}");
  const std::vector<std::string> inputs = {
      "42",
      "[1,2",
      "{",
      "}",
      "{\"metadata\":",
      R"({"metadata":{"name":"a})",
      R"({"metadata":{"name":"a"},})",
      R"({"metadata" {"name":"a"}})",
      "{\"metadata\":{\"name\":\"a\x01\"}}",
      R"({"metadata":{"name":"a\q"}})",
      R"({"metadata":{"generation":1.2.3}})",
      R"({"metadata":{"generation":tru}})",
      R"({"metadata":{"generation":nul}})",
      "hello",
      "{\"a\":1}}",
      good + "\n{",
      good + "\n42",
      good + " x",
      "{\"metadata\":{\"name\":\"a\xff\"}}",
      std::string(20000, '[') + std::string(20000, ']'),
      absl::StrCat(R"({"kind":"List","apiVersion":"v1","items":[)", good, " ", good, "]}"),
      absl::StrCat(R"({"kind":"List","apiVersion":"v1","items":[)", good, ",]}"),
      absl::StrCat(R"({"type":"ADDED","object":)", good),
  };
  std::vector<std::string> parser_words = {"simdjson", "get_", "tape", "TAPE", "SCALAR_DOCUMENT"};
  for (int code = 1; code < simdjson::NUM_ERROR_CODES; ++code) {
    parser_words.push_back(simdjson::error_message(static_cast<simdjson::error_code>(code)));
  }
  for (const std::string& input : inputs) {
    const absl::Status whole = DecodeError(input);
    const absl::Status piecewise =
        internal::DecodeClaimsStreaming(input, [](DecodedClaim) { return absl::OkStatus(); });
    for (const absl::Status& s : {whole, piecewise}) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << input.substr(0, 80) << ": " << s;
      for (const std::string& word : parser_words) {
        EXPECT_THAT(std::string(s.message()), ::testing::Not(::testing::HasSubstr(word)))
            << input.substr(0, 80);
      }
    }
  }
}

TEST(DecodeErrorsTest, JsonLinesErrorsNameTheDocumentAndOffset) {
  const std::string good = ClaimWithStatus("{}");
  const std::string lines =
      absl::StrCat(good, "\n", ClaimWithStatus(R"({"reservedFor":[{"uid":1}]})"), "\n");
  EXPECT_THAT(DecodeError(lines),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("line 2, column 1 (document 1, byte ", good.size() + 1,
                                    "): status.reservedFor[0].uid: expected a string")));
}

TEST(DecodeErrorsTest, NestingDeeperThanTenThousandLevelsIsRefused) {
  const auto with_data = [](int depth) {
    return ClaimWithStatus(
        absl::StrCat(R"({"devices":[{"driver":"d","pool":"p","device":"x","data":)",
                     std::string(depth, '['), std::string(depth, ']'), "}]}"));
  };
  // data sits 4 levels deep (root, status, devices, devices[0]).
  EXPECT_THAT(DecodeClaim(with_data(9996)), IsOk());
  EXPECT_THAT(DecodeClaim(with_data(9997)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "status.devices[0].data: invalid JSON at byte 9996: nesting deeper"));
  EXPECT_FALSE(DecodeClaim(with_data(200000)).ok());
}

}  // namespace
}  // namespace claimstore
