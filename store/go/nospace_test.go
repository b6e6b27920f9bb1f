//go:build linux

package claimstore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"claimstore.dev/claimstore"
)

// tmpfs mounts a tmpfs of the given size for the test (root only: CI runs
// tests as root) and unmounts it at the end.
func tmpfs(t *testing.T, bytes int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root (CI runs tests as root)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", bytes)); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes zeros to path until the disk is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<16)
	for {
		if _, err := f.Write(chunk); err != nil {
			return
		}
	}
}

// bigClaim is a claim of about 3 KB: an allocation of 32 devices.
func bigClaim(i int) []byte {
	var results []string
	for d := 0; d < 32; d++ {
		results = append(results, fmt.Sprintf(
			`{"request":"req","driver":"gpu.example.com","pool":"pool-%d","device":"gpu-%d-with-a-long-name-%d"}`, i, d, i))
	}
	return []byte(fmt.Sprintf(`{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1",`+
		`"metadata":{"name":"c%d","namespace":"full","uid":"uid-%d"},`+
		`"status":{"allocation":{"devices":{"results":[%s]}}}}`, i, i, strings.Join(results, ",")))
}

// A Go program whose disk fills survives: writes fail with ErrNoSpace (and
// ErrExhausted, its code), reads go on, writes resume once space is freed.
func TestAFullDiskIsErrNoSpaceAndWritesResume(t *testing.T) {
	mnt := tmpfs(t, 16<<20)
	dir := filepath.Join(mnt, "db")
	s, err := claimstore.Open(ctx, dir, claimstore.Options{SyncWrites: true, WriteBufferBytes: 256 << 10})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if _, err := s.PutJSON(ctx, bigClaim(0), claimstore.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(mnt, "ballast"))
	var full error
	i := 1
	for ; i < 100000; i++ {
		if _, err := s.PutJSON(ctx, bigClaim(i), claimstore.Preconditions{}); err != nil {
			full = err
			break
		}
	}
	if !errors.Is(full, claimstore.ErrNoSpace) || !errors.Is(full, claimstore.ErrExhausted) {
		t.Fatalf("a write on a full disk: %v, want ErrNoSpace", full)
	}
	if !strings.Contains(full.Error(), dir+": no space left on device") {
		t.Errorf("the error does not name the database: %v", full)
	}
	if _, err := s.Get(claimstore.Key{Namespace: "full", Name: "c0"}); err != nil {
		t.Errorf("a read on a full disk: %v", err)
	}
	os.Remove(filepath.Join(mnt, "ballast"))
	for attempt := 0; ; attempt++ {
		_, err := s.PutJSON(ctx, bigClaim(i), claimstore.Preconditions{})
		if err == nil {
			break
		}
		if attempt == 250 { // about 5 s: a compaction that failed holds a resume back for a second
			t.Fatalf("writes did not resume once space was freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The rule's ResourceExhausted (256 consumers) is not a full disk.
func TestTheRulesExhaustedIsNotErrNoSpace(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	key := claimstore.Key{Namespace: "ns", Name: "many"}
	if _, err := s.PutJSON(ctx, claimJSON("ns", "many",
		`{"allocation":{"devices":{"results":[{"request":"req","driver":"gpu.example.com","pool":"p","device":"gpu-0"}]}}}`),
		claimstore.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	var last error
	for i := 0; i <= 256 && last == nil; i++ {
		u := fmt.Sprintf("u-%d", i)
		_, last = s.Reserve(ctx, key, claimstore.Consumer{Resource: "pods", Name: u, UID: u}, claimstore.Preconditions{})
	}
	if !errors.Is(last, claimstore.ErrExhausted) || errors.Is(last, claimstore.ErrNoSpace) {
		t.Fatalf("the 257th consumer: %v, want ErrExhausted and not ErrNoSpace", last)
	}
}
