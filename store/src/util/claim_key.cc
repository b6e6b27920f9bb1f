#include "claimstore/claim_key.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace claimstore {

absl::StatusOr<ClaimKey> ClaimKey::Parse(absl::string_view text) {
  const size_t slash = text.find('/');
  if (slash == absl::string_view::npos || slash == 0 || slash + 1 == text.size() ||
      text.find('/', slash + 1) != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not NAMESPACE/NAME"));
  }
  return ClaimKey{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
}

}  // namespace claimstore
