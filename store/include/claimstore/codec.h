// The JSON codec: ResourceClaims as Kubernetes writes them, in and out of
// ClaimRecords, without losing anything claimstore keeps. DecodeClaims reads
// every input form (a claim, a list, JSON lines, watch events), in JSON or
// YAML (as kubectl -o yaml writes it); decoding is
// strict (InvalidArgument naming the field path or the byte offset) and
// checks types and shapes, not Kubernetes semantics (validation.h). Output
// is the API form, as the API server writes it.
//
// Thread-safety: every function here may be called concurrently from any
// number of threads (each thread keeps its own parser and builder), and a
// DecodeClaims sink may itself decode (it then gets a parser of its own).
//
// Input forms, what is kept, strictness, output: docs/codec.md.
#ifndef CLAIMSTORE_CODEC_H_
#define CLAIMSTORE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "claimstore/claim_record.h"

namespace claimstore {

// The largest single JSON document DecodeClaims accepts (simdjson's limit).
// Larger dumps must be split, e.g. as JSON lines.
inline constexpr size_t kMaxJsonDocumentBytes = 0xFFFFFFFFu - 64;

// One claim found in an input.
struct DecodedClaim {
  ClaimRecord record;
  WatchEventType event = WatchEventType::kNone;  // the watch event it arrived in, if any
  // Where the claim stood: the 0-based document (JSON value) of the input,
  // and its index in that document's `items`, or -1 outside a list.
  size_t document = 0;
  int64_t item = -1;
  // The claim's place in the input: larger for a claim later in the input
  // (not necessarily by one). What orders, say, two watch events of one
  // claim when they are decoded on different threads.
  uint64_t ordinal = 0;
  // The byte offset in the input where the claim's document (or, in a
  // list, its item) starts, for progress through the input: set by
  // DecodeClaimsConcurrently; 0 where a decoder does not know it.
  size_t offset = 0;
};

// Decodes exactly one ResourceClaim object. Returns InvalidArgument for
// anything else (a list, an event, trailing content) or any decode error.
absl::StatusOr<ClaimRecord> DecodeClaim(absl::string_view json);

// Decodes every claim of `input`, in input order, and hands each to `sink`.
// BOOKMARK events are skipped; an ERROR event is an error. Stops at the first
// error, of decoding or of `sink`, and returns it; claims before it have
// already been handed to `sink` (callers that need all-or-nothing, like
// restore, collect first). An input without any JSON value is an error.
absl::Status DecodeClaims(absl::string_view input,
                          absl::FunctionRef<absl::Status(DecodedClaim)> sink);

// DecodeClaims on `threads` threads at once, for large inputs: the input
// is cut into its documents and list items (a light scan), which are then
// decoded concurrently, each claim once. `sink` is called from any of the
// threads, several at a time, in no particular order: it must be
// thread-safe, and DecodedClaim::ordinal tells the input order. Returns the
// error DecodeClaims would return (the first in input order); claims after
// it may have been handed to `sink` already.
absl::Status DecodeClaimsConcurrently(absl::string_view input, int threads,
                                      absl::FunctionRef<absl::Status(DecodedClaim)> sink);

// The JSON of the one YAML document of `yaml`, as Kubernetes reads YAML
// (sigs.k8s.io/yaml: YAML 1.1 plain scalars, string keys, aliases
// expanded), for programs that read a YAML stream a document at a time;
// DecodeClaims reads YAML input by the same rules. InvalidArgument naming
// the line and column of what is not YAML, or not one document.
absl::StatusOr<std::string> YamlToJson(absl::string_view yaml);

struct EncodeOptions {
  // Indentation per level, as in Go's json.MarshalIndent (kubectl uses four
  // spaces). Empty: compact output on one line.
  std::string indent = {};
};

// A ResourceClaim object (with kind and apiVersion).
std::string EncodeClaim(const ClaimRecord& record, const EncodeOptions& options = {});

// A ResourceClaimList in the API form: `items` without kind and apiVersion,
// `metadata.resourceVersion` set to `resource_version`, `[]` when empty.
std::string EncodeClaimList(absl::Span<const ClaimRecord> records,
                            absl::string_view resource_version, const EncodeOptions& options = {});

// Appends one claim as compact JSON: the building block of streaming writers
// (JSON lines, large lists). `with_type_meta` writes kind and apiVersion.
void AppendClaimJson(const ClaimRecord& record, bool with_type_meta, std::string* out);

}  // namespace claimstore

#endif  // CLAIMSTORE_CODEC_H_
