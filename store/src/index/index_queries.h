// The index lookups of the public API (ClaimsReservedFor,
// ClaimsUsingDevice) over any source of index keys: the published state of
// a writable store, or RocksDB for a read-only one. Each builds the key
// prefix of its query, has the source scan it, and turns the keys into the
// public types.
#ifndef CLAIMSTORE_SRC_INDEX_INDEX_QUERIES_H_
#define CLAIMSTORE_SRC_INDEX_INDEX_QUERIES_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "claimstore/store.h"

namespace claimstore::internal {

using KeyVisitor = absl::FunctionRef<void(absl::string_view key)>;
// Visits the keys of one index that start with `prefix`, in key order, at
// one state; returns the store revision of that state.
using IndexScan =
    absl::FunctionRef<absl::StatusOr<uint64_t>(const std::string& prefix, KeyVisitor visit)>;

// The claims reserved for `consumer_uid`. DataLoss for a malformed key.
absl::StatusOr<ClaimKeys> FindReservations(absl::string_view consumer_uid, IndexScan scan);

// The holdings `query` selects. InvalidArgument for a query that skips a
// level (a device without a pool, a shareID without a device); DataLoss for
// a malformed key.
absl::StatusOr<DeviceHoldings> FindHoldings(const DeviceQuery& query, IndexScan scan);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_INDEX_INDEX_QUERIES_H_
