// The change feed of a store (Store::Watch): every committed change of a
// claim as one event, in revision order, as a Kubernetes watch delivers
// them; a Watcher hands them over, and tells a watcher that fell behind the
// feed's history to re-list (OutOfRange, as etcd's ErrCompacted).
//
// Thread-safety: see Watcher. The feed's layout on disk: docs/format.md;
// watching in the shared mode: docs/shared-mode.md.
#ifndef CLAIMSTORE_WATCH_H_
#define CLAIMSTORE_WATCH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "claimstore/claim_key.h"
#include "claimstore/claim_record.h"

namespace claimstore {

// One committed change of one claim.
struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  // The store revision of the change: every revision is one event.
  uint64_t revision = 0;
  ClaimKey key;
  // Always set. kAdded and kModified: the claim as written (its
  // mod_revision() is `revision`). kDeleted: the claim as it was when it
  // was deleted (its last write's revisions), as Kubernetes' DELETED events
  // carry the object's last state.
  std::optional<ClaimRecord> record;
  // kDeleted: the same as `record`. kModified, when the store was written
  // with Options::feed_records_before: the claim before the change.
  // Otherwise nullopt.
  std::optional<ClaimRecord> before;
};

// Which events a watcher hands over; every event when empty.
struct WatchOptions {
  std::string claim_namespace = {};  // only claims of this namespace
  std::string key_prefix = {};       // only claims whose "namespace/name" starts with this
};

// A watcher of the change feed (Store::Watch). Events come in revision
// order, each once, none skipped: a watcher that falls behind the feed's
// history is told so (OutOfRange) rather than moved ahead.
//
// Thread-safety: Next from one thread at a time; Cancel from any thread. A
// Watcher must be destroyed before its Store.
class Watcher {
 public:
  virtual ~Watcher();
  // The next event (that the options select), waiting up to `timeout` for
  // one to be committed. Errors:
  //   DeadlineExceeded  none came within `timeout`; call again
  //   OutOfRange        the events from next_revision() on were compacted
  //                     away before this watcher read them (CompactRevision()
  //                     of the error: re-list, then watch from the list's
  //                     revision + 1), as etcd's ErrCompacted; every later
  //                     call returns it too
  //   Cancelled         Cancel() was called
  //   DataLoss          a stored event is corrupt
  virtual absl::StatusOr<WatchEvent> Next(absl::Duration timeout) = 0;
  // The revision the next event is looked for from (events the options do
  // not select are passed over).
  virtual uint64_t next_revision() const = 0;
  // Makes a Next waiting now, and every later one, return Cancelled.
  virtual void Cancel() = 0;

 protected:
  Watcher() = default;
};

// The compact revision carried by an OutOfRange error of Store::Watch or
// Watcher::Next: events up to it are no longer in the feed.
std::optional<uint64_t> CompactRevision(const absl::Status& status);

}  // namespace claimstore

#endif  // CLAIMSTORE_WATCH_H_
