package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"claimstore.dev/claimstore"
	"claimstore.dev/claimstore/k8s"
)

// podsSettled waits until every pod of namespace is bound to a node or
// marked unschedulable by the scheduler, and returns the bound and the
// unschedulable ones.
func (c *cluster) podsSettled(t testing.TB, ctx context.Context, namespace string, bound, unschedulable int) (b, u []v1.Pod) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pods, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, u = nil, nil
		for _, p := range pods.Items {
			switch {
			case p.Spec.NodeName != "":
				b = append(b, p)
			case unschedulableReason(&p) != "":
				u = append(u, p)
			}
		}
		last = fmt.Sprintf("%d bound, %d unschedulable of %d", len(b), len(u), len(pods.Items))
		if len(u) > 0 {
			last += fmt.Sprintf(" (%s: %q)", u[0].Name, unschedulableReason(&u[0]))
		}
		if len(b) == bound && len(u) == unschedulable && len(b)+len(u) == len(pods.Items) {
			return b, u
		}
	}
	t.Fatalf("pods of %s: want %d bound and %d unschedulable, have %s", namespace, bound, unschedulable, last)
	return nil, nil
}

func unschedulableReason(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

// checkAllocations checks, from the API server's claims, that each bound
// pod's claim is allocated a device of its node's pool and reserved for
// the pod, and that no device is allocated to two claims (but in the
// planted namespaces, whose claims the test allocated itself).
func (c *cluster) checkAllocations(t testing.TB, ctx context.Context, bound []v1.Pod, planted ...string) {
	t.Helper()
	claims, err := c.client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*resourcev1.ResourceClaim{}
	holder := map[string]string{}
	for i := range claims.Items {
		claim := &claims.Items[i]
		byName[claim.Namespace+"/"+claim.Name] = claim
		if claim.Status.Allocation == nil || slices.Contains(planted, claim.Namespace) {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			if other, taken := holder[id]; taken {
				t.Errorf("device %s is allocated to %s and to %s/%s", id, other, claim.Namespace, claim.Name)
			}
			holder[id] = claim.Namespace + "/" + claim.Name
		}
	}
	for _, p := range bound {
		if len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			t.Errorf("pod %s/%s: resourceClaimStatuses %v, want its one generated claim", p.Namespace, p.Name, p.Status.ResourceClaimStatuses)
			continue
		}
		claim := byName[p.Namespace+"/"+*p.Status.ResourceClaimStatuses[0].ResourceClaimName]
		switch {
		case claim == nil:
			t.Errorf("pod %s/%s: its claim %s is missing", p.Namespace, p.Name, *p.Status.ResourceClaimStatuses[0].ResourceClaimName)
		case claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1:
			t.Errorf("pod %s/%s on %s: claim %s allocated %v, want one device", p.Namespace, p.Name, p.Spec.NodeName, claim.Name, claim.Status.Allocation)
		case claim.Status.Allocation.Devices.Results[0].Pool != p.Spec.NodeName:
			t.Errorf("pod %s/%s on %s: claim %s has a device of pool %s", p.Namespace, p.Name, p.Spec.NodeName, claim.Name, claim.Status.Allocation.Devices.Results[0].Pool)
		case len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != p.UID:
			t.Errorf("pod %s/%s: claim %s reserved for %v", p.Namespace, p.Name, claim.Name, claim.Status.ReservedFor)
		}
	}
}

// checkStoreEqualsAPI waits until the store at dir (opened read-only
// beside the scheduler that writes it) holds every claim of the API
// server with the same status, field by field, and no other.
// lacking are claims ("namespace/name") whose version in the API server
// the store refused: it must have an older one or none.
func (c *cluster) checkStoreEqualsAPI(t testing.TB, ctx context.Context, dir string, lacking ...string) {
	t.Helper()
	var diff string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if diff = c.storeDiff(t, ctx, dir, lacking); diff == "" {
			return
		}
	}
	t.Errorf("the store in %s differs from the API server's claims:\n%s", dir, diff)
}

func (c *cluster) storeDiff(t testing.TB, ctx context.Context, dir string, lacking []string) string {
	claims, err := c.client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := claimstore.Open(ctx, dir, claimstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var diffs []string
	inAPI := map[claimstore.Key]bool{}
	for i := range claims.Items {
		claim := &claims.Items[i]
		key := claimstore.Key{Namespace: claim.Namespace, Name: claim.Name}
		inAPI[key] = true
		rec, err := store.Get(key)
		switch {
		case slices.Contains(lacking, key.String()):
			if err == nil {
				if stored, err := k8s.FromRecord(rec); err != nil || apiequality.Semantic.DeepEqual(stored.Status, claim.Status) {
					diffs = append(diffs, fmt.Sprintf("%s: in the store as the API server has it, which the store should have refused", key))
				}
			}
			continue
		case errors.Is(err, claimstore.ErrNotFound):
			diffs = append(diffs, fmt.Sprintf("%s: in the API server, not in the store", key))
			continue
		case err != nil:
			t.Fatal(err)
		}
		stored, err := k8s.FromRecord(rec)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if stored.UID != claim.UID || !apiequality.Semantic.DeepEqual(stored.Status, claim.Status) {
			diffs = append(diffs, fmt.Sprintf("%s (-store +API):\n%s", key,
				cmp.Diff(stored.Status, claim.Status)))
		}
	}
	page, err := store.List(claimstore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range page.Claims {
		if key := (claimstore.Key{Namespace: rec.Namespace(), Name: rec.Name()}); !inAPI[key] {
			diffs = append(diffs, fmt.Sprintf("%s: in the store, not in the API server", key))
		}
	}
	return strings.Join(diffs, "\n")
}

// TestSchedulerAllocatesFromTheStoreAndResumesAfterKill runs
// claimstore-scheduler against a real kube-apiserver: pods with claims
// from a template are bound where a device is free and marked
// unschedulable where none is, every claim's status in the API server is
// the store's, and a scheduler SIGKILLed and restarted resumes its watch
// from the store (no list of the cluster) and allocates nothing twice.
func TestSchedulerAllocatesFromTheStoreAndResumesAfterKill(t *testing.T) {
	ctx := t.Context()
	c := startCluster(t)
	const nodes, devices = 4, 2
	c.createDevices(t, ctx, nodes, devices)
	dir := filepath.Join(t.TempDir(), "store")
	s := c.startScheduler(t, dir)

	before := s.metrics(t)
	c.createPods(t, ctx, "team-a", "pod", nodes*devices+2)
	bound, pending := c.podsSettled(t, ctx, "team-a", nodes*devices, 2)
	// The plugin asked claimstore's tracker (not the scheduler's own
	// manager): every allocation was signalled to it and assumed by it,
	// and the figures an operator scrapes moved.
	after := s.metrics(t)
	for _, m := range []struct {
		name string
		min  float64
	}{
		{"claimstore_tracker_pending_allocations_signalled_total", nodes * devices},
		{"claimstore_tracker_assumed_total", nodes * devices},
		{"claimstore_tracker_claims", nodes*devices + 2},
		{"claimstore_store_claims", nodes*devices + 2},
		{"claimstore_write_duration_seconds_count", 2 * (nodes*devices + 2)},
		{"claimstore_tracker_watch_lag_seconds_count", 2 * (nodes*devices + 2)},
	} {
		if got := sum(after, m.name) - sum(before, m.name); got < m.min {
			t.Errorf("%s moved by %v, want at least %v", m.name, got, m.min)
		}
	}
	for _, name := range []string{"claimstore_store_revision", "claimstore_tracker_watch_resource_version"} {
		if sum(after, name) <= sum(before, name) {
			t.Errorf("%s: %v before the pods, %v after", name, sum(before, name), sum(after, name))
		}
	}
	if n := sum(after, "claimstore_tracker_refused_total"); n != 0 {
		t.Errorf("claimstore_tracker_refused_total %v, want 0", n)
	}
	for _, p := range pending {
		if r := unschedulableReason(&p); !strings.Contains(r, "cannot allocate all claims") {
			t.Errorf("pod %s pending: %q, want the DRA plugin's reason", p.Name, r)
		}
	}
	c.checkAllocations(t, ctx, bound)
	c.checkStoreEqualsAPI(t, ctx, dir)
	if log, _ := os.ReadFile(s.log.Name()); !strings.Contains(string(log), "listed the cluster's ResourceClaims") {
		t.Errorf("the first start did not list the cluster's claims:\n%s", tail(string(log), 50))
	}

	// Two claims allocated one device (the API server checks each claim
	// alone; #133602): the second is reported with its name and field
	// path, counted, and kept out of the store; the scheduler goes on.
	c.createDoubleAllocation(t, ctx, "team-b")
	waitFor(t, "the double allocation reported", func() bool {
		log, _ := os.ReadFile(s.log.Name())
		return strings.Contains(string(log), `claim="team-b/second" field="status.allocation.devices.results[0]"`) &&
			sum(s.metrics(t), "claimstore_tracker_conflicts_total") == 1
	})
	c.checkStoreEqualsAPI(t, ctx, dir, "team-b/second")
	if !s.running() {
		t.Fatalf("the scheduler stopped: %v", s.err)
	}

	// Killed: two bound pods go (the claim controller deallocates their
	// claims), and three pods come while no scheduler runs.
	s.kill()
	zero := int64(0)
	for _, p := range bound[:2] {
		if err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	c.createPods(t, ctx, "team-a", "later", 3)
	s = c.startScheduler(t, dir)
	bound, _ = c.podsSettled(t, ctx, "team-a", nodes*devices, 3)
	c.checkAllocations(t, ctx, bound, "team-b")
	c.checkStoreEqualsAPI(t, ctx, dir, "team-b/second")
	log, _ := os.ReadFile(s.log.Name())
	if !strings.Contains(string(log), "resuming the watch of ResourceClaims from the store") ||
		strings.Contains(string(log), "listed the cluster's ResourceClaims") {
		t.Errorf("the restarted scheduler did not resume from its store:\n%s", tail(string(log), 50))
	}
}

// TestSchedulerRefusesAStoreItCannotOpen: a store directory that cannot
// be created stops the scheduler at start with an error naming it.
func TestSchedulerRefusesAStoreItCannotOpen(t *testing.T) {
	c := startCluster(t)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "store")
	s := c.startScheduler(t, dir)
	select {
	case <-s.exited:
		if s.err == nil {
			t.Errorf("the scheduler exited 0")
		}
	case <-time.After(time.Minute):
		t.Fatal("the scheduler still runs on a store it cannot open")
	}
	log, _ := os.ReadFile(s.log.Name())
	// klog quotes the error, and in it the directory's quotes.
	if want := `ClaimstoreDynamicResources: opening the store in \"` + dir + `\"`; !strings.Contains(string(log), want) {
		t.Errorf("the scheduler's log lacks %s:\n%s", want, tail(string(log), 30))
	}
}

// The API server restarted mid-run (stopped, down for two seconds, another
// started on the same etcd, as a control plane upgrade does): the
// scheduler keeps running, its tracker watches again, and pods created
// afterwards are bound from the store with no device allocated twice; the
// store equals the API server's claims.
func TestSchedulerRidesOutAnAPIServerRestart(t *testing.T) {
	ctx := t.Context()
	c := startCluster(t)
	const nodes, devices = 2, 4
	c.createDevices(t, ctx, nodes, devices)
	dir := filepath.Join(t.TempDir(), "store")
	s := c.startScheduler(t, dir)
	c.createPods(t, ctx, "team-a", "first", 4)
	c.podsSettled(t, ctx, "team-a", 4, 0)
	position := sum(s.metrics(t), "claimstore_tracker_watch_resource_version")

	c.restartAPIServer(t, 2*time.Second)
	c.createPods(t, ctx, "team-a", "second", 6)
	bound, _ := c.podsSettled(t, ctx, "team-a", nodes*devices, 2)
	c.checkAllocations(t, ctx, bound)
	c.checkStoreEqualsAPI(t, ctx, dir)
	if !s.running() {
		t.Fatalf("the scheduler exited when the API server restarted: %v", s.err)
	}
	if after := sum(s.metrics(t), "claimstore_tracker_watch_resource_version"); after <= position {
		t.Errorf("the tracker's watch position stayed at %v after the restart", after)
	}
	out, err := os.ReadFile(s.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "claimstore tracker") {
			t.Log(line)
		}
	}
}
