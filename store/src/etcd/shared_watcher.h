// SharedWatcher: Store::Watch in the shared mode. Its events are etcd's
// history of the claims itself (a watch of the claims prefix with the
// previous values), so that every machine sees the same events at the same
// revisions (with gaps); a watcher from R hands over the claims' changes at
// revisions >= R. A thread of its own reads etcd's watch into a bounded
// queue and watches again when the stream breaks; compacted revisions are
// OutOfRange with the compact revision, as in the local feed.
//
// Thread-safety: as Watcher (Next from one thread at a time; Cancel from
// any thread).
//
// Design: docs/shared-mode.md, "The change feed".
#ifndef CLAIMSTORE_SRC_ETCD_SHARED_WATCHER_H_
#define CLAIMSTORE_SRC_ETCD_SHARED_WATCHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "claimstore/store.h"
#include "etcd/etcd_client.h"
#include "util/mutex.h"

namespace claimstore::internal {

class SharedWatcher : public Watcher {
 public:
  // The event of one etcd event: OK with *skip false (an event), OK with
  // *skip true (not a claim's), or an error that ends the watch.
  using EventOf = std::function<absl::Status(const mvccpb::Event&, bool* skip, WatchEvent*)>;

  // Watches `prefix` of `etcd` (which must outlive the watcher) from
  // revision `from`, or from etcd's next revision when `from` is 0.
  // OutOfRange with the compact revision when etcd has compacted `from`
  // (as the local feed); Unavailable when no member takes the watch within
  // the client's timeout.
  static absl::StatusOr<std::unique_ptr<Watcher>> Start(EtcdClient* etcd, std::string prefix,
                                                        uint64_t from, WatchOptions options,
                                                        EventOf event_of);
  ~SharedWatcher() override;

  absl::StatusOr<WatchEvent> Next(absl::Duration timeout) override;
  uint64_t next_revision() const override;
  void Cancel() override;

 private:
  SharedWatcher(EtcdClient* etcd, std::string prefix, uint64_t from, WatchOptions options,
                EventOf event_of);
  // A watch that hands over the events from `from` on (WatchStartFor).
  etcdserverpb::WatchCreateRequest Request(uint64_t from) const;
  // Start's error when etcd refused a read at WatchStartFor(from) as
  // compacted: OutOfRange with the compact revision.
  absl::Status CompactedStart(uint64_t from);
  // The reader thread, from the watch Start created (from `from`).
  void Run(std::unique_ptr<EtcdWatch> first, uint64_t from);
  // Ends the watch with `error` (read by Next once the queue is empty).
  void Fail(absl::Status error);

  EtcdClient* const etcd_;
  const std::string prefix_;
  const WatchOptions options_;
  const EventOf event_of_;

  mutable Mutex mu_;
  CondVar cv_;  // an event queued or taken, an error, Cancel
  std::deque<WatchEvent> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_);  // Next's: next_revision()
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  EtcdWatch* current_ ABSL_GUARDED_BY(mu_) = nullptr;  // the reader's, to cancel
  WatchCanceller canceller_;                           // of the reader's watch being made again
  std::thread reader_;
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_ETCD_SHARED_WATCHER_H_
