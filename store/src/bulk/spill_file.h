// SpillFile: memory for a bulk load's encoded records that the kernel may
// write out to disk and drop, instead of anonymous memory it must keep:
// chunks of a shared mapping of an unnamed file (O_TMPFILE) in the
// database's directory. Where that cannot be done safely, Create or
// Allocate says so and the caller uses the heap. Memory Allocate returns
// lives as long as the SpillFile.
//
// Thread-safety: Allocate may be called from any number of threads.
//
// Design: docs/design.md, section The bulk load's spill file.
#ifndef CLAIMSTORE_SRC_BULK_SPILL_FILE_H_
#define CLAIMSTORE_SRC_BULK_SPILL_FILE_H_

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "util/mutex.h"

namespace claimstore::internal {

class SpillFile {
 public:
  // A spill file in `dir`, or null when the file system cannot make one.
  static std::unique_ptr<SpillFile> Create(const std::string& dir);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  // `size` bytes (a multiple of the page size), zeroed, page-aligned, valid
  // until the SpillFile goes; null when the disk has no room for them.
  char* Allocate(size_t size);

 private:
  explicit SpillFile(int fd) : fd_(fd) {}

  const int fd_;
  Mutex mu_;
  off_t size_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<void*, size_t>> maps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_BULK_SPILL_FILE_H_
