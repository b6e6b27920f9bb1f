// WriteGroup on its own: the leader/follower queue over a commit function
// that records what it was given.
#include "write/write_group.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/mutex.h"

namespace claimstore::internal {
namespace {

struct TestWriter : WriteGroup::Writer {
  int thread = 0, sequence = 0;
  int commits = 0;  // written by the committing thread, read after Submit
};

// A commit function that checks it runs alone and as the leader, counts
// each writer's commits, and records group sizes and the order of writers.
class Recorder {
 public:
  explicit Recorder(std::chrono::microseconds delay = {}) : delay_(delay) {}

  WriteGroup::CommitFn Fn(WriteGroup* group) {
    return [this, group](absl::Span<WriteGroup::Writer* const> writers) {
      group->leader.AssertHeld();
      EXPECT_FALSE(in_commit_.exchange(true)) << "two commits at once";
      if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
      MutexLock lock(&mu_);
      sizes_.push_back(writers.size());
      for (WriteGroup::Writer* w : writers) {
        TestWriter* t = static_cast<TestWriter*>(w);
        ++t->commits;
        order_.emplace_back(t->thread, t->sequence);
      }
      in_commit_ = false;
    };
  }
  std::vector<size_t> sizes() {
    MutexLock lock(&mu_);
    return sizes_;
  }
  std::vector<std::pair<int, int>> order() {
    MutexLock lock(&mu_);
    return order_;
  }

 private:
  const std::chrono::microseconds delay_;
  std::atomic<bool> in_commit_{false};
  Mutex mu_;
  std::vector<size_t> sizes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, int>> order_ ABSL_GUARDED_BY(mu_);
};

TEST(WriteGroupTest, ALoneWriterCommitsItself) {
  Recorder recorder;
  WriteGroup* group_ptr = nullptr;
  WriteGroup group(WriteGroup::Options{},
                   [&](absl::Span<WriteGroup::Writer* const> w) { recorder.Fn(group_ptr)(w); });
  group_ptr = &group;
  TestWriter w;
  group.Submit(&w);
  EXPECT_EQ(w.commits, 1);
  EXPECT_THAT(recorder.sizes(), ::testing::ElementsAre(1u));
}

// Runs `threads` writers of `per_thread` writes each through a group and
// checks that every write was committed exactly once, before its Submit
// returned, and that each thread's writes were committed in its order.
void RaceWriters(const WriteGroup::Options& options, int threads, int per_thread,
                 std::chrono::microseconds delay, std::vector<size_t>* sizes) {
  Recorder recorder(delay);
  WriteGroup* group_ptr = nullptr;
  WriteGroup group(options,
                   [&](absl::Span<WriteGroup::Writer* const> w) { recorder.Fn(group_ptr)(w); });
  group_ptr = &group;
  std::vector<std::thread> workers;
  std::atomic<int> unconfirmed{0};
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        TestWriter w;
        w.thread = t;
        w.sequence = i;
        group.Submit(&w);
        if (w.commits != 1) ++unconfirmed;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  EXPECT_EQ(unconfirmed.load(), 0);
  std::vector<int> next(threads, 0);
  for (const auto& [thread, sequence] : recorder.order()) {
    EXPECT_EQ(sequence, next[thread]++) << "thread " << thread;
  }
  for (int t = 0; t < threads; ++t) EXPECT_EQ(next[t], per_thread);
  *sizes = recorder.sizes();
}

TEST(WriteGroupTest, EveryWriteIsCommittedOnceInOrderWithoutGathering) {
  std::vector<size_t> sizes;
  RaceWriters(WriteGroup::Options{}, 8, 500, std::chrono::microseconds(0), &sizes);
}

TEST(WriteGroupTest, EveryWriteIsCommittedOnceInOrderWhileGathering) {
  std::vector<size_t> sizes;
  RaceWriters(WriteGroup::Options{.gather = true}, 8, 300, std::chrono::microseconds(0), &sizes);
}

TEST(WriteGroupTest, WritersThatQueueDuringACommitShareTheNextOne) {
  // Each commit takes 2 ms: the other writers are all queued by then.
  std::vector<size_t> sizes;
  RaceWriters(WriteGroup::Options{}, 4, 20, std::chrono::microseconds(2000), &sizes);
  size_t writes = 0, largest = 0;
  for (size_t s : sizes) {
    writes += s;
    largest = std::max(largest, s);
  }
  EXPECT_EQ(writes, 80u);
  EXPECT_LT(sizes.size(), writes);  // some commits served several writers
  EXPECT_GE(largest, 2u);
}

TEST(WriteGroupTest, TheLeaderCommitsTheWritersQueuedDuringItsCommitOnceMore) {
  // Each commit records its thread and, the first two, takes 100 ms: the
  // next writer queues meanwhile (it is started 20 ms into the commit).
  Mutex mu;
  std::vector<std::thread::id> committed_on;
  std::atomic<int> started{0};
  WriteGroup group(WriteGroup::Options{}, [&](absl::Span<WriteGroup::Writer* const>) {
    const int n = started++;
    {
      MutexLock lock(&mu);
      committed_on.push_back(std::this_thread::get_id());
    }
    if (n < 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  });
  TestWriter a, b, c;
  const auto after_commit_starts = [&](int n) {
    while (started.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  std::thread ta([&] { group.Submit(&a); });
  const std::thread::id a_thread = ta.get_id();
  after_commit_starts(1);
  std::thread tb([&] { group.Submit(&b); });  // queues during a's commit
  after_commit_starts(2);
  std::thread tc([&] { group.Submit(&c); });  // queues during b's
  const std::thread::id c_thread = tc.get_id();
  ta.join();
  tb.join();
  tc.join();
  MutexLock lock(&mu);
  ASSERT_EQ(committed_on.size(), 3u);
  // b's write on a's thread, without waiting for b's thread to wake up to
  // lead; c's not (a leads once more at most): c leads it.
  EXPECT_EQ(committed_on[0], a_thread);
  EXPECT_EQ(committed_on[1], a_thread);
  EXPECT_EQ(committed_on[2], c_thread);
}

TEST(WriteGroupTest, NoGroupCommitsWhileHeldExclusively) {
  std::atomic<int> commits{0};
  WriteGroup group(WriteGroup::Options{},
                   [&](absl::Span<WriteGroup::Writer* const> w) { commits += w.size(); });
  std::thread writer;
  TestWriter w;
  {
    Exclusive exclusive(&group);
    group.leader.AssertHeld();  // the holder has the leader's role
    writer = std::thread([&] { group.Submit(&w); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(commits.load(), 0);
  }
  writer.join();
  EXPECT_EQ(commits.load(), 1);
}

TEST(WriteGroupDeathTest, TheLeadersStateIsRefusedToOtherThreads) {
  WriteGroup group(WriteGroup::Options{}, [](absl::Span<WriteGroup::Writer* const>) {});
  EXPECT_DEATH(group.leader.AssertHeld(), "off the leader's thread");
}

}  // namespace
}  // namespace claimstore::internal
