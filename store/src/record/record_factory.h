// Construction of ClaimRecords inside the library.
#ifndef CLAIMSTORE_SRC_RECORD_RECORD_FACTORY_H_
#define CLAIMSTORE_SRC_RECORD_RECORD_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "claimstore/claim_record.h"

namespace claimstore::internal {

class RecordFactory {
 public:
  // Wraps bytes produced by a FlatBufferBuilder in this process (the codec,
  // the store's write path): correct by construction, so the Verifier pass
  // that ClaimRecord::FromBytes makes for untrusted bytes is skipped.
  // REQUIRES: `bytes` is a finished ClaimRecord buffer with the CLM1
  // identifier.
  static ClaimRecord FromBuilt(std::string bytes);

  // Bytes read from storage, kept alive by `holder` (e.g. a pinned RocksDB
  // value): verified, and used in place when 8-byte aligned (FlatBuffers
  // reads scalars in place); otherwise copied once into an aligned buffer.
  // Returns DataLoss when verification fails.
  static absl::StatusOr<ClaimRecord> FromStorage(std::shared_ptr<const void> holder,
                                                 absl::string_view bytes);
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_RECORD_RECORD_FACTORY_H_
