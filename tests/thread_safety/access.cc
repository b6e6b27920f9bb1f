// Compile tests of the locking annotations (mutex.h, write_group.h), run by
// ctest in the thread-safety preset (clang, -Wthread-safety -Werror).
// Compiled as it is, every access holds its guard and the file compiles;
// with -DUNGUARDED_MUTEX, _ROLE or _SHARED one access is made without its
// guard, and clang must refuse the file. So a refusal is the analysis, and
// a missing refusal means the annotations stopped being checked.
#include "util/mutex.h"
#include "write/write_group.h"

namespace claimstore::internal {

class Guarded {
 public:
  int ReadMutex() {
#ifndef UNGUARDED_MUTEX
    MutexLock lock(&mu_);
#endif
    return value_;
  }
  int ReadRole() {
#ifndef UNGUARDED_ROLE
    Exclusive exclusive(&group_);
#endif
    return leader_only_;
  }
  void WriteShared() {
#ifndef UNGUARDED_SHARED
    WriterLock lock(&shared_);
#else
    ReaderLock lock(&shared_);  // a reader may not write
#endif
    shared_value_ = 1;
  }
  int ReadShared() {
    ReaderLock lock(&shared_);
    return shared_value_;
  }

 private:
  Mutex mu_;
  int value_ ABSL_GUARDED_BY(mu_) = 0;
  SharedMutex shared_;
  int shared_value_ ABSL_GUARDED_BY(shared_) = 0;
  WriteGroup group_{WriteGroup::Options{}, [](absl::Span<WriteGroup::Writer* const>) {}};
  int leader_only_ ABSL_GUARDED_BY(group_.leader) = 0;
};

}  // namespace claimstore::internal
