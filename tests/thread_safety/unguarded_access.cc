// Must NOT compile under -Wthread-safety -Werror: each function touches
// state guarded by a lock or by the write leader's role without holding
// it. ctest (thread-safety preset) expects the compiler to refuse this
// file, which proves the annotations of mutex.h and write_group.h are
// checked.
#include "mutex.h"
#include "write_group.h"

namespace claimstore::internal {

class Guarded {
 public:
#if defined(CASE_MUTEX)
  int Read() { return value_; }  // mu_ not held
#elif defined(CASE_ROLE)
  int Read() { return leader_only_; }  // group_.leader not held
#elif defined(CASE_SHARED)
  void Write() {
    ReaderLock lock(&shared_);
    shared_value_ = 1;  // needs the writer lock
  }
#else
#error "define CASE_MUTEX, CASE_ROLE or CASE_SHARED"
#endif

 private:
  Mutex mu_;
  int value_ ABSL_GUARDED_BY(mu_) = 0;
  SharedMutex shared_;
  int shared_value_ ABSL_GUARDED_BY(shared_) = 0;
  WriteGroup group_{WriteGroup::Options{}, [](absl::Span<WriteGroup::Writer* const>) {}};
  int leader_only_ ABSL_GUARDED_BY(group_.leader) = 0;
};

}  // namespace claimstore::internal
