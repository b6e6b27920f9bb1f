// ClaimKey: a claim's identity in the store (namespace and name).
//
// Thread-safety: a value type.
#ifndef CLAIMSTORE_CLAIM_KEY_H_
#define CLAIMSTORE_CLAIM_KEY_H_

#include <compare>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace claimstore {

struct ClaimKey {
  std::string claim_namespace = {};
  std::string name = {};

  // Parses "NAMESPACE/NAME" (both non-empty). InvalidArgument otherwise.
  static absl::StatusOr<ClaimKey> Parse(absl::string_view text);
  std::string ToString() const { return claim_namespace + "/" + name; }
  friend bool operator==(const ClaimKey&, const ClaimKey&) = default;
  friend auto operator<=>(const ClaimKey&, const ClaimKey&) = default;
};

}  // namespace claimstore

#endif  // CLAIMSTORE_CLAIM_KEY_H_
