// SpillFile: memory for a bulk load's encoded records that the kernel may
// write out to disk and drop, instead of anonymous memory it must keep.
//
// A restore of a million claims holds about 800 MB of encoded records
// between decoding and the sorted write. Anonymous memory that large must
// stay resident (or go to swap, which servers seldom have): a node or a
// container with a memory limit kills the restore. Chunks of a shared
// mapping of an unnamed file in the database's directory (O_TMPFILE) are
// page cache instead: while memory is plentiful they stay where they are
// and cost what anonymous memory would; under pressure the kernel writes
// them back and reclaims them, as it does the mapped input. The file has
// no name, so a crash leaves nothing behind. It is made only on ext4, XFS
// and tmpfs, where fallocate reserves the blocks up front, so that writing
// a mapped page cannot fail for lack of space (which on a mapping would be
// SIGBUS); and a chunk is taken only while the file system keeps three
// times what was spilled free besides, for the load's table files. Where
// any of this does not hold, Create or Allocate says so and the caller
// uses the heap. As for the mapped input, a disk that fails to read back
// a page the kernel had written out ends the process (SIGBUS).
//
// Thread-safety: Allocate may be called from any number of threads.
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
