#include "write/write_group.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

namespace claimstore::internal {

void LeaderRole::Acquire() { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }

void LeaderRole::Release() { owner_.store(std::thread::id(), std::memory_order_relaxed); }

void LeaderRole::AssertHeld() const {
  if (owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) {
    std::fprintf(stderr, "claimstore: leader-only state touched off the leader's thread\n");
    std::abort();
  }
}

WriteGroup::WriteGroup(const Options& options, CommitFn commit)
    : options_(options), commit_(std::move(commit)) {}

void WriteGroup::Submit(Writer* writer) {
  MutexLock lock(&mu_);
  queue_.push_back(writer);
  if (gatherer_ != nullptr && queue_.size() >= expected_) {
    // This writer completes the group a leader is gathering: commit it
    // here, instead of waking the leader to do it. With synced writes the
    // wake-up was a fifth of each group's cycle; the leader's own wake-up
    // now overlaps the next group.
    gatherer_ = nullptr;
    Lead();
    return;
  }
  while (!writer->done_ && (leading_ || queue_.front() != writer)) changed_.Wait(&mu_);
  if (writer->done_) return;
  leading_ = true;
  if (options_.gather && expected_ > queue_.size()) {
    // Writers of the last group (or that arrived while it was committed)
    // are likely coming back: wait briefly for them, so that they share
    // this commit's fsync instead of each paying for one.
    gatherer_ = writer;
    const auto deadline = std::chrono::steady_clock::now() + options_.gather_window;
    while (gatherer_ == writer && changed_.WaitUntil(&mu_, deadline)) {
    }
    if (gatherer_ != writer) {
      // The writer that completed the group committed it, this one with
      // it (and another leader may be gathering by now).
      while (!writer->done_) changed_.Wait(&mu_);
      return;
    }
    gatherer_ = nullptr;
  }
  Lead();
}

void WriteGroup::Lead() {
  // The group queued at the start, then once more the writers that queued
  // while it was committed: handed to a leader of their own, they would
  // wait for that thread to wake up first (two threads writing in turn
  // spent each write's wake-up so). Twice at most, so that the leader's
  // own write returns after at most one group of others'.
  size_t served = 0;
  for (int round = 0; round < 2 && !queue_.empty(); ++round) {
    std::vector<Writer*> group(queue_.begin(), queue_.end());
    queue_.clear();
    mu_.Unlock();
    leader.Acquire();
    commit_(group);
    leader.Release();
    mu_.Lock();
    for (Writer* w : group) w->done_ = true;
    served += group.size();
  }
  expected_ = std::min(served + queue_.size(), options_.max_group);
  leading_ = false;
  changed_.NotifyAll();
}

void WriteGroup::BeginExclusive() {
  {
    MutexLock lock(&mu_);
    while (leading_) changed_.Wait(&mu_);
    leading_ = true;
  }
  leader.Acquire();
}

void WriteGroup::EndExclusive() {
  leader.Release();
  MutexLock lock(&mu_);
  leading_ = false;
  changed_.NotifyAll();
}

}  // namespace claimstore::internal
