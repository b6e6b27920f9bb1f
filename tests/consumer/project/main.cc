// A program outside the claimstore tree, built against the installed package:
// the codec and the store, as the README shows them.
#include <fstream>
#include <iostream>
#include <sstream>

#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"

int Fail(const absl::Status& s) {
  std::cerr << s << "\n";
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  std::ifstream in(argv[1]);
  std::stringstream json;
  json << in.rdbuf();
  absl::StatusOr<claimstore::ClaimRecord> record = claimstore::DecodeClaim(json.str());
  if (!record.ok()) return Fail(record.status());
  const claimstore::fb::ClaimRecord& table = record->table();
  std::cout << record->claim_namespace() << "/" << record->name()
            << " results=" << table.status()->allocation()->results()->size()
            << " reservedFor=" << table.status()->reserved_for()->size() << "\n";

  auto store = claimstore::Store::Open(argv[2], {.sync_writes = true});
  if (!store.ok()) return Fail(store.status());
  claimstore::Store& s = **store;
  auto pending = claimstore::DecodeClaim(
      R"({"metadata":{"namespace":"team-a","name":"trainer","uid":"u1"},"status":{}})");
  if (!pending.ok()) return Fail(pending.status());
  if (auto put = s.Put(*pending); !put.ok()) return Fail(put.status());
  const claimstore::ClaimKey key{"team-a", "trainer"};
  auto allocation = claimstore::AllocationBuilder()
                        .AddResult({"gpus", "gpu.example.com", "node-7", "gpu-3", {}, {}})
                        .SetNodeName("node-7")
                        .Build();
  if (auto a = s.Allocate(key, allocation); !a.ok()) return Fail(a.status());
  auto read = s.Get(key);
  if (!read.ok()) return Fail(read.status());
  auto r = s.Reserve(key, {"", "pods", "pod-a", "pod-uid"},
                     {.mod_revision = read->record.mod_revision()});
  if (!r.ok()) return Fail(r.status());
  auto mine = s.ClaimsReservedFor("pod-uid");
  auto who = s.ClaimsUsingDevice({"gpu.example.com", "node-7", "gpu-3"});
  if (!mine.ok() || !who.ok()) return 1;
  std::cout << "store revision=" << r->revision << " claims=" << mine->claims.size()
            << " holder=" << who->holdings.at(0).claim.ToString() << "\n";
  return claimstore::EncodeClaim(*record).empty() ? 1 : 0;
}
