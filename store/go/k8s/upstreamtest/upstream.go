// Package upstreamtest checks claimstore's Kubernetes module against
// kube-scheduler's own code (k8s.io/kubernetes v1.37.2): a differential
// test of the Tracker against kube-scheduler's DefaultDRAManager, and
// benchmarks of the two side by side. It is a module of its own because
// importing k8s.io/kubernetes needs a replace line per staging module,
// which no user of claimstore.dev/claimstore/k8s should inherit.
package upstreamtest

import (
	"context"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// Informer feeds objects to the one handler an AssumeCache registers, in
// the caller's goroutine (as kube-scheduler's own tests do).
type Informer struct {
	handler cache.ResourceEventHandler
}

// AddEventHandler implements assumecache.Informer.
func (i *Informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.handler = h
	return nil, nil
}

// Add delivers an add or update.
func (i *Informer) Add(obj any) { i.handler.OnAdd(obj, false) }

// Delete delivers a delete.
func (i *Informer) Delete(obj any) { i.handler.OnDelete(obj) }

// Upstream is kube-scheduler's DefaultDRAManager fed by an Informer.
type Upstream struct {
	Informer *Informer
	Manager  *dynamicresources.DefaultDRAManager
}

// Claims returns upstream's ResourceClaimTracker.
func (u *Upstream) Claims() fwk.ResourceClaimTracker { return u.Manager.ResourceClaims() }

// NewUpstream builds kube-scheduler's DRA manager as the scheduler does
// (dynamicresources.NewDRAManager over an AssumeCache), with the feature
// gates as they are in utilfeature.DefaultFeatureGate when called.
func NewUpstream(ctx context.Context) *Upstream {
	inf := &Informer{}
	ac := assumecache.NewAssumeCache(klog.FromContext(ctx), inf, "ResourceClaim", "", nil)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	return &Upstream{Informer: inf, Manager: dynamicresources.NewDRAManager(ctx, ac, nil, factory)}
}
