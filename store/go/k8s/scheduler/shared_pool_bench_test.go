package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"claimstore.dev/claimstore/internal/etcdtest"
)

// BenchmarkSharedPool measures how fast pods with a claim each are bound
// on one pool against one kube-apiserver: by one claimstore-scheduler
// without a ledger (as one scheduler is deployed), by one with the ledger
// (a 3-member etcd: what the ledger costs), and by two sharing the ledger,
// each looking for devices in its own part of each pool (ledgerShard), or
// both in the same order.
// Each run starts its own cluster; a warm-up pod per scheduler is bound
// first; then pods are created at once, timed from the first creation to
// the last pod bound (pods/s). tools/bench.sh --scheduler runs it.
func BenchmarkSharedPool(b *testing.B) {
	const nodes, devices = 4, 50
	for _, bc := range []struct {
		name       string
		schedulers int
		ledger     bool
		sameOrder  bool // every scheduler ledgerShard 0
	}{{"one", 1, false, false}, {"one-ledger", 1, true, false}, {"two-ledger", 2, true, false},
		{"two-ledger-same-order", 2, true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			var rate, refused float64
			for range b.N {
				b.StopTimer()
				c := startCluster(b)
				ctx := context.Background()
				c.createDevices(b, ctx, nodes, devices)
				var endpoints []string
				if bc.ledger {
					for _, m := range etcdtest.StartCluster(b, 3) {
						endpoints = append(endpoints, m.URL)
					}
				}
				var names []string
				var running []*scheduler
				for i := range bc.schedulers {
					name := fmt.Sprintf("claimstore-%c", 'a'+i)
					names = append(names, name)
					shard := i
					if bc.sameOrder {
						shard = 0
					}
					config := c.sharedPoolConfig(b, name, shard, endpoints)
					if !bc.ledger {
						config = c.ownPoolConfig(b, name)
					}
					// kube-scheduler's client allows 50 requests a second by
					// default, which would be what is measured (and twice
					// as many for two schedulers): as scheduler_perf does,
					// the API server is the limit instead.
					running = append(running, c.runScheduler(b, strings.Replace(config, "clientConnection:\n",
						"clientConnection:\n  qps: 5000\n  burst: 5000\n", 1)))
				}
				c.createPodsFor(b, ctx, "warm", "warm", len(names), driver, names...)
				c.podsSettled(b, ctx, "warm", len(names), 0)
				pods := nodes*devices - len(names)
				b.StartTimer()
				start := time.Now()
				c.createPodsFor(b, ctx, "timed", "pod", pods, driver, names...)
				c.allBound(b, ctx, "timed", pods)
				took := time.Since(start)
				b.StopTimer()
				rate = float64(pods) / took.Seconds()
				refused = 0
				for _, s := range running {
					refused += sum(s.metrics(b), "claimstore_ledger_refused_total")
				}
			}
			b.ReportMetric(rate, "pods/s")
			b.ReportMetric(refused, "refused/op")
		})
	}
}

// ownPoolConfig is sharedPoolConfig without the ledger: one scheduler
// alone on its pools.
func (c *cluster) ownPoolConfig(t testing.TB, name string) string {
	config := c.sharedPoolConfig(t, name, 0, nil)
	for _, arg := range []string{"etcdEndpoints:", "ledgerShard:", "ledgerShards:"} {
		config = replaceLine(config, arg, "")
	}
	return config
}

// allBound waits (polling every 20 ms) until count pods of namespace are
// bound.
func (c *cluster) allBound(t testing.TB, ctx context.Context, namespace string, count int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if bound == count {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pods of %s bound after 5 minutes", bound, count, namespace)
		}
	}
}

// replaceLine replaces each line of s that contains marker with line.
func replaceLine(s, marker, line string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.Contains(l, marker) {
			lines[i] = line
		}
	}
	return strings.Join(lines, "\n")
}
