// JSON to YAML for -o yaml, byte for byte as kubectl prints it: keys
// sorted as go-yaml v2 sorts them, each scalar in the style go-yaml's
// encoder asks for, and libyaml's emitter (of which go-yaml's is a port)
// for quoting, folding at 80 columns and indentation (kubectl_yaml.cc).
//
// Why libyaml (Debian's libyaml-dev): kubectl's YAML is go-yaml v2's, and
// go-yaml v2's emitter is a line-by-line port of libyaml's emitter.c, so
// libyaml reproduces its rules (when a plain scalar must be quoted, where a
// long one folds, how a sequence sits under its key) by construction,
// where a converter by hand would re-derive them and yaml-cpp
// (libyaml-cpp-dev) emits a style of its own.
#ifndef CLAIMSTORE_TOOLS_CLI_KUBECTL_YAML_H_
#define CLAIMSTORE_TOOLS_CLI_KUBECTL_YAML_H_

#include <string>

namespace claimstore::cli {

// Appends the YAML rendering of the JSON value `json` to *out; false (and
// nothing appended) if `json` does not parse or the emitter fails.
[[nodiscard]] bool AppendYaml(const std::string& json, std::string* out);

}  // namespace claimstore::cli

#endif  // CLAIMSTORE_TOOLS_CLI_KUBECTL_YAML_H_
