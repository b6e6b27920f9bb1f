// WriteGroup: the leader/follower queue of group commit (as RocksDB's
// db/write_thread.h). Writers queue; one leader hands every queued writer,
// itself included, to the commit function at once; the writes that queue
// up meanwhile form the next group, which the same leader commits too, once
// (Lead). So one commit (one RocksDB Write, one
// fsync) serves many writers, and the commit function runs on one thread
// at a time, in arrival order: what it applies is linearizable by
// construction.
//
// Thread-safety: Submit and Exclusive from any number of threads. The
// commit function, and the code inside an Exclusive scope, hold `leader`:
// state that only the leader touches is ABSL_GUARDED_BY(group.leader).
//
// Design (gathering synced writers): docs/design.md, section Group commit.
#ifndef CLAIMSTORE_SRC_WRITE_WRITE_GROUP_H_
#define CLAIMSTORE_SRC_WRITE_WRITE_GROUP_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/types/span.h"
#include "util/mutex.h"

namespace claimstore::internal {

// The capability of the thread that commits a write group or runs
// exclusively: no lock, a role that WriteGroup hands to one thread at a
// time. AssertHeld checks at run time that the calling thread has it.
class ABSL_LOCKABLE LeaderRole {
 public:
  void Acquire() ABSL_EXCLUSIVE_LOCK_FUNCTION();
  void Release() ABSL_UNLOCK_FUNCTION();
  // Aborts the process when the calling thread does not hold the role.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK();

 private:
  std::atomic<std::thread::id> owner_{};
};

class WriteGroup {
 public:
  // A queued writer: callers derive their write from it.
  class Writer {
   private:
    friend class WriteGroup;
    bool done_ = false;  // guarded by the group's mu_
  };

  struct Options {
    // Wait for the last group's writers to come back (synced writes).
    // Default: false.
    bool gather = false;
    // How long a gathering leader waits. Default: 200 µs.
    std::chrono::microseconds gather_window{200};
    // The most writers a gathering leader expects. Default: 64.
    size_t max_group = 64;
  };

  // Commits one group, in arrival order. Called with `leader` held.
  using CommitFn = std::function<void(absl::Span<Writer* const> group)>;

  WriteGroup(const Options& options, CommitFn commit);
  WriteGroup(const WriteGroup&) = delete;
  WriteGroup& operator=(const WriteGroup&) = delete;

  // Queues `writer` and returns once a group holding it has been committed
  // (the commit function returned for it), on this thread or another.
  void Submit(Writer* writer) ABSL_LOCKS_EXCLUDED(mu_);

  // While held, no group is in flight and none can start; the holder has
  // `leader`. Prefer the scoped Exclusive below.
  void BeginExclusive() ABSL_LOCKS_EXCLUDED(mu_) ABSL_EXCLUSIVE_LOCK_FUNCTION(leader);
  void EndExclusive() ABSL_LOCKS_EXCLUDED(mu_) ABSL_UNLOCK_FUNCTION(leader);

  LeaderRole leader;

 private:
  // Commits every queued writer. REQUIRES: this thread leads (leading_).
  void Lead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const CommitFn commit_;
  Mutex mu_;
  CondVar changed_;  // the queue, the leadership or a writer's state changed
  std::deque<Writer*> queue_ ABSL_GUARDED_BY(mu_);
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  // The writer of a leader while it waits for writers to join its group
  // (identifies that leader: a writer that completes the group takes over).
  Writer* gatherer_ ABSL_GUARDED_BY(mu_) = nullptr;
  // How many writers the next group should expect: the last leader's
  // groups', plus those who arrived while they were committed.
  size_t expected_ ABSL_GUARDED_BY(mu_) = 1;
};

// Holds a WriteGroup exclusively for its scope.
class ABSL_SCOPED_LOCKABLE Exclusive {
 public:
  explicit Exclusive(WriteGroup* group) ABSL_EXCLUSIVE_LOCK_FUNCTION(group->leader)
      : group_(group) {
    group_->BeginExclusive();
  }
  ~Exclusive() ABSL_UNLOCK_FUNCTION() { group_->EndExclusive(); }
  Exclusive(const Exclusive&) = delete;
  Exclusive& operator=(const Exclusive&) = delete;

 private:
  WriteGroup* const group_;
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_WRITE_WRITE_GROUP_H_
