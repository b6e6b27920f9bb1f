// Package perf runs kube-scheduler's own scheduler_perf DRA workloads
// (k8s.io/kubernetes v1.37.2, test/integration/scheduler_perf/dra: the
// workload files as upstream has them, read from the module) with
// claimstore's plugin in place of DynamicResources, and, in the
// benchmark, with upstream's plugin in the same run.
package perf

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/dynamic-resource-allocation/structured"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"sigs.k8s.io/yaml"

	"claimstore.dev/claimstore/k8s/scheduler"
)

// TestMain builds etcd from go.etcd.io/etcd/server/v3 (the version
// k8s.io/kubernetes v1.37.2 requires, a tool of this module) and puts it
// first on PATH, where scheduler_perf looks for it: it serves clients on a
// unix socket, which Debian's etcd 3.4 cannot.
func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// scheduler_perf collects per-plugin metrics for the names in
	// PluginNames, a slice its default collector configuration took when
	// the package was initialised: appending is not seen, a name put in
	// place of another is. VolumeZone's place: no DRA workload has volumes.
	i := slices.Index(perf.PluginNames, "VolumeZone")
	if i < 0 {
		fmt.Fprintln(os.Stderr, "scheduler_perf's PluginNames lacks VolumeZone:", perf.PluginNames)
		os.Exit(1)
	}
	perf.PluginNames[i] = scheduler.Name
	bin, err := os.MkdirTemp("", "claimstore-perf-etcd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "etcd"), "go.etcd.io/etcd/server/v3")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building etcd:", err)
		os.Exit(1)
	}
	os.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	code := m.Run()
	os.RemoveAll(bin)
	os.Exit(code)
}

// suites are upstream's DRA workload files: the directory under
// scheduler_perf/dra, its topic (as upstream names its results) and the
// allocator upstream's own test of it enables.
type suite struct{ dir, topic, allocator string }

var suites = []suite{
	{".", "dra", "incubating"},
	{"consumablecapacity", "dra_consumablecapacity", "experimental"},
	{"partitionabledevices", "dra_partitionabledevices", "experimental"},
}

// workspace is a copy of upstream's scheduler_perf/dra directory in
// which the performance-config.yaml of each suite has a twin,
// performance-config-claimstore.yaml, whose test cases all run with
// claimstore's scheduler configuration (schedulerConfigPath). The
// configuration is rewritten before each workload with a new store
// directory (preRun).
type workspace struct {
	root   string // the copy of dra/
	config string // the claimstore scheduler configuration
}

func newWorkspace(tb testing.TB) *workspace {
	tb.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		tb.Fatalf("finding k8s.io/kubernetes in the module cache: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "test", "integration", "scheduler_perf", "dra")
	w := &workspace{root: filepath.Join(tb.TempDir(), "dra")}
	w.config = filepath.Join(filepath.Dir(w.root), "claimstore-scheduler.yaml")
	err = filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(w.root, rel), 0o755)
		}
		if !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(w.root, rel), data, 0o644); err != nil {
			return err
		}
		if info.Name() != "performance-config.yaml" || !slices.ContainsFunc(suites, func(s suite) bool { return s.dir == filepath.Dir(rel) }) {
			return nil
		}
		var cases []map[string]any
		if err := yaml.Unmarshal(data, &cases); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, tc := range cases {
			if _, set := tc["schedulerConfigPath"]; set {
				return fmt.Errorf("%s: test case %v has a scheduler configuration of its own", path, tc["name"])
			}
			tc["schedulerConfigPath"] = w.config
		}
		twin, err := yaml.Marshal(cases)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(w.root, filepath.Dir(rel), "performance-config-claimstore.yaml"), twin, 0o644)
	})
	if err != nil {
		tb.Fatalf("copying %s: %v", src, err)
	}
	return w
}

// preRun writes the claimstore scheduler configuration with a new store
// directory, for the workload about to start.
func (w *workspace) preRun(tCtx ktesting.TContext, _ *perf.Workload) (func(), error) {
	dir, err := os.MkdirTemp(filepath.Dir(w.root), "store-")
	if err != nil {
		return nil, err
	}
	config := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: %s
        weight: 2
      disabled:
      - name: DynamicResources
  pluginConfig:
  - name: %s
    args:
      directory: %s
`, scheduler.Name, scheduler.Name, dir)
	if err := os.WriteFile(w.config, []byte(config), 0o644); err != nil {
		return nil, err
	}
	return func() { _ = os.RemoveAll(dir) }, nil
}

// BenchmarkPerfScheduling runs each suite's workloads with upstream's
// DynamicResources and with claimstore's plugin, one after the other in
// one process; -perf-scheduling-label-filter and -bench select the
// workloads (tools/bench.sh --scheduler). Compare SchedulingThroughput.
//
// CI runs the workloads upstream runs as integration tests (label
// integration-test: the "fast" variants) with claimstore's plugin, once
// each (-bench 'BenchmarkPerfScheduling/.*/claimstore' -benchtime 1x
// -perf-scheduling-label-filter integration-test): a workload fails
// unless every pod it measures is scheduled, as with upstream's plugin.
// (A benchmark, not a test: only RunBenchmarkPerfScheduling takes an
// out-of-tree plugin registry.)
func BenchmarkPerfScheduling(b *testing.B) {
	w := newWorkspace(b)
	for _, s := range suites {
		b.Run(s.topic, func(b *testing.B) {
			b.Chdir(filepath.Join(w.root, s.dir))
			structured.EnableAllocators(s.allocator)
			defer structured.EnableAllocators()
			b.Run("upstream", func(b *testing.B) {
				perf.RunBenchmarkPerfScheduling(b, "performance-config.yaml", s.topic+"_upstream", nil)
			})
			b.Run("claimstore", func(b *testing.B) {
				perf.RunBenchmarkPerfScheduling(b, "performance-config-claimstore.yaml", s.topic+"_claimstore",
					scheduler.Registry(), perf.WithPreRunFn(w.preRun))
			})
		})
	}
}
