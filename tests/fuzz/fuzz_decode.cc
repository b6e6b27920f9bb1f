// Fuzz target: the JSON decoder. Whatever decodes must encode, decode again
// and encode to the same text (the codec's round trip is a fixed point).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "claimstore/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  (void)claimstore::DecodeClaims(input, [](claimstore::DecodedClaim c) {
    const std::string once = claimstore::EncodeClaim(c.record);
    absl::StatusOr<claimstore::ClaimRecord> again = claimstore::DecodeClaim(once);
    if (!again.ok()) {
      std::fprintf(stderr, "re-decoding failed: %s\n%s\n", again.status().ToString().c_str(),
                   once.c_str());
      std::abort();
    }
    if (claimstore::EncodeClaim(*again) != once) {
      std::fprintf(stderr, "encoding is not a fixed point:\n%s\n", once.c_str());
      std::abort();
    }
    return absl::OkStatus();
  });
  return 0;
}
