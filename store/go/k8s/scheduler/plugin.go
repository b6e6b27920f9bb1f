package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"claimstore.dev/claimstore"
	"claimstore.dev/claimstore/k8s"
)

// Name is the plugin's name in a KubeSchedulerConfiguration profile: it
// takes the place of DynamicResources, which the profile disables.
const Name = "ClaimstoreDynamicResources"

// Args are the plugin's pluginConfig args. Unknown fields are refused.
type Args struct {
	// Directory holds the store (created when missing). Required.
	Directory string `json:"directory"`
	// EtcdEndpoints, when set, let this scheduler allocate from pools that
	// other schedulers allocate from too: every scheduler of the pools
	// records its allocations in a ledger on this etcd (a claimstore store
	// in the shared mode, its mirror in Directory/ledger) before it writes
	// them to the API server, and one device goes to one claim only
	// (k8s.TrackerOptions.Ledger). Every scheduler of the pools must name
	// the same etcd and EtcdPrefix.
	EtcdEndpoints []string `json:"etcdEndpoints,omitempty"`
	// EtcdPrefix is the ledger's key prefix in etcd (default "/claimstore/").
	EtcdPrefix string `json:"etcdPrefix,omitempty"`
	// TLS to etcd (https:// endpoints), as etcdctl's --cacert, --cert and
	// --key: PEM files of the CA, and of this client's certificate and key.
	EtcdCAFile   string `json:"etcdCAFile,omitempty"`
	EtcdCertFile string `json:"etcdCertFile,omitempty"`
	EtcdKeyFile  string `json:"etcdKeyFile,omitempty"`
	// LedgerReapAfter is how old a ledger entry of a claim the API server
	// has not allocated gets before it is taken out (a reservation whose
	// scheduler was killed before it wrote the allocation): longer than
	// the longest a pod waits in Permit. Default 5m.
	LedgerReapAfter *metav1.Duration `json:"ledgerReapAfter,omitempty"`
	// LedgerShard of LedgerShards: schedulers sharing pools look for free
	// devices in each ResourceSlice from different places (this one from
	// the LedgerShard/LedgerShards part of its devices on, wrapping
	// around), so that two of them rarely pick one device at once and
	// lose a scheduling cycle on the ledger's refusal. 0 of 0: in the
	// slices' order, as upstream.
	LedgerShard  int `json:"ledgerShard,omitempty"`
	LedgerShards int `json:"ledgerShards,omitempty"`
	// FilterTimeout and BindingTimeout are DynamicResources' own args,
	// with its defaults and feature gates.
	FilterTimeout  *metav1.Duration `json:"filterTimeout,omitempty"`
	BindingTimeout *metav1.Duration `json:"bindingTimeout,omitempty"`
}

// Options are the app options that register the plugin, for
// app.NewSchedulerCommand (cmd/claimstore-scheduler).
func Options() []app.Option {
	return []app.Option{app.WithPlugin(Name, New), app.WithPlugin(FitName, NewFit),
		app.WithPlugin(BalancedAllocationName, NewBalancedAllocation)}
}

// Registry is the plugin as an out-of-tree registry (scheduler.New's
// WithFrameworkOutOfTreeRegistry, scheduler_perf's outOfTreePluginRegistry).
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{Name: New, FitName: NewFit, BalancedAllocationName: NewBalancedAllocation}
}

// plugin is upstream's DynamicResources plugin under this plugin's name:
// every extension point is upstream's, with a Handle whose
// SharedDRAManager answers claims from claimstore, and PreFilter first
// waits (a moment at most) until the tracker has applied every claim event
// the scheduler's own informer delivered: the scheduler's queue acts on
// that informer's events, and the tracker has a watch of its own.
type plugin struct {
	*dynamicresources.DynamicResources
	s  *started
	fh fwk.Handle
}

func (plugin) Name() string { return Name }

// catchUpTimeout bounds PreFilter's wait for the tracker.
const catchUpTimeout = time.Second

func (p plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	p.s.catchUp(ctx)
	return p.DynamicResources.PreFilter(ctx, state, pod, nodes)
}

// reserveAttempts bounds Reserve's tries on one node when the ledger
// refuses a device another scheduler took first.
const reserveAttempts = 3

// Reserve is upstream's, but when the ledger refuses a device (another
// scheduler reserved it since this cycle's PreFilter), the pod is not
// sent back to the queue's backoff (a second or more) at once: the
// holder is counted, what was reserved is undone, and the allocation on
// the same node is made again (upstream's PreFilter and Filter for that
// node), up to reserveAttempts times. When that node has nothing left, or
// the claim itself is held in the ledger (another scheduler reserves the
// same claim), or in a pod group's cycle (whose shared reservations one
// pod must not undo), the ledger's error is returned, as without the retry:
// the pod is tried again on every node after its backoff.
func (p plugin) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	st := p.DynamicResources.Reserve(ctx, cs, pod, nodeName)
	for attempt := 1; attempt < reserveAttempts && st != nil && errors.Is(st.AsError(), k8s.ErrHeldInLedger) &&
		!errors.Is(st.AsError(), k8s.ErrClaimHeldInLedger) && cs.GetPodGroupSchedulingCycle() == nil; attempt++ {
		nodeInfo, err := p.fh.SnapshotSharedLister().NodeInfos().Get(nodeName)
		if err != nil {
			return st
		}
		if err := p.s.tracker.LearnHolders(st.AsError()); err != nil {
			return st
		}
		p.DynamicResources.Unreserve(ctx, cs, pod, nodeName)
		_, fits := p.DynamicResources.PreFilter(ctx, cs, pod, []fwk.NodeInfo{nodeInfo})
		if fits.IsSuccess() {
			fits = p.DynamicResources.Filter(ctx, cs, pod, nodeInfo)
		}
		if !fits.IsSuccess() {
			// Undone already: kube-scheduler's Unreserve after this
			// failure must find nothing to undo a second time.
			cs.Delete(dynamicresources.Name)
			return st
		}
		klog.FromContext(ctx).V(4).Info("claimstore ledger: a device was reserved by another scheduler; allocating again on the node",
			"pod", klog.KObj(pod), "node", nodeName, "attempt", attempt+1)
		st = p.DynamicResources.Reserve(ctx, cs, pod, nodeName)
	}
	return st
}

// New builds the plugin (a runtime.PluginFactory). The store and its
// tracker are opened once per directory for the scheduler and shared by
// every profile that names it; New returns once the tracker holds the
// cluster's claims (loaded from the store, or listed), or ctx ends.
func New(ctx context.Context, obj runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	fts := plfeature.NewSchedulerFeaturesFromGates(feature.DefaultFeatureGate)
	upstreamArgs := &config.DynamicResourcesArgs{FilterTimeout: args.FilterTimeout, BindingTimeout: args.BindingTimeout}
	if upstreamArgs.FilterTimeout == nil && fts.EnableDRASchedulerFilterTimeout {
		upstreamArgs.FilterTimeout = &metav1.Duration{Duration: config.DynamicResourcesFilterTimeoutDefault}
	}
	if upstreamArgs.BindingTimeout == nil && fts.EnableDRADeviceBindingConditions && fts.EnableDRAResourceClaimDeviceStatus {
		upstreamArgs.BindingTimeout = &metav1.Duration{Duration: config.DynamicResourcesBindingTimeoutDefault}
	}
	// Before the store is opened: bad args change nothing.
	if err := validation.ValidateDynamicResourcesArgs(field.NewPath("pluginConfig", Name, "args"), upstreamArgs, fts); err != nil {
		return nil, err
	}
	s, err := trackerFor(ctx, args, fh, fts)
	if err != nil {
		return nil, err
	}
	// The profile's ClaimstoreNodeResourcesFit and -BalancedAllocation
	// score with this tracker too, until it stops.
	profiles.Store(fh, s)
	go func() {
		<-s.stopped
		profiles.CompareAndDelete(fh, s)
	}()
	m := manager{SharedDRAManager: fh.SharedDRAManager(),
		claims: claimsView{Tracker: s.tracker, informer: fh.SharedDRAManager().ResourceClaims()}}
	if args.LedgerShards > 1 {
		m.slices = &rotatedSlices{ResourceSliceLister: fh.SharedDRAManager().ResourceSlices(),
			shard: args.LedgerShard, shards: args.LedgerShards, copies: map[*resourcev1.ResourceSlice]*resourcev1.ResourceSlice{}}
	}
	h := handle{Handle: fh, dra: m}
	p, err := dynamicresources.New(ctx, upstreamArgs, h, fts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return plugin{DynamicResources: p.(*dynamicresources.DynamicResources), s: s, fh: fh}, nil
}

// decodeArgs reads the pluginConfig args strictly: an unknown field (a
// typo) is an error naming it, as kube-scheduler's own args are.
func decodeArgs(obj runtime.Object) (*Args, error) {
	args := &Args{}
	if err := decodeStrict(Name, obj, args); err != nil {
		return nil, err
	}
	if args.Directory == "" {
		return nil, fmt.Errorf("pluginConfig %s: args.directory: required (where the store keeps its database)", Name)
	}
	if args.LedgerShards < 0 || args.LedgerShard < 0 || (args.LedgerShards > 0 && args.LedgerShard >= args.LedgerShards) ||
		(args.LedgerShards == 0 && args.LedgerShard != 0) {
		return nil, fmt.Errorf("pluginConfig %s: args.ledgerShard: %d of %d: must be at least 0 and less than ledgerShards", Name,
			args.LedgerShard, args.LedgerShards)
	}
	if args.LedgerReapAfter != nil && args.LedgerReapAfter.Duration <= 0 {
		return nil, fmt.Errorf("pluginConfig %s: args.ledgerReapAfter: %v: must be positive", Name, args.LedgerReapAfter.Duration)
	}
	return args, nil
}

// decodeStrict decodes plugin name's pluginConfig args (raw JSON from the
// configuration file; nil: none) into args, refusing unknown fields.
func decodeStrict(name string, obj runtime.Object, args any) error {
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			d := json.NewDecoder(bytes.NewReader(o.Raw))
			d.DisallowUnknownFields()
			if err := d.Decode(args); err != nil {
				return fmt.Errorf("pluginConfig %s: args: %w", name, err)
			}
		}
	default:
		return fmt.Errorf("pluginConfig %s: args of type %T, want the plugin's own (runtime.Unknown)", name, obj)
	}
	return nil
}

// handle is the framework's Handle with claimstore's SharedDRAManager.
type handle struct {
	fwk.Handle
	dra fwk.SharedDRAManager
}

func (h handle) SharedDRAManager() fwk.SharedDRAManager { return h.dra }

// manager answers claims from claimstore's Tracker and everything else
// (ResourceSlices with DeviceTaintRules, DeviceClasses, the extended
// resource resolver) from the scheduler's own manager.
type manager struct {
	fwk.SharedDRAManager
	claims claimsView
	slices *rotatedSlices // with ledgerShards, else nil
}

func (m manager) ResourceClaims() fwk.ResourceClaimTracker { return m.claims }

func (m manager) ResourceSlices() fwk.ResourceSliceLister {
	if m.slices != nil {
		return m.slices
	}
	return m.SharedDRAManager.ResourceSlices()
}

// rotatedSlices are the scheduler's ResourceSlices with each slice's
// devices starting at its shard's part (ledgerShard of ledgerShards) and
// wrapping around: the allocator takes the first free device it finds, so
// schedulers of different shards look in different places. A slice's
// rotated copy is made once (the informer's objects do not change; an
// update is a new object) and kept while the slice is listed.
type rotatedSlices struct {
	fwk.ResourceSliceLister
	shard, shards int

	mu     sync.Mutex
	copies map[*resourcev1.ResourceSlice]*resourcev1.ResourceSlice
}

func (r *rotatedSlices) ListWithDeviceTaintRules() ([]*resourcev1.ResourceSlice, error) {
	slices, err := r.ResourceSliceLister.ListWithDeviceTaintRules()
	if err != nil {
		return nil, err
	}
	out := make([]*resourcev1.ResourceSlice, len(slices))
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range slices {
		c, ok := r.copies[s]
		if !ok {
			c = rotate(s, len(s.Spec.Devices)*r.shard/r.shards)
			r.copies[s] = c
		}
		out[i] = c
	}
	if len(r.copies) > 2*len(slices)+64 {
		// Drop the copies of slices no longer listed.
		listed := make(map[*resourcev1.ResourceSlice]bool, len(slices))
		for _, s := range slices {
			listed[s] = true
		}
		for s := range r.copies {
			if !listed[s] {
				delete(r.copies, s)
			}
		}
	}
	return out, nil
}

// rotate is s with its devices from index from on, then those before.
func rotate(s *resourcev1.ResourceSlice, from int) *resourcev1.ResourceSlice {
	if from == 0 || from >= len(s.Spec.Devices) {
		return s
	}
	c := *s
	c.Spec.Devices = append(append(make([]resourcev1.Device, 0, len(s.Spec.Devices)), s.Spec.Devices[from:]...), s.Spec.Devices[:from]...)
	return &c
}

// claimsView is the Tracker, but Get answers with the newer of the
// Tracker's claim and the scheduler's own informer's: the scheduler's
// queue (PreEnqueue, the queueing hints) looks a claim up as soon as its
// informer delivers an event about it, which may be moments before the
// Tracker's watch brings the same change.
type claimsView struct {
	*k8s.Tracker
	informer fwk.ResourceClaimTracker
}

func (c claimsView) Get(namespace, name string) (*resourcev1.ResourceClaim, error) {
	claim, err := c.Tracker.Get(namespace, name)
	if c.informer == nil || (err != nil && !apierrors.IsNotFound(err)) {
		return claim, err
	}
	other, oerr := c.informer.Get(namespace, name)
	switch {
	case oerr != nil:
		return claim, err
	case err != nil || resourceVersion(other) > resourceVersion(claim):
		return other, nil
	}
	return claim, nil
}

func resourceVersion(o metav1.Object) uint64 {
	n, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return n
}

// started is a store opened and its tracker running for one scheduler
// (ctx) until it stops.
type started struct {
	tracker   *k8s.Tracker
	ledger    *claimstore.Store // with etcdEndpoints, else nil
	applied   func() uint64     // tracker.Applied
	endpoints string            // etcd's, joined (the shared mode), or ""
	ctx       context.Context
	stopped   chan struct{} // closed once the tracker stopped and the store is closed
	// informed is the newest ResourceClaim resourceVersion the scheduler's
	// own informer delivered.
	informed atomic.Uint64
}

// catchUp waits until the tracker has applied what the scheduler's
// informer delivered, for catchUpTimeout at most.
func (s *started) catchUp(ctx context.Context) {
	want := s.informed.Load()
	if s.applied() >= want {
		return
	}
	deadline := time.Now().Add(catchUpTimeout)
	for s.applied() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	if got := s.applied(); got < want {
		klog.FromContext(ctx).V(2).Info("claimstore tracker behind the scheduler's informer; scheduling on",
			"applied", got, "informer", want)
	}
}

func (s *started) inform(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		n := resourceVersion(o)
		for cur := s.informed.Load(); n > cur && !s.informed.CompareAndSwap(cur, n); cur = s.informed.Load() {
		}
	}
}

var (
	trackersMu sync.Mutex
	trackers   = map[string]*started{}
)

// trackerFor opens the store at args.Directory and starts its tracker, or
// returns the one already running for that directory. When ctx (the
// scheduler's) ends, the tracker stops and the store is closed; a later
// scheduler in the process (a test's) opens it again.
func trackerFor(ctx context.Context, args *Args, fh fwk.Handle, fts plfeature.Features) (*started, error) {
	dir, err := filepath.Abs(args.Directory)
	if err != nil {
		return nil, fmt.Errorf("%s: directory %q: %w", Name, args.Directory, err)
	}
	endpoints := strings.Join(args.EtcdEndpoints, ",")
	trackersMu.Lock()
	defer trackersMu.Unlock()
	if s, ok := trackers[dir]; ok {
		if s.ctx.Err() == nil {
			if s.endpoints != endpoints {
				return nil, fmt.Errorf("%s: directory %q is the store of another profile with etcdEndpoints %q, not %q",
					Name, args.Directory, s.endpoints, endpoints)
			}
			return s, nil
		}
		<-s.stopped
		delete(trackers, dir)
	}
	registerMetrics()
	logger := klog.FromContext(ctx).WithName(Name)
	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: opening the store in %q: %w", Name, args.Directory, err)
	}
	var ledger *claimstore.Store
	if len(args.EtcdEndpoints) > 0 {
		ledgerDir := filepath.Join(dir, "ledger")
		ledger, err = claimstore.Open(ctx, ledgerDir, claimstore.Options{EtcdEndpoints: args.EtcdEndpoints, EtcdPrefix: args.EtcdPrefix,
			EtcdCAFile: args.EtcdCAFile, EtcdCertFile: args.EtcdCertFile, EtcdKeyFile: args.EtcdKeyFile})
		if err != nil {
			_ = store.Close()
			return nil, fmt.Errorf("%s: opening the ledger in %q on etcd %s: %w", Name, ledgerDir, endpoints, err)
		}
	}
	observeWrite, observeLag := observers(dir)
	var reapAfter time.Duration
	if args.LedgerReapAfter != nil {
		reapAfter = args.LedgerReapAfter.Duration
	}
	t := k8s.NewTracker(store, k8s.TrackerOptions{ConsumableCapacity: fts.EnableDRAConsumableCapacity, Logger: &logger,
		ObserveWrite: observeWrite, ObserveWatchLag: observeLag, Ledger: ledger, LedgerReapAfter: reapAfter})
	s := &started{tracker: t, ledger: ledger, applied: t.Applied, endpoints: endpoints, ctx: ctx, stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		if err := t.Run(ctx, fh.ClientSet()); err != nil && !errors.Is(err, context.Canceled) {
			logger.Error(err, "claimstore tracker stopped")
		}
		if ledger != nil {
			_ = ledger.Close()
		}
		_ = store.Close()
	}()
	if _, err := fh.SharedInformerFactory().Resource().V1().ResourceClaims().Informer().AddEventHandler(
		cache.ResourceEventHandlerFuncs{
			AddFunc:    s.inform,
			UpdateFunc: func(_, obj any) { s.inform(obj) },
			DeleteFunc: s.inform,
		}); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	start := time.Now()
	for !t.HasSynced() {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: the store in %q did not load the cluster's claims: %w", Name, args.Directory, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	logger.Info("claimstore tracker synced", "directory", dir, "duration", time.Since(start))
	trackers[dir] = s
	return s, nil
}
