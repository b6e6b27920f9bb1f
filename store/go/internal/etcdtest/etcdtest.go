// Package etcdtest runs an etcd (one member, or a cluster) on loopback for the Go tests of
// claimstore's modules: free ports, a temporary data directory, killed when
// the test ends (or when the test's process dies). The binary is
// $CLAIMSTORE_TEST_ETCD (ctest sets it to etcd-server's); without it the
// test is skipped.
package etcdtest

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TLS makes the member serve clients over TLS only and require client
// certificates: PEM files of the CA and the server's certificate and key,
// and a client with the CA and a client certificate for the health check.
type TLS struct {
	CA, ServerCert, ServerKey string
	Client                    *http.Client
}

// A Member is a running etcd.
type Member struct {
	URL string // the client URL
	cmd *exec.Cmd
}

// FreePort returns a TCP port on 127.0.0.1 free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs a member (over TLS with tls) and waits until it serves.
func Start(t testing.TB, tls *TLS) *Member {
	t.Helper()
	return start(t, tls, 1)[0]
}

// StartCluster runs a cluster of n members (plain HTTP) and waits until
// each serves.
func StartCluster(t testing.TB, n int) []*Member {
	t.Helper()
	return start(t, nil, n)
}

func start(t testing.TB, tls *TLS, n int) []*Member {
	t.Helper()
	bin := os.Getenv("CLAIMSTORE_TEST_ETCD")
	if bin == "" {
		t.Skip("CLAIMSTORE_TEST_ETCD is not set (ctest sets it to etcd's binary)")
	}
	scheme := "http"
	if tls != nil {
		scheme = "https"
	}
	clients, peers := make([]string, n), make([]string, n)
	var initial []string
	for i := range n {
		clients[i] = scheme + "://127.0.0.1:" + strconv.Itoa(FreePort(t))
		peers[i] = "http://127.0.0.1:" + strconv.Itoa(FreePort(t))
		initial = append(initial, "m"+strconv.Itoa(i)+"="+peers[i])
	}
	members := make([]*Member, n)
	for i := range n {
		args := []string{"--name", "m" + strconv.Itoa(i), "--data-dir", filepath.Join(t.TempDir(), "etcd"),
			"--listen-client-urls", clients[i], "--advertise-client-urls", clients[i],
			"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--logger", "zap", "--log-level", "warn"}
		if tls != nil {
			args = append(args, "--cert-file", tls.ServerCert, "--key-file", tls.ServerKey,
				"--trusted-ca-file", tls.CA, "--client-cert-auth")
		}
		cmd := exec.Command(bin, args...)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", bin, err)
		}
		members[i] = &Member{URL: clients[i], cmd: cmd}
		t.Cleanup(members[i].Kill)
	}
	// Each check within a second: a starting member accepts connections
	// before it serves them (and a cluster's before it has a leader).
	hc := &http.Client{Timeout: time.Second}
	if tls != nil {
		c := *tls.Client
		c.Timeout = time.Second
		hc = &c
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, m := range members {
		for {
			resp, err := hc.Get(m.URL + "/health")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("etcd at %s did not serve within 60 s: %v", m.URL, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return members
}

// Kill SIGKILLs the member (once) and waits for it.
func (m *Member) Kill() {
	if m.cmd.ProcessState == nil {
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
	}
}
