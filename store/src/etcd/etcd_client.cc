#include "etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "util/status_macros.h"

namespace claimstore::internal {
namespace {

constexpr char kOutcomeUnknownUrl[] = "type.claimstore.dev/etcd-outcome-unknown";
constexpr char kEtcdCompactUrl[] = "type.claimstore.dev/etcd-compact-revision";

std::chrono::system_clock::time_point DeadlineAfter(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// etcd's refusals that happen before a proposal (nothing was committed):
// the server's rpctypes errors of 3.4.
bool RefusedBeforeProposal(absl::string_view message) {
  for (absl::string_view m : {"etcdserver: no leader", "etcdserver: too many requests",
                              "etcdserver: not capable", "etcdserver: too many operations",
                              "etcdserver: request is too large", "etcdserver: duplicate key",
                              "etcdserver: key is not provided", "etcdserver: unhealthy cluster"}) {
    if (absl::StartsWith(message, m)) return true;
  }
  return false;
}

// A member worth leaving for another one at once: not reachable, no
// leader, stopping, or not yet a voting member.
bool TryAnotherMember(const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) return true;
  return absl::StartsWith(s.error_message(), "etcdserver: no leader") ||
         absl::StartsWith(s.error_message(), "etcdserver: too many requests") ||
         absl::StartsWith(s.error_message(), "etcdserver: not capable") ||
         absl::StartsWith(s.error_message(), "etcdserver: rpc not supported for learner");
}

absl::Status FromGrpc(const grpc::Status& s, absl::string_view endpoint, absl::string_view what) {
  const std::string message = absl::StrCat("etcd ", endpoint, ": ", what, ": ", s.error_message());
  // etcd's transient refusals (RESOURCE_EXHAUSTED, FAILED_PRECONDITION):
  // try again, not a bad request.
  if (absl::StartsWith(s.error_message(), "etcdserver: too many requests") ||
      absl::StartsWith(s.error_message(), "etcdserver: not capable")) {
    return absl::UnavailableError(message);
  }
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return absl::InvalidArgumentError(message);
    case grpc::StatusCode::OUT_OF_RANGE:
      return absl::OutOfRangeError(message);
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::PermissionDeniedError(message);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return absl::InvalidArgumentError(message);  // a message over gRPC's size limit
    default:
      return absl::UnavailableError(message);
  }
}

struct TxnFault {
  std::mutex mu;
  std::string key_part;  // empty: none armed
  bool sent = false;
  std::function<void()> between;
};

TxnFault& Fault() {
  static auto* fault = new TxnFault;
  return *fault;
}

absl::Status UnknownOutcome(absl::Status s) {
  s.SetPayload(kOutcomeUnknownUrl, absl::Cord("1"));
  return s;
}

}  // namespace

void FailNextTxnForTesting(std::string key_part, bool sent, std::function<void()> between) {
  std::lock_guard<std::mutex> lock(Fault().mu);
  Fault().key_part = std::move(key_part);
  Fault().sent = sent;
  Fault().between = std::move(between);
}

bool OutcomeUnknown(const absl::Status& status) {
  return status.GetPayload(kOutcomeUnknownUrl).has_value();
}

uint64_t CompactRevisionOf(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kEtcdCompactUrl);
  uint64_t v = 0;
  if (payload.has_value() && absl::SimpleAtoi(std::string(*payload), &v)) return v;
  return 0;
}

std::string PrefixRangeEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

namespace {

// The contents of a PEM file an option names.
absl::StatusOr<std::string> ReadPem(absl::string_view option, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    return absl::InvalidArgumentError(absl::StrCat(option, ": Invalid value: \"", path,
                                                   "\": cannot be opened: ", std::strerror(errno)));
  }
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, ": Invalid value: \"", path, "\": cannot be read"));
  }
  if (out.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, ": Invalid value: \"", path, "\": not a PEM file"));
  }
  return out;
}

// The channel credentials of `options`: TLS when the endpoints are
// https://, else none.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> CredentialsOf(const EtcdOptions& options,
                                                                        bool tls) {
  const bool files =
      !options.ca_file.empty() || !options.cert_file.empty() || !options.key_file.empty();
  if (!tls) {
    if (files) {
      return absl::InvalidArgumentError(
          "etcd TLS files: Forbidden: the endpoints are http:// (TLS needs https:// endpoints)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "etcd TLS files: Invalid value: a client certificate and its key go together (both or "
        "neither)");
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.ca_file.empty()) {
    CS_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem("etcd CA file", options.ca_file));
  }
  if (!options.cert_file.empty()) {
    CS_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem("etcd certificate file", options.cert_file));
    CS_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem("etcd key file", options.key_file));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const EtcdOptions& options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("etcd endpoints: Required value");
  }
  const bool tls = absl::StartsWith(options.endpoints[0], "https://");
  CS_ASSIGN_OR_RETURN(const std::shared_ptr<grpc::ChannelCredentials> credentials,
                      CredentialsOf(options, tls));
  std::unique_ptr<EtcdClient> client(new EtcdClient(options));
  for (size_t i = 0; i < options.endpoints.size(); ++i) {
    absl::string_view e = options.endpoints[i];
    if (absl::StartsWith(e, "https://") != tls) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoints[", i, "]: Invalid value: \"", e, "\": endpoints[0] is ",
                       tls ? "https://" : "not https://", ": all use TLS or none does"));
    }
    absl::ConsumePrefix(&e, tls ? "https://" : "http://");
    while (absl::ConsumeSuffix(&e, "/")) continue;
    if (e.empty() || e.find(':') == absl::string_view::npos ||
        e.find('/') != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoints[", i, "]: Invalid value: \"", options.endpoints[i],
                       "\": expected host:port, http://host:port or https://host:port"));
    }
    grpc::ChannelArguments args;
    // Reconnect soon after a member comes back (gRPC's default backoff
    // starts at 1 s and grows to 120 s). (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS
    // is also the connect timeout in gRPC 1.51: left at its 20 s.)
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetMaxReceiveMessageSize(64 << 20);
    // Keepalive pings while calls are open (the follower's watch always
    // is), so that a member gone silent (a dropped network, not a closed
    // connection) breaks its watch within seconds instead of TCP's
    // minutes. Not more often than etcd's --grpc-keepalive-min-time (5 s)
    // allows.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    // A distinct channel per client: members are not shared with other
    // clients of the process (their stalls are not ours).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    Member m;
    m.endpoint = std::string(e);
    m.channel = grpc::CreateCustomChannel(m.endpoint, credentials, args);
    m.kv = etcdserverpb::KV::NewStub(m.channel);
    m.watch = etcdserverpb::Watch::NewStub(m.channel);
    m.maintenance = etcdserverpb::Maintenance::NewStub(m.channel);
    m.lease = etcdserverpb::Lease::NewStub(m.channel);
    client->members_.push_back(std::move(m));
  }
  return client;
}

EtcdClient::~EtcdClient() = default;

void EtcdClient::MoveOn(size_t from) {
  size_t expected = from;
  preferred_.compare_exchange_strong(expected, (from + 1) % members_.size(),
                                     std::memory_order_relaxed);
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::TxnIdempotent(
    const etcdserverpb::TxnRequest& request, bool* resent) {
  absl::StatusOr<etcdserverpb::TxnResponse> r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (resent != nullptr && attempt > 0) *resent = true;
    r = Txn(request);
    if (r.ok() || !OutcomeUnknown(r.status())) break;
  }
  return r;
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  // The test fault (FailNextTxnForTesting), when it matches this Txn.
  bool faulty = false, fault_sent = false;
  std::function<void()> between;
  if (request.compare_size() > 0) {
    TxnFault& fault = Fault();
    std::lock_guard<std::mutex> lock(fault.mu);
    if (!fault.key_part.empty() &&
        request.compare(0).key().find(fault.key_part) != std::string::npos) {
      faulty = true;
      fault_sent = fault.sent;
      between = std::move(fault.between);
      fault.key_part.clear();
    }
  }
  if (faulty) {
    absl::Status lost = UnknownOutcome(
        absl::UnavailableError("etcd: the connection broke (a test fault; outcome unknown)"));
    if (fault_sent) {
      faulty = false;  // send it, then drop the reply
      absl::StatusOr<etcdserverpb::TxnResponse> sent_reply = Txn(request);
      (void)sent_reply;
    }
    if (between) between();
    return lost;
  }
  const absl::Time deadline = absl::Now() + options_.request_timeout;
  // A Txn is sent to a connected member only (waiting up to a second for
  // one to connect, then trying the next), so that a member that is down
  // costs no ambiguity: what fails before the call was sent is retried
  // on another member; once sent, an error leaves the outcome open.
  absl::Status last = absl::UnavailableError("etcd: no endpoint");
  for (size_t tried = 0; tried < 2 * members_.size() && absl::Now() < deadline; ++tried) {
    const size_t i = (Preferred() + tried) % members_.size();
    Member& m = members_[i];
    if (m.channel->GetState(/*try_to_connect=*/true) != GRPC_CHANNEL_READY &&
        !m.channel->WaitForConnected(
            absl::ToChronoTime(std::min(deadline, absl::Now() + absl::Seconds(1))))) {
      last = absl::UnavailableError(absl::StrCat("etcd ", m.endpoint, ": not reachable"));
      MoveOn(i);
      continue;
    }
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    etcdserverpb::TxnResponse response;
    grpc::Status s = m.kv->Txn(&context, request, &response);
    if (s.ok()) return response;
    absl::Status mapped = FromGrpc(s, m.endpoint, "txn");
    if (RefusedBeforeProposal(s.error_message())) {
      if (!TryAnotherMember(s)) return mapped;
      last = mapped;
      MoveOn(i);
      continue;
    }
    if (mapped.code() == absl::StatusCode::kUnavailable) {
      MoveOn(i);
      mapped = UnknownOutcome(
          absl::UnavailableError(absl::StrCat(mapped.message(), " (outcome unknown)")));
    }
    return mapped;
  }
  return last;
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const etcdserverpb::RangeRequest& request) {
  const absl::Time deadline = absl::Now() + options_.request_timeout;
  absl::Status last = absl::UnavailableError("etcd: no endpoint");
  for (size_t attempt = 0;; ++attempt) {
    const size_t i = Preferred();
    Member& m = members_[i];
    grpc::ClientContext context;
    // Each member gets a share of what is left, so that one that hangs
    // (a member cut off from the others waits for a leader) leaves time
    // for the rest.
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    context.set_deadline(DeadlineAfter(
        std::max(left / static_cast<int64_t>(members_.size()), absl::Milliseconds(200))));
    etcdserverpb::RangeResponse response;
    grpc::Status s = m.kv->Range(&context, request, &response);
    if (s.ok()) return response;
    last = FromGrpc(s, m.endpoint, "range");
    if (s.error_code() == grpc::StatusCode::OUT_OF_RANGE) return last;
    if (!TryAnotherMember(s) && s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) return last;
    MoveOn(i);
    if (attempt + 1 >= members_.size()) absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::UnavailableError(absl::StrCat("etcd: no member answered a read within ",
                                             absl::FormatDuration(options_.request_timeout),
                                             " (last: ", last.message(), ")"));
}

template <typename Call>
absl::Status EtcdClient::OnAMember(const char* what, Call call) {
  absl::Status last = absl::UnavailableError("etcd: no endpoint");
  for (size_t tried = 0; tried < members_.size(); ++tried) {
    const size_t i = Preferred();
    grpc::ClientContext context;
    context.set_deadline(DeadlineAfter(options_.request_timeout));
    grpc::Status s = call(members_[i], &context);
    if (s.ok()) return absl::OkStatus();
    last = FromGrpc(s, members_[i].endpoint, what);
    if (!TryAnotherMember(s)) return last;
    MoveOn(i);
  }
  return last;
}

absl::StatusOr<int64_t> EtcdClient::LeaseGrant(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)))));
  etcdserverpb::LeaseGrantResponse response;
  CS_RETURN_IF_ERROR(OnAMember("lease grant", [&](Member& m, grpc::ClientContext* context) {
    return m.lease->LeaseGrant(context, request, &response);
  }));
  return response.id();
}

absl::Status EtcdClient::Compact(int64_t revision) {
  etcdserverpb::CompactionRequest request;
  request.set_revision(revision);
  request.set_physical(true);
  etcdserverpb::CompactionResponse response;
  return OnAMember("compact", [&](Member& m, grpc::ClientContext* context) {
    return m.kv->Compact(context, request, &response);
  });
}

absl::StatusOr<etcdserverpb::StatusResponse> EtcdClient::MemberStatus(size_t i) {
  if (i >= members_.size()) return absl::InvalidArgumentError("no such endpoint");
  grpc::ClientContext context;
  context.set_deadline(DeadlineAfter(options_.request_timeout));
  etcdserverpb::StatusResponse response;
  grpc::Status s =
      members_[i].maintenance->Status(&context, etcdserverpb::StatusRequest(), &response);
  if (!s.ok()) return FromGrpc(s, members_[i].endpoint, "status");
  return response;
}

void WatchCanceller::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

bool WatchCanceller::Enter(grpc::ClientContext* context) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return false;
  context_ = context;
  return true;
}

void WatchCanceller::Leave() {
  std::lock_guard<std::mutex> lock(mu_);
  context_ = nullptr;
}

absl::StatusOr<std::unique_ptr<EtcdWatch>> EtcdClient::Watch(
    const etcdserverpb::WatchCreateRequest& create, WatchCanceller* canceller,
    absl::Time stream_deadline) {
  const absl::Time deadline = std::min(absl::Now() + options_.request_timeout, stream_deadline);
  absl::Status last = absl::UnavailableError("etcd: no endpoint");
  while (absl::Now() < deadline) {
    const size_t i = Preferred();
    Member& m = members_[i];
    std::unique_ptr<EtcdWatch> w(new EtcdWatch());
    if (canceller != nullptr && !canceller->Enter(&w->context_)) {
      return absl::CancelledError("etcd watch cancelled");
    }
    // The attempt's context is the canceller's until the attempt is over.
    struct Leave {
      WatchCanceller* canceller;
      ~Leave() {
        if (canceller != nullptr) canceller->Leave();
      }
    } leave{canceller};
    // etcd requires a leader for watches created with this metadata key:
    // a member cut off from the quorum refuses instead of serving a watch
    // that never delivers (clientv3.WithRequireLeader).
    w->context_.AddMetadata("hasleader", "true");
    if (stream_deadline != absl::InfiniteFuture()) {
      w->context_.set_deadline(absl::ToChronoTime(stream_deadline));
    }
    w->stream_ = m.watch->Watch(&w->context_);
    etcdserverpb::WatchRequest request;
    *request.mutable_create_request() = create;
    if (w->stream_->Write(request)) {
      // The first response confirms the watch (created) or refuses it.
      absl::StatusOr<etcdserverpb::WatchResponse> first = w->Next();
      if (first.ok() && first->created()) return w;
      if (first.status().code() == absl::StatusCode::kOutOfRange) return first.status();
      last = first.ok() ? absl::UnavailableError("etcd: a watch not confirmed") : first.status();
    } else {
      last = FromGrpc(w->stream_->Finish(), m.endpoint, "watch");
      w->stream_.reset();  // finished: the destructor must not finish it again
    }
    MoveOn(i);
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::UnavailableError(absl::StrCat("etcd: no member took a watch within ",
                                             absl::FormatDuration(options_.request_timeout),
                                             " (last: ", last.message(), ")"));
}

EtcdWatch::~EtcdWatch() {
  if (stream_ != nullptr) {
    context_.TryCancel();
    stream_->Finish().ok();
  }
}

void EtcdWatch::Cancel() {
  cancelled_.store(true);
  context_.TryCancel();
}

absl::StatusOr<etcdserverpb::WatchResponse> EtcdWatch::Next() {
  if (cancelled_.load()) return absl::CancelledError("etcd watch cancelled");
  if (stream_ == nullptr) return absl::UnavailableError("etcd watch broke");
  etcdserverpb::WatchResponse response;
  if (!stream_->Read(&response)) {
    if (cancelled_.load()) return absl::CancelledError("etcd watch cancelled");
    grpc::Status s = stream_->Finish();
    stream_.reset();
    return absl::UnavailableError(absl::StrCat("etcd watch broke: ", s.error_message()));
  }
  if (response.compact_revision() > 0) {
    absl::Status s = absl::OutOfRangeError(
        absl::StrCat("etcd: the watch's start revision was compacted (compact revision ",
                     response.compact_revision(), ")"));
    s.SetPayload(kEtcdCompactUrl, absl::Cord(absl::StrCat(response.compact_revision())));
    return s;
  }
  if (response.canceled()) {
    return absl::UnavailableError(
        absl::StrCat("etcd cancelled the watch: ", response.cancel_reason()));
  }
  return response;
}

}  // namespace claimstore::internal
