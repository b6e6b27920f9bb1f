package claimstore

// internal/fb is flatc --go's code for schema/claim.fbs (the go_flatc test
// checks it is current).
//go:generate sh -c "rm -rf internal/fb && flatc --go --go-namespace fb -o internal ../../schema/claim.fbs"

import (
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// readerRecords are records to read: the fixture with every field set and
// claims of the benchmarks' shape (one device, one pod).
func readerRecords(tb testing.TB) (full []byte, small [][]byte) {
	input, err := os.ReadFile("../../tests/testdata/k8s/fixtures/ResourceClaim.roundtrip.json")
	if err != nil {
		tb.Fatal(err)
	}
	decoded, err := Decode(input)
	if err != nil || len(decoded) != 1 {
		tb.Fatalf("decode the fixture: %v", err)
	}
	full = decoded[0].Claim.Bytes()
	for i := 0; i < 1024; i++ {
		n := strconv.Itoa(i)
		decoded, err := Decode([]byte(`{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"claim-` + n +
			`","namespace":"ns","uid":"uid-` + n + `"},"status":{"allocation":{"devices":{"results":[` +
			`{"request":"gpu","driver":"gpu.example.com","pool":"node-` + n + `","device":"gpu-0"}]}},` +
			`"reservedFor":[{"resource":"pods","name":"pod-` + n + `","uid":"pod-uid-` + n + `"}]}}`))
		if err != nil {
			tb.Fatal(err)
		}
		small = append(small, decoded[0].Claim.Bytes())
	}
	return full, small
}

type readView interface {
	Key() Key
	UID() string
	ResourceVersion() string
	Generation() int64
	CreationTimestamp() *time.Time
	DeletionTimestamp() *time.Time
	CreateRevision() uint64
	ModRevision() uint64
	Version() uint64
	Unvalidated() bool
	Object() []byte
	SpecRequests() []SpecRequest
	NumReservedFor() int
	ReservedFor() []Consumer
	Allocated() bool
	NumResults() int
	Allocation() *Allocation
	DeviceStatuses() []DeviceStatus
}

// The hand-written reader (record.go) reads every field as flatc's code
// does: the offsets written by hand against the schema compiler's.
func TestGeneratedReaderReadsAsTheHandWrittenOne(t *testing.T) {
	full, small := readerRecords(t)
	for i, b := range append([][]byte{full}, small[:8]...) {
		got, want := readView(newGenClaim(b)), readView(newClaim(b))
		gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
		for m := 0; m < reflect.TypeFor[readView]().NumMethod(); m++ {
			name := reflect.TypeFor[readView]().Method(m).Name
			g := gv.MethodByName(name).Call(nil)[0].Interface()
			w := wv.MethodByName(name).Call(nil)[0].Interface()
			if !reflect.DeepEqual(g, w) {
				t.Errorf("record %d: %s() = %#v, hand-written %#v", i, name, g, w)
			}
		}
		c, h := newGenClaim(b), newClaim(b)
		for r := 0; r < c.NumResults(); r++ {
			if !reflect.DeepEqual(c.ResultAt(r), h.ResultAt(r)) {
				t.Errorf("record %d: ResultAt(%d) = %+v, hand-written %+v", i, r, c.ResultAt(r), h.ResultAt(r))
			}
		}
		for r := 0; r < c.NumReservedFor(); r++ {
			if c.ReservedForAt(r) != h.ReservedForAt(r) || !c.ReservedBy(h.ReservedForAt(r).UID) {
				t.Errorf("record %d: ReservedForAt(%d) = %+v, hand-written %+v", i, r, c.ReservedForAt(r), h.ReservedForAt(r))
			}
		}
	}
}

// BenchmarkReader: the record read through flatc --go's code and the
// official runtime (generated_reader_test.go) against claimstore's
// hand-written reader (record.go), in one run. hot: what a plugin reads of a
// claim (a result's device, a consumer's uid, the revision) over 1,024
// claims, a view made for each as Get makes one; full: every field of the
// fixture that has every field set.
func BenchmarkReader(b *testing.B) {
	full, small := readerRecords(b)
	b.Run("hot/flatc", func(b *testing.B) {
		n := 0
		for i := 0; b.Loop(); i++ {
			var c genClaim
			c.init(small[i%len(small)])
			n += len(c.ResultAt(0).Device) + len(c.ReservedForAt(0).UID) + int(c.ModRevision())
		}
		readerSink = n
	})
	b.Run("hot/handwritten", func(b *testing.B) {
		n := 0
		for i := 0; b.Loop(); i++ {
			c := Claim{b: small[i%len(small)]}
			c.root = rootTable(c.b)
			n += len(c.ResultAt(0).Device) + len(c.ReservedForAt(0).UID) + int(c.ModRevision())
		}
		readerSink = n
	})
	b.Run("full/flatc", func(b *testing.B) {
		for b.Loop() {
			readAll(newGenClaim(full))
		}
	})
	b.Run("full/handwritten", func(b *testing.B) {
		for b.Loop() {
			readAll(newClaim(full))
		}
	})
}

var readerSink int

func readAll(c readView) {
	n := len(c.Key().Name) + len(c.UID()) + len(c.ResourceVersion()) + int(c.ModRevision()) + len(c.Object())
	n += len(c.SpecRequests()) + len(c.ReservedFor()) + len(c.DeviceStatuses())
	if a := c.Allocation(); a != nil {
		n += len(a.Results) + len(a.Config)
	}
	readerSink += n
}
