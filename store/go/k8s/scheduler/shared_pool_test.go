package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"claimstore.dev/claimstore/internal/etcdtest"
)

// sharedPoolConfig is examples/claimstore-scheduler-shared-pool.yaml for
// the scheduler named name (ledgerShard shard), with the test's
// kubeconfig, a directory of its own and the ledger's etcd endpoints.
func (c *cluster) sharedPoolConfig(t testing.TB, name string, shard int, endpoints []string) string {
	t.Helper()
	example, err := os.ReadFile("examples/claimstore-scheduler-shared-pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(
		"/etc/kubernetes/scheduler.conf", c.kubeconfig,
		"/var/lib/claimstore-scheduler-a", filepath.Join(t.TempDir(), name),
		"claimstore-a", name,
		"leaderElect: true", "leaderElect: false",
		"ledgerShard: 0", fmt.Sprintf("ledgerShard: %d", shard),
		"http://10.0.0.11:2379, http://10.0.0.12:2379, http://10.0.0.13:2379", strings.Join(endpoints, ", "),
	).Replace(string(example))
}

// upstreamConfig is kube-scheduler's default profile (upstream's
// DynamicResources) under the scheduler name name.
func (c *cluster) upstreamConfig(name string) string {
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
profiles:
- schedulerName: %s
`, c.kubeconfig, name)
}

// allSettled waits until every pod of namespace is bound or marked
// unschedulable, and returns the bound ones.
func (c *cluster) allSettled(t testing.TB, ctx context.Context, namespace string) []v1.Pod {
	t.Helper()
	var bound []v1.Pod
	waitFor(t, "the pods of "+namespace+" bound or unschedulable", func() bool {
		pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bound = nil
		settled := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound = append(bound, p)
			}
			if p.Spec.NodeName != "" || unschedulableReason(&p) != "" {
				settled++
			}
		}
		return settled == len(pods.Items)
	})
	return bound
}

// doubleAllocations counts, from the API server's claims of namespace, the
// devices allocated to more than one claim, the claims beyond the first on
// each, and the devices allocated at all.
func (c *cluster) doubleAllocations(t testing.TB, ctx context.Context, namespace string) (devices, extraClaims, used int) {
	t.Helper()
	claims, err := c.client.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]int{}
	for _, claim := range claims.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			holders[r.Driver+"/"+r.Pool+"/"+r.Device]++
		}
	}
	used = len(holders)
	for _, n := range holders {
		if n > 1 {
			devices++
			extraClaims += n - 1
		}
	}
	return devices, extraClaims, used
}

func boundBy(pods []v1.Pod) map[string]int {
	by := map[string]int{}
	for _, p := range pods {
		by[p.Spec.SchedulerName]++
	}
	return by
}

// Two claimstore-schedulers allocate from the same two pools (12 devices),
// looking for devices in the same order, through a ledger on a 3-member
// etcd, one member killed between two
// waves of pods: no device goes to two claims (from the API server's
// claims), every pod is bound or unschedulable with the DRA reason, and
// both schedulers bind pods. Then the same waves on pools of their own
// with two upstream kube-schedulers (claimstore-scheduler's binary, the
// default profile): the double allocations they make are counted and
// reported.
func TestTwoSchedulersShareOnePool(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	const nodes, devices, wave = 2, 6, 10

	members := etcdtest.StartCluster(t, 3)
	endpoints := []string{members[0].URL, members[1].URL, members[2].URL}
	c.createDevices(t, ctx, nodes, devices)
	// Both look for devices in the same order (one ledgerShard): the
	// ledger alone keeps them apart.
	a := c.runScheduler(t, c.sharedPoolConfig(t, "claimstore-a", 0, endpoints))
	b := c.runScheduler(t, c.sharedPoolConfig(t, "claimstore-b", 0, endpoints))
	names := []string{"claimstore-a", "claimstore-b"}
	c.createPodsFor(t, ctx, "shared", "first", wave, driver, names...)
	bound, _ := c.podsSettled(t, ctx, "shared", wave, 0)
	if by := boundBy(bound); by["claimstore-a"] != wave/2 || by["claimstore-b"] != wave/2 {
		t.Fatalf("first wave bound by %v, want %d by each scheduler", by, wave/2)
	}
	members[0].Kill()
	c.createPodsFor(t, ctx, "shared", "second", wave, driver, names...)
	bound, unschedulable := c.podsSettled(t, ctx, "shared", nodes*devices, 2*wave-nodes*devices)
	c.checkAllocations(t, ctx, bound)
	for _, p := range unschedulable {
		if r := unschedulableReason(&p); !strings.Contains(r, "cannot allocate all claims") {
			t.Errorf("pod %s unschedulable for %q, want the DRA reason", p.Name, r)
		}
	}
	if d, _, _ := c.doubleAllocations(t, ctx, "shared"); d != 0 {
		t.Errorf("two claimstore-schedulers allocated %d devices twice", d)
	}
	refused := 0.0
	for _, s := range []*scheduler{a, b} {
		// Every allocated claim, once the mirror has the other scheduler's
		// last writes.
		var m map[string]float64
		waitFor(t, "claimstore_ledger_claims at every allocated claim", func() bool {
			m = s.metrics(t)
			return sum(m, "claimstore_ledger_claims") == nodes*devices
		})
		if sum(m, "claimstore_etcd_following") != 1 {
			t.Errorf("claimstore_etcd_following %v after a member was killed, want 1", sum(m, "claimstore_etcd_following"))
		}
		refused += sum(m, "claimstore_ledger_refused_total")
		if !s.running() {
			t.Fatalf("a claimstore-scheduler exited: %v", s.err)
		}
	}
	t.Logf("two claimstore-schedulers, one pool of %d devices, %d pods in two waves (an etcd member killed between): "+
		"%d bound (%v), 0 devices allocated twice; %v reservations refused by the ledger and tried again",
		nodes*devices, 2*wave, len(bound), boundBy(bound), refused)
	a.kill()
	b.kill()

	// Two upstream schedulers, the same waves, on pools of their own.
	const upstreamDriver = "upstream.example.com"
	c.createDevicesOf(t, ctx, upstreamDriver, "upstream", nodes, devices)
	upstream := []string{"upstream-a", "upstream-b"}
	for _, name := range upstream {
		c.runScheduler(t, c.upstreamConfig(name))
	}
	c.createPodsFor(t, ctx, "upstream", "first", wave, upstreamDriver, upstream...)
	c.allSettled(t, ctx, "upstream")
	c.createPodsFor(t, ctx, "upstream", "second", wave, upstreamDriver, upstream...)
	bound = c.allSettled(t, ctx, "upstream")
	d, extra, used := c.doubleAllocations(t, ctx, "upstream")
	t.Logf("two upstream kube-schedulers, one pool of %d devices, %d pods in two waves: %d bound (%v), "+
		"%d devices allocated to two claims or more (%d claims too many)", nodes*devices, 2*wave, len(bound), boundBy(bound), d, extra)
	if len(bound) != used+extra {
		t.Errorf("upstream: %d pods bound, want the %d devices allocated plus the %d claims too many", len(bound), used, extra)
	}
}
