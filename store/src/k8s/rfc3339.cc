#include "k8s/rfc3339.h"

#include "absl/strings/str_cat.h"

namespace claimstore::internal {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
// days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, int* m, int* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

bool IsLeap(int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

int DaysInMonth(int64_t y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// Reads `n` decimal digits at text[*pos]; false when they are not digits.
bool ReadDigits(absl::string_view text, size_t* pos, int n, int* value) {
  if (*pos + n > text.size()) return false;
  int v = 0;
  for (int i = 0; i < n; ++i) {
    const char c = text[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *value = v;
  return true;
}

bool Expect(absl::string_view text, size_t* pos, char c) {
  if (*pos >= text.size() || text[*pos] != c) return false;
  ++*pos;
  return true;
}

constexpr int64_t kMinUnix = -62167219200;  // 0000-01-01T00:00:00Z
constexpr int64_t kMaxUnix = 253402300799;  // 9999-12-31T23:59:59Z

}  // namespace

absl::StatusOr<int64_t> ParseRfc3339(absl::string_view text) {
  const auto bad = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid time \"", text, "\": must be RFC 3339, e.g. \"2006-01-02T15:04:05Z\""));
  };
  size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!ReadDigits(text, &pos, 4, &year) || !Expect(text, &pos, '-') ||
      !ReadDigits(text, &pos, 2, &month) || !Expect(text, &pos, '-') ||
      !ReadDigits(text, &pos, 2, &day) || !Expect(text, &pos, 'T') ||
      !ReadDigits(text, &pos, 2, &hour) || !Expect(text, &pos, ':') ||
      !ReadDigits(text, &pos, 2, &minute) || !Expect(text, &pos, ':') ||
      !ReadDigits(text, &pos, 2, &second)) {
    return bad();
  }
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month) || hour > 23 ||
      minute > 59 || second > 59) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid time \"", text, "\": field out of range"));
  }
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    const size_t digits_start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
    if (pos == digits_start) return bad();
    // Fractions are dropped: metav1.Time keeps whole seconds.
  }
  int64_t offset_seconds = 0;
  if (Expect(text, &pos, 'Z')) {
    // UTC
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!ReadDigits(text, &pos, 2, &oh) || !Expect(text, &pos, ':') ||
        !ReadDigits(text, &pos, 2, &om)) {
      return bad();
    }
    if (oh > 23 || om > 59) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid time \"", text, "\": offset out of range"));
    }
    offset_seconds = sign * (oh * 3600 + om * 60);
  } else {
    return bad();
  }
  if (pos != text.size()) return bad();
  const int64_t local =
      DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  const int64_t utc = local - offset_seconds;
  if (utc < kMinUnix || utc > kMaxUnix) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid time \"", text, "\": year outside of range [0,9999] in UTC"));
  }
  return utc;
}

void AppendRfc3339(int64_t unix_seconds, std::string* out) {
  int64_t days = unix_seconds / 86400;
  int64_t secs = unix_seconds % 86400;
  if (secs < 0) {
    secs += 86400;
    --days;
  }
  int64_t year;
  int month, day;
  CivilFromDays(days, &year, &month, &day);
  char buf[21];
  const auto put = [&](int at, int64_t value, int width) {
    for (int i = width - 1; i >= 0; --i) {
      buf[at + i] = static_cast<char>('0' + value % 10);
      value /= 10;
    }
  };
  put(0, year, 4);
  buf[4] = '-';
  put(5, month, 2);
  buf[7] = '-';
  put(8, day, 2);
  buf[10] = 'T';
  put(11, secs / 3600, 2);
  buf[13] = ':';
  put(14, secs / 60 % 60, 2);
  buf[16] = ':';
  put(17, secs % 60, 2);
  buf[19] = 'Z';
  out->append(buf, 20);
}

}  // namespace claimstore::internal
