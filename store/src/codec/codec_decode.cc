// The codec's public entry points for input (codec.h): the whole-input
// reader for most inputs, the piecewise one for large inputs and to locate
// a syntax error simdjson found somewhere in a batch.

#include <optional>
#include <utility>

#include "claimstore/codec.h"
#include "codec/codec_internal.h"
#include "codec/decode_status.h"
#include "codec/document_reader.h"

namespace claimstore {

absl::Status DecodeClaims(absl::string_view input,
                          absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  if (input.size() > internal::kStreamingThreshold) {
    return internal::DecodePiecewise(input, sink).ToStatus();
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
    if (!located.ok()) return located.ToStatus();
  }
  return s.ToStatus();
}

absl::Status DecodeClaimsConcurrently(absl::string_view input, int threads,
                                      absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  if (threads <= 1 || input.size() < (size_t{1} << 20)) return DecodeClaims(input, sink);
  const internal::DecodeStatus s = internal::DecodeConcurrently(input, threads, sink);
  return s.ToStatus();
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
