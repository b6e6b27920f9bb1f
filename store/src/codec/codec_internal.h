// Codec internals shared with the tests.
#ifndef CLAIMSTORE_SRC_CODEC_CODEC_INTERNAL_H_
#define CLAIMSTORE_SRC_CODEC_CODEC_INTERNAL_H_

#include <cstddef>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "claimstore/codec.h"
#include "codec/decode_status.h"

namespace claimstore::internal {

// Inputs larger than this are decoded a piece at a time (each top-level value,
// and each element of a list's items), so that memory is bounded by the
// largest claim instead of the whole input.
inline constexpr size_t kStreamingThreshold = size_t{16} << 20;

// DecodeClaims' piecewise path, whatever the input's size
// (piecewise_reader.cc).
DecodeStatus DecodePiecewise(absl::string_view input,
                             absl::FunctionRef<absl::Status(DecodedClaim)> sink);
// DecodeClaimsConcurrently's work (piecewise_reader.cc).
DecodeStatus DecodeConcurrently(absl::string_view input, int threads,
                                absl::FunctionRef<absl::Status(DecodedClaim)> sink);
// The same, with the location written into the message (for tests).
absl::Status DecodeClaimsStreaming(absl::string_view input,
                                   absl::FunctionRef<absl::Status(DecodedClaim)> sink);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_CODEC_CODEC_INTERNAL_H_
