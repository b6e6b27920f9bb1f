package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"claimstore.dev/claimstore"
)

// The shape of the benchmarks' claims: claim i is allocated one device of
// one of 1,000 pools (node-i/1000 … ), reserved for one pod.
const claimsAtScale = 100000

func claimJSON(i int) string {
	n := strconv.Itoa(i)
	return `{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"claim-` + n +
		`","namespace":"ns","uid":"uid-` + n + `"},"status":{"allocation":{"devices":{"results":[` +
		`{"request":"gpu","driver":"gpu.example.com","pool":"` + pool(i) + `","device":"` + device(i) + `"}]}},` +
		`"reservedFor":[{"resource":"pods","name":"pod-` + n + `","uid":"pod-uid-` + n + `"}]}}`
}
func pool(i int) string   { return "node-" + strconv.Itoa(i%1000) }
func device(i int) string { return "gpu-" + strconv.Itoa(i/1000) }
func key(i int) claimstore.Key {
	return claimstore.Key{Namespace: "ns", Name: "claim-" + strconv.Itoa(i)}
}

// The hand-written baseline: claims in a Go map under a sync.RWMutex, and a
// set of allocated devices.
type deviceID struct{ driver, pool, device string }
type mapClaim struct {
	uid         string
	modRevision uint64
	results     []claimstore.DeviceResult
	reservedFor []claimstore.Consumer
}
type mapStore struct {
	mu        sync.RWMutex
	revision  uint64
	claims    map[claimstore.Key]*mapClaim
	allocated map[deviceID]claimstore.Key
}

func newMapStore(n int) *mapStore {
	m := &mapStore{claims: map[claimstore.Key]*mapClaim{}, allocated: map[deviceID]claimstore.Key{}}
	for i := 0; i < n; i++ {
		m.revision++
		c := &mapClaim{uid: "uid-" + strconv.Itoa(i), modRevision: m.revision,
			results:     []claimstore.DeviceResult{{Request: "gpu", Driver: "gpu.example.com", Pool: pool(i), Device: device(i)}},
			reservedFor: []claimstore.Consumer{{Resource: "pods", Name: "pod-" + strconv.Itoa(i), UID: "pod-uid-" + strconv.Itoa(i)}}}
		m.claims[key(i)] = c
		m.allocated[deviceID{"gpu.example.com", pool(i), device(i)}] = key(i)
	}
	return m
}

// get copies what a caller may keep, as Store.Get gives a claim of its own.
func (m *mapStore) get(k claimstore.Key) (mapClaim, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.claims[k]
	if !ok {
		return mapClaim{}, false
	}
	out := *c
	out.results = append([]claimstore.DeviceResult(nil), c.results...)
	out.reservedFor = append([]claimstore.Consumer(nil), c.reservedFor...)
	return out, true
}

func (m *mapStore) reserve(k claimstore.Key, c claimstore.Consumer) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc := m.claims[k]
	for _, r := range mc.reservedFor {
		if r.UID == c.UID {
			return false
		}
	}
	m.revision++
	mc.reservedFor = append(mc.reservedFor, c)
	mc.modRevision = m.revision
	return true
}

func (m *mapStore) unreserve(k claimstore.Key, uid string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc := m.claims[k]
	for i, r := range mc.reservedFor {
		if r.UID == uid {
			m.revision++
			mc.reservedFor = append(mc.reservedFor[:i], mc.reservedFor[i+1:]...)
			mc.modRevision = m.revision
			return true
		}
	}
	return false
}

// The store at scale, built once for every benchmark of the run. The map
// baseline is built when a map benchmark needs it and dropped before each
// store benchmark: a plugin that keeps its state in claimstore has none of
// it in Go's heap, and the map's 100k claims would otherwise make every GC
// of the store's benchmarks scan them.
var (
	scaleOnce  sync.Once
	scaleStore *claimstore.Store
	scaleMap   *mapStore
)

func storeAtScale(b *testing.B) *claimstore.Store {
	s, _ := atScale(b)
	dropScaleMap(b)
	return s
}

// dropScaleMap lets the GC take the map at scale before a benchmark of the
// store (outside its timer).
func dropScaleMap(b *testing.B) {
	scaleMap = nil
	runtime.GC()
	b.ResetTimer()
}

func mapAtScale(b *testing.B) *mapStore {
	atScale(b)
	if scaleMap == nil {
		scaleMap = newMapStore(claimsAtScale)
	}
	b.ResetTimer()
	return scaleMap
}

func atScale(b *testing.B) (*claimstore.Store, *mapStore) {
	scaleOnce.Do(func() {
		s, err := claimstore.Open(ctx, filepath.Join(scaleDir, "scale"), claimstore.Options{RecordCacheBytes: recordCache})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < claimsAtScale; i++ {
			if _, err := s.PutJSON(ctx, []byte(claimJSON(i)), claimstore.Preconditions{}); err != nil {
				b.Fatal(err)
			}
		}
		a, err := s.AllocatedDevices() // the first call builds the state
		if err != nil || a.Len() != claimsAtScale {
			b.Fatalf("allocated state: %v", err)
		}
		a.Close()
		scaleStore = s
	})
	if scaleStore == nil {
		b.Skip("the store at scale could not be built")
	}
	return scaleStore, scaleMap
}

var sink int

// scaleDir holds the stores at scale, which every benchmark of the run
// shares: made and removed by TestMain, after the stores are closed (a
// benchmark's TempDir would be removed under an open store when that
// benchmark ends).
var scaleDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "claimstore-bench-go-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scaleDir = dir
	code := m.Run()
	if scaleStore != nil {
		scaleStore.Close()
	}
	if cScale != nil {
		cScale.close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// A record cache that holds every claim at scale (the default 64 MiB holds
// most of 100k claims, not all, and a miss reads RocksDB): what a
// scheduler would set for its claims.
const recordCache = 256 << 20

// The same claims in a store opened through the C ABI, for the C loops.
var (
	cScaleOnce sync.Once
	cScale     *cStore
)

func cAtScale(b *testing.B) *cStore {
	cScaleOnce.Do(func() {
		c, err := openCStore(filepath.Join(scaleDir, "c-scale"), recordCache)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < claimsAtScale; i++ {
			if err := c.putJSON(claimJSON(i)); err != nil {
				b.Fatal(err)
			}
		}
		cScale = c
	})
	if cScale == nil {
		b.Skip("the C store at scale could not be built")
	}
	return cScale
}

// Get of a random claim at 100k claims, reading its allocation and its
// reservations (what a plugin reads of a claim), against the map's copy.
// BenchmarkGetInOrder reads the claims in the order they were written, as
// bench/compare_bench's Get does (neighbouring records share cache lines
// and pages): the same work with memory latency mostly out of the way.
func BenchmarkGet(b *testing.B) { benchmarkGet(b, 7919) }

func BenchmarkGetInOrder(b *testing.B) { benchmarkGet(b, 1) }

func benchmarkGet(b *testing.B, stride int) {
	keys := make([]claimstore.Key, claimsAtScale) // a plugin has its keys already
	for i := range keys {
		keys[i] = key((i * stride) % claimsAtScale)
	}
	b.Run("store", func(b *testing.B) {
		s := storeAtScale(b)
		for i := 0; i < b.N; i++ {
			c, err := s.Get(keys[i%claimsAtScale])
			if err != nil {
				b.Fatal(err)
			}
			a := c.Allocation()
			sink += len(a.Results[0].Device) + len(c.ReservedFor()[0].UID) + int(c.ModRevision())
		}
	})
	// The accessors that do not allocate (ResultAt, ReservedForAt).
	b.Run("store-at", func(b *testing.B) {
		s := storeAtScale(b)
		for i := 0; i < b.N; i++ {
			c, err := s.Get(keys[i%claimsAtScale])
			if err != nil {
				b.Fatal(err)
			}
			sink += len(c.ResultAt(0).Device) + len(c.ReservedForAt(0).UID) + int(c.ModRevision())
		}
	})
	// GetView: the claim read into a reused buffer, released after the
	// read; every result and reservation read (the map's copy reads them
	// all too).
	b.Run("store-view", func(b *testing.B) {
		s := storeAtScale(b)
		for i := 0; i < b.N; i++ {
			v, err := s.GetView(keys[i%claimsAtScale])
			if err != nil {
				b.Fatal(err)
			}
			for r := 0; r < v.NumResults(); r++ {
				sink += len(v.ResultAt(r).Device)
			}
			for r := 0; r < v.NumReservedFor(); r++ {
				sink += len(v.ReservedForAt(r).UID)
			}
			sink += int(v.ModRevision())
			v.Release()
		}
	})
	b.Run("c-loop", func(b *testing.B) {
		c := cAtScale(b)
		b.ResetTimer()
		if err := c.getLoop(b.N, claimsAtScale, stride); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("map", func(b *testing.B) {
		m := mapAtScale(b)
		for i := 0; i < b.N; i++ {
			c, _ := m.get(keys[i%claimsAtScale])
			sink += len(c.results[0].Device) + len(c.reservedFor[0].UID) + int(c.modRevision)
		}
	})
}

// Get of a random claim over 512 bytes (eight pods, two devices: about 800
// bytes) at 10k claims, reading its allocation and reservations. Get's first
// buffer follows the sizes of the records read (Store.Get): one call into
// C each, where a fixed 512-byte first buffer took two.
func BenchmarkGetLarger(b *testing.B) {
	const claims = 10000
	s, err := claimstore.Open(ctx, filepath.Join(b.TempDir(), "larger"), claimstore.Options{RecordCacheBytes: recordCache})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	keys := make([]claimstore.Key, claims)
	for i := range keys {
		n := strconv.Itoa(i)
		var pods []string
		for p := 0; p < 8; p++ {
			pn := n + "-" + strconv.Itoa(p)
			pods = append(pods, `{"resource":"pods","name":"pod-`+pn+`","uid":"pod-uid-`+pn+`"}`)
		}
		claim := `{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"large-` + n +
			`","namespace":"ns","uid":"uid-` + n + `"},"status":{"allocation":{"devices":{"results":[` +
			`{"request":"gpu","driver":"gpu.example.com","pool":"` + pool(i) + `","device":"` + device(i) + `"},` +
			`{"request":"nic","driver":"nic.example.com","pool":"` + pool(i) + `","device":"nic-` + n + `"}]}},` +
			`"reservedFor":[` + strings.Join(pods, ",") + `]}}`
		if _, err := s.PutJSON(ctx, []byte(claim), claimstore.Preconditions{}); err != nil {
			b.Fatal(err)
		}
		keys[(i*7919)%claims] = claimstore.Key{Namespace: "ns", Name: "large-" + n}
	}
	c, err := s.Get(keys[0])
	if err != nil {
		b.Fatal(err)
	}
	if len(c.Bytes()) <= 512 {
		b.Fatalf("a claim of the benchmark takes %d bytes, not over 512", len(c.Bytes()))
	}
	size := len(c.Bytes())
	dropScaleMap(b) // an earlier benchmark's map would make every GC here scan it
	for i := 0; i < b.N; i++ {
		c, err := s.Get(keys[i%claims])
		if err != nil {
			b.Fatal(err)
		}
		sink += len(c.ResultAt(1).Device) + len(c.ReservedForAt(7).UID) + int(c.ModRevision())
	}
	b.ReportMetric(float64(size), "record-bytes")
}

// The cost of one cgo call that does nothing but return a field.
func BenchmarkCgoCall(b *testing.B) {
	c, err := openCStore(filepath.Join(b.TempDir(), "cgo"), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer c.close()
	b.ResetTimer()
	sink += int(c.noopCalls(b.N))
}

// The allocated-state question of one pod attempt at 100k claims: take the
// state, then ask about 50 candidate devices (of one node's pool, as
// Filter does). The baseline does what a consistent view costs with the
// map: clone the set of allocated devices under the read lock, then look
// up; "map-locked" holds the read lock over the 50 lookups instead (no
// snapshot to keep, and writers wait meanwhile): the floor, for reference.
func BenchmarkPerPod(b *testing.B) {
	candidates := func(i int) (string, []string) {
		p := pool(i % 1000)
		ds := make([]string, 50)
		for j := range ds {
			ds[j] = "gpu-" + strconv.Itoa(j*2) // half of them held (gpu-0 … gpu-99)
		}
		return p, ds
	}
	b.Run("store", func(b *testing.B) {
		s := storeAtScale(b)
		for i := 0; i < b.N; i++ {
			a, err := s.AllocatedDevices()
			if err != nil {
				b.Fatal(err)
			}
			p, ds := candidates(i)
			for _, d := range ds {
				if a.Taken("gpu.example.com", p, d) {
					sink++
				}
			}
			a.Close()
		}
	})
	b.Run("store-batched", func(b *testing.B) {
		s := storeAtScale(b)
		var taken []bool
		for i := 0; i < b.N; i++ {
			a, err := s.AllocatedDevices()
			if err != nil {
				b.Fatal(err)
			}
			p, ds := candidates(i)
			taken = a.TakenMany("gpu.example.com", p, ds, taken)
			for _, t := range taken {
				if t {
					sink++
				}
			}
			a.Close()
		}
	})
	b.Run("map-clone", func(b *testing.B) {
		m := mapAtScale(b)
		for i := 0; i < b.N; i++ {
			m.mu.RLock()
			set := make(map[deviceID]claimstore.Key, len(m.allocated))
			for k, v := range m.allocated {
				set[k] = v
			}
			m.mu.RUnlock()
			p, ds := candidates(i)
			for _, d := range ds {
				if _, ok := set[deviceID{"gpu.example.com", p, d}]; ok {
					sink++
				}
			}
		}
	})
	b.Run("map-locked", func(b *testing.B) {
		m := mapAtScale(b)
		for i := 0; i < b.N; i++ {
			m.mu.RLock()
			p, ds := candidates(i)
			for _, d := range ds {
				if _, ok := m.allocated[deviceID{"gpu.example.com", p, d}]; ok {
					sink++
				}
			}
			m.mu.RUnlock()
		}
	})
}

// The claim the Reserve benchmarks reserve: allocated, one device.
const reserveClaim = `{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"claim",` +
	`"namespace":"ns","uid":"uid-claim"},"status":{"allocation":{"devices":{"results":[` +
	`{"request":"gpu","driver":"gpu.example.com","pool":"p","device":"gpu-0"}]}}}}`

// openReserveStore opens a store in a temporary directory holding reserveClaim.
func openReserveStore(b *testing.B) *claimstore.Store {
	s, err := claimstore.Open(ctx, filepath.Join(b.TempDir(), "go"), claimstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.PutJSON(ctx, []byte(reserveClaim), claimstore.Preconditions{}); err != nil {
		s.Close()
		b.Fatal(err)
	}
	return s
}

// openReserveCStore does the same through the C loop's store.
func openReserveCStore(b *testing.B) *cStore {
	c, err := openCStore(filepath.Join(b.TempDir(), "c"), 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.putJSON(reserveClaim); err != nil {
		c.close()
		b.Fatal(err)
	}
	return c
}

// Reserve+Unreserve of one consumer on one claim: through the Go package,
// in a loop in C through the C ABI (the store's own write time), and on the
// map. Go's share is go − c-loop.
func BenchmarkReserve(b *testing.B) {
	b.Run("go", func(b *testing.B) {
		dropScaleMap(b)
		s := openReserveStore(b)
		defer s.Close()
		k := claimstore.Key{Namespace: "ns", Name: "claim"}
		pod := claimstore.Consumer{Resource: "pods", Name: "pod-c", UID: "uid-c"}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.Reserve(ctx, k, pod, claimstore.Preconditions{}); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Unreserve(ctx, k, "uid-c", claimstore.Preconditions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("c-loop", func(b *testing.B) {
		c := openReserveCStore(b)
		defer c.close()
		b.ResetTimer()
		if err := c.reservePairs(b.N); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("map", func(b *testing.B) {
		m := newMapStore(1)
		k := key(0)
		pod := claimstore.Consumer{Resource: "pods", Name: "pod-c", UID: "uid-c"}
		for i := 0; i < b.N; i++ {
			m.reserve(k, pod)
			m.unreserve(k, "uid-c")
		}
	})
}

// The same three, interleaved pair by pair in one loop (so that drift of
// this VM hits each alike), each timed on its own: ns per pair of each,
// and Go's share (go − c) against 3× the map's pair.
func BenchmarkReserveInterleaved(b *testing.B) {
	dropScaleMap(b)
	s := openReserveStore(b)
	defer s.Close()
	c := openReserveCStore(b)
	defer c.close()
	m := newMapStore(1)
	k := claimstore.Key{Namespace: "ns", Name: "claim"}
	mk := key(0)
	pod := claimstore.Consumer{Resource: "pods", Name: "pod-c", UID: "uid-c"}
	var goNs, cNs, mapNs time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := s.Reserve(ctx, k, pod, claimstore.Preconditions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Unreserve(ctx, k, "uid-c", claimstore.Preconditions{}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := c.reservePairs(1); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		m.reserve(mk, pod)
		m.unreserve(mk, "uid-c")
		t3 := time.Now()
		goNs += t1.Sub(t0)
		cNs += t2.Sub(t1)
		mapNs += t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(goNs.Nanoseconds())/n, "go-ns/pair")
	b.ReportMetric(float64(cNs.Nanoseconds())/n, "c-ns/pair")
	b.ReportMetric(float64(mapNs.Nanoseconds())/n, "map-ns/pair")
	b.ReportMetric(float64((goNs-cNs).Nanoseconds())/n, "go-share-ns/pair")
}
