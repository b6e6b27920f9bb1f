// A program outside the claimstore tree, built against the installed package.
#include <fstream>
#include <iostream>
#include <sstream>

#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::ifstream in(argv[1]);
  std::stringstream json;
  json << in.rdbuf();
  absl::StatusOr<claimstore::ClaimRecord> record = claimstore::DecodeClaim(json.str());
  if (!record.ok()) {
    std::cerr << record.status() << "\n";
    return 1;
  }
  const claimstore::fb::ClaimRecord& table = record->table();
  std::cout << record->claim_namespace() << "/" << record->name()
            << " results=" << table.status()->allocation()->results()->size()
            << " reservedFor=" << table.status()->reserved_for()->size() << "\n";
  return claimstore::EncodeClaim(*record).empty() ? 1 : 0;
}
