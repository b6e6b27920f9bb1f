// Fuzz target: restore input. The piecewise decoder (large inputs) and the
// whole-document decoder must agree on JSON: both accept or both refuse,
// and the claims they pass on are the same. Every claim is validated (YAML
// too).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/strip.h"
#include "claimstore/codec.h"
#include "claimstore/validation.h"
#include "codec/codec_internal.h"
#include "codec/yaml_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> whole, pieces;
  const absl::Status a = claimstore::DecodeClaims(input, [&](claimstore::DecodedClaim c) {
    (void)claimstore::ValidateClaimStatus(nullptr, c.record);
    whole.emplace_back(c.record.bytes());
    return absl::OkStatus();
  });
  // The piecewise decoder reads JSON after the byte-order mark; YAML has
  // one path only (checked above for crashes and by validation).
  absl::string_view json = input;
  absl::ConsumePrefix(&json, "\xEF\xBB\xBF");
  if (claimstore::internal::LooksLikeYaml(json)) return 0;
  const absl::Status b =
      claimstore::internal::DecodeClaimsStreaming(json, [&](claimstore::DecodedClaim c) {
        pieces.emplace_back(c.record.bytes());
        return absl::OkStatus();
      });
  // Before an error the paths may have passed on different numbers of claims
  // (the whole-document path checks a batch's syntax first, the piecewise
  // path a list's kind first); the claims they both passed on are the same.
  const size_t common = pieces.size() < whole.size() ? pieces.size() : whole.size();
  for (size_t i = 0; i < common; ++i) {
    if (pieces[i] != whole[i]) std::abort();
  }
  if (a.ok() != b.ok()) std::abort();
  if (a.ok() && pieces.size() != whole.size()) std::abort();
  return 0;
}
