#include "k8s/quantity.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace claimstore::internal {
namespace {

constexpr char kErrFormatWrong[] =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr char kErrNumeric[] = "unable to parse numeric part of quantity";
constexpr char kErrSuffix[] = "unable to parse quantity's suffix";

absl::Status QuantityError(const char* message) { return absl::InvalidArgumentError(message); }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The pieces parseQuantityString finds in a quantity.
struct Split {
  bool positive = true;
  absl::string_view value;  // sign and number, as written
  absl::string_view num;    // integer digits without leading zeros ("0" if none)
  absl::string_view denom;  // fraction digits
  absl::string_view suffix;
};

// A faithful port of the scanner's decisions in apimachinery's
// parseQuantityString (including accepting "1.G" and ".").
bool SplitQuantity(absl::string_view str, Split* out) {
  size_t pos = 0;
  const size_t end = str.size();
  if (pos < end && (str[0] == '-' || str[0] == '+')) {
    out->positive = str[0] != '-';
    ++pos;
  }
  while (pos < end && str[pos] == '0') ++pos;
  if (pos >= end) {
    out->num = "0";
    out->value = "0";
    return true;
  }
  size_t i = pos;
  while (i < end && IsDigit(str[i])) ++i;
  out->num = str.substr(pos, i - pos);
  if (i >= end) {
    out->value = str;
    return true;
  }
  pos = i;
  if (out->num.empty()) out->num = "0";
  if (str[pos] == '.') {
    ++pos;
    i = pos;
    while (i < end && IsDigit(str[i])) ++i;
    out->denom = str.substr(pos, i - pos);
    if (i >= end) {
      out->value = str;
      return true;
    }
    pos = i;
  }
  out->value = str.substr(0, pos);
  const size_t suffix_start = pos;
  while (pos < end && absl::StrContains("eEinumkKMGTP", str[pos])) ++pos;
  if (pos < end && (str[pos] == '-' || str[pos] == '+')) ++pos;
  while (pos < end && IsDigit(str[pos])) ++pos;
  if (pos < end) return false;
  out->suffix = str.substr(suffix_start);
  return true;
}

struct Suffix {
  int base;
  int32_t exponent;
  Quantity::Format format;
};

bool InterpretSuffix(absl::string_view s, Suffix* out) {
  using F = Quantity::Format;
  static constexpr struct {
    const char* text;
    Suffix suffix;
  } kTable[] = {
      {"", {10, 0, F::kDecimalSI}},   {"n", {10, -9, F::kDecimalSI}},
      {"u", {10, -6, F::kDecimalSI}}, {"m", {10, -3, F::kDecimalSI}},
      {"k", {10, 3, F::kDecimalSI}},  {"M", {10, 6, F::kDecimalSI}},
      {"G", {10, 9, F::kDecimalSI}},  {"T", {10, 12, F::kDecimalSI}},
      {"P", {10, 15, F::kDecimalSI}}, {"E", {10, 18, F::kDecimalSI}},
      {"Ki", {2, 10, F::kBinarySI}},  {"Mi", {2, 20, F::kBinarySI}},
      {"Gi", {2, 30, F::kBinarySI}},  {"Ti", {2, 40, F::kBinarySI}},
      {"Pi", {2, 50, F::kBinarySI}},  {"Ei", {2, 60, F::kBinarySI}},
  };
  for (const auto& entry : kTable) {
    if (s == entry.text) {
      *out = entry.suffix;
      return true;
    }
  }
  if (s.size() > 1 && (s[0] == 'e' || s[0] == 'E')) {
    // strconv.ParseInt(s[1:], 10, 64), then Go's int32 conversion.
    absl::string_view digits = s.substr(1);
    bool negative = false;
    if (digits[0] == '+' || digits[0] == '-') {
      negative = digits[0] == '-';
      digits.remove_prefix(1);
    }
    if (digits.empty()) return false;
    uint64_t magnitude = 0;
    for (char c : digits) {
      if (!IsDigit(c)) return false;
      if (magnitude > (std::numeric_limits<uint64_t>::max() - 9) / 10) {
        return false;
      }
      magnitude = magnitude * 10 + static_cast<uint64_t>(c - '0');
    }
    const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + negative;
    if (magnitude > limit) return false;
    const int64_t parsed =
        negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    *out = {10, static_cast<int32_t>(parsed), F::kDecimalExponent};
    return true;
  }
  return false;
}

// Decimal digit strings (most significant first, no leading zeros).
void StripLeadingZeros(std::string* digits) {
  const size_t first = digits->find_first_not_of('0');
  digits->erase(0, first == std::string::npos ? digits->size() : first);
}

void MultiplySmall(std::string* digits, uint32_t factor) {
  uint64_t carry = 0;
  for (size_t i = digits->size(); i-- > 0;) {
    const uint64_t v = static_cast<uint64_t>((*digits)[i] - '0') * factor + carry;
    (*digits)[i] = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  std::string head;
  for (; carry > 0; carry /= 10) head.push_back(static_cast<char>('0' + carry % 10));
  std::reverse(head.begin(), head.end());
  head.append(*digits);
  digits->swap(head);
}

void AddOne(std::string* digits) {
  if (digits->empty()) {
    digits->assign("1");
    return;
  }
  for (size_t i = digits->size(); i-- > 0;) {
    if ((*digits)[i] != '9') {
      ++(*digits)[i];
      return;
    }
    (*digits)[i] = '0';
  }
  // All nines became zeros: 99 + 1 = 100.
  (*digits)[0] = '1';
  digits->push_back('0');
}

// Moves trailing zero digits into the exponent.
void StripTrailingZeros(std::string* digits, int64_t* exponent) {
  const size_t last = digits->find_last_not_of('0');
  const size_t zeros = digits->size() - (last + 1);
  digits->erase(last + 1);
  *exponent += static_cast<int64_t>(zeros);
}

// Compares two non-negative values digits*10^scale.
int CompareMagnitude(std::string a, int64_t sa, std::string b, int64_t sb) {
  if (a.empty() || b.empty()) return (a.empty() ? 0 : 1) - (b.empty() ? 0 : 1);
  StripTrailingZeros(&a, &sa);
  StripTrailingZeros(&b, &sb);
  const int64_t order_a = static_cast<int64_t>(a.size()) + sa;
  const int64_t order_b = static_cast<int64_t>(b.size()) + sb;
  if (order_a != order_b) return order_a < order_b ? -1 : 1;
  const int c = a.compare(b);  // same order of magnitude: compare digit-wise
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

constexpr uint64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

// `digits` * 10^`from` as digits * 10^`to`, for to <= from.
std::string Rescaled(const std::string& digits, int64_t from, int64_t to) {
  std::string out = digits;
  out.append(static_cast<size_t>(from - to), '0');
  return out;
}

// a + b, and a - b for a >= b, on aligned digit strings.
std::string AddDigits(const std::string& a, const std::string& b) {
  std::string out;
  out.reserve(std::max(a.size(), b.size()) + 1);
  int carry = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()) || carry > 0; ++i) {
    int v = carry;
    if (i < a.size()) v += a[a.size() - 1 - i] - '0';
    if (i < b.size()) v += b[b.size() - 1 - i] - '0';
    out.push_back(static_cast<char>('0' + v % 10));
    carry = v / 10;
  }
  std::reverse(out.begin(), out.end());
  StripLeadingZeros(&out);
  return out;
}
std::string SubtractDigits(const std::string& a, const std::string& b) {
  std::string out;
  out.reserve(a.size());
  int borrow = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    int v = (a[a.size() - 1 - i] - '0') - borrow;
    if (i < b.size()) v -= b[b.size() - 1 - i] - '0';
    borrow = v < 0 ? 1 : 0;
    out.push_back(static_cast<char>('0' + v + 10 * borrow));
  }
  std::reverse(out.begin(), out.end());
  StripLeadingZeros(&out);
  return out;
}

const char* DecimalSuffix(int64_t exponent) {
  switch (exponent) {
    case -9:
      return "n";
    case -6:
      return "u";
    case -3:
      return "m";
    case 0:
      return "";
    case 3:
      return "k";
    case 6:
      return "M";
    case 9:
      return "G";
    case 12:
      return "T";
    case 15:
      return "P";
    case 18:
      return "E";
    default:
      return "";  // apimachinery writes no suffix here (a known quirk)
  }
}

bool IsGoSpace(absl::string_view s, size_t i, size_t* len) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= '\t' && c <= '\r')) {
    *len = 1;
    return true;
  }
  // U+0085, U+00A0 (2 bytes); U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
  // U+205F, U+3000 (3 bytes): Go's unicode.IsSpace beyond ASCII.
  if (c == 0xC2 && i + 1 < s.size()) {
    const unsigned char d = static_cast<unsigned char>(s[i + 1]);
    *len = 2;
    return d == 0x85 || d == 0xA0;
  }
  if (i + 2 < s.size()) {
    const unsigned char d = static_cast<unsigned char>(s[i + 1]);
    const unsigned char e = static_cast<unsigned char>(s[i + 2]);
    *len = 3;
    if (c == 0xE1 && d == 0x9A && e == 0x80) return true;
    if (c == 0xE2 && d == 0x80 && (e <= 0x8A || e == 0xA8 || e == 0xA9 || e == 0xAF)) {
      return true;
    }
    if (c == 0xE2 && d == 0x81 && e == 0x9F) return true;
    if (c == 0xE3 && d == 0x80 && e == 0x80) return true;
  }
  return false;
}

absl::string_view TrimGoSpace(absl::string_view s) {
  size_t len = 0;
  while (!s.empty() && IsGoSpace(s, 0, &len)) s.remove_prefix(len);
  // Trailing: look back over at most three bytes for a space sequence.
  for (bool trimmed = true; trimmed && !s.empty();) {
    trimmed = false;
    for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
      const size_t at = s.size() - back;
      if (IsGoSpace(s, at, &len) && len == back) {
        s.remove_suffix(back);
        trimmed = true;
        break;
      }
    }
  }
  return s;
}

}  // namespace

namespace {

// What a parse found: the value is -1 (when negative) times digits times
// 10^scale10.
struct Parsed {
  bool negative = false;
  std::string digits;  // without leading zeros; empty for zero
  int64_t scale10 = 0;
  Quantity::Format format = Quantity::Format::kDecimalSI;
  // The fast path judged the input canonical: its text is kept verbatim.
  bool canonical = false;
};

// The int64 fast path of ParseQuantity, with its "already canonical" test
// that keeps the input text; nullopt when the value does not fit it.
std::optional<absl::StatusOr<Parsed>> ParseFast(const Split& split, const Suffix& suffix) {
  using Format = Quantity::Format;
  int64_t precision = 0;
  int64_t scale = 0;
  uint64_t mantissa = 1;
  if (suffix.format == Format::kBinarySI) {
    if (suffix.exponent >= 0 && split.denom.empty()) {
      mantissa = uint64_t{1} << suffix.exponent;
      precision = 15 - static_cast<int64_t>(split.num.size()) -
                  static_cast<int64_t>(static_cast<float>(suffix.exponent) * 3 / 10) - 1;
    } else {
      precision = -1;
    }
  } else {
    scale = suffix.exponent;
    precision = 18 - static_cast<int64_t>(split.num.size() + split.denom.size());
  }
  if (precision < 0) return std::nullopt;
  scale -= static_cast<int64_t>(split.denom.size());
  if (scale < -9) return std::nullopt;
  const std::string shifted = absl::StrCat(split.num, split.denom);
  uint64_t value = 0;
  if (!absl::SimpleAtoi(shifted, &value) || value > kMaxInt64) {
    return absl::StatusOr<Parsed>(QuantityError(kErrNumeric));
  }
  if (value != 0 && mantissa > kMaxInt64 / value) return std::nullopt;
  const uint64_t result = value * mantissa;
  Parsed p;
  p.negative = !split.positive && result != 0;
  p.digits = result == 0 ? "" : absl::StrCat(result);
  p.scale10 = scale;
  p.format = suffix.format;
  p.canonical = suffix.format == Format::kBinarySI
                    ? suffix.exponent % 10 == 0 && (value & 0x07) != 0
                    : scale % 3 == 0 && !absl::EndsWith(shifted, "000") && shifted[0] != '0';
  return absl::StatusOr<Parsed>(std::move(p));
}

// Rounds a non-zero value up (away from zero) to a multiple of 1n.
void RoundUpToNano(std::string* digits, int64_t* scale10) {
  if (digits->empty() || *scale10 >= -9) return;
  const uint64_t drop = static_cast<uint64_t>(-9 - *scale10);
  bool dropped_nonzero = false;
  if (drop >= digits->size()) {
    dropped_nonzero = true;  // digits is non-empty, so non-zero
    digits->clear();
  } else {
    const size_t keep = digits->size() - drop;
    dropped_nonzero = digits->find_first_not_of('0', keep) != std::string::npos;
    digits->erase(keep);
  }
  if (dropped_nonzero) AddOne(digits);
  StripLeadingZeros(digits);
  *scale10 = -9;
}

// The arbitrary-precision path (inf.Dec in apimachinery).
absl::StatusOr<Parsed> ParseExact(const Split& split, const Suffix& suffix) {
  absl::string_view value = split.value;
  bool negative = false;
  if (!value.empty() && (value[0] == '+' || value[0] == '-')) {
    negative = value[0] == '-';
    value.remove_prefix(1);
  }
  const size_t dot = value.find('.');
  const absl::string_view int_part = value.substr(0, dot);
  const absl::string_view frac_part =
      dot == absl::string_view::npos ? absl::string_view() : value.substr(dot + 1);
  if (int_part.empty() && frac_part.empty()) return QuantityError(kErrNumeric);
  Parsed p;
  p.format = suffix.format;
  p.digits = absl::StrCat(int_part, frac_part);
  p.scale10 = -static_cast<int64_t>(frac_part.size());
  StripLeadingZeros(&p.digits);
  if (suffix.base == 10) {
    p.scale10 += suffix.exponent;
  } else {
    for (int32_t e = suffix.exponent; e > 0; e -= 16) {
      MultiplySmall(&p.digits, uint32_t{1} << std::min<int32_t>(e, 16));
    }
  }
  RoundUpToNano(&p.digits, &p.scale10);
  if (p.format == Quantity::Format::kBinarySI) {
    if (CompareMagnitude(p.digits, p.scale10, absl::StrCat(kMaxInt64), 0) > 0) {
      p.digits = absl::StrCat(kMaxInt64);
      p.scale10 = 0;
    }
    if (!p.digits.empty() && CompareMagnitude(p.digits, p.scale10, "1", 0) < 0) {
      p.format = Quantity::Format::kDecimalSI;
    }
  }
  p.negative = negative && !p.digits.empty();
  return p;
}

}  // namespace

absl::StatusOr<Quantity> Quantity::Parse(absl::string_view str) {
  if (str.empty()) return QuantityError(kErrFormatWrong);
  Quantity q;
  if (str == "0") {
    q.verbatim_ = "0";
    return q;
  }
  Split split;
  if (!SplitQuantity(str, &split)) return QuantityError(kErrFormatWrong);
  Suffix suffix;
  if (!InterpretSuffix(split.suffix, &suffix)) return QuantityError(kErrSuffix);
  std::optional<absl::StatusOr<Parsed>> fast = ParseFast(split, suffix);
  absl::StatusOr<Parsed> parsed = fast.has_value() ? *std::move(fast) : ParseExact(split, suffix);
  if (!parsed.ok()) return parsed.status();
  q.negative_ = parsed->negative;
  q.digits_ = std::move(parsed->digits);
  q.scale10_ = parsed->scale10;
  q.format_ = parsed->format;
  if (parsed->canonical) q.verbatim_ = std::string(str);
  return q;
}

absl::StatusOr<Quantity> Quantity::ParseJsonToken(absl::string_view token) {
  token = absl::StripTrailingAsciiWhitespace(token);
  if (token == "null") return Quantity();
  if (token.size() >= 2 && token.front() == '"' && token.back() == '"') {
    token = token.substr(1, token.size() - 2);
  }
  return Parse(TrimGoSpace(token));
}

std::string Quantity::ToString() const {
  if (!verbatim_.empty()) return verbatim_;
  if (IsZero()) return "0";
  const char* sign = negative_ ? "-" : "";
  Format format = format_;
  if (format == Format::kBinarySI) {
    const bool below_1024 = CompareMagnitude(digits_, scale10_, "1024", 0) < 0;
    std::string integer = digits_;
    int64_t exponent = scale10_;
    StripTrailingZeros(&integer, &exponent);
    if (below_1024 || exponent < 0) {
      format = Format::kDecimalSI;  // small or fractional: no binary suffix
    } else {
      // Exact and at least 1024: the factors of 1024 become the suffix, as
      // apimachinery's removeBigIntFactors takes them (any number of them:
      // a sum may pass 2^63). Past Ei there is no suffix, and apimachinery
      // prints the bare number left (a quirk, as 1000E prints as 1).
      integer.append(static_cast<size_t>(exponent), '0');
      int power = 0;
      for (;;) {
        std::string quotient;
        uint32_t remainder = 0;
        for (const char c : integer) {
          remainder = remainder * 10 + static_cast<uint32_t>(c - '0');
          if (!quotient.empty() || remainder >= 1024) {
            quotient.push_back(static_cast<char>('0' + remainder / 1024));
          }
          remainder %= 1024;
        }
        if (remainder != 0) break;
        integer = quotient;
        ++power;
      }
      static constexpr const char* kBinary[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
      return absl::StrCat(sign, integer, power <= 6 ? kBinary[power] : "");
    }
  }
  std::string mantissa = digits_;
  int64_t exponent = scale10_;
  StripTrailingZeros(&mantissa, &exponent);
  while (exponent % 3 != 0) {
    mantissa.push_back('0');
    --exponent;
  }
  if (format == Format::kDecimalSI) {
    return absl::StrCat(sign, mantissa, DecimalSuffix(exponent));
  }
  if (exponent == 0) return absl::StrCat(sign, mantissa);
  return absl::StrCat(sign, mantissa, "e", exponent);
}

absl::StatusOr<Quantity> Quantity::Plus(const Quantity& other) const {
  Quantity sum;
  sum.format_ = IsZero() ? other.format_ : format_;
  if (other.IsZero() || IsZero()) {
    const Quantity& value = IsZero() ? other : *this;
    sum.negative_ = value.negative_;
    sum.digits_ = value.digits_;
    sum.scale10_ = value.scale10_;
    return sum;
  }
  const int64_t scale = std::min(scale10_, other.scale10_);
  // The digits of the operands once aligned to the smaller scale.
  const auto aligned = [scale](const std::string& digits, int64_t scale10) {
    return static_cast<uint64_t>(digits.size()) + static_cast<uint64_t>(scale10 - scale);
  };
  if (std::max(aligned(digits_, scale10_), aligned(other.digits_, other.scale10_)) >
      kMaxSumDigits) {
    return absl::OutOfRangeError(absl::StrCat("cannot sum ", ToString(), " and ", other.ToString(),
                                              " exactly: more than ", kMaxSumDigits, " digits"));
  }
  const std::string a = Rescaled(digits_, scale10_, scale);
  const std::string b = Rescaled(other.digits_, other.scale10_, scale);
  sum.scale10_ = scale;
  if (negative_ == other.negative_) {
    sum.digits_ = AddDigits(a, b);
    sum.negative_ = negative_;
  } else {
    const int order = CompareMagnitude(a, 0, b, 0);
    if (order == 0) return sum;  // zero, in this one's format
    sum.digits_ = order > 0 ? SubtractDigits(a, b) : SubtractDigits(b, a);
    sum.negative_ = order > 0 ? negative_ : other.negative_;
  }
  StripTrailingZeros(&sum.digits_, &sum.scale10_);
  return sum;
}

int Quantity::Compare(const Quantity& other) const {
  if (negative_ != other.negative_) return negative_ ? -1 : 1;
  const int magnitude = CompareMagnitude(digits_, scale10_, other.digits_, other.scale10_);
  return negative_ ? -magnitude : magnitude;
}

}  // namespace claimstore::internal
