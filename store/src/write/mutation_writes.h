// MutationWrites: the single-claim writes of a Store (Put, Delete,
// Reserve, Unreserve, Allocate, Deallocate, SetDeviceStatus), each defined
// once as its input checks and its mutation (mutations.h), for every store
// that writes: the local write path (StoreImpl) and the shared mode
// (SharedStore) differ only in how they commit a mutation, their Write.
//
// Thread-safety: as Store.
#ifndef CLAIMSTORE_SRC_WRITE_MUTATION_WRITES_H_
#define CLAIMSTORE_SRC_WRITE_MUTATION_WRITES_H_

#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "claimstore/store.h"
#include "index/device_rule.h"
#include "write/mutations.h"

namespace claimstore::internal {

class MutationWrites : public Store {
 public:
  absl::StatusOr<WriteResult> Put(const ClaimRecord& record, const Preconditions& pre) final;
  absl::StatusOr<WriteResult> Delete(const ClaimKey& key, const Preconditions& pre) final;
  absl::StatusOr<WriteResult> Reserve(const ClaimKey& key, const ConsumerRef& consumer,
                                      const Preconditions& pre) final;
  absl::StatusOr<WriteResult> Unreserve(const ClaimKey& key, absl::string_view consumer_uid,
                                        const Preconditions& pre) final;
  absl::StatusOr<WriteResult> Allocate(const ClaimKey& key, const Allocation& allocation,
                                       const Preconditions& pre,
                                       absl::Span<const DeviceCapacity> capacity) final;
  absl::StatusOr<WriteResult> Deallocate(const ClaimKey& key, const Preconditions& pre) final;
  absl::StatusOr<WriteResult> SetDeviceStatus(const ClaimKey& key, const DeviceStatuses& statuses,
                                              const Preconditions& pre) final;

 protected:
  // A mutation of one claim: its current record (null: absent) to what the
  // write does.
  using MutateFn = absl::FunctionRef<absl::StatusOr<Mutation>(const ClaimRecord* current)>;
  // Commits `mutate` of claim `key` under `pre`, with Allocate's capacity
  // limits (null: none), and returns its result.
  virtual absl::StatusOr<WriteResult> Write(const ClaimKey& key, const Preconditions& pre,
                                            MutateFn mutate,
                                            const std::vector<CapacityLimit>* capacity) = 0;
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_WRITE_MUTATION_WRITES_H_
