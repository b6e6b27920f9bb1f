package upstreamtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"claimstore.dev/claimstore"
	csk8s "claimstore.dev/claimstore/k8s"
)

// The benchmarks' cluster, as in bench/go: claim i is allocated one device
// (gpu-<i/1000> of pool node-<i%1000>) and reserved for one pod.
func benchClaim(i int) *resourcev1.ResourceClaim {
	n := strconv.Itoa(i)
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim-" + n, Namespace: "ns", UID: types.UID("uid-" + n),
			ResourceVersion: strconv.Itoa(i + 1)},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com",
					Pool: benchPool(i), Device: benchDevice(i)}}}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod-" + n,
				UID: types.UID("pod-uid-" + n)}},
		},
	}
}

func benchPool(i int) string   { return "node-" + strconv.Itoa(i%1000) }
func benchDevice(i int) string { return "gpu-" + strconv.Itoa(i/1000) }

var benchSizes = []int{1_000, 10_000, 100_000}

// trackers holds, per size, upstream's tracker and claimstore's with the
// same claims: built once per process (100k claims take seconds).
type trackers struct {
	upstream fwk.ResourceClaimTracker
	ours     *csk8s.Tracker
	store    *claimstore.Store
}

var built = map[int]*trackers{}

func trackersOf(b *testing.B, n int) *trackers {
	if t := built[n]; t != nil {
		return t
	}
	b.StopTimer()
	defer b.StartTimer()
	up := NewUpstream(context.Background())
	dir, err := os.MkdirTemp("", "claimstore-bench-")
	if err != nil {
		b.Fatal(err)
	}
	// Removed at exit (TestMain); a benchmark's own TempDir would go with
	// the first benchmark that built it.
	benchDirs = append(benchDirs, dir)
	store, err := claimstore.Open(ctx, filepath.Join(dir, "db"), claimstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ours := csk8s.NewTracker(store, csk8s.TrackerOptions{ConsumableCapacity: true})
	for i := 0; i < n; i++ {
		c := benchClaim(i)
		up.Informer.Add(c)
		ours.OnAdd(c)
	}
	t := &trackers{upstream: up.Claims(), ours: ours, store: store}
	built[n] = t
	return t
}

var benchDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, t := range built {
		t.store.Close()
	}
	for _, d := range benchDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

func sizeName(n int) string { return strconv.Itoa(n/1000) + "k" }

var sinkInt int

// GatherAllocatedState as PreFilter calls it, once per pod: with nothing
// changed since the last call (the same maps, constant time), and with one
// pending allocation signalled before each call and removed after it (what
// the previous pod's Reserve and PreBind do), so each call sees a change.
func BenchmarkGatherAllocatedState(b *testing.B) {
	for _, n := range benchSizes {
		for _, impl := range []string{"upstream", "claimstore"} {
			b.Run(sizeName(n)+"/"+impl+"/unchanged", func(b *testing.B) {
				tr := trackersOf(b, n).pick(impl)
				for i := 0; i < b.N; i++ {
					s, err := tr.GatherAllocatedState()
					if err != nil {
						b.Fatal(err)
					}
					sinkInt += len(s.AllocatedDevices)
				}
			})
			b.Run(sizeName(n)+"/"+impl+"/changed", func(b *testing.B) {
				tr := trackersOf(b, n).pick(impl)
				pending := pendingExtended(n)
				for i := 0; i < b.N; i++ {
					if err := tr.SignalClaimPendingAllocation(pending.UID, pending); err != nil {
						b.Fatal(err)
					}
					s, err := tr.GatherAllocatedState()
					if err != nil {
						b.Fatal(err)
					}
					sinkInt += len(s.AllocatedDevices)
					tr.MaybeRemoveClaimPendingAllocation(pending.UID, true)
				}
			})
		}
	}
}

func (t *trackers) pick(impl string) fwk.ResourceClaimTracker {
	if impl == "upstream" {
		return t.upstream
	}
	return t.ours
}

// pendingExtended is an allocation of a device no claim holds, under the
// name kube-scheduler gives a pod's extended-resource claim (so the
// tracker does not look the claim up).
func pendingExtended(n int) *resourcev1.ResourceClaim {
	c := benchClaim(n + 1)
	c.Name = "<extended-resources>"
	return c
}

// The per-pod question: the allocated state, then 50 candidate devices of
// one node looked up (half of them taken), as the allocator asks. Upstream
// clones its sets for each pod; claimstore's Tracker returns its frozen
// maps; claimstore's own API takes a snapshot and asks it through cgo.
func BenchmarkPerPodQuestion(b *testing.B) {
	candidates := make([]string, 50)
	for j := range candidates {
		candidates[j] = "gpu-" + strconv.Itoa(j*2)
	}
	for _, n := range benchSizes {
		for _, impl := range []string{"upstream", "claimstore"} {
			b.Run(sizeName(n)+"/"+impl, func(b *testing.B) {
				tr := trackersOf(b, n).pick(impl)
				for i := 0; i < b.N; i++ {
					s, err := tr.GatherAllocatedState()
					if err != nil {
						b.Fatal(err)
					}
					p := benchPool(i % 1000)
					for _, d := range candidates {
						if s.AllocatedDevices.Has(structured.MakeDeviceID("gpu.example.com", p, d)) {
							sinkInt++
						}
					}
				}
			})
		}
		b.Run(sizeName(n)+"/claimstore-snapshot", func(b *testing.B) {
			store := trackersOf(b, n).store
			for i := 0; i < b.N; i++ {
				a, err := store.AllocatedDevices()
				if err != nil {
					b.Fatal(err)
				}
				p := benchPool(i % 1000)
				for _, d := range candidates {
					if a.Taken("gpu.example.com", p, d) {
						sinkInt++
					}
				}
				a.Close()
			}
		})
	}
}

// The informer's apply rate: claims added one event at a time, as the
// informer delivers them (upstream: into its assume cache and allocated
// devices; claimstore: written to the store, durable, and tracked).
func BenchmarkInformerAdd(b *testing.B) {
	b.Run("upstream", func(b *testing.B) {
		up := NewUpstream(context.Background())
		claims := make([]*resourcev1.ResourceClaim, b.N)
		for i := range claims {
			claims[i] = benchClaim(i)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			up.Informer.Add(claims[i])
		}
	})
	b.Run("claimstore", func(b *testing.B) {
		store, err := claimstore.Open(ctx, filepath.Join(b.TempDir(), "db"), claimstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		tr := csk8s.NewTracker(store, csk8s.TrackerOptions{ConsumableCapacity: true})
		claims := make([]*resourcev1.ResourceClaim, b.N)
		for i := range claims {
			claims[i] = benchClaim(i)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tr.OnAdd(claims[i])
		}
	})
}

// Memory per claim at 100,000 claims, each tracker filled in a process of
// its own (this test binary again, TestMemoryChild): the Go heap it adds
// (both hold the informer's objects, which are counted) and the resident
// memory it adds, which for claimstore includes the store's C memory
// (RocksDB's memtables and caches, the record cache, the allocated state).
func BenchmarkMemoryPerClaim(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, impl := range []string{"upstream", "claimstore"} {
		b.Run(impl, func(b *testing.B) {
			for it := 0; it < b.N; it++ {
				cmd := exec.Command(exe, "-test.run=^TestMemoryChild$")
				cmd.Env = append(os.Environ(), "CLAIMSTORE_MEMORY_CHILD="+impl, "CLAIMSTORE_MEMORY_DIR="+b.TempDir())
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				var heap, rss float64
				for _, line := range strings.Split(string(out), "\n") {
					if _, err := fmt.Sscanf(line, "memory heap=%g rss=%g", &heap, &rss); err == nil {
						break
					}
				}
				b.ReportMetric(heap, "heap-B/claim")
				b.ReportMetric(rss, "rss-B/claim")
			}
		})
	}
}

// TestMemoryChild is BenchmarkMemoryPerClaim's child process; a no-op
// otherwise.
func TestMemoryChild(t *testing.T) {
	impl := os.Getenv("CLAIMSTORE_MEMORY_CHILD")
	if impl == "" {
		t.Skip("BenchmarkMemoryPerClaim's child process")
	}
	const n = 100_000
	claims := make([]*resourcev1.ResourceClaim, n)
	for i := range claims {
		claims[i] = benchClaim(i)
	}
	heap0, rss0 := memory()
	var keep any
	if impl == "upstream" {
		up := NewUpstream(context.Background())
		for _, c := range claims {
			up.Informer.Add(c)
		}
		keep = up
	} else {
		store, err := claimstore.Open(ctx, filepath.Join(os.Getenv("CLAIMSTORE_MEMORY_DIR"), "db"), claimstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		tr := csk8s.NewTracker(store, csk8s.TrackerOptions{ConsumableCapacity: true})
		for _, c := range claims {
			tr.OnAdd(c)
		}
		keep = tr
	}
	heap1, rss1 := memory()
	fmt.Printf("memory heap=%g rss=%g\n", float64(heap1-heap0)/n, float64(rss1-rss0)/n)
	runtime.KeepAlive(keep)
}

// memory returns the live Go heap after a collection, and the resident
// set size.
func memory() (heap, rss int64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	statm, err := os.ReadFile("/proc/self/statm")
	if err == nil {
		if f := strings.Fields(string(statm)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			rss = pages * int64(os.Getpagesize())
		}
	}
	return int64(ms.HeapAlloc), rss
}
