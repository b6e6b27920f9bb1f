package claimstore

// An internal test: Get's first buffer (Store.getSize) follows the records
// read, and every Get returns the whole record whatever the buffer was.

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// putReserved writes ns/name, allocated a device and reserved for `pods`
// pods (1 to 256), and returns its record's size.
func putReserved(t *testing.T, s *Store, name string, pods int) int {
	t.Helper()
	var rs []string
	for i := 0; i < pods; i++ {
		n := name + "-pod-" + strconv.Itoa(i)
		rs = append(rs, `{"resource":"pods","name":"`+n+`","uid":"uid-`+n+`"}`)
	}
	status := `{"allocation":{"devices":{"results":[{"request":"req","driver":"gpu.example.com",` +
		`"pool":"pool","device":"` + name + `"}]}},"reservedFor":[` + strings.Join(rs, ",") + `]}`
	claim := `{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"` + name +
		`","namespace":"ns","uid":"uid-` + name + `"},"status":` + status + `}`
	if _, err := s.PutJSON(ctx, []byte(claim), Preconditions{}); err != nil {
		t.Fatalf("PutJSON %s: %v", name, err)
	}
	read, err := s.GetMany([]Key{{"ns", name}})
	many := read.Claims
	if err != nil || len(many) != 1 || many[0] == nil {
		t.Fatalf("GetMany %s: %v", name, err)
	}
	return len(many[0].Bytes())
}

func TestGetBufferFollowsTheRecordsRead(t *testing.T) {
	s, err := Open(ctx, filepath.Join(t.TempDir(), "db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sizes := map[string]int{
		"small":  putReserved(t, s, "small", 1),
		"medium": putReserved(t, s, "medium", 12),
		"big":    putReserved(t, s, "big", 150),
		"huge":   putReserved(t, s, "huge", 256),
	}
	roundUp := func(n int) int { return (n + 63) &^ 63 }
	m, b := roundUp(sizes["medium"]), roundUp(sizes["big"])
	t.Logf("record sizes: %v", sizes)
	if roundUp(sizes["small"]) > getBufferBytes || m/2 <= getBufferBytes || m/4 >= getBufferBytes ||
		b < 8*m || b > getBufferMax || sizes["huge"] <= getBufferMax {
		t.Fatalf("the claims' sizes do not make the steps below: %v", sizes)
	}
	get := func(step, name string) int {
		c, err := s.Get(Key{"ns", name})
		if err != nil {
			t.Fatalf("%s: Get %s: %v", step, name, err)
		}
		if got := len(c.Bytes()); got != sizes[name] || c.Name() != name {
			t.Errorf("%s: Get %s returned claim %q of %d bytes, the record has %d", step, name, c.Name(), got, sizes[name])
		}
		if n := len(c.ReservedFor()); n == 0 {
			t.Errorf("%s: Get %s: the claim does not read whole (no reservations)", step, name)
		}
		return bufferSize(s.getSize.Load())
	}
	if got := get("a small claim first", "small"); got != getBufferBytes {
		t.Errorf("after a record that fits, the first buffer is %d bytes, want %d", got, getBufferBytes)
	}
	for i := 0; i < 2; i++ {
		if got := get("medium", "medium"); got != m {
			t.Errorf("after a record of %d bytes, the first buffer is %d bytes, want %d", sizes["medium"], got, m)
		}
	}
	if got := get("small after medium", "small"); got != (m/2)&^63 {
		t.Errorf("after a smaller record, the first buffer is %d bytes, want %d (halved)", got, (m/2)&^63)
	}
	if got := get("small again", "small"); got != getBufferBytes {
		t.Errorf("after smaller records, the first buffer is %d bytes, want %d (halved, not below it)", got, getBufferBytes)
	}
	if got := get("huge", "huge"); got != getBufferBytes {
		t.Errorf("after a record over %d bytes, the first buffer is %d bytes, want it unmoved (%d)", getBufferMax, got, getBufferBytes)
	}
	if got := get("big", "big"); got != b {
		t.Errorf("after a record of %d bytes, the first buffer is %d bytes, want %d (up at once)", sizes["big"], got, b)
	}
	// Medium records after it: halved each time until the record's size.
	size := b
	for i := 0; size != m; i++ {
		want := (size / 2) &^ 63
		if want < m {
			want = m
		}
		got := get("medium after big", "medium")
		if got != want {
			t.Fatalf("medium Get %d after the big one: the first buffer is %d bytes, want %d", i, got, want)
		}
		size = got
	}
	if got := get("medium, settled", "medium"); got != m {
		t.Errorf("after settling, the first buffer is %d bytes, want %d", got, m)
	}
}
