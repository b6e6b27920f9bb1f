package k8s

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	resourcev1 "k8s.io/api/resource/v1"
)

var _ fwk.SharedDRAManager = (*Manager)(nil)

// Manager is kube-scheduler's SharedDRAManager with claimstore's Tracker
// for the claims and upstream's own listers for ResourceSlices (with
// DeviceTaintRules applied, from k8s.io/dynamic-resource-allocation's slice
// tracker) and DeviceClasses (from the informer factory), as
// kube-scheduler's DefaultDRAManager pairs them. Safe for concurrent use.
type Manager struct {
	claims   *Tracker
	slices   *resourceslicetracker.Tracker
	classes  resourcelisters.DeviceClassLister
	resolver *extendedresourcecache.ExtendedResourceCache
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// ExtendedResources is kube-scheduler's DRAExtendedResource feature
	// gate: DeviceClassResolver maps extended resource names to device
	// classes (an ExtendedResourceCache fed by the DeviceClass informer).
	// Off, it resolves nothing.
	ExtendedResources bool
	Logger            *klog.Logger
}

// NewManager pairs claims with sliceTracker and the factory's DeviceClass
// informer. Start the factory (and wait for its caches) as kube-scheduler
// does before scheduling.
func NewManager(claims *Tracker, sliceTracker *resourceslicetracker.Tracker, factory informers.SharedInformerFactory,
	opts ManagerOptions) *Manager {
	m := &Manager{claims: claims, slices: sliceTracker,
		classes: factory.Resource().V1().DeviceClasses().Lister()}
	if opts.ExtendedResources {
		m.resolver = extendedresourcecache.NewExtendedResourceCache(loggerOr(opts.Logger))
		_, _ = factory.Resource().V1().DeviceClasses().Informer().AddEventHandler(m.resolver)
	}
	return m
}

// ResourceClaims returns the claimstore Tracker.
func (m *Manager) ResourceClaims() fwk.ResourceClaimTracker { return m.claims }

// Tracker returns the claimstore Tracker with its claimstore-specific
// methods.
func (m *Manager) Tracker() *Tracker { return m.claims }

// ResourceSlices lists the slices with DeviceTaintRules applied.
func (m *Manager) ResourceSlices() fwk.ResourceSliceLister { return sliceLister{m.slices} }

// DeviceClasses lists the device classes.
func (m *Manager) DeviceClasses() fwk.DeviceClassLister { return classLister{m.classes} }

// DeviceClassResolver resolves extended resource names (nothing unless
// ManagerOptions.ExtendedResources; a nil cache answers nil).
func (m *Manager) DeviceClassResolver() fwk.DeviceClassResolver { return m.resolver }

type sliceLister struct{ t *resourceslicetracker.Tracker }

func (l sliceLister) ListWithDeviceTaintRules() ([]*resourcev1.ResourceSlice, error) {
	return l.t.ListPatchedResourceSlices()
}

type classLister struct {
	l resourcelisters.DeviceClassLister
}

func (l classLister) Get(name string) (*resourcev1.DeviceClass, error) { return l.l.Get(name) }
func (l classLister) List() ([]*resourcev1.DeviceClass, error) {
	return l.l.List(labels.Everything())
}
