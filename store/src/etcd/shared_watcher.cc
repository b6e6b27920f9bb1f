#include "etcd/shared_watcher.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "feed/feed.h"
#include "util/status_macros.h"
#include "util/store_errors.h"

namespace claimstore::internal {
namespace {

// Events queued and not yet taken by Next, at most.
constexpr size_t kQueueMax = 4096;

std::chrono::steady_clock::time_point DeadlineIn(absl::Duration d) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             absl::ToChronoNanoseconds(std::min(d, absl::Hours(24 * 365))));
}

// etcd's OutOfRange (a read or watch at a compacted revision) as the
// feed's error for a watch from `from`.
absl::Status Compacted(uint64_t from, const absl::Status& out_of_range) {
  return FeedCompacted(from, CompactRevisionOf(out_of_range));
}

}  // namespace

SharedWatcher::SharedWatcher(EtcdClient* etcd, std::string prefix, uint64_t from,
                             WatchOptions options, EventOf event_of)
    : etcd_(etcd),
      prefix_(std::move(prefix)),
      options_(std::move(options)),
      event_of_(std::move(event_of)),
      next_(from) {}

etcdserverpb::WatchCreateRequest SharedWatcher::Request(uint64_t from) const {
  etcdserverpb::WatchCreateRequest create;
  create.set_key(prefix_);
  create.set_range_end(PrefixRangeEnd(prefix_));
  create.set_start_revision(static_cast<int64_t>(WatchStartFor(from)));
  create.set_prev_kv(true);  // a deleted claim's last state
  return create;
}

absl::StatusOr<std::unique_ptr<Watcher>> SharedWatcher::Start(EtcdClient* etcd, std::string prefix,
                                                              uint64_t from, WatchOptions options,
                                                              EventOf event_of) {
  // etcd's revision now: 0 watches from the next one.
  etcdserverpb::RangeRequest probe;
  probe.set_key(prefix);
  probe.set_range_end(PrefixRangeEnd(prefix));
  probe.set_count_only(true);
  CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse now, etcd->Range(probe));
  const uint64_t current = static_cast<uint64_t>(now.header().revision());
  if (from == 0) from = current + 1;
  std::unique_ptr<SharedWatcher> w(
      new SharedWatcher(etcd, std::move(prefix), from, std::move(options), std::move(event_of)));
  // A compacted start is refused here, as the local feed refuses it: etcd
  // would confirm the watch and cancel it after. A read at the revision
  // the watch starts from is refused the same way (etcd refuses both below
  // its compact revision).
  bool compacted = false;
  if (from <= current) {
    probe.set_revision(static_cast<int64_t>(WatchStartFor(from)));
    absl::StatusOr<etcdserverpb::RangeResponse> at = etcd->Range(probe);
    compacted = absl::IsOutOfRange(at.status());
    if (!compacted) CS_RETURN_IF_ERROR(at.status());
  }
  if (compacted) return w->CompactedStart(from);
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch = etcd->Watch(w->Request(from));
  if (absl::IsOutOfRange(watch.status()))
    return Compacted(from, watch.status());  // since the probe
  if (!watch.ok()) return watch.status();
  w->reader_ = std::thread(&SharedWatcher::Run, w.get(), *std::move(watch), from);
  return w;
}

absl::Status SharedWatcher::CompactedStart(uint64_t from) {
  // etcd's read error does not say up to where it compacted; a watch from
  // the same revision does, when etcd cancels it. The member the watch
  // goes to may not have applied the compaction yet (the read was
  // linearizable, the watch is not): it then takes the watch, which is
  // dropped after a while and made again, within the client's timeout.
  const absl::Time give_up = absl::Now() + etcd_->request_timeout();
  absl::Status last = absl::UnavailableError("no watch made");
  while (absl::Now() < give_up) {
    absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
        etcd_->Watch(Request(from), nullptr, std::min(give_up, absl::Now() + absl::Seconds(1)));
    if (watch.ok()) {
      absl::StatusOr<etcdserverpb::WatchResponse> r;
      do {
        r = (*watch)->Next();
      } while (r.ok());
      watch = r.status();
    }
    if (absl::IsOutOfRange(watch.status())) return Compacted(from, watch.status());
    last = watch.status();
    absl::SleepFor(absl::Milliseconds(100));  // the member catches up
  }
  return absl::UnavailableError(absl::StrCat(
      "etcd refused a read at revision ", WatchStartFor(from),
      " as compacted, but no watch from there was cancelled as compacted within ",
      absl::FormatDuration(etcd_->request_timeout()), " (last: ", last.message(), ")"));
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

void SharedWatcher::Run(std::unique_ptr<EtcdWatch> first, uint64_t from) {
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
  // `from`: the next revision to hand over. Events below it are ones read
  // before the stream broke (a watch is made again from the revision
  // before it; WatchStartFor).
  for (;;) {
    if (watch == nullptr) {
      // The stream broke: watch again (another member, when the client's
      // is gone).
      {
        MutexLock lock(&mu_);
        if (cancelled_) return;
      }
      absl::StatusOr<std::unique_ptr<EtcdWatch>> again = etcd_->Watch(Request(from), &canceller_);
      if (absl::IsOutOfRange(again.status())) return Fail(Compacted(from, again.status()));
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
      {
        MutexLock lock(&mu_);
        current_ = nullptr;
        if (cancelled_) return;
      }
      watch.reset();
      if (absl::IsOutOfRange(r.status())) return Fail(Compacted(from, r.status()));
      continue;
    }
    std::vector<WatchEvent> events;
    uint64_t last = 0;
    for (const mvccpb::Event& e : r->events()) {
      const uint64_t revision = static_cast<uint64_t>(e.kv().mod_revision());
      last = std::max(last, revision);
      if (revision < from) continue;  // handed over before the stream broke
      WatchEvent event;
      bool skip = false;
      if (absl::Status s = event_of_(e, &skip, &event); !s.ok()) {
        // The events before it are handed over first.
        MutexLock lock(&mu_);
        while (!cancelled_ && queue_.size() >= kQueueMax) cv_.Wait(&mu_);
        for (WatchEvent& queued : events) queue_.push_back(std::move(queued));
        if (error_.ok()) error_ = std::move(s);
        cv_.NotifyAll();
        return;
      }
      if (!skip) events.push_back(std::move(event));
    }
    if (last == 0) continue;  // a progress notification
    MutexLock lock(&mu_);
    while (!cancelled_ && queue_.size() >= kQueueMax) cv_.Wait(&mu_);
    if (cancelled_) return;
    for (WatchEvent& e : events) queue_.push_back(std::move(e));
    from = std::max(from, last + 1);
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
