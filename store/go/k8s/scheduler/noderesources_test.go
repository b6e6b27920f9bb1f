package scheduler

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	kubeschedulerv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"claimstore.dev/claimstore/k8s"
)

// stubHandle is a profile's Handle as the node-resources plugins use it.
type stubHandle struct {
	fwk.Handle
	dra fwk.SharedDRAManager
}

func (h *stubHandle) SharedDRAManager() fwk.SharedDRAManager { return h.dra }

type stubManager struct {
	fwk.SharedDRAManager
	claims fwk.ResourceClaimTracker
}

func (m stubManager) ResourceClaims() fwk.ResourceClaimTracker { return m.claims }

// The node-resources plugins' manager answers claims from the scheduler's
// own tracker until the profile's ClaimstoreDynamicResources has its
// tracker, from claimstore's after, and from the scheduler's own again
// once it stopped; another profile's tracker is not used.
func TestNodeResourcesAskTheProfilesTracker(t *testing.T) {
	own := informerClaims{}
	fh, other := &stubHandle{dra: stubManager{claims: own}}, &stubHandle{dra: stubManager{claims: own}}
	m := profileHandle(fh).SharedDRAManager()
	if _, ok := m.ResourceClaims().(informerClaims); !ok {
		t.Fatalf("before the DRA plugin is built: %T, want the scheduler's own tracker", m.ResourceClaims())
	}
	tracker := k8s.NewTracker(nil, k8s.TrackerOptions{})
	s := &started{tracker: tracker}
	profiles.Store(other, &started{tracker: k8s.NewTracker(nil, k8s.TrackerOptions{})})
	defer profiles.Delete(other)
	if _, ok := m.ResourceClaims().(informerClaims); !ok {
		t.Fatal("another profile's tracker was used")
	}
	profiles.Store(fh, s)
	view, ok := m.ResourceClaims().(claimsView)
	if !ok || view.Tracker != tracker {
		t.Fatalf("after: %T, want claimstore's tracker of the profile", m.ResourceClaims())
	}
	profiles.CompareAndDelete(fh, s)
	if _, ok := m.ResourceClaims().(informerClaims); !ok {
		t.Fatal("after the tracker stopped: not the scheduler's own tracker")
	}
}

// Their args are NodeResourcesFit's and NodeResourcesBalancedAllocation's,
// defaulted as kube-scheduler defaults them; unknown fields and invalid
// values are refused with the plugin's name.
func TestNodeResourcesArgs(t *testing.T) {
	fit := &config.NodeResourcesFitArgs{}
	if err := decodeUpstreamArgs(FitName, nil, &kubeschedulerv1.NodeResourcesFitArgs{}, fit); err != nil {
		t.Fatal(err)
	}
	if fit.ScoringStrategy == nil || fit.ScoringStrategy.Type != config.LeastAllocated || len(fit.ScoringStrategy.Resources) != 2 {
		t.Fatalf("defaults: %+v, want LeastAllocated on cpu and memory", fit.ScoringStrategy)
	}
	raw := &runtime.Unknown{Raw: []byte(`{"scoringStrategy":{"type":"MostAllocated"}}`)}
	if err := decodeUpstreamArgs(FitName, raw, &kubeschedulerv1.NodeResourcesFitArgs{}, fit); err != nil || fit.ScoringStrategy.Type != config.MostAllocated {
		t.Fatalf("MostAllocated: %v, %+v", err, fit.ScoringStrategy)
	}
	raw = &runtime.Unknown{Raw: []byte(`{"scoringStrategie":{}}`)}
	if err := decodeUpstreamArgs(FitName, raw, &kubeschedulerv1.NodeResourcesFitArgs{}, fit); err == nil ||
		!strings.Contains(err.Error(), FitName) || !strings.Contains(err.Error(), "scoringStrategie") {
		t.Fatalf("an unknown field: %v, want an error naming the plugin and the field", err)
	}
	raw = &runtime.Unknown{Raw: []byte(`{"resources":[{"name":"cpu","weight":-1}]}`)}
	if _, err := NewBalancedAllocation(t.Context(), raw, &stubHandle{dra: stubManager{}}); err == nil ||
		!strings.Contains(err.Error(), "pluginConfig."+BalancedAllocationName+".args.resources[0].weight") {
		t.Fatalf("a negative weight: %v, want an error with the field path", err)
	}
}
