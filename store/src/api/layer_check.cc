// Linked from the layers below db/ alone (store/CMakeLists.txt): that it
// links at all proves they need no RocksDB. Run as a test, it decodes and
// validates a claim, so that the objects it links are the ones used.
#include <cstdio>

#include "claimstore/codec.h"
#include "claimstore/validation.h"

int main() {
  absl::StatusOr<claimstore::ClaimRecord> claim =
      claimstore::DecodeClaim(R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1",)"
                              R"("metadata":{"name":"c","namespace":"ns","uid":"u"},"status":{}})");
  if (!claim.ok()) {
    std::fprintf(stderr, "%s\n", std::string(claim.status().message()).c_str());
    return 1;
  }
  if (!claimstore::ValidateClaimStatus(nullptr, *claim).empty()) return 1;
  std::printf("the layers below db/ decode and validate without RocksDB\n");
  return 0;
}
