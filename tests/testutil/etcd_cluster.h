// EtcdCluster: a real etcd cluster for tests, on loopback only: N members
// of Debian's /usr/bin/etcd on free ports, each with a temporary data
// directory, stopped (SIGKILL) and removed when the object goes. Members
// can be killed (SIGKILL) and started again on the same ports and data.
// A member also dies with the thread that started it (PR_SET_PDEATHSIG), so
// that a crashed test leaves no etcd running: start, restart and destroy
// the cluster from a thread that outlives it (the test's main thread).
//
// Thread-safety: one thread at a time.
#ifndef CLAIMSTORE_TESTS_TESTUTIL_ETCD_CLUSTER_H_
#define CLAIMSTORE_TESTS_TESTUTIL_ETCD_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "claimstore/store.h"
#include "etcd/etcd_client.h"

namespace claimstore::testing {

// PEM files for a cluster with TLS and its clients (MakeTestTls).
struct EtcdTls {
  std::string ca_file;                            // the CA that signed the rest
  std::string server_cert_file, server_key_file;  // for 127.0.0.1
  std::string client_cert_file, client_key_file;  // a client of the CA
  std::string other_ca_file;                      // a CA that signed none of them
};

// Makes those files in `dir` (with openssl; ECDSA P-256, valid for a day).
absl::StatusOr<EtcdTls> MakeTestTls(const std::string& dir);

class EtcdCluster {
 public:
  // Starts `members` members and waits until the cluster has a leader and
  // takes writes. FailedPrecondition when etcd is not installed. With
  // `tls`, members serve clients over TLS only (https://) and require
  // client certificates signed by its CA (--client-cert-auth).
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(
      int members, std::optional<EtcdTls> tls = std::nullopt);
  ~EtcdCluster();

  // Every member's client URL ("http://127.0.0.1:PORT", or https://).
  std::vector<std::string> Endpoints() const;
  std::string Endpoint(int i) const;
  int size() const { return static_cast<int>(members_.size()); }

  // SIGKILL to member i (no-op when it is down).
  void Kill(int i);
  // Starts member i again with its data; waits until it serves. (etcd
  // serves a member's clients once it has published itself through the
  // cluster: seconds after it starts.)
  absl::Status Restart(int i);
  // Starts every member that is down, then waits until each serves.
  absl::Status StartStopped();
  bool Running(int i) const { return members_[i].pid > 0; }
  // The index of the member that leads, or -1 when none is known within
  // a few seconds.
  int Leader() const;

 private:
  struct Member {
    std::string name, data_dir, log;
    int client_port = 0, peer_port = 0;
    pid_t pid = -1;
  };
  EtcdCluster() = default;
  absl::Status Spawn(int i, bool fresh);
  absl::Status WaitServing(int i) const;
  // A client of member i alone.
  absl::StatusOr<std::unique_ptr<internal::EtcdClient>> ClientOf(int i,
                                                                 absl::Duration timeout) const;

  std::string dir_;
  std::optional<EtcdTls> tls_;
  std::string initial_cluster_;
  std::vector<Member> members_;
};

// The test binary's cluster of 3 members, started at the first call and
// stopped when the tests are over (a gtest environment); a test that
// cannot start it fails and aborts. Tests share it: each uses keys (a
// prefix) of its own.
EtcdCluster& TestCluster();

// A store's options for the shared mode on `endpoints` under `prefix`
// (keys of the test's own), with `timeout` per etcd request.
Options SharedOptions(std::vector<std::string> endpoints, const std::string& prefix,
                      absl::Duration timeout = Options().etcd_timeout);

}  // namespace claimstore::testing

#endif  // CLAIMSTORE_TESTS_TESTUTIL_ETCD_CLUSTER_H_
