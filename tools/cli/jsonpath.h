// -o jsonpath=TEMPLATE, the part of kubectl's JSONPath that reads fields:
// text with {expressions}: `.a.b`, `['key.with.dots']`, `[N]` (negative
// from the end), `[*]`, `{range PATH}...{end}` (inside, paths are relative
// to each item), and string literals `{"\n"}`. As kubectl prints them: the
// results of one expression separated by a space, strings as they are,
// other values as Go's json.Marshal writes them (keys sorted, <>& escaped);
// a missing key prints nothing (kubectl's default
// --allow-missing-template-keys), an index past the end is an error.
// Filters, slices and recursive descent are refused as unsupported, not
// silently misread.
#ifndef CLAIMSTORE_TOOLS_CLI_JSONPATH_H_
#define CLAIMSTORE_TOOLS_CLI_JSONPATH_H_

#include <string>

#include "absl/status/statusor.h"

namespace claimstore::cli {

// The template applied to the JSON value `json`; InvalidArgument naming
// the template's problem.
absl::StatusOr<std::string> ApplyJsonPath(const std::string& templ, const std::string& json);

}  // namespace claimstore::cli

#endif  // CLAIMSTORE_TOOLS_CLI_JSONPATH_H_
