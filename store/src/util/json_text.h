// JSON text primitives shared by the codec: Go-compatible string escaping,
// validation and compaction of raw JSON values, and Go-compatible indenting.
//
// These functions are pure and thread-safe.
#ifndef CLAIMSTORE_SRC_UTIL_JSON_TEXT_H_
#define CLAIMSTORE_SRC_UTIL_JSON_TEXT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace claimstore::internal {

// The deepest nesting of arrays and objects accepted anywhere in the input.
// Go's encoding/json (and so the API server) accepts 10000 levels.
inline constexpr int kMaxJsonDepth = 10000;

// Appends `s` as a JSON string literal exactly as Go's encoding/json writes
// it with HTML escaping on (the API server's encoder): `"`, `\` and control
// characters escaped (`\n`, `\r`, `\t`, `\b`, `\f`, else `\u00XX`), `<`, `>`,
// `&`, U+2028 and U+2029 as `\uXXXX`, invalid UTF-8 bytes as `\ufffd`, all
// other text as raw UTF-8.
void AppendGoJsonString(absl::string_view s, std::string* out);

// Checks that `in` holds exactly one JSON value (RFC 8259: strict grammar,
// valid UTF-8, no control characters in strings, at most kMaxJsonDepth levels
// of nesting), surrounded by optional whitespace. On success appends the value
// compacted the way Go's json.Compact with HTML escaping does (whitespace
// between tokens removed; `<`, `>`, `&`, U+2028, U+2029 inside strings
// escaped; everything else, including number spellings, key order and
// duplicate keys, kept byte for byte) to `*out` unless `out` is null.
// Returns InvalidArgument naming the byte offset of the first error; `*out`
// is then unspecified. `max_depth` lowers the nesting limit for a value that
// itself sits that many levels deep in a larger document; `utf8_validated`
// skips the UTF-8 check for text a parser has already validated.
// The offset of the first byte of `s` that does not begin a valid UTF-8
// sequence (as Go's decoder judges it), or npos when all of `s` is valid.
size_t FirstInvalidUtf8(absl::string_view s);

absl::Status CompactJson(absl::string_view in, std::string* out, int max_depth = kMaxJsonDepth,
                         bool utf8_validated = false);

// Appends `json`, which must be valid JSON, re-indented the way Go's
// json.MarshalIndent(v, "", indent) prints it: one member or element per
// line, `": "` after keys, empty objects and arrays kept as `{}` and `[]`.
void IndentJson(absl::string_view json, absl::string_view indent, std::string* out);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_UTIL_JSON_TEXT_H_
