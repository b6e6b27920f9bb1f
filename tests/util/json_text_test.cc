#include "util/json_text.h"

#include "testutil/test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::IsOk;
using ::claimstore::testing::StatusIs;

std::string GoString(absl::string_view s) {
  std::string out;
  AppendGoJsonString(s, &out);
  return out;
}

TEST(AppendGoJsonStringTest, EscapesLikeGoEncodingJson) {
  EXPECT_EQ(GoString("plain"), R"("plain")");
  EXPECT_EQ(GoString("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(GoString("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(GoString(absl::string_view("\x01\x1f\0", 3)), R"("\u0001\u001f\u0000")");
  EXPECT_EQ(GoString("<a href=\"x\">&</a>"), R"("\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e")");
  EXPECT_EQ(GoString("line\xE2\x80\xA8para\xE2\x80\xA9"), R"("line\u2028para\u2029")");
  EXPECT_EQ(GoString("caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80"),
            "\"caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80\"");
  EXPECT_EQ(GoString("/"), R"("/")");
  EXPECT_EQ(GoString("\x7f"), "\"\x7f\"");
}

TEST(AppendGoJsonStringTest, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(GoString("a\xff"
                     "b"),
            R"("a\ufffdb")");
  EXPECT_EQ(GoString("\xC3"), R"("\ufffd")");                      // truncated sequence
  EXPECT_EQ(GoString("\xED\xA0\x80"), R"("\ufffd\ufffd\ufffd")");  // surrogate
  EXPECT_EQ(GoString("\xC0\x80"), R"("\ufffd\ufffd")");            // overlong
}

std::string Compact(absl::string_view in) {
  std::string out;
  absl::Status s = CompactJson(in, &out);
  return s.ok() ? out : "error: " + std::string(s.message());
}

TEST(CompactJsonTest, RemovesWhitespaceAndKeepsEverythingElse) {
  EXPECT_EQ(Compact(" { \"b\" : 1.50 ,\n\t\"a\" : [ 1e2 , -0 , true , null ] } "),
            R"({"b":1.50,"a":[1e2,-0,true,null]})");
  // Key order and duplicate keys are kept, as Go's RawMessage does.
  EXPECT_EQ(Compact(R"({"z":1,"a":2,"z":3})"), R"({"z":1,"a":2,"z":3})");
  // Escapes already in the input are kept; HTML characters are escaped.
  EXPECT_EQ(Compact(R"(["\/\n\u00e9", "<&>"])"), R"(["\/\n\u00e9","\u003c\u0026\u003e"])");
  EXPECT_EQ(Compact("\"\xE2\x80\xA8\""), R"("\u2028")");
  EXPECT_EQ(Compact("{}"), "{}");
  EXPECT_EQ(Compact("[ ]"), "[]");
  EXPECT_EQ(Compact("\"s\""), "\"s\"");
  EXPECT_EQ(Compact("0"), "0");
}

TEST(CompactJsonTest, RejectsMalformedJsonWithByteOffset) {
  const struct {
    const char* in;
    const char* error;
  } cases[] = {
      {"", "at byte 0: unexpected end of input"},
      {"{", "at byte 1: unexpected end of input"},
      {"{\"a\" 1}", "at byte 5: expected ':'"},
      {"{\"a\":1,}", "at byte 7: expected a string key"},
      {"[1,]", "at byte 3: invalid character"},
      {"[1 2]", "at byte 3: expected ',' or ']'"},
      {"\"abc", "unterminated string"},
      {"\"\\x\"", "invalid escape"},
      {"\"\\u12g4\"", "invalid \\u escape"},
      {"\"a\nb\"", "control character"},
      {"01", "at byte 1: unexpected content after the JSON value"},
      {"1.", "no digits after '.'"},
      {".5", "invalid character"},
      {"-", "invalid number"},
      {"1e", "no digits in exponent"},
      {"tru", "invalid character"},
      {"\"\xff\"", "invalid UTF-8"},
      {"{} {}", "unexpected content after the JSON value"},
      {"{1:2}", "expected a string key"},
  };
  for (const auto& c : cases) {
    EXPECT_THAT(CompactJson(c.in, nullptr), StatusIs(absl::StatusCode::kInvalidArgument, c.error))
        << "input: " << c.in;
  }
}

TEST(CompactJsonTest, NestingLimitIsTenThousandLevels) {
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_THAT(CompactJson(ok, nullptr), IsOk());
  const std::string deep =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_THAT(CompactJson(deep, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "nesting deeper than 10000"));
  // Deep input does not exhaust the stack: the checker is iterative.
  const std::string very_deep(1 << 20, '[');
  EXPECT_THAT(CompactJson(very_deep, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "nesting"));
}

TEST(IndentJsonTest, MatchesGoMarshalIndent) {
  std::string out;
  IndentJson(R"({"a":{},"b":[],"c":[1,{"d":"x:y,z"}],"e":"q\"}"})", "  ", &out);
  EXPECT_EQ(out,
            "{\n"
            "  \"a\": {},\n"
            "  \"b\": [],\n"
            "  \"c\": [\n"
            "    1,\n"
            "    {\n"
            "      \"d\": \"x:y,z\"\n"
            "    }\n"
            "  ],\n"
            "  \"e\": \"q\\\"}\"\n"
            "}");
}

}  // namespace
}  // namespace claimstore::internal
