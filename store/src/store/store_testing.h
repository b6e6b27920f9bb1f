// Test hooks of the store, not part of the public API.
#ifndef CLAIMSTORE_SRC_STORE_STORE_TESTING_H_
#define CLAIMSTORE_SRC_STORE_STORE_TESTING_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bulk/bulk_load.h"
#include "claimstore/store.h"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace claimstore::internal {

// Store::Open, with RocksDB doing its file I/O through `env` (the fault
// injection tests' file system). `env` must outlive the store. Creating a
// new database still goes through the process's own file system.
absl::StatusOr<std::unique_ptr<Store>> OpenStoreWithEnv(absl::string_view path,
                                                        const Options& options, rocksdb::Env* env);

// SetBulkTableFileBytesForTesting: bulk/bulk_load.h.

// Calls `hook` (null: none) on the write leader right after each commit's
// RocksDB write returns, before the commit is published: for measuring
// what follows a commit (bench/watch_bench: commit to watcher).
void SetCommitHookForTesting(void (*hook)());

// How many table files the writable `store` has at level 0, over its
// records, consumers and devices families (a bulk load's files overlap
// nothing and go below it).
uint64_t LevelZeroFilesForTesting(Store& store);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_STORE_STORE_TESTING_H_
