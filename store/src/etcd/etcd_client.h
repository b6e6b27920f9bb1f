// EtcdClient: the shared mode's connection to an etcd cluster (v3 API over
// gRPC): Txn, Range and Watch, with deadlines, fail-over between members
// (one gRPC channel each), and etcd's errors mapped to absl::Status in one
// place: Unavailable (no member answered, no leader, ...), InvalidArgument
// (etcd refused the request itself; etcd's message), OutOfRange (a
// compacted revision: CompactRevisionOf). A Txn is never sent twice: when
// its outcome is unknown, OutcomeUnknown() says so and the caller resolves it.
//
// Thread-safety: an EtcdClient is safe for concurrent use by any number of
// threads (gRPC channels and stubs are); an EtcdWatch is used by one thread
// at a time, except Cancel, which any thread may call.
//
// Members, fail-over, the errors in full: docs/shared-mode.md, "The etcd client".
#ifndef CLAIMSTORE_SRC_ETCD_ETCD_CLIENT_H_
#define CLAIMSTORE_SRC_ETCD_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace claimstore::internal {

struct EtcdOptions {
  // The members' client URLs: "http://127.0.0.1:2379" or "127.0.0.1:2379",
  // or all "https://HOST:PORT" (TLS; the member's certificate must name
  // HOST).
  std::vector<std::string> endpoints;
  // TLS (as etcdctl's --cacert, --cert, --key): PEM files of the CA that
  // signed the members' certificates (empty: gRPC's default roots), and of
  // this client's certificate and key (both or neither; etcd's
  // --client-cert-auth requires them). Only with https:// endpoints.
  std::string ca_file, cert_file, key_file;
  // The deadline of one request, fail-over included. Default: 5 s.
  absl::Duration request_timeout = absl::Seconds(5);
};

// Whether `status`, an error of EtcdClient::Txn, leaves open whether the
// Txn committed.
bool OutcomeUnknown(const absl::Status& status);

// The compact revision an OutOfRange error of a Range or Watch carries.
uint64_t CompactRevisionOf(const absl::Status& status);

// The revision to start an etcd watch at that hands over every event at
// `from` (> 0) and after, deletions included: the one before `from`, and
// events below `from` are dropped. etcd takes a watch from its compact
// revision itself, but a deletion at that revision went with the
// compaction; a watch from the revision before is cancelled as compacted
// instead (then re-list, or report it).
inline uint64_t WatchStartFor(uint64_t from) { return from > 1 ? from - 1 : 1; }

// Cancels the EtcdClient::Watch calls made with it, from another thread:
// the one in progress (its stream is cancelled) and every later one
// (Cancelled at once).
class WatchCanceller {
 public:
  void Cancel();

 private:
  friend class EtcdClient;
  // Registers an attempt's context; false once cancelled.
  bool Enter(grpc::ClientContext* context);
  void Leave();
  std::mutex mu_;
  bool cancelled_ = false;                  // guarded by mu_
  grpc::ClientContext* context_ = nullptr;  // guarded by mu_
};

// A watch of one key range (EtcdClient::Watch).
class EtcdWatch {
 public:
  ~EtcdWatch();
  // The next response, blocking until one comes: events in revision
  // order, or none (a progress notification; header.revision set). Errors: OutOfRange with the
  // compact revision when the start revision was compacted (the watch is over: re-list and watch
  // again), Unavailable when the stream broke (watch again from the last revision seen + 1),
  // Cancelled after Cancel().
  absl::StatusOr<etcdserverpb::WatchResponse> Next();
  // Makes a Next waiting now, and every later one, return Cancelled.
  void Cancel();

 private:
  friend class EtcdClient;
  EtcdWatch() = default;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriterInterface<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>>
      stream_;
  std::atomic<bool> cancelled_{false};
};

class EtcdClient {
 public:
  // Checks the endpoints and creates a channel per member; connects lazily
  // (the first request does).
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(const EtcdOptions& options);
  ~EtcdClient();

  // One Txn, sent once, to one member.
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);
  // A Txn that may land twice harmlessly (its compares or its writes make
  // a second copy change nothing that matters): sent again, up to three
  // times in all, while its outcome is unknown (*resent, when given, says
  // whether it was).
  absl::StatusOr<etcdserverpb::TxnResponse> TxnIdempotent(const etcdserverpb::TxnRequest& request,
                                                          bool* resent = nullptr);
  // A Range (linearizable unless request.serializable()); tried on each
  // member in turn until the deadline.
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request);
  // A watch, created on a member that confirms it. `stream_deadline`, when
  // set, ends the stream then (Next returns Unavailable).
  absl::StatusOr<std::unique_ptr<EtcdWatch>> Watch(
      const etcdserverpb::WatchCreateRequest& create, WatchCanceller* canceller = nullptr,
      absl::Time stream_deadline = absl::InfiniteFuture());
  // A lease of `ttl` (whole seconds, at least 1), not kept alive: keys put
  // with it go when it ends. Its ID.
  absl::StatusOr<int64_t> LeaseGrant(absl::Duration ttl);
  // Compacts etcd's history up to `revision` (physical: returns once the
  // compaction is done).
  absl::Status Compact(int64_t revision);
  // The member's status (Maintenance.Status) of endpoint `i` (tests: which
  // member leads).
  absl::StatusOr<etcdserverpb::StatusResponse> MemberStatus(size_t i);

  size_t endpoints() const { return members_.size(); }
  absl::Duration request_timeout() const { return options_.request_timeout; }

 private:
  struct Member {
    std::string endpoint;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
    std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  };
  explicit EtcdClient(const EtcdOptions& options) : options_(options) {}
  // The member to try first.
  size_t Preferred() const { return preferred_.load(std::memory_order_relaxed); }
  // Makes `call` (Member&, ClientContext*) -> grpc::Status on the preferred
  // member, then on the next while the error says another may take it.
  template <typename Call>
  absl::Status OnAMember(const char* what, Call call);
  void MoveOn(size_t from);

  const EtcdOptions options_;
  std::vector<Member> members_;
  std::atomic<size_t> preferred_{0};
};

// Tests: the next Txn whose first compare's key contains `key_part` fails
// as an unknown outcome: sent, committed and its reply dropped (`sent`),
// or never sent. `between`, when set, runs before the error is returned
// (another writer acting meanwhile). Once.
void FailNextTxnForTesting(std::string key_part, bool sent, std::function<void()> between);

// Keys: the end of the range of every key starting with `prefix` (etcd's
// clientv3.GetPrefixRangeEnd).
std::string PrefixRangeEnd(absl::string_view prefix);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_ETCD_ETCD_CLIENT_H_
