// Package etcdtest runs a one-member etcd on loopback for the Go tests of
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
	bin := os.Getenv("CLAIMSTORE_TEST_ETCD")
	if bin == "" {
		t.Skip("CLAIMSTORE_TEST_ETCD is not set (ctest sets it to etcd's binary)")
	}
	scheme := "http"
	if tls != nil {
		scheme = "https"
	}
	client := scheme + "://127.0.0.1:" + strconv.Itoa(FreePort(t))
	peer := "http://127.0.0.1:" + strconv.Itoa(FreePort(t))
	args := []string{"--name", "m0", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "m0=" + peer, "--initial-cluster-state", "new",
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
	m := &Member{URL: client, cmd: cmd}
	t.Cleanup(m.Kill)
	// Each check within a second: a starting member accepts connections
	// before it serves them.
	hc := &http.Client{Timeout: time.Second}
	if tls != nil {
		c := *tls.Client
		c.Timeout = time.Second
		hc = &c
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get(client + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd at %s did not serve within 60 s: %v", client, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill SIGKILLs the member (once) and waits for it.
func (m *Member) Kill() {
	if m.cmd.ProcessState == nil {
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
	}
}
