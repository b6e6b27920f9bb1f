#include "testutil/etcd_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "etcd/etcd_client.h"
#include "gtest/gtest.h"

namespace claimstore::testing {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";

// A port the kernel hands out for loopback now, not one handed out before
// by this process.
absl::StatusOr<int> FreePort() {
  static std::set<int>* used = new std::set<int>;
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return absl::InternalError("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    close(fd);
    if (port > 0 && used->insert(port).second) return port;
  }
  return absl::InternalError("no free port");
}

// The last lines of a member's log, for an error that names the member.
std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::deque<std::string> lines;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > 10) lines.pop_front();
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace

absl::StatusOr<EtcdTls> MakeTestTls(const std::string& dir) {
  EtcdTls t;
  t.ca_file = dir + "/ca.pem";
  t.server_cert_file = dir + "/server.pem";
  t.server_key_file = dir + "/server-key.pem";
  t.client_cert_file = dir + "/client.pem";
  t.client_key_file = dir + "/client-key.pem";
  t.other_ca_file = dir + "/other-ca.pem";
  {
    std::ofstream(dir + "/server.ext")
        << "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n";
    std::ofstream(dir + "/client.ext") << "extendedKeyUsage=clientAuth\n";
  }
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string d = "'" + dir + "'";
  const std::vector<std::string> commands = {
      absl::StrCat("openssl req -x509 ", key, " -keyout ", d, "/ca-key.pem -out ", d,
                   "/ca.pem -days 1 -subj /CN=claimstore-test-ca"),
      absl::StrCat("openssl req -x509 ", key, " -keyout ", d, "/other-ca-key.pem -out ", d,
                   "/other-ca.pem -days 1 -subj /CN=claimstore-test-other-ca"),
      absl::StrCat("openssl req ", key, " -keyout ", d, "/server-key.pem -out ", d,
                   "/server.csr -subj /CN=127.0.0.1"),
      absl::StrCat("openssl x509 -req -in ", d, "/server.csr -CA ", d, "/ca.pem -CAkey ", d,
                   "/ca-key.pem -CAcreateserial -days 1 -extfile ", d, "/server.ext -out ", d,
                   "/server.pem"),
      absl::StrCat("openssl req ", key, " -keyout ", d, "/client-key.pem -out ", d,
                   "/client.csr -subj /CN=claimstore-test-client"),
      absl::StrCat("openssl x509 -req -in ", d, "/client.csr -CA ", d, "/ca.pem -CAkey ", d,
                   "/ca-key.pem -CAcreateserial -days 1 -extfile ", d, "/client.ext -out ", d,
                   "/client.pem"),
  };
  for (const std::string& c : commands) {
    const std::string quiet = c + " >" + d + "/openssl.log 2>&1";
    if (std::system(quiet.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("`", c, "` failed: ", LogTail(dir + "/openssl.log"),
                                              " (tools/deps.sh installs openssl)"));
    }
  }
  return t;
}

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(int members,
                                                                std::optional<EtcdTls> tls) {
  if (access(kEtcd, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kEtcd, " is not installed (tools/deps.sh installs etcd-server)"));
  }
  std::unique_ptr<EtcdCluster> c(new EtcdCluster());
  c->tls_ = std::move(tls);
  char tmpl[] = "/tmp/claimstore-etcd-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp");
  c->dir_ = tmpl;
  std::vector<std::string> peers;
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = absl::StrCat("m", i);
    m.data_dir = absl::StrCat(c->dir_, "/", m.name);
    m.log = absl::StrCat(c->dir_, "/", m.name, ".log");
    auto client = FreePort();
    auto peer = FreePort();
    if (!client.ok()) return client.status();
    if (!peer.ok()) return peer.status();
    m.client_port = *client;
    m.peer_port = *peer;
    peers.push_back(absl::StrCat(m.name, "=http://127.0.0.1:", m.peer_port));
    c->members_.push_back(std::move(m));
  }
  c->initial_cluster_ = absl::StrJoin(peers, ",");
  for (int i = 0; i < members; ++i) {
    if (absl::Status s = c->Spawn(i, /*fresh=*/true); !s.ok()) return s;
  }
  for (int i = 0; i < members; ++i) {
    if (absl::Status s = c->WaitServing(i); !s.ok()) return s;
  }
  return c;
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) Kill(i);
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string EtcdCluster::Endpoint(int i) const {
  return absl::StrCat(tls_.has_value() ? "https" : "http",
                      "://127.0.0.1:", members_[i].client_port);
}

absl::StatusOr<std::unique_ptr<internal::EtcdClient>> EtcdCluster::ClientOf(
    int i, absl::Duration timeout) const {
  internal::EtcdOptions options;
  options.endpoints = {Endpoint(i)};
  options.request_timeout = timeout;
  if (tls_.has_value()) {
    options.ca_file = tls_->ca_file;
    options.cert_file = tls_->client_cert_file;
    options.key_file = tls_->client_key_file;
  }
  return internal::EtcdClient::Connect(options);
}

std::vector<std::string> EtcdCluster::Endpoints() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) out.push_back(Endpoint(i));
  return out;
}

absl::Status EtcdCluster::Spawn(int i, bool fresh) {
  Member& m = members_[i];
  const std::string client_url = Endpoint(i);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", m.peer_port);
  std::vector<std::string> args = {
      kEtcd,
      "--name",
      m.name,
      "--data-dir",
      m.data_dir,
      "--listen-client-urls",
      client_url,
      "--advertise-client-urls",
      client_url,
      "--listen-peer-urls",
      peer_url,
      "--initial-advertise-peer-urls",
      peer_url,
      "--initial-cluster",
      initial_cluster_,
      "--initial-cluster-state",
      fresh ? "new" : "existing",
      "--initial-cluster-token",
      dir_,
      "--logger",
      "zap",
      "--log-level",
      "warn",
      // Loopback: elections in a fraction of the default's 1 s.
      "--heartbeat-interval",
      "50",
      "--election-timeout",
      "500",
  };
  if (tls_.has_value()) {
    for (const std::string& a :
         {std::string("--cert-file"), tls_->server_cert_file, std::string("--key-file"),
          tls_->server_key_file, std::string("--trusted-ca-file"), tls_->ca_file,
          std::string("--client-cert-auth")}) {
      args.push_back(a);
    }
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // fork + exec rather than posix_spawn: the member is told to die with
  // the thread that started it (PR_SET_PDEATHSIG), so that a test binary
  // that crashes leaves no etcd behind.
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int log = open(m.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int null = open("/dev/null", O_RDONLY);
    if (log < 0 || null < 0) _exit(127);
    dup2(null, 0);
    dup2(log, 1);
    dup2(log, 2);
    execv(kEtcd, argv.data());
    _exit(127);
  }
  m.pid = pid;
  return absl::OkStatus();
}

absl::Status EtcdCluster::WaitServing(int i) const {
  // A member serves once it has published itself through the cluster;
  // etcd retries a publish that found no leader after its request timeout
  // (5 s + 2 election timeouts), so two or three of those may pass.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::Status last;
  while (absl::Now() < deadline) {
    if (members_[i].pid > 0 && waitpid(members_[i].pid, nullptr, WNOHANG) == members_[i].pid) {
      return absl::InternalError(
          absl::StrCat("etcd member ", i, " exited; its log ends:\n", LogTail(members_[i].log)));
    }
    // A new connection each time: one client kept from before the member
    // served stayed unable to reach it for up to gRPC's connect timeout
    // (20 s) after it did (restarts took 15-20 s that way, now 0.1-1 s).
    auto client = ClientOf(i, absl::Milliseconds(500));
    if (!client.ok()) return client.status();
    // A linearizable read needs a leader: the member serves.
    etcdserverpb::RangeRequest r;
    r.set_key("health");
    auto got = (*client)->Range(r);
    if (got.ok()) return absl::OkStatus();
    last = got.status();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("etcd member ", i,
                                                  " did not serve within 60 s: ", last.message(),
                                                  "; its log ends:\n", LogTail(members_[i].log)));
}

void EtcdCluster::Kill(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return;
  kill(m.pid, SIGKILL);
  waitpid(m.pid, nullptr, 0);
  m.pid = -1;
}

absl::Status EtcdCluster::Restart(int i) {
  Kill(i);
  if (absl::Status s = Spawn(i, /*fresh=*/false); !s.ok()) return s;
  return WaitServing(i);
}

absl::Status EtcdCluster::StartStopped() {
  std::vector<int> started;
  for (int i = 0; i < size(); ++i) {
    if (Running(i)) continue;
    if (absl::Status s = Spawn(i, /*fresh=*/false); !s.ok()) return s;
    started.push_back(i);
  }
  for (int i : started) {
    if (absl::Status s = WaitServing(i); !s.ok()) return s;
  }
  return absl::OkStatus();
}

int EtcdCluster::Leader() const {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    for (int i = 0; i < size(); ++i) {
      if (!Running(i)) continue;
      auto client = ClientOf(i, absl::Milliseconds(500));
      if (!client.ok()) continue;
      auto status = (*client)->MemberStatus(0);
      if (status.ok() && status->leader() != 0 &&
          status->leader() == status->header().member_id()) {
        return i;
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return -1;
}

namespace {

std::unique_ptr<EtcdCluster>& TestClusterSlot() {
  static auto* cluster = new std::unique_ptr<EtcdCluster>;
  return *cluster;
}

class StopTestCluster : public ::testing::Environment {
 public:
  void TearDown() override { TestClusterSlot().reset(); }
};

}  // namespace

EtcdCluster& TestCluster() {
  std::unique_ptr<EtcdCluster>& slot = TestClusterSlot();
  if (slot == nullptr) {
    static const bool registered = [] {
      ::testing::AddGlobalTestEnvironment(new StopTestCluster);
      return true;
    }();
    (void)registered;
    absl::StatusOr<std::unique_ptr<EtcdCluster>> c = EtcdCluster::Start(3);
    if (!c.ok()) {
      ADD_FAILURE() << c.status();
      std::abort();
    }
    slot = *std::move(c);
  }
  return *slot;
}

Options SharedOptions(std::vector<std::string> endpoints, const std::string& prefix,
                      absl::Duration timeout) {
  Options o;
  o.etcd_endpoints = std::move(endpoints);
  o.etcd_prefix = prefix;
  o.etcd_timeout = timeout;
  return o;
}

}  // namespace claimstore::testing
