package scheduler_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"

	"claimstore.dev/claimstore/internal/etcdtest"
)

// schedulerBin is cmd/claimstore-scheduler, built once by TestMain.
var schedulerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "claimstore-scheduler-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	schedulerBin = filepath.Join(dir, "claimstore-scheduler")
	build := exec.Command("go", "build", "-o", schedulerBin, "./cmd/claimstore-scheduler")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cmd/claimstore-scheduler:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cluster is a kube-apiserver in this process (on loopback, its own
// certificates) on an etcd of its own, with kube-controller-manager's
// ResourceClaim controller (claims from templates) running beside it.
type cluster struct {
	client     kubernetes.Interface
	kubeconfig string
	// The API server is reached through proxy (a TCP relay on a port of
	// its own), with a static token and without checking its certificate,
	// so that a restarted API server (another port, other certificates)
	// is the same server to every client.
	proxy    *relay
	storage  *storagebackend.Config
	tokens   string // --token-auth-file
	stopping func() // stops the API server running now
}

const adminToken = "claimstore-test-admin-token"

func startCluster(t testing.TB) *cluster {
	t.Helper()
	etcd := etcdtest.Start(t, nil)
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcd.URL}
	c := &cluster{storage: storage, tokens: filepath.Join(t.TempDir(), "tokens.csv"), proxy: startRelay(t)}
	if err := os.WriteFile(c.tokens, []byte(adminToken+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.startAPIServer(t)
	t.Cleanup(func() { c.stopping() })
	cfg := &rest.Config{Host: "https://" + c.proxy.addr, BearerToken: adminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 500, Burst: 1000}
	client := kubernetes.NewForConfigOrDie(cfg)

	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: true}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: adminToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := resourceclaim.NewController(klog.Background(), client, factory.Core().V1().Pods(),
		factory.Scheduling().V1beta1().PodGroups(), factory.Resource().V1().ResourceClaims(),
		factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { ctrl.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	c.client, c.kubeconfig = client, path
	return c
}

// startAPIServer starts kube-apiserver in this process on the cluster's
// etcd and points the relay at it.
func (c *cluster) startAPIServer(t testing.TB) {
	t.Helper()
	server, err := kubeapiservertesting.StartTestServer(t, kubeapiservertesting.NewDefaultTestServerOptions(),
		[]string{"--endpoint-reconciler-type=none", "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
			"--token-auth-file=" + c.tokens}, c.storage)
	if err != nil {
		t.Fatalf("starting kube-apiserver: %v", err)
	}
	c.stopping = sync.OnceFunc(server.TearDownFn)
	c.proxy.point(strings.TrimPrefix(server.ClientConfig.Host, "https://"))
}

// restartAPIServer stops the API server (every connection through the
// relay is cut), waits down for a moment, and starts another on the same
// etcd.
func (c *cluster) restartAPIServer(t testing.TB, down time.Duration) {
	t.Helper()
	c.proxy.point("")
	c.stopping()
	time.Sleep(down)
	c.startAPIServer(t)
}

// relay forwards TCP connections on addr to the target it points at; a
// new target (or none) cuts the connections it relays.
type relay struct {
	addr   string
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
}

func startRelay(t testing.TB) *relay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{addr: l.Addr().String(), conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { l.Close(); r.point("") })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go r.serve(in)
		}
	}()
	return r
}

func (r *relay) serve(in net.Conn) {
	r.mu.Lock()
	target := r.target
	r.mu.Unlock()
	if target == "" {
		in.Close()
		return
	}
	out, err := net.Dial("tcp", target)
	if err != nil {
		in.Close()
		return
	}
	r.mu.Lock()
	if r.target != target {
		r.mu.Unlock()
		in.Close()
		out.Close()
		return
	}
	r.conns[in], r.conns[out] = struct{}{}, struct{}{}
	r.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
	in.Close()
	out.Close()
	r.mu.Lock()
	delete(r.conns, in)
	delete(r.conns, out)
	r.mu.Unlock()
}

// point makes the relay forward to target ("": nowhere) and cuts the
// connections it relays.
func (r *relay) point(target string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target = target
	for c := range r.conns {
		c.Close()
	}
	clear(r.conns)
}

// scheduler is one claimstore-scheduler process.
type scheduler struct {
	cmd    *exec.Cmd
	log    *os.File
	port   int           // of /metrics and /healthz (HTTPS)
	exited chan struct{} // closed when the process has exited (err: how)
	err    error
}

// running reports whether the process has not exited.
func (s *scheduler) running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// startScheduler runs cmd/claimstore-scheduler with the example
// configuration (examples/claimstore-scheduler.yaml), its kubeconfig and
// store directory replaced by the test's, and without leader election.
func (c *cluster) startScheduler(t testing.TB, dir string, extraArgs ...string) *scheduler {
	t.Helper()
	example, err := os.ReadFile("examples/claimstore-scheduler.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := strings.NewReplacer(
		"/etc/kubernetes/scheduler.conf", c.kubeconfig,
		"/var/lib/claimstore-scheduler", dir,
		"leaderElect: true", "leaderElect: false").Replace(string(example))
	return c.runScheduler(t, config, extraArgs...)
}

// runScheduler runs cmd/claimstore-scheduler with the configuration
// config (a KubeSchedulerConfiguration).
func (c *cluster) runScheduler(t testing.TB, config string, extraArgs ...string) *scheduler {
	t.Helper()
	configPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.CreateTemp(t.TempDir(), "scheduler-*.log")
	if err != nil {
		t.Fatal(err)
	}
	port := etcdtest.FreePort(t)
	args := append([]string{"--config", configPath, "--secure-port", strconv.Itoa(port),
		"--bind-address", "127.0.0.1",
		"--authentication-kubeconfig", c.kubeconfig, "--authorization-kubeconfig", c.kubeconfig,
		"--authorization-always-allow-paths", "/healthz,/readyz,/livez,/metrics"}, extraArgs...)
	cmd := exec.Command(schedulerBin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &scheduler{cmd: cmd, log: log, port: port, exited: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("claimstore-scheduler's log (%s):\n%s", log.Name(), tail(string(out), 200))
		}
	})
	return s
}

// metrics scrapes the scheduler's /metrics (as Prometheus does, without
// credentials: the test allows the path) and returns each sample's value
// by its name and labels as exposed ("name{label=\"value\"}").
func (s *scheduler) metrics(t testing.TB) map[string]float64 {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the scheduler's own self-signed certificate
	var body []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", s.port))
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("%s: %s", resp.Status, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("scraping the scheduler's /metrics: %v", err)
		}
	}
	samples := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("/metrics: line %q", line)
		}
		samples[line[:i]] = v
	}
	return samples
}

// sum adds the samples of metric name (any labels).
func sum(samples map[string]float64, name string) float64 {
	total := 0.0
	for k, v := range samples {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

// kill SIGKILLs the scheduler and waits for it to exit.
func (s *scheduler) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

func tail(s string, lines int) string {
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

const driver = "gpu.example.com"

// createDevices creates the DeviceClass and, for each of nodes nodes, the
// Node and a ResourceSlice of its pool with devicesPerNode devices.
func (c *cluster) createDevices(t testing.TB, ctx context.Context, nodes, devicesPerNode int) {
	t.Helper()
	c.createDevicesOf(t, ctx, driver, "node", nodes, devicesPerNode)
}

// createDevicesOf is createDevices for the driver (and DeviceClass) named
// driver, with nodes named prefix-i.
func (c *cluster) createDevicesOf(t testing.TB, ctx context.Context, driver, prefix string, nodes, devicesPerNode int) {
	t.Helper()
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}}}}}
	if _, err := c.client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		name := fmt.Sprintf("%s-%d", prefix, i)
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
			Status: v1.NodeStatus{
				Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"),
					v1.ResourceMemory: resource.MustParse("64Gi"), v1.ResourcePods: resource.MustParse("110")},
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"),
					v1.ResourceMemory: resource.MustParse("64Gi"), v1.ResourcePods: resource.MustParse("110")},
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			}}
		if _, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + driver},
			Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &name,
				Pool: resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}}}
		for d := range devicesPerNode {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", d)})
		}
		if _, err := c.client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// createPods creates a ResourceClaimTemplate (once per namespace) asking
// for one device of the class, and count pods named prefix-i, each with a
// claim from it.
func (c *cluster) createPods(t testing.TB, ctx context.Context, namespace, prefix string, count int) {
	t.Helper()
	c.createPodsFor(t, ctx, namespace, prefix, count, driver, "")
}

// createPodsFor is createPods with the device class class (in a namespace
// new to createPods), every other pod to each of the schedulers named
// (none: the default scheduler).
func (c *cluster) createPodsFor(t testing.TB, ctx context.Context, namespace, prefix string, count int, class string, schedulers ...string) {
	t.Helper()
	if _, err := c.client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{}); err != nil {
		if _, err := c.client.CoreV1().Namespaces().Create(ctx,
			&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: namespace},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
				Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
					Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}}}}}}
		if _, err := c.client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tmplName := "gpu"
	for i := range count {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: namespace},
			Spec: v1.PodSpec{
				Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}},
				ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmplName}},
			}}
		if len(schedulers) > 0 {
			pod.Spec.SchedulerName = schedulers[i%len(schedulers)]
		}
		if _, err := c.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// createDoubleAllocation creates two claims in namespace and allocates
// both the same device (of a pool no node has), through the status
// subresource as a scheduler would: the API server lets it through.
func (c *cluster) createDoubleAllocation(t testing.TB, ctx context.Context, namespace string) {
	t.Helper()
	if _, err := c.client.CoreV1().Namespaces().Create(ctx,
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"first", "second"} {
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: driver}}}}}}
		claim, err := c.client.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: "spare", Device: "spare-0"}}}}
		if _, err := c.client.ResourceV1().ResourceClaims(namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls cond for up to a minute.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within a minute", what)
		}
	}
}
