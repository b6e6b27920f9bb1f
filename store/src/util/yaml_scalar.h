// go-yaml v2's reading of plain YAML scalars (resolve.go), which Kubernetes
// (sigs.k8s.io/yaml) and kubectl -o yaml follow: what the reader converts
// to JSON (codec/yaml_reader.cc) and what the writer must quote so that it
// reads back as a string (tools/cli/kubectl_yaml.cc).
// Thread-safety: pure functions.
#ifndef CLAIMSTORE_SRC_UTIL_YAML_SCALAR_H_
#define CLAIMSTORE_SRC_UTIL_YAML_SCALAR_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace claimstore::internal {

// ~, null, Null, NULL and the empty scalar.
bool IsYamlNull(absl::string_view s);
// YAML 1.1's booleans: y, yes, true, on (true) and n, no, false, off
// (false), each in three capitalisations; nullopt for anything else.
std::optional<bool> YamlBool(absl::string_view s);
// An integer as Go's strconv.ParseInt/ParseUint(s, 0, 64) read it, as
// go-yaml calls them once '_' is dropped: a sign, then 0x/0o/0b or a
// leading 0 (octal), then digits of that base; a magnitude within 64 bits
// whatever the sign (ParseInt's narrower range for negatives is the
// caller's to check).
struct GoInt {
  bool negative = false;
  uint64_t magnitude = 0;
};
std::optional<GoInt> ParseGoInt(absl::string_view s);
bool ParsesAsGoInt(absl::string_view s);
// go-yaml's yamlStyleFloat: ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$
bool IsYamlStyleFloat(absl::string_view s);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_UTIL_YAML_SCALAR_H_
