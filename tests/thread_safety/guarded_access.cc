// The counterpart of unguarded_access.cc: the same accesses with the locks
// held compile cleanly, so a refusal there is the analysis, not the file.
#include "mutex.h"
#include "write_group.h"

namespace claimstore::internal {

class Guarded {
 public:
  int ReadMutex() {
    MutexLock lock(&mu_);
    return value_;
  }
  int ReadRole() {
    Exclusive exclusive(&group_);
    return leader_only_;
  }
  void WriteShared() {
    WriterLock lock(&shared_);
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
