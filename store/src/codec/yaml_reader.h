// YAML input: each document of a YAML stream (libyaml's parser) is turned
// into the JSON that Kubernetes' own YAML reading gives (sigs.k8s.io/yaml
// over go-yaml v2: YAML 1.1 plain scalars, so `yes` is true, `0x1F` is 31
// and `010` is 8; quoted scalars are strings; keys are strings; aliases are
// expanded) and decoded by the JSON decoder, so that validation, field paths
// and all-or-nothing behave exactly as for JSON. Errors name the line and
// column of the YAML: of the bad character for a YAML syntax error, of the
// document or list item for a claim that does not decode.
//
// Thread-safety: any number of threads at once (no shared state).
#ifndef CLAIMSTORE_SRC_CODEC_YAML_READER_H_
#define CLAIMSTORE_SRC_CODEC_YAML_READER_H_

#include <cstddef>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "claimstore/codec.h"

namespace claimstore::internal {

// Whether `input` is YAML rather than JSON: its first character that is
// not white space cannot start a JSON value ({, [, ", a digit, or - before
// a digit), as `apiVersion: v1`, `---`, `- item` or `# comment` cannot.
bool LooksLikeYaml(absl::string_view input);

// Decodes every claim of the YAML stream `input` (UTF-8, no byte-order
// mark: `skipped` bytes came before it), as DecodeClaims does JSON. A
// `kind: List` document's items are converted and decoded one at a time.
absl::Status DecodeYaml(absl::string_view input, size_t skipped,
                        absl::FunctionRef<absl::Status(DecodedClaim)> sink);

// DecodeYaml on two threads: one converts the YAML (libyaml's parser), the
// caller's decodes what it converted and calls `sink`, in input order.
absl::Status DecodeYamlPipelined(absl::string_view input, size_t skipped,
                                 absl::FunctionRef<absl::Status(DecodedClaim)> sink);

// The JSON of the one YAML document of `yaml`, by the same rules.
absl::StatusOr<std::string> YamlDocumentToJson(absl::string_view yaml);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_CODEC_YAML_READER_H_
