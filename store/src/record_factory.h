// Construction of ClaimRecords from buffers claimstore itself just built.
#ifndef CLAIMSTORE_SRC_RECORD_FACTORY_H_
#define CLAIMSTORE_SRC_RECORD_FACTORY_H_

#include <string>

#include "claimstore/claim_record.h"

namespace claimstore::internal {

class RecordFactory {
 public:
  // Wraps bytes produced by a FlatBufferBuilder in this process (the codec,
  // the store's write path): correct by construction, so the Verifier pass
  // that ClaimRecord::FromBytes makes for untrusted bytes is skipped.
  // REQUIRES: `bytes` is a finished ClaimRecord buffer with the CLM1
  // identifier.
  static ClaimRecord FromBuilt(std::string bytes) {
    return ClaimRecord(std::move(bytes));
  }
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_RECORD_FACTORY_H_
