#include "k8s/quantity.h"

#include "testutil/test_util.h"

namespace claimstore::internal {
namespace {

using ::claimstore::testing::StatusIs;

std::string Canonical(absl::string_view in) {
  absl::StatusOr<Quantity> q = Quantity::Parse(in);
  EXPECT_TRUE(q.ok()) << in << ": " << q.status();
  return q.ok() ? q->ToString() : "<error>";
}

struct Case {
  const char* in;
  const char* out;
};

TEST(QuantityTest, CanonicalFormMatchesKubernetes) {
  // apimachinery's ParseQuantity (docs/validation-rules.md), plus the cases each branch takes.
  const Case cases[] = {
      {"1.5", "1500m"},
      {"0.1", "100m"},
      {"1000", "1k"},
      {"1000m", "1"},
      {"5000000000", "5G"},
      {"2048", "2048"},
      {"1024Mi", "1Gi"},
      {"8192Mi", "8Gi"},
      {"1.5Gi", "1536Mi"},
      {"0.5Gi", "512Mi"},
      {"12e6", "12e6"},
      {"0Gi", "0"},
      {"0.1Ki", "102400m"},
      {"0", "0"},
      {"00", "0"},
      {"-0", "0"},
      {"0.0", "0"},
      {"100m", "100m"},
      {"1e3", "1e3"},
      {"1.5e3", "1500"},
      {"1E3", "1E3"},
      {"100Ki", "100Ki"},
      {"1024Ki", "1Mi"},
      {"8Ki", "8Ki"},
      {"-1.5", "-1500m"},
      {"1n", "1n"},
      {"0.5n", "1n"},
      {"1.0000000001", "1000000001n"},
      {"-0.5n", "-1n"},
      {"1u", "1u"},
      {"1500u", "1500u"},
      {"1000000u", "1"},
      {"10Ti", "10Ti"},
      {"1Ei", "1Ei"},
      {"9Ei", "9223372036854775807"},
      {"1023", "1023"},
      {"1.", "1."},
      {".5", "500m"},
      {".", "0"},
      {"Ki", "0"},
      {"1.G", "1.G"},
      {"123456789012345678901", "123456789012345678901"},
      {"1e-3", "1e-3"},
      {"1e-12", "1e-9"},
      {"12e-4", "1200e-6"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Canonical(c.in), c.out) << "input " << c.in;
  }
}

TEST(QuantityTest, FastPathKeepsInputItJudgesCanonical) {
  // apimachinery's fast path re-emits these verbatim (a quirk kept on purpose).
  EXPECT_EQ(Canonical("+1Gi"), "+1Gi");
  EXPECT_EQ(Canonical("01Gi"), "01Gi");
  EXPECT_EQ(Canonical("05"), "05");
  EXPECT_EQ(Canonical("+5"), "+5");
  // ... but not inputs that end in 000 or start with 0 after the shift.
  EXPECT_EQ(Canonical("+1000"), "1k");
  EXPECT_EQ(Canonical("0.5"), "500m");
}

TEST(QuantityTest, DecimalSIBeyondExaPrintsWithoutSuffixLikeKubernetes) {
  // apimachinery finds no suffix for 10^21 and writes the bare mantissa.
  EXPECT_EQ(Canonical("1000E"), "1");
  EXPECT_EQ(Canonical("2000000000000000000000"), "2");
}

TEST(QuantityTest, MalformedQuantitiesGiveApimachineryMessages) {
  EXPECT_THAT(Quantity::Parse(""),
              StatusIs(absl::StatusCode::kInvalidArgument, "regular expression"));
  EXPECT_THAT(Quantity::Parse("abc"),
              StatusIs(absl::StatusCode::kInvalidArgument, "regular expression"));
  EXPECT_THAT(Quantity::Parse("1.2.3"),
              StatusIs(absl::StatusCode::kInvalidArgument, "regular expression"));
  // 'B' is no suffix character, so the scanner (and the regular expression)
  // rejects "16GB" before any suffix lookup.
  EXPECT_THAT(Quantity::Parse("16GB"),
              StatusIs(absl::StatusCode::kInvalidArgument, "regular expression"));
  EXPECT_THAT(Quantity::Parse("16Gb"),
              StatusIs(absl::StatusCode::kInvalidArgument, "regular expression"));
  EXPECT_THAT(Quantity::Parse("1ki"), StatusIs(absl::StatusCode::kInvalidArgument, "suffix"));
  EXPECT_THAT(Quantity::Parse("1K"), StatusIs(absl::StatusCode::kInvalidArgument, "suffix"));
  EXPECT_THAT(Quantity::Parse("1e"), StatusIs(absl::StatusCode::kInvalidArgument, "suffix"));
  EXPECT_THAT(Quantity::Parse("1e99999999999999999999"),
              StatusIs(absl::StatusCode::kInvalidArgument, "suffix"));
  EXPECT_THAT(Quantity::Parse(" 1"),
              StatusIs(absl::StatusCode::kInvalidArgument, "regular expression"));
}

TEST(QuantityTest, JsonTokensFollowUnmarshalJSON) {
  const auto json = [](absl::string_view token) {
    absl::StatusOr<Quantity> q = Quantity::ParseJsonToken(token);
    return q.ok() ? q->ToString() : std::string(q.status().message());
  };
  EXPECT_EQ(json("\"1Gi\""), "1Gi");
  EXPECT_EQ(json("\" 2Gi \""), "2Gi");  // whitespace inside is trimmed
  EXPECT_EQ(json("\"\xC2\xA0"
                 "3\""),
            "3");             // Unicode space too
  EXPECT_EQ(json("5"), "5");  // a bare JSON number
  EXPECT_EQ(json("1.5 "), "1500m");
  EXPECT_EQ(json("null"), "0");
  // Escapes are not decoded: Go strips the quotes and parses the raw text.
  EXPECT_THAT(json("\"1\\u0030\""), ::testing::HasSubstr("regular expression"));
}

TEST(QuantityTest, ComparesNumerically) {
  const auto q = [](absl::string_view s) { return *Quantity::Parse(s); };
  EXPECT_EQ(q("1Gi").Compare(q("1073741824")), 0);
  EXPECT_EQ(q("1000m").Compare(q("1")), 0);
  EXPECT_LT(q("1500m").Compare(q("2")), 0);
  EXPECT_GT(q("2").Compare(q("1500m")), 0);
  EXPECT_LT(q("-1").Compare(q("0")), 0);
  EXPECT_LT(q("-2").Compare(q("-1")), 0);
  EXPECT_EQ(q("0Gi").Compare(q("0")), 0);
  EXPECT_TRUE(q("0Gi").IsZero());
}

// The exact sum of `texts`, in order, from zero (as the scheduler sums
// consumedCapacity over a device's shares), printed canonically.
std::string Sum(std::initializer_list<const char*> texts) {
  Quantity sum;
  for (const char* t : texts) {
    absl::StatusOr<Quantity> q = Quantity::Parse(t);
    EXPECT_TRUE(q.ok()) << t << ": " << q.status();
    if (!q.ok()) continue;
    absl::StatusOr<Quantity> next = sum.Plus(*q);
    EXPECT_TRUE(next.ok()) << next.status();
    if (next.ok()) sum = *std::move(next);
  }
  return sum.ToString();
}

TEST(QuantityTest, SumsAreExactAndCanonical) {
  // The same value in different suffixes and formats: the first operand's
  // format wins (apimachinery's Add), the text is canonical.
  EXPECT_EQ(Sum({"1Gi", "1024Mi"}), "2Gi");
  EXPECT_EQ(Sum({"1024Mi", "1Gi"}), "2Gi");
  EXPECT_EQ(Sum({"1Gi", "1073741824"}), "2Gi");
  EXPECT_EQ(Sum({"1073741824", "1Gi"}), "2147483648");
  EXPECT_EQ(Sum({"1G", "1000M"}), "2G");
  EXPECT_EQ(Sum({"1e9", "1G"}), "2e9");
  EXPECT_EQ(Sum({"1k", "1e3", "1000"}), "3k");
  // Verbatim inputs of the fast path are not kept in a sum.
  EXPECT_EQ(Sum({"+1Gi"}), "1Gi");
  EXPECT_EQ(Sum({"05"}), "5");
  // Milli-units and below: no floating point anywhere.
  EXPECT_EQ(Sum({"100m", "200m"}), "300m");
  EXPECT_EQ(Sum({"0.1", "0.2"}), "300m");
  EXPECT_EQ(Sum({"333m", "333m", "334m"}), "1");
  EXPECT_EQ(Sum({"1n", "999999999n"}), "1");
  EXPECT_EQ(Sum({"1u", "1n"}), "1001n");
  EXPECT_EQ(Sum({"1.5Gi", "512Mi"}), "2Gi");
  EXPECT_EQ(Sum({"1Gi", "500m"}), "1073741824500m");  // fractional: no binary suffix
  // Exponents.
  EXPECT_EQ(Sum({"1e3", "1e-3"}), "1000001e-3");
  EXPECT_EQ(Sum({"12e6", "12e6"}), "24e6");
  // Huge values: past 2^64, and BinarySI past 2^63-1 (printed as DecimalSI).
  EXPECT_EQ(Sum({"123456789012345678901", "123456789012345678901"}), "246913578024691357802");
  EXPECT_EQ(Sum({"8Ei", "8Ei"}), "18446744073709551614");
  EXPECT_EQ(Sum({"999E", "1E"}), "1");  // 10^21: no SI suffix (apimachinery prints the mantissa)
  EXPECT_EQ(Sum({"18446744073709551615", "1"}), "18446744073709551616");
  // Signs and zero.
  EXPECT_EQ(Sum({"1", "-1"}), "0");
  EXPECT_EQ(Sum({"1", "-2"}), "-1");
  EXPECT_EQ(Sum({"-1500m", "500m"}), "-1");
  EXPECT_EQ(Sum({}), "0");
  EXPECT_EQ(Sum({"0", "0Gi"}), "0");
  EXPECT_EQ(Sum({"0", "1Gi"}), "1Gi");
}

TEST(QuantityTest, SumsCompareByValue) {
  const Quantity a = *Quantity::Parse("1Gi");
  const Quantity b = *Quantity::Parse("1073741823");
  EXPECT_GT(a.Compare(b), 0);
  EXPECT_EQ(a.Compare(*b.Plus(*Quantity::Parse("1"))), 0);
  EXPECT_LT(a.Compare(*b.Plus(*Quantity::Parse("2"))), 0);
  EXPECT_EQ(Quantity().Plus(*Quantity::Parse("0.5"))->Compare(*Quantity::Parse("500m")), 0);
}

TEST(QuantityTest, SumsTooFarApartAreRefusedNotExpanded) {
  // Parse takes exponents up to 2^31; an exact sum would take gigabytes.
  const Quantity huge = *Quantity::Parse("1e2000000000");
  EXPECT_THAT(huge.Plus(*Quantity::Parse("1")).status(),
              StatusIs(absl::StatusCode::kOutOfRange, "more than 1000 digits"));
  EXPECT_THAT(Quantity::Parse("1")->Plus(huge).status(),
              StatusIs(absl::StatusCode::kOutOfRange, "cannot sum 1 and 100e1999999998 exactly"));
  // Alone, with zero or with itself, it sums (canonical: an exponent that
  // is a multiple of 3).
  EXPECT_EQ(Quantity().Plus(huge)->ToString(), "100e1999999998");
  EXPECT_EQ(huge.Plus(huge)->ToString(), "200e1999999998");
}

TEST(QuantityTest, BinarySumsPastInt64KeepTheirSuffixAsApimachineryPrintsThem) {
  EXPECT_EQ(Sum({"4Ei", "4Ei"}), "8Ei");  // 2^63: past int64, exact in BinarySI
  Quantity sum;
  for (int i = 0; i < 16; ++i) sum = *sum.Plus(*Quantity::Parse("4Ei"));
  EXPECT_EQ(sum.ToString(), "64Ei");
  // 2^70 has no suffix: apimachinery prints what is left after the factors
  // of 1024 (its quirk, as 1000E prints as 1).
  for (int i = 0; i < 1024 - 16; ++i) sum = *sum.Plus(*Quantity::Parse("4Ei"));
  EXPECT_EQ(sum.ToString(), "4");
  EXPECT_EQ(Sum({"4Ei", "4Ei", "1"}), "9223372036854775809");  // not a multiple of 1024
}

}  // namespace
}  // namespace claimstore::internal
