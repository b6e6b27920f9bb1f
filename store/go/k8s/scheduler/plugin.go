package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
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
	// EtcdEndpoints, when set, open the store in the shared mode: etcd
	// holds the claims and device holdings, Directory is this scheduler's
	// mirror (claimstore.Options.EtcdEndpoints).
	EtcdEndpoints []string `json:"etcdEndpoints,omitempty"`
	// EtcdPrefix is the store's key prefix in etcd (default "/claimstore/").
	EtcdPrefix string `json:"etcdPrefix,omitempty"`
	// FilterTimeout and BindingTimeout are DynamicResources' own args,
	// with its defaults and feature gates.
	FilterTimeout  *metav1.Duration `json:"filterTimeout,omitempty"`
	BindingTimeout *metav1.Duration `json:"bindingTimeout,omitempty"`
}

// Options are the app options that register the plugin, for
// app.NewSchedulerCommand (cmd/claimstore-scheduler).
func Options() []app.Option {
	return []app.Option{app.WithPlugin(Name, New)}
}

// Registry is the plugin as an out-of-tree registry (scheduler.New's
// WithFrameworkOutOfTreeRegistry, scheduler_perf's outOfTreePluginRegistry).
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{Name: New}
}

// plugin is upstream's DynamicResources plugin under this plugin's name:
// every extension point is upstream's, with a Handle whose
// SharedDRAManager answers claims from claimstore.
type plugin struct {
	*dynamicresources.DynamicResources
}

func (plugin) Name() string { return Name }

// New builds the plugin (a runtime.PluginFactory). The store and its
// tracker are opened once per directory for the process and shared by
// every profile that names it; New returns once the tracker holds the
// cluster's claims (loaded from the store, or listed), or ctx ends.
func New(ctx context.Context, obj runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	fts := plfeature.NewSchedulerFeaturesFromGates(feature.DefaultFeatureGate)
	tracker, err := trackerFor(ctx, args, fh, fts)
	if err != nil {
		return nil, err
	}
	upstreamArgs := &config.DynamicResourcesArgs{FilterTimeout: args.FilterTimeout, BindingTimeout: args.BindingTimeout}
	if upstreamArgs.FilterTimeout == nil && fts.EnableDRASchedulerFilterTimeout {
		upstreamArgs.FilterTimeout = &metav1.Duration{Duration: config.DynamicResourcesFilterTimeoutDefault}
	}
	if upstreamArgs.BindingTimeout == nil && fts.EnableDRADeviceBindingConditions && fts.EnableDRAResourceClaimDeviceStatus {
		upstreamArgs.BindingTimeout = &metav1.Duration{Duration: config.DynamicResourcesBindingTimeoutDefault}
	}
	h := handle{Handle: fh, dra: manager{SharedDRAManager: fh.SharedDRAManager(), claims: tracker}}
	p, err := dynamicresources.New(ctx, upstreamArgs, h, fts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return plugin{p.(*dynamicresources.DynamicResources)}, nil
}

// decodeArgs reads the pluginConfig args strictly: an unknown field (a
// typo) is an error naming it, as kube-scheduler's own args are.
func decodeArgs(obj runtime.Object) (*Args, error) {
	args := &Args{}
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			d := json.NewDecoder(bytes.NewReader(o.Raw))
			d.DisallowUnknownFields()
			if err := d.Decode(args); err != nil {
				return nil, fmt.Errorf("pluginConfig %s: args: %w", Name, err)
			}
		}
	default:
		return nil, fmt.Errorf("pluginConfig %s: args of type %T, want the plugin's own (runtime.Unknown)", Name, obj)
	}
	if args.Directory == "" {
		return nil, fmt.Errorf("pluginConfig %s: args.directory: required (where the store keeps its database)", Name)
	}
	return args, nil
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
	claims *k8s.Tracker
}

func (m manager) ResourceClaims() fwk.ResourceClaimTracker { return m.claims }

// started is a store opened and its tracker running.
type started struct {
	tracker *k8s.Tracker
	shared  bool // etcd holds the store (the shared mode)
}

var (
	trackersMu sync.Mutex
	trackers   = map[string]*started{}
)

// trackerFor opens the store at args.Directory and starts its tracker, or
// returns the one already started for that directory. When ctx (the
// scheduler's) ends, the tracker stops and the store is closed.
func trackerFor(ctx context.Context, args *Args, fh fwk.Handle, fts plfeature.Features) (*k8s.Tracker, error) {
	trackersMu.Lock()
	defer trackersMu.Unlock()
	if s, ok := trackers[args.Directory]; ok {
		return s.tracker, nil
	}
	registerMetrics()
	logger := klog.FromContext(ctx).WithName(Name)
	store, err := claimstore.Open(ctx, args.Directory, claimstore.Options{
		EtcdEndpoints: args.EtcdEndpoints,
		EtcdPrefix:    args.EtcdPrefix,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: opening the store in %q: %w", Name, args.Directory, err)
	}
	observeWrite, observeLag := observers(args.Directory)
	t := k8s.NewTracker(store, k8s.TrackerOptions{ConsumableCapacity: fts.EnableDRAConsumableCapacity, Logger: &logger,
		ObserveWrite: observeWrite, ObserveWatchLag: observeLag})
	s := &started{tracker: t, shared: len(args.EtcdEndpoints) > 0}
	go func() {
		if err := t.Run(ctx, fh.ClientSet()); err != nil && !errors.Is(err, context.Canceled) {
			logger.Error(err, "claimstore tracker stopped")
		}
		trackersMu.Lock()
		if trackers[args.Directory] == s {
			delete(trackers, args.Directory)
		}
		trackersMu.Unlock()
		_ = store.Close()
	}()
	start := time.Now()
	for !t.HasSynced() {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: the store in %q did not load the cluster's claims: %w", Name, args.Directory, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	logger.Info("claimstore tracker synced", "directory", args.Directory, "duration", time.Since(start))
	trackers[args.Directory] = s
	return t, nil
}
