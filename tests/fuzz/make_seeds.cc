// Writes seed inputs for the record and key fuzzers: the record bytes and
// index keys of the JSON seeds and of some generated claims.
#include <fstream>
#include <sstream>
#include <string>

#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "index/keys.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string records_dir = argv[1], keys_dir = argv[2];
  int n = 0;
  const auto add = [&](const claimstore::ClaimRecord& r) {
    std::ofstream(records_dir + "/seed" + std::to_string(n) + ".clm", std::ios::binary)
        << r.bytes();
    std::ofstream(keys_dir + "/seed" + std::to_string(n) + ".key", std::ios::binary)
        << claimstore::internal::DeviceKey("gpu.example.com", "node-1", "gpu-0",
                                           claimstore::internal::HoldingKind::kShare, "s",
                                           r.claim_namespace(), r.name());
    ++n;
  };
  for (int i = 3; i < argc; ++i) {
    std::ifstream in(argv[i]);
    std::stringstream ss;
    ss << in.rdbuf();
    (void)claimstore::DecodeClaims(ss.str(), [&](claimstore::DecodedClaim c) {
      add(c.record);
      return absl::OkStatus();
    });
  }
  for (int i = 0; i < 20; ++i) add(*claimstore::DecodeClaim(claimstore::GenerateClaimJson(i)));
  return 0;
}
