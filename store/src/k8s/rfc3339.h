// metav1.Time in JSON: RFC 3339 in, "YYYY-MM-DDTHH:MM:SSZ" out.
#ifndef CLAIMSTORE_SRC_K8S_RFC3339_H_
#define CLAIMSTORE_SRC_K8S_RFC3339_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace claimstore::internal {

// Go's zero time.Time (0001-01-01T00:00:00Z) in Unix seconds. metav1.Time
// writes it as `null`, so the codec treats it as absent.
inline constexpr int64_t kGoZeroTimeUnixSeconds = -62135596800;

// Parses an RFC 3339 date-time (`2006-01-02T15:04:05[.frac](Z|±hh:mm)`, any
// offset, any number of fraction digits) into Unix seconds, truncated to the
// second (floor), as metav1.Time stores it. The UTC result must lie in years
// 0000 to 9999 (Go refuses to write others). Returns InvalidArgument
// describing the problem otherwise.
absl::StatusOr<int64_t> ParseRfc3339(absl::string_view text);

// Appends `unix_seconds` as `YYYY-MM-DDTHH:MM:SSZ`.
// REQUIRES: the time lies in years 0000 to 9999.
void AppendRfc3339(int64_t unix_seconds, std::string* out);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_K8S_RFC3339_H_
