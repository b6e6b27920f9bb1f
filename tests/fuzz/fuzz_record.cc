// Fuzz target: the stored-record verifier. Bytes the Verifier accepts must
// be safe to read: encoding and validation may not crash or read out of
// bounds (ASan watches).
#include <cstddef>
#include <cstdint>
#include <string>

#include "claimstore/codec.h"
#include "claimstore/validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<claimstore::ClaimRecord> record =
      claimstore::ClaimRecord::FromBytes(std::string(reinterpret_cast<const char*>(data), size));
  if (!record.ok()) return 0;
  (void)claimstore::EncodeClaim(*record);
  (void)claimstore::ValidateClaimStatus(nullptr, *record);
  (void)claimstore::ValidateClaimStatus(&*record, *record);
  return 0;
}
