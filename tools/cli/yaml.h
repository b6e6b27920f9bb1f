// JSON to YAML for -o yaml: JSON is valid YAML, but operators expect block
// style. A small converter over the compact JSON the encoder writes
// (strings stay quoted JSON strings, which YAML reads as the same values).
//
// Why not a YAML library: Debian 12 has yaml-cpp (libyaml-cpp-dev), but
// kubectl's YAML (what -o yaml should print byte for byte) is go-yaml v2's
// output of the object's JSON: its own rules for quoting, sorted keys,
// folding at 80 columns and list indentation, which yaml-cpp's emitter does
// not reproduce. The converter is the place to implement those rules.
#ifndef CLAIMSTORE_TOOLS_CLI_YAML_H_
#define CLAIMSTORE_TOOLS_CLI_YAML_H_

#include <string>

namespace claimstore::cli {

// Appends the YAML rendering of `json` (compact JSON, as the encoder
// writes it) to *out.
void AppendYaml(const std::string& json, std::string* out);

}  // namespace claimstore::cli

#endif  // CLAIMSTORE_TOOLS_CLI_YAML_H_
