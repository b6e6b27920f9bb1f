// The generic JSON reader (json_reader.h) on its own: paths in errors,
// strict and lenient objects, scalars as Go's decoder reads them.
#include "codec/json_reader.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "testutil/test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::IsOk;
using ::claimstore::testing::StatusIs;

// Parses `json` and runs `read` on its root value.
template <typename Read>
absl::Status OnRoot(const std::string& json, Read read) {
  od::parser parser;
  simdjson::padded_string padded(json);
  od::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return absl::InternalError("iterate");
  od::value root;
  if (doc.get_value().get(root) != simdjson::SUCCESS) return absl::InternalError("root");
  JsonReader reader;
  return read(reader, root);
}

constexpr FieldNames<2> kNames = {"a", "b"};

TEST(JsonReaderTest, ObjectsCallBackByNameAndNameThePathInErrors) {
  int64_t a = 0;
  EXPECT_THAT(OnRoot(R"({"a": 5, "b": {"c": 1}})",
                     [&](JsonReader& r, od::value& v) {
                       return r.ReadObject(
                           v, kNames, Unknown::kError, [&](size_t i, od::value& f) -> absl::Status {
                             if (i == 0) return r.ReadInt64(f, &a);
                             return r.ReadObject(
                                 f, FieldNames<1>{"d"}, Unknown::kError,
                                 [](size_t, od::value&) { return absl::OkStatus(); });
                           });
                     }),
              StatusIs(absl::StatusCode::kInvalidArgument, "b: unknown field \"c\""));
  EXPECT_EQ(a, 5);
}

TEST(JsonReaderTest, LenientObjectsReadPastUnknownMembersButCheckThem) {
  const auto lenient = [](JsonReader& r, od::value& v) {
    return r.ReadObject(v, kNames, Unknown::kSkip,
                        [](size_t, od::value&) { return absl::OkStatus(); });
  };
  EXPECT_THAT(OnRoot(R"({"x": [1, {"y": null}], "a": 1})", lenient), IsOk());
  EXPECT_THAT(OnRoot(R"({"x": [1, tru]})", lenient),
              StatusIs(absl::StatusCode::kInvalidArgument, "malformed JSON"));
}

TEST(JsonReaderTest, DuplicateMembersAreRefused) {
  EXPECT_THAT(OnRoot(R"({"a": 1, "a": 2})",
                     [](JsonReader& r, od::value& v) {
                       return r.ReadObject(v, kNames, Unknown::kError,
                                           [](size_t, od::value&) { return absl::OkStatus(); });
                     }),
              StatusIs(absl::StatusCode::kInvalidArgument, "duplicate field \"a\""));
}

TEST(JsonReaderTest, IntegersAsGosDecoderReadsThem) {
  // The value as member "a" (simdjson reads a scalar document otherwise).
  const auto int64 = [](const std::string& json) {
    return OnRoot(absl::StrCat(R"({"a":)", json, "}"), [](JsonReader& r, od::value& v) {
      return r.ReadObject(v, kNames, Unknown::kError, [&](size_t, od::value& f) {
        int64_t out = 0;
        return r.ReadInt64(f, &out);
      });
    });
  };
  EXPECT_THAT(int64("9223372036854775807"), IsOk());
  EXPECT_THAT(int64("9223372036854775808"),
              StatusIs(absl::StatusCode::kInvalidArgument, "a: integer out of the int64 range"));
  EXPECT_THAT(int64("1.5"), StatusIs(absl::StatusCode::kInvalidArgument,
                                     "a: expected an integer, got a fractional number"));
  EXPECT_THAT(int64("\"1\""),
              StatusIs(absl::StatusCode::kInvalidArgument, "a: expected an integer, got a string"));
  EXPECT_THAT(int64("null"), IsOk());  // absent
}

TEST(JsonReaderTest, ArrayElementsAreNamedByIndex) {
  EXPECT_THAT(
      OnRoot(R"([true, "x"])",
             [](JsonReader& r, od::value& v) {
               bool present = false;
               return r.ReadArray(v, &present, [&](od::value& e) {
                 std::optional<bool> b;
                 return r.ReadOptionalBool(e, &b);
               });
             }),
      StatusIs(absl::StatusCode::kInvalidArgument, "[1]: expected a boolean, got a string"));
}

}  // namespace
}  // namespace claimstore::internal
