// The codec's public entry points for input (codec.h): the whole-input
// reader for most inputs, the piecewise one for large inputs and to locate
// a syntax error simdjson found somewhere in a batch.

#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "claimstore/codec.h"
#include "codec/codec_internal.h"
#include "codec/decode_status.h"
#include "codec/document_reader.h"
#include "codec/yaml_reader.h"
#include "util/status_macros.h"

namespace claimstore {
namespace {

constexpr absl::string_view kUtf8Bom = "\xEF\xBB\xBF";

// An input in UTF-16 (by its byte-order mark, or a NUL beside its first
// character): named as such, for it is not UTF-8.
absl::Status CheckNotUtf16(absl::string_view input) {
  const auto starts = [&](absl::string_view prefix) { return absl::StartsWith(input, prefix); };
  const char* order = nullptr;
  if (starts("\xFF\xFE") || (input.size() >= 2 && input[0] != '\0' && input[1] == '\0')) {
    order = "little-endian";
  } else if (starts("\xFE\xFF") || (input.size() >= 2 && input[0] == '\0' && input[1] != '\0')) {
    order = "big-endian";
  }
  if (order == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the input is UTF-16 (", order,
                   "); claims are read as UTF-8: convert it first, e.g. iconv -f UTF-16 -t UTF-8"));
}

// Skips a UTF-8 byte-order mark at the start of *input and says how many
// bytes it had; UTF-16 input is refused.
absl::StatusOr<size_t> SkipByteOrderMark(absl::string_view* input) {
  CS_RETURN_IF_ERROR(CheckNotUtf16(*input));
  return absl::ConsumePrefix(input, kUtf8Bom) ? kUtf8Bom.size() : 0;
}

absl::Status DecodeUtf8(absl::string_view input, size_t skipped,
                        absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  if (input.size() > internal::kStreamingThreshold) {
    return internal::DecodePiecewise(input, sink).ToStatus(input, skipped);
  }
  uint64_t ordinal = 0;
  const internal::DecodeStatus s =
      internal::DecodeDocuments(input.data(), input.size(), /*nested=*/false, [&](DecodedClaim c) {
        c.ordinal = ordinal++;
        return sink(std::move(c));
      });
  if (s.unplaced()) {
    // simdjson checks a whole batch of documents before the first is
    // parsed, so where a syntax error is is unknown. Decoding piece by piece
    // (the sink has seen its claims already) finds where it really is.
    const internal::DecodeStatus located =
        internal::DecodePiecewise(input, [](DecodedClaim) { return absl::OkStatus(); });
    if (!located.ok()) return located.ToStatus(input, skipped);
  }
  return s.ToStatus(input, skipped);
}

}  // namespace

absl::Status DecodeClaims(absl::string_view input,
                          absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  CS_ASSIGN_OR_RETURN(const size_t skipped, SkipByteOrderMark(&input));
  if (internal::LooksLikeYaml(input)) return internal::DecodeYaml(input, skipped, sink);
  return DecodeUtf8(input, skipped, sink);
}

absl::Status DecodeClaimsConcurrently(absl::string_view input, int threads,
                                      absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  if (threads <= 1 || input.size() < (size_t{1} << 20)) return DecodeClaims(input, sink);
  CS_ASSIGN_OR_RETURN(const size_t skipped, SkipByteOrderMark(&input));
  if (internal::LooksLikeYaml(input)) return internal::DecodeYamlPipelined(input, skipped, sink);
  const internal::DecodeStatus s = internal::DecodeConcurrently(input, threads, sink);
  return s.ToStatus(input, skipped);
}

absl::StatusOr<std::string> YamlToJson(absl::string_view yaml) {
  absl::ConsumePrefix(&yaml, kUtf8Bom);
  return internal::YamlDocumentToJson(yaml);
}

absl::StatusOr<ClaimRecord> DecodeClaim(absl::string_view json) {
  std::optional<ClaimRecord> result;
  absl::Status s = DecodeClaims(json, [&](DecodedClaim claim) -> absl::Status {
    if (claim.item >= 0 || claim.event != WatchEventType::kNone || result.has_value()) {
      return absl::InvalidArgumentError(
          "expected exactly one ResourceClaim object, not a list, a watch "
          "event or several documents");
    }
    result = std::move(claim.record);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (!result.has_value()) {
    return absl::InvalidArgumentError("expected exactly one ResourceClaim object, found none");
  }
  return *std::move(result);
}

}  // namespace claimstore
