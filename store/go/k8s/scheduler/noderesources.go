package scheduler

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/util/feature"
	kubeschedulerv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
)

// The names of NodeResourcesFit and NodeResourcesBalancedAllocation on
// claimstore: upstream's plugins, whose scoring of extended resources
// backed by DRA (the DRAExtendedResource feature) asks the profile's
// SharedDRAManager for the allocated devices; these ask claimstore's
// tracker, the one ClaimstoreDynamicResources allocates with.
const (
	FitName                = "ClaimstoreNodeResourcesFit"
	BalancedAllocationName = "ClaimstoreNodeResourcesBalancedAllocation"
)

type fitPlugin struct{ *noderesources.Fit }

func (fitPlugin) Name() string { return FitName }

type balancedAllocationPlugin struct {
	*noderesources.BalancedAllocation
}

func (balancedAllocationPlugin) Name() string { return BalancedAllocationName }

// NewFit builds ClaimstoreNodeResourcesFit: upstream's NodeResourcesFit
// with NodeResourcesFit's args (defaulted and validated as upstream's).
func NewFit(ctx context.Context, obj runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
	args := &config.NodeResourcesFitArgs{}
	if err := decodeUpstreamArgs(FitName, obj, &kubeschedulerv1.NodeResourcesFitArgs{}, args); err != nil {
		return nil, err
	}
	if err := validation.ValidateNodeResourcesFitArgs(field.NewPath("pluginConfig", FitName, "args"), args); err != nil {
		return nil, err
	}
	p, err := noderesources.NewFit(ctx, args, profileHandle(fh), plfeature.NewSchedulerFeaturesFromGates(feature.DefaultFeatureGate))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FitName, err)
	}
	return fitPlugin{p.(*noderesources.Fit)}, nil
}

// NewBalancedAllocation builds ClaimstoreNodeResourcesBalancedAllocation:
// upstream's NodeResourcesBalancedAllocation with its args.
func NewBalancedAllocation(ctx context.Context, obj runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
	args := &config.NodeResourcesBalancedAllocationArgs{}
	if err := decodeUpstreamArgs(BalancedAllocationName, obj, &kubeschedulerv1.NodeResourcesBalancedAllocationArgs{}, args); err != nil {
		return nil, err
	}
	if err := validation.ValidateNodeResourcesBalancedAllocationArgs(field.NewPath("pluginConfig", BalancedAllocationName, "args"), args); err != nil {
		return nil, err
	}
	p, err := noderesources.NewBalancedAllocation(ctx, args, profileHandle(fh), plfeature.NewSchedulerFeaturesFromGates(feature.DefaultFeatureGate))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", BalancedAllocationName, err)
	}
	return balancedAllocationPlugin{p.(*noderesources.BalancedAllocation)}, nil
}

// decodeUpstreamArgs reads a plugin's pluginConfig args (raw JSON; none:
// the defaults) strictly into versioned (kubescheduler.config.k8s.io/v1),
// defaults them as kube-scheduler does and converts them to out.
func decodeUpstreamArgs(name string, obj runtime.Object, versioned, out runtime.Object) error {
	if err := decodeStrict(name, obj, versioned); err != nil {
		return err
	}
	scheme.Scheme.Default(versioned)
	if err := scheme.Scheme.Convert(versioned, out, nil); err != nil {
		return fmt.Errorf("pluginConfig %s: args: %w", name, err)
	}
	return nil
}

// profiles holds, for each profile's Handle, the tracker its
// ClaimstoreDynamicResources allocates with (*started).
var profiles sync.Map

// profileHandle is fh with a SharedDRAManager whose claims are those of
// the profile's ClaimstoreDynamicResources, once that plugin is built
// (kube-scheduler builds a profile's plugins in no set order), and the
// scheduler's own before that or in a profile without it.
func profileHandle(fh fwk.Handle) fwk.Handle {
	return handle{Handle: fh, dra: profileManager{SharedDRAManager: fh.SharedDRAManager(), fh: fh}}
}

type profileManager struct {
	fwk.SharedDRAManager
	fh fwk.Handle
}

func (m profileManager) ResourceClaims() fwk.ResourceClaimTracker {
	if s, ok := profiles.Load(m.fh); ok {
		return claimsView{Tracker: s.(*started).tracker, informer: m.SharedDRAManager.ResourceClaims()}
	}
	return m.SharedDRAManager.ResourceClaims()
}
