// Large inputs are decoded a piece at a time; the result must not depend on
// which path an input takes.
#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "codec/codec_internal.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

struct Outcome {
  std::vector<std::string> claims;  // record bytes, event, document, item
  std::string error;
};

template <typename Decode>
Outcome Run(const std::string& input, Decode&& decode) {
  Outcome out;
  absl::Status s = decode(input, [&](DecodedClaim c) {
    out.claims.push_back(absl::StrCat(c.record.bytes(), "|", static_cast<int>(c.event), "|",
                                      c.document, "|", c.item));
    return absl::OkStatus();
  });
  if (!s.ok()) out.error = s.ToString();
  return out;
}

// Same claims and same error; with `prefix_only`, the piecewise path may stop
// earlier (it checks a list's kind before its items), so its claims need only
// be a prefix of the whole-document path's.
void ExpectSamePaths(const std::string& input, bool prefix_only = false) {
  const Outcome whole =
      Run(input, [](absl::string_view in, auto sink) { return DecodeClaims(in, sink); });
  const Outcome pieces = Run(input, [](absl::string_view in, auto sink) {
    return internal::DecodeClaimsStreaming(in, sink);
  });
  if (prefix_only) {
    ASSERT_LE(pieces.claims.size(), whole.claims.size());
    EXPECT_TRUE(std::equal(pieces.claims.begin(), pieces.claims.end(), whole.claims.begin()));
  } else {
    EXPECT_EQ(pieces.claims, whole.claims) << input.substr(0, 200);
  }
  EXPECT_EQ(pieces.error, whole.error) << input.substr(0, 200);
}

std::string ApiList(int n, int skip = -1, const std::string& bad_item = "") {
  std::string out =
      R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1","metadata":{"resourceVersion":"9"},"items":[)";
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += ",\n  ";
    out += i == skip ? bad_item : GenerateClaimJson(i);
  }
  return out + "]}";
}

TEST(CodecStreamTest, EveryInputFormGivesTheSameClaims) {
  ExpectSamePaths(ApiList(40));
  ExpectSamePaths(ApiList(0));
  // kubectl's List: items first, kind after them.
  std::string kubectl = R"({"apiVersion":"v1","items":[)";
  for (int i = 0; i < 10; ++i) kubectl += (i ? "," : "") + GenerateClaimJson(i);
  ExpectSamePaths(kubectl + R"(],"kind":"List","metadata":{"resourceVersion":""}})");
  std::string lines;
  for (int i = 0; i < 25; ++i) lines += GenerateClaimJson(i) + "\n";
  ExpectSamePaths(lines);
  std::string events;
  for (int i = 0; i < 5; ++i) {
    events += absl::StrCat(R"({"type":")", i % 2 ? "MODIFIED" : "ADDED", R"(","object":)",
                           GenerateClaimJson(i), "}\n");
  }
  events +=
      R"({"type":"BOOKMARK","object":{"kind":"ResourceClaim","metadata":{"resourceVersion":"5"}}})";
  ExpectSamePaths(events);
  ExpectSamePaths(GenerateClaimJson(3));
  // Strings holding brackets and escaped quotes do not confuse the scanner.
  ExpectSamePaths(
      R"({"metadata":{"name":"a]}\"[{","namespace":"n","labels":{"x":"}}]]\\"}},"status":{}})");
}

// The scanner reads 64 bytes at a time: brackets, quotes and escapes at
// every offset of a block, and across its edges, must cut where the
// whole-input path reads.
TEST(CodecStreamTest, EscapesAndBracketsAtEveryOffsetOfABlock) {
  const std::vector<std::string> tricky = {R"(\")",   R"(\\)",     R"(\\\")",
                                           R"(]}{[)", R"(\"}]\\)", R"(\u005c)"};
  std::string lines;
  for (int pad = 0; pad < 70; ++pad) {
    for (const std::string& t : tricky) {
      const std::string value = std::string(pad, 'x') + t + std::string(pad % 7, 'y');
      lines +=
          absl::StrCat(R"({"metadata":{"name":"c)", pad, R"(","namespace":"n","labels":{"k":")",
                       value, R"("}},"status":{}})", std::string(pad % 3, ' '), "\n");
    }
  }
  ExpectSamePaths(lines);
  const Outcome pieces = claimstore::Run(lines, [](absl::string_view in, auto sink) {
    return internal::DecodeClaimsStreaming(in, sink);
  });
  EXPECT_EQ(pieces.claims.size(), 70 * tricky.size()) << pieces.error;
  // A string left open at any offset is a truncated input, not a hang.
  for (int pad = 0; pad < 70; ++pad) {
    ExpectSamePaths(absl::StrCat(R"({"metadata":{"name":")", std::string(pad, 'x'), R"(\")"));
  }
}

TEST(CodecStreamTest, ErrorsAreTheSameWhicheverThePath) {
  ExpectSamePaths(
      ApiList(5, 3, R"({"metadata":{"name":"x"},"status":{"reservedFor":[{"uid":7}]}})"));
  ExpectSamePaths(ApiList(5, 2, "null"));
  ExpectSamePaths(
      absl::StrCat(R"({"kind":"PodList","apiVersion":"v1","items":[)", GenerateClaimJson(1), "]}"),
      /*prefix_only=*/true);
  ExpectSamePaths(ApiList(4, 1, "42"));
  ExpectSamePaths(GenerateClaimJson(1) + "\n" + R"({"status":{"bogus":1}})");
  ExpectSamePaths(R"({"type":"ERROR","object":{"kind":"Status","code":410}})");
  ExpectSamePaths("");
  ExpectSamePaths("  \n");
}

// Found by fuzz_restore: a stray separator or control character where a
// value should start made the piecewise path read an empty piece (and, in a
// release build, loop forever on it).
TEST(CodecStreamTest, StraySeparatorsAreErrorsNotHangs) {
  const std::string claim = GenerateClaimJson(1);
  for (const std::string& input : std::vector<std::string>{
           claim + " ,", claim + "\n]", "}" + claim, claim + "\f" + claim, std::string("\v"),
           ApiList(2) + ",",
           R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1","items":[,]})"}) {
    const absl::Status s =
        internal::DecodeClaimsStreaming(input, [](DecodedClaim) { return absl::OkStatus(); });
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s << " for " << input.substr(0, 40);
    EXPECT_THAT(s.message(), ::testing::HasSubstr("malformed JSON")) << s;
    EXPECT_FALSE(DecodeClaims(input, [](DecodedClaim) { return absl::OkStatus(); }).ok()) << input;
  }
}

// Found by fuzz_restore in CI: the piecewise path took list items followed
// by a trailing ',' or by another item without a ',' between them, which the
// whole-document path refuses.
TEST(CodecStreamTest, ItemsNeedACommaBetweenThemAndNoneAfterTheLast) {
  const std::string head =
      R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1","items":[)";
  const std::string a = GenerateClaimJson(1), b = GenerateClaimJson(2);
  for (const std::string& input : std::vector<std::string>{
           head + a + ",]}", head + a + " , \n]}", head + a + " " + b + "]}", head + a + b + "]}",
           head + a + "," + b + ",]}", head + "{} {}]}", head + a + ",," + b + "]}"}) {
    const absl::Status s =
        internal::DecodeClaimsStreaming(input, [](DecodedClaim) { return absl::OkStatus(); });
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s << " for " << input;
    EXPECT_THAT(s.message(), ::testing::HasSubstr("malformed JSON")) << s;
    EXPECT_FALSE(DecodeClaims(input, [](DecodedClaim) { return absl::OkStatus(); }).ok()) << input;
  }
  // Where the item was missing its ',' the error names it and the byte.
  const std::string input = head + a + " " + b + "]}";
  EXPECT_EQ(internal::DecodeClaimsStreaming(input, [](DecodedClaim) { return absl::OkStatus(); })
                .message(),
            absl::StrCat("line 1, column ", head.size() + a.size() + 2, " (document 0, byte ",
                         head.size() + a.size() + 1,
                         "): malformed JSON: items[0]: expected ',' or ']' after it"));
  // Space and newlines around the separators are fine on both paths.
  ExpectSamePaths(head + " " + a + " ,\n " + b + " \n]}");
}

// Found by fuzz_restore: simdjson reported a syntax error in any document of
// a stream at document 0; both paths now name the document that has it.
TEST(CodecStreamTest, SyntaxErrorsNameTheirDocument) {
  const std::string bad = std::string(R"({"object":{"metadata":{"na)") + '\x1f' +
                          R"(e":"a"},"status":{}},"type":"DELETED"})";
  const std::string input =
      R"({"type":"ADDED","object":{"metadata":{"name":"a","namespace":"b"},"status":{}}})"
      "\n" +
      bad;
  const absl::Status s = DecodeClaims(input, [](DecodedClaim) { return absl::OkStatus(); });
  EXPECT_TRUE(absl::StartsWith(s.message(), "line 2, column 1 (document 1, byte 80): ")) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("malformed JSON")) << s;
  // The same error on the piecewise path (which has passed document 0 on to
  // its sink first: claims before an error may differ, the error may not).
  EXPECT_EQ(internal::DecodeClaimsStreaming(input, [](DecodedClaim) { return absl::OkStatus(); }),
            s);
}

// Found by fuzz_restore: a raw value (runtime.RawExtension) given as a scalar
// was left unconsumed, and simdjson skipped it without checking what followed.
TEST(CodecStreamTest, ScalarRawValuesAreFollowedByValidJson) {
  for (const std::string input :
       {R"({"status":{"devices":[{"data":"":}}]}})", R"({"status":{"devices":[{"data":12 "x"}]}})",
        R"({"status":{"devices":[{"data":true:}]}})"}) {
    EXPECT_EQ(DecodeClaims(input, [](DecodedClaim) { return absl::OkStatus(); }).code(),
              absl::StatusCode::kInvalidArgument)
        << input;
    ExpectSamePaths(input);
  }
  // A scalar raw value that is well-formed still decodes.
  EXPECT_TRUE(
      DecodeClaim(
          R"({"metadata":{"name":"a","namespace":"b"},"status":{"devices":[{"driver":"d","pool":"p","device":"x","data":"text"}]}})")
          .ok());
}

// Found by fuzz_decode: a sink that decodes again (a natural thing to do)
// reused the thread's parser and input buffer while the outer decode was
// still reading them: wrong claims, or a use after free.
TEST(CodecStreamTest, ASinkMayDecodeAgain) {
  std::string list = ApiList(3);
  std::string jsonl = GenerateClaimJson(0) + "\n" + GenerateClaimJson(1);
  std::string watch = R"({"type":"ADDED","object":)" + GenerateClaimJson(2) + "}\n" +
                      R"({"type":"MODIFIED","object":)" + GenerateClaimJson(3) + "}";
  for (const std::string& input : {list, jsonl, watch}) {
    std::vector<std::string> plain, nested;
    ASSERT_TRUE(DecodeClaims(input, [&](DecodedClaim c) {
                  plain.emplace_back(c.record.bytes());
                  return absl::OkStatus();
                }).ok());
    // A much larger inner input, so the inner decode must grow its buffer.
    const std::string big = ApiList(40);
    absl::Status s = DecodeClaims(input, [&](DecodedClaim c) {
      absl::StatusOr<ClaimRecord> again = DecodeClaim(EncodeClaim(c.record));
      if (!again.ok()) return again.status();
      int inner = 0;
      absl::Status t = DecodeClaims(big, [&](DecodedClaim) {
        ++inner;
        return absl::OkStatus();
      });
      if (!t.ok()) return t;
      EXPECT_EQ(inner, 40);
      nested.emplace_back(again->bytes());
      return absl::OkStatus();
    });
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(nested, plain);
  }
}

TEST(CodecStreamTest, TruncatedInputIsAnErrorOnBothPaths) {
  const std::string list = ApiList(3);
  for (size_t cut : {list.size() - 1, list.size() / 2, size_t{10}}) {
    EXPECT_FALSE(internal::DecodeClaimsStreaming(list.substr(0, cut),
                                                 [](DecodedClaim) { return absl::OkStatus(); })
                     .ok())
        << cut;
    EXPECT_FALSE(
        DecodeClaims(list.substr(0, cut), [](DecodedClaim) { return absl::OkStatus(); }).ok())
        << cut;
  }
}

TEST(CodecStreamTest, LargeInputsTakeThePiecewisePath) {
  // Over the threshold: a list of ~17 MB decodes, claim by claim.
  std::string big = R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1","items":[)";
  int n = 0;
  while (big.size() <= internal::kStreamingThreshold) {
    big += (n ? "," : "") + GenerateClaimJson(n);
    ++n;
  }
  big += "]}";
  int seen = 0;
  ASSERT_TRUE(DecodeClaims(big, [&](DecodedClaim c) {
                EXPECT_EQ(c.item, seen++);
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(seen, n);
}

}  // namespace
}  // namespace claimstore

namespace claimstore {
namespace {

// DecodeClaimsConcurrently hands over the claims DecodeClaims does, each
// once, with ordinals in input order, and returns the error DecodeClaims
// returns (the first in input order), whatever the threads do.
struct Seen {
  std::mutex mu;
  std::vector<std::pair<uint64_t, std::string>> claims;  // ordinal, name
};

absl::Status Concurrently(const std::string& input, int threads, Seen* seen) {
  return DecodeClaimsConcurrently(input, threads, [&](DecodedClaim c) {
    std::lock_guard<std::mutex> lock(seen->mu);
    seen->claims.emplace_back(
        c.ordinal, absl::StrCat(c.record.claim_namespace(), "/", c.record.name(), " ", c.document,
                                " ", c.item, " ", static_cast<int>(c.event)));
    return absl::OkStatus();
  });
}

std::string BigJsonLines(size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) absl::StrAppend(&out, GenerateClaimJson(i, 5), "\n");
  return out;
}

TEST(DecodeConcurrentlyTest, TheSameClaimsInInputOrder) {
  const std::string lines = BigJsonLines(3000);  // over 1 MiB: cut and decoded concurrently
  ASSERT_GT(lines.size(), size_t{1} << 20);
  std::string list = R"({"kind":"List","apiVersion":"v1","items":[)";
  for (size_t i = 0; i < 3000; ++i)
    absl::StrAppend(&list, i > 0 ? "," : "", GenerateClaimJson(i, 6));
  list += "]}";
  for (const std::string* input : std::vector<const std::string*>{&lines, &list}) {
    std::vector<std::string> want;
    ASSERT_THAT(DecodeClaims(*input,
                             [&](DecodedClaim c) {
                               want.push_back(absl::StrCat(c.record.claim_namespace(), "/",
                                                           c.record.name(), " ", c.document, " ",
                                                           c.item, " ", static_cast<int>(c.event)));
                               return absl::OkStatus();
                             }),
                testing::IsOk());
    Seen seen;
    ASSERT_THAT(Concurrently(*input, 2, &seen), testing::IsOk());
    std::sort(seen.claims.begin(), seen.claims.end());
    std::vector<std::string> got;
    for (size_t i = 0; i < seen.claims.size(); ++i) {
      if (i > 0) {
        EXPECT_LT(seen.claims[i - 1].first, seen.claims[i].first);  // one ordinal each
      }
      got.push_back(seen.claims[i].second);
    }
    EXPECT_EQ(got, want);
  }
}

TEST(DecodeConcurrentlyTest, TheFirstErrorInInputOrder) {
  std::string lines = BigJsonLines(3000);
  // A bad claim early, a syntax error late: the early one is reported, as
  // DecodeClaims reports it.
  const size_t at = lines.find("\n", lines.size() / 10) + 1;
  lines.insert(at, R"({"metadata":{"name":"x","namespace":"y"},"status":{"reservedFor":7}})"
                   "\n");
  lines += "{\"broken\":\n";
  const absl::Status want = DecodeClaims(lines, [](DecodedClaim) { return absl::OkStatus(); });
  ASSERT_FALSE(want.ok());
  EXPECT_THAT(want.message(), ::testing::HasSubstr("status.reservedFor"));
  for (int round = 0; round < 5; ++round) {
    Seen seen;
    EXPECT_EQ(Concurrently(lines, 2, &seen), want);
  }
  // A sink's error stops it too, the first in input order.
  const absl::Status sink_error =
      DecodeClaimsConcurrently(BigJsonLines(3000), 2, [](DecodedClaim c) {
        return c.record.name() == "claim-100" || c.record.name() == "claim-2900"
                   ? absl::FailedPreconditionError(absl::StrCat("refused ", c.record.name()))
                   : absl::OkStatus();
      });
  EXPECT_THAT(sink_error.message(), ::testing::HasSubstr("refused claim-100"));
}

}  // namespace
}  // namespace claimstore
