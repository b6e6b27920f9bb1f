// Kubernetes' string formats (apimachinery pkg/util/validation), with its
// messages word for word: each function returns the list of problems, empty
// when the value is valid.
#ifndef CLAIMSTORE_SRC_K8S_K8S_FORMATS_H_
#define CLAIMSTORE_SRC_K8S_K8S_FORMATS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace claimstore::internal {

// IsDNS1123Label: 1-63 of [a-z0-9-], alphanumeric at both ends.
std::vector<std::string> IsDns1123Label(absl::string_view value);
// IsDNS1123Subdomain: up to 253, dot-separated labels.
std::vector<std::string> IsDns1123Subdomain(absl::string_view value);
// IsQualifiedName: [prefix/]name, prefix a DNS subdomain, name up to 63 of
// [A-Za-z0-9-_.] starting and ending alphanumeric.
std::vector<std::string> IsQualifiedName(absl::string_view value);
// IsValidLabelValue: empty, or up to 63 like a qualified name's name part.
std::vector<std::string> IsValidLabelValue(absl::string_view value);
// A metav1.Condition reason: [A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?.
std::vector<std::string> IsValidConditionReason(absl::string_view value);
// uuid.Validate plus 36 characters plus lower case (shareID).
bool IsLowercaseUuid(absl::string_view value);

// IsValidInterfaceAddress: an IP address with a prefix length ("ifaddr",
// not a network), written in canonical form. Returns the problem, or "".
std::string InterfaceAddressProblem(absl::string_view value);

// Go's strconv.Quote, as field errors print string values.
std::string GoQuote(absl::string_view value);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_K8S_K8S_FORMATS_H_
