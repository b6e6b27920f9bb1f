#include "k8s/rfc3339.h"

#include "testutil/test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::StatusIs;

std::string RoundTrip(absl::string_view in) {
  absl::StatusOr<int64_t> t = ParseRfc3339(in);
  if (!t.ok()) return std::string(t.status().message());
  std::string out;
  AppendRfc3339(*t, &out);
  return out;
}

TEST(Rfc3339Test, ParsesToUnixSeconds) {
  EXPECT_EQ(*ParseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*ParseRfc3339("2008-01-01T01:01:01Z"), 1199149261);
  EXPECT_EQ(*ParseRfc3339("0001-01-01T00:00:00Z"), kGoZeroTimeUnixSeconds);
  EXPECT_EQ(*ParseRfc3339("2000-02-29T12:00:00+02:00"), 951818400);
}

TEST(Rfc3339Test, WritesUtcSecondsTruncatingFractions) {
  EXPECT_EQ(RoundTrip("2008-01-01T01:01:01Z"), "2008-01-01T01:01:01Z");
  EXPECT_EQ(RoundTrip("2008-01-01T01:01:01.999999999Z"), "2008-01-01T01:01:01Z");
  EXPECT_EQ(RoundTrip("2008-01-01T03:31:01+02:30"), "2008-01-01T01:01:01Z");
  EXPECT_EQ(RoundTrip("2007-12-31T20:01:01-05:00"), "2008-01-01T01:01:01Z");
  EXPECT_EQ(RoundTrip("1969-12-31T23:59:59.5Z"), "1969-12-31T23:59:59Z");
  EXPECT_EQ(RoundTrip("0000-01-01T00:00:00Z"), "0000-01-01T00:00:00Z");
  EXPECT_EQ(RoundTrip("9999-12-31T23:59:59Z"), "9999-12-31T23:59:59Z");
  EXPECT_EQ(RoundTrip("2024-02-29T00:00:00Z"), "2024-02-29T00:00:00Z");
}

TEST(Rfc3339Test, RejectsWhatGoRejects) {
  for (const char* bad :
       {"", "2008-01-01", "2008-01-01T01:01:01", "2008-01-01 01:01:01Z", "2008-1-01T01:01:01Z",
        "2008-01-01T01:01:01.Z", "2008-01-01T01:01:01+0100", "2008-01-01T01:01:01Zjunk",
        "2008-01-01t01:01:01z"}) {
    EXPECT_THAT(ParseRfc3339(bad), StatusIs(absl::StatusCode::kInvalidArgument, "RFC 3339")) << bad;
  }
  for (const char* bad : {"2008-13-01T01:01:01Z", "2008-02-30T01:01:01Z", "2023-02-29T00:00:00Z",
                          "2008-01-01T24:00:00Z", "2008-01-01T01:60:00Z", "2008-01-01T01:01:60Z"}) {
    EXPECT_THAT(ParseRfc3339(bad), StatusIs(absl::StatusCode::kInvalidArgument, "out of range"))
        << bad;
  }
  EXPECT_THAT(ParseRfc3339("9999-12-31T23:00:00-05:00"),
              StatusIs(absl::StatusCode::kInvalidArgument, "year outside of range"));
  EXPECT_THAT(ParseRfc3339("0000-01-01T00:00:00+01:00"),
              StatusIs(absl::StatusCode::kInvalidArgument, "year outside of range"));
}

}  // namespace
}  // namespace claimstore::internal
