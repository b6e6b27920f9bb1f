#include "etcd/shared_watcher.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "feed.h"
#include "store_errors.h"

namespace claimstore::internal {
namespace {

// Events queued and not yet taken by Next, at most.
constexpr size_t kQueueMax = 4096;

std::chrono::steady_clock::time_point DeadlineIn(absl::Duration d) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             absl::ToChronoNanoseconds(std::min(d, absl::Hours(24 * 365))));
}

}  // namespace

SharedWatcher::SharedWatcher(EtcdClient* etcd, std::string prefix, uint64_t from,
                             WatchOptions options, EventOf event_of)
    : etcd_(etcd),
      prefix_(std::move(prefix)),
      options_(std::move(options)),
      event_of_(std::move(event_of)),
      read_next_(from),
      next_(from) {}

etcdserverpb::WatchCreateRequest SharedWatcher::Request(uint64_t from) const {
  etcdserverpb::WatchCreateRequest create;
  create.set_key(prefix_);
  create.set_range_end(PrefixRangeEnd(prefix_));
  create.set_start_revision(static_cast<int64_t>(from));
  create.set_prev_kv(true);  // a deleted claim's last state
  return create;
}

absl::StatusOr<std::unique_ptr<Watcher>> SharedWatcher::Start(EtcdClient* etcd,
                                                              std::string prefix, uint64_t from,
                                                              bool compacted, WatchOptions options,
                                                              EventOf event_of) {
  std::unique_ptr<SharedWatcher> w(
      new SharedWatcher(etcd, std::move(prefix), from, std::move(options), std::move(event_of)));
  // A compacted start is drained from the revision its probe was refused
  // at (from - 1): etcd refuses reads below its compact revision and
  // cancels watches from below it, saying up to where it compacted. A
  // watch from the compact revision itself it would take and never cancel.
  const uint64_t start = compacted ? std::max<uint64_t>(from - 1, 1) : from;
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch = etcd->Watch(w->Request(start));
  if (compacted && watch.ok()) {
    absl::StatusOr<etcdserverpb::WatchResponse> r;
    do {
      r = (*watch)->Next();
    } while (r.ok());
    watch = r.status();
  }
  if (absl::IsOutOfRange(watch.status())) {
    return FeedCompacted(from, CompactRevisionOf(watch.status()));
  }
  if (!watch.ok()) return watch.status();
  w->reader_ = std::thread(&SharedWatcher::Run, w.get(), *std::move(watch));
  return w;
}

SharedWatcher::~SharedWatcher() {
  Cancel();
  if (reader_.joinable()) reader_.join();
}

void SharedWatcher::Cancel() {
  MutexLock lock(&mu_);
  cancelled_ = true;
  if (current_ != nullptr) current_->Cancel();
  canceller_.Cancel();  // a watch being made again
  cv_.NotifyAll();
}

void SharedWatcher::Fail(absl::Status error) {
  MutexLock lock(&mu_);
  if (error_.ok()) error_ = std::move(error);
  cv_.NotifyAll();
}

void SharedWatcher::Run(std::unique_ptr<EtcdWatch> first) {
  std::unique_ptr<EtcdWatch> watch = std::move(first);
  // However Run ends, Cancel no longer reaches the watch it is about to
  // destroy.
  struct Forget {
    SharedWatcher* w;
    ~Forget() {
      MutexLock lock(&w->mu_);
      w->current_ = nullptr;
    }
  } forget{this};
  {
    MutexLock lock(&mu_);
    if (cancelled_) return;
    current_ = watch.get();
  }
  for (;;) {
    if (watch == nullptr) {
      // The stream broke: watch again from the revision after the last
      // one read (another member, when the client's is gone).
      uint64_t from;
      {
        MutexLock lock(&mu_);
        if (cancelled_) return;
        from = read_next_;
      }
      absl::StatusOr<std::unique_ptr<EtcdWatch>> again = etcd_->Watch(Request(from), &canceller_);
      if (absl::IsOutOfRange(again.status())) {
        return Fail(FeedCompacted(from, CompactRevisionOf(again.status())));
      }
      MutexLock lock(&mu_);
      if (cancelled_) return;
      if (!again.ok()) {
        // Not reachable: Next times out meanwhile; try again shortly.
        cv_.WaitUntil(&mu_, DeadlineIn(absl::Milliseconds(100)));
        continue;
      }
      watch = *std::move(again);
      current_ = watch.get();
    }
    absl::StatusOr<etcdserverpb::WatchResponse> r = watch->Next();
    if (!r.ok()) {
      uint64_t from;
      {
        MutexLock lock(&mu_);
        current_ = nullptr;
        if (cancelled_) return;
        from = read_next_;
      }
      watch.reset();
      if (absl::IsOutOfRange(r.status())) {
        return Fail(FeedCompacted(from, CompactRevisionOf(r.status())));
      }
      continue;
    }
    std::vector<WatchEvent> events;
    uint64_t last = 0;
    for (const mvccpb::Event& e : r->events()) {
      last = std::max(last, static_cast<uint64_t>(e.kv().mod_revision()));
      WatchEvent event;
      bool skip = false;
      if (absl::Status s = event_of_(e, &skip, &event); !s.ok()) return Fail(std::move(s));
      if (!skip) events.push_back(std::move(event));
    }
    if (last == 0) continue;  // a progress notification
    MutexLock lock(&mu_);
    while (!cancelled_ && queue_.size() >= kQueueMax) cv_.Wait(&mu_);
    if (cancelled_) return;
    for (WatchEvent& e : events) queue_.push_back(std::move(e));
    read_next_ = std::max(read_next_, last + 1);
    cv_.NotifyAll();
  }
}

absl::StatusOr<WatchEvent> SharedWatcher::Next(absl::Duration timeout) {
  const auto deadline = DeadlineIn(timeout);
  MutexLock lock(&mu_);
  for (;;) {
    if (cancelled_) return absl::CancelledError("the watch was cancelled");
    while (!queue_.empty()) {
      WatchEvent e = std::move(queue_.front());
      queue_.pop_front();
      next_ = e.revision + 1;
      cv_.NotifyAll();  // room for the reader
      if (Selected(options_, e)) return e;
    }
    if (!error_.ok()) return error_;
    if (!cv_.WaitUntil(&mu_, deadline) && queue_.empty() && error_.ok() && !cancelled_) {
      return absl::DeadlineExceededError("no event within the timeout");
    }
  }
}

uint64_t SharedWatcher::next_revision() const {
  MutexLock lock(&mu_);
  return next_;
}

}  // namespace claimstore::internal
