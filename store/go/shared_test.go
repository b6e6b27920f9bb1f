package claimstore_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"claimstore.dev/claimstore"
	"claimstore.dev/claimstore/internal/etcdtest"
)

// tlsFiles are PEM files: a CA, a server certificate for 127.0.0.1 and a
// client certificate it signed.
type tlsFiles struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

// makeTLS writes them to a temporary directory (ECDSA P-256, valid for an
// hour), with the standard library.
func makeTLS(t *testing.T) *tlsFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "claimstore-go-test-ca"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	files := &tlsFiles{ca: write("ca.pem", "CERTIFICATE", caDER)}
	issue := func(serial int64, name string, usage []x509.ExtKeyUsage, ips []net.IP) (string, string) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
	files.serverCert, files.serverKey = issue(2, "server",
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, []net.IP{net.ParseIP("127.0.0.1")})
	files.clientCert, files.clientKey = issue(3, "client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil)
	return files
}

// startEtcd runs a one-member etcd on loopback (etcdtest.Start); with
// tls, it serves clients over TLS only and requires client certificates.
func startEtcd(t *testing.T, files *tlsFiles) *etcdtest.Member {
	t.Helper()
	if files == nil {
		return etcdtest.Start(t, nil)
	}
	return etcdtest.Start(t, &etcdtest.TLS{CA: files.ca, ServerCert: files.serverCert, ServerKey: files.serverKey,
		Client: tlsClient(t, files)})
}

// tlsClient is an HTTP client with the test's CA and client certificate.
func tlsClient(t *testing.T, files *tlsFiles) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(files.ca)
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("reading %s: %v", files.ca, err)
	}
	cert, err := tls.LoadX509KeyPair(files.clientCert, files.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
}

// The shared mode from Go: two stores (two mirrors, as two schedulers on
// two machines would have) share claims through etcd. Writes on one are
// read on the other at the same revisions, goroutines on both race for
// one device and exactly one wins, a stale compare-and-set loses, a
// watcher on one sees the other's writes at their revisions, and with
// etcd gone writes fail with ErrUnavailable within the timeout while reads
// go on and Stats says since when the mirror is stale.
func TestSharedModeThroughEtcd(t *testing.T) {
	etcd := startEtcd(t, nil)
	opts := claimstore.Options{EtcdEndpoints: []string{etcd.URL}, EtcdPrefix: "/gotest/",
		EtcdTimeout: 2 * time.Second}
	a, _ := open(t, opts)
	b, _ := open(t, opts)
	for g := 0; g < 16; g++ {
		put(t, a, "ns", "c"+strconv.Itoa(g), "{}")
	}
	// Read on the other mirror once it has caught up: the same revisions.
	if err := b.Refresh(); err != nil {
		t.Fatal(err)
	}
	ca, err := a.Get(claimstore.Key{"ns", "c0"})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.Get(claimstore.Key{"ns", "c0"})
	if err != nil {
		t.Fatal(err)
	}
	if ca.ModRevision() != cb.ModRevision() || ca.CreateRevision() != cb.CreateRevision() || ca.Version() != cb.Version() {
		t.Fatalf("revisions differ: %d/%d/%d and %d/%d/%d", ca.CreateRevision(), ca.ModRevision(), ca.Version(),
			cb.CreateRevision(), cb.ModRevision(), cb.Version())
	}

	// 16 goroutines over the two stores race for one device.
	winner := raceForDevice(t, []*claimstore.Store{a, b}, "gpu-shared")
	// The device is taken on both mirrors (once each has caught up: the
	// winner's write is read at once only on its own mirror).
	for _, s := range []*claimstore.Store{a, b} {
		if err := s.Refresh(); err != nil {
			t.Fatal(err)
		}
		state, err := s.AllocatedDevices()
		if err != nil {
			t.Fatal(err)
		}
		d, ok := state.Find(driver, pool, "gpu-shared")
		state.Close()
		if !ok || d.Exclusive == nil || *d.Exclusive != winner {
			t.Fatalf("the allocated state shows %+v, want held by %v", d, winner)
		}
	}

	// Compare-and-set on a revision one mirror saw before the other wrote.
	seen, err := b.Get(winner)
	if err != nil {
		t.Fatal(err)
	}
	won, err := a.Reserve(ctx, winner, pod("p1"), claimstore.Preconditions{ModRevision: u64(seen.ModRevision())})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Reserve(ctx, winner, pod("p2"), claimstore.Preconditions{ModRevision: u64(seen.ModRevision())})
	var ce *claimstore.ConflictError
	if !errors.As(err, &ce) || ce.CurrentRevision != won.Revision {
		t.Fatalf("a stale compare-and-set returned %v, want a conflict at revision %d", err, won.Revision)
	}

	// A watcher on one mirror sees the other's writes, at the revisions
	// they returned (etcd's, with gaps).
	w, err := a.Watch(context.Background(), 0, claimstore.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var wrote []uint64
	for _, name := range []string{"w1", "w2"} {
		wrote = append(wrote, put(t, b, "ns", name, "{}").Revision)
	}
	for i, name := range []string{"w1", "w2"} {
		e, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type != claimstore.EventAdded || e.Key.Name != name || e.Revision != wrote[i] || e.Claim.ModRevision() != wrote[i] {
			t.Fatalf("event %d: %v %v at %d, want %s added at %d", i, e.Type, e.Key, e.Revision, name, wrote[i])
		}
	}
	for _, s := range []*claimstore.Store{a, b} {
		if err := s.Refresh(); err != nil {
			t.Fatal(err)
		}
		st, err := s.Stats()
		if err != nil || !st.EtcdFollowing || !st.EtcdUnreachableSince.IsZero() || st.Claims != 18 {
			t.Fatalf("Stats: %+v, %v", st, err)
		}
	}

	// etcd gone: writes fail within the timeout, reads go on, Stats says
	// since when the mirror cannot follow.
	etcd.Kill()
	// A context that ends first ends the wait (the write may still land,
	// as with etcd's client): well before the 2 s timeout.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	began := time.Now()
	_, err = a.Unreserve(short, winner, "p1", claimstore.Preconditions{})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > time.Second {
		t.Fatalf("a write whose context ended after 100 ms: %v after %v", err, time.Since(began))
	}
	began = time.Now()
	_, err = a.Unreserve(ctx, winner, "p1", claimstore.Preconditions{})
	if !errors.Is(err, claimstore.ErrUnavailable) {
		t.Fatalf("a write without etcd returned %v, want ErrUnavailable", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("the write failed after %v; the timeout is 2s", took)
	}
	if c, err := a.Get(winner); err != nil || c.NumReservedFor() != 1 {
		t.Fatalf("a read without etcd: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := a.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if !st.EtcdFollowing && !st.EtcdUnreachableSince.IsZero() && !st.EtcdUnreachableSince.After(time.Now()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stats still says the mirror follows etcd: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Options the shared mode cannot take are refused at Open.
func TestSharedModeOptions(t *testing.T) {
	_, err := claimstore.Open(ctx, filepath.Join(t.TempDir(), "db"), claimstore.Options{
		EtcdEndpoints: []string{"http://127.0.0.1:1"}, EtcdTimeout: -time.Second})
	if !errors.Is(err, claimstore.ErrInvalid) {
		t.Fatalf("a negative EtcdTimeout: %v", err)
	}
	// No etcd at the endpoint: Open fails within the timeout, naming it.
	began := time.Now()
	_, err = claimstore.Open(ctx, filepath.Join(t.TempDir(), "db"), claimstore.Options{
		EtcdEndpoints: []string{"http://127.0.0.1:1"}, EtcdTimeout: 300 * time.Millisecond})
	if !errors.Is(err, claimstore.ErrUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Open without etcd: %v", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("Open without etcd failed after %v", took)
	}
}

// TLS to etcd with a client certificate: Options.EtcdCAFile, EtcdCertFile
// and EtcdKeyFile; without the client certificate etcd does not take the
// store.
func TestSharedModeOverTLS(t *testing.T) {
	files := makeTLS(t)
	etcd := startEtcd(t, files)
	opts := claimstore.Options{EtcdEndpoints: []string{etcd.URL}, EtcdPrefix: "/gotls/",
		EtcdTimeout: 2 * time.Second, EtcdCAFile: files.ca, EtcdCertFile: files.clientCert, EtcdKeyFile: files.clientKey}
	s, _ := open(t, opts)
	r := put(t, s, "ns", "tls", "{}")
	c, err := s.Get(claimstore.Key{"ns", "tls"})
	if err != nil || c.ModRevision() != r.Revision {
		t.Fatalf("Get over TLS: %v", err)
	}
	opts.EtcdCertFile, opts.EtcdKeyFile = "", ""
	if _, err := claimstore.Open(ctx, filepath.Join(t.TempDir(), "db"), opts); !errors.Is(err, claimstore.ErrUnavailable) {
		t.Fatalf("Open without a client certificate: %v", err)
	}
	opts.EtcdCertFile = files.clientCert
	if _, err := claimstore.Open(ctx, filepath.Join(t.TempDir(), "db"), opts); !errors.Is(err, claimstore.ErrInvalid) ||
		!strings.Contains(err.Error(), "both or neither") {
		t.Fatalf("Open with a certificate and no key: %v", err)
	}
}
