package upstreamtest

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	"claimstore.dev/claimstore"
	csk8s "claimstore.dev/claimstore/k8s"
)

// model is what the random stream knows of the cluster: the claims the
// API server has, the version the scheduler assumed, and the pending
// allocations, so that it only makes what a real cluster makes (the API
// server never lets two claims hold one device whole).
type model struct {
	rng      *rand.Rand
	rv       int64
	api      map[string]*resourcev1.ResourceClaim // by name, all in "default"
	assumed  map[string]*resourcev1.ResourceClaim
	pending  map[types.UID]*resourcev1.ResourceClaim
	deleted  []*resourcev1.ResourceClaim
	next     int
	devices  int
	shareSeq int
}

func (m *model) nextRV() string { m.rv++; return strconv.FormatInt(m.rv, 10) }

// taken is every device some version of some claim, or a pending
// allocation, holds: a new allocation picks from the others.
func (m *model) taken() map[string]bool {
	t := map[string]bool{}
	add := func(c *resourcev1.ResourceClaim) {
		if c == nil || c.Status.Allocation == nil {
			return
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			t[r.Device] = true
		}
	}
	for _, c := range m.api {
		add(c)
	}
	for _, c := range m.assumed {
		add(c)
	}
	for _, c := range m.pending {
		add(c)
	}
	return t
}

func (m *model) newClaim() *resourcev1.ResourceClaim {
	m.next++
	name := "claim-" + strconv.Itoa(m.next)
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			UID: types.UID(fmt.Sprintf("%08x-0000-4000-8000-000000000000", m.next)), ResourceVersion: m.nextRV()},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "req", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "class"}}}}},
	}
}

// allocate returns a copy of c allocated 1-3 free devices: whole, shared
// with consumed capacity, or with admin access.
func (m *model) allocate(c *resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
	out := c.DeepCopy()
	taken := m.taken()
	a := &resourcev1.AllocationResult{}
	for n := 1 + m.rng.Intn(3); n > 0; n-- {
		var dev string
		var num int
		for try := 0; try < 20; try++ {
			num = m.rng.Intn(m.devices)
			if d := "dev-" + strconv.Itoa(num); !taken[d] {
				dev = d
				break
			}
		}
		if dev == "" {
			break
		}
		taken[dev] = true
		r := resourcev1.DeviceRequestAllocationResult{Request: "req", Driver: "driver.example.com",
			Pool: "pool-" + strconv.Itoa(m.rng.Intn(2)), Device: dev}
		switch m.rng.Intn(4) {
		case 0:
			r.AdminAccess = ptr.To(true)
		case 1, 2:
			if num%2 != 0 {
				break // shares only of devices that take several allocations (allocator_test.go's slices)
			}
			m.shareSeq++
			r.ShareID = ptr.To(types.UID(fmt.Sprintf("%08x-0000-4000-8000-000000000001", m.shareSeq)))
			if m.rng.Intn(3) > 0 {
				r.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{
					"memory": *resource.NewQuantity(int64(1+m.rng.Intn(4))<<30, resource.BinarySI)}
			}
		}
		a.Devices.Results = append(a.Devices.Results, r)
	}
	if len(a.Devices.Results) == 0 {
		return nil
	}
	out.Status.Allocation = a
	return out
}

func (m *model) pick(from map[string]*resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
	if len(from) == 0 {
		return nil
	}
	i := m.rng.Intn(len(from))
	for _, c := range sortedClaims(from) {
		if i == 0 {
			return c
		}
		i--
	}
	return nil
}

// pair is the two trackers under test, fed the same calls.
type pair struct {
	t        *testing.T
	upstream *Upstream
	ours     *csk8s.Tracker
	step     int
	what     string
	// The state claimstore handed out at the previous step, and a copy of
	// it then: handed-out maps never change.
	handedOut, copied *structured.AllocatedState
	// Claims the allocator placed on both trackers' states alike.
	allocations int
}

func (p *pair) fail(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("step %d (%s): %s", p.step, p.what, fmt.Sprintf(format, args...))
}

func (p *pair) informerAdd(c *resourcev1.ResourceClaim) {
	p.upstream.Informer.Add(c)
	p.ours.OnAdd(c)
}

func (p *pair) informerDelete(c *resourcev1.ResourceClaim) {
	p.upstream.Informer.Delete(c)
	p.ours.OnDelete(c)
}

// compare checks every question the scheduler asks.
func (p *pair) compare(m *model) {
	p.t.Helper()
	up, ours := p.upstream.Claims(), fwk.ResourceClaimTracker(p.ours)
	ul, _ := up.List()
	ol, _ := ours.List()
	if len(ul) != len(ol) {
		p.fail("List: upstream %d claims, claimstore %d", len(ul), len(ol))
	}
	byName := map[string]*resourcev1.ResourceClaim{}
	for _, c := range ul {
		byName[c.Name] = c
	}
	for _, c := range ol {
		if byName[c.Name] != c {
			p.fail("List: claimstore's %s (rv %s) is not upstream's", c.Name, c.ResourceVersion)
		}
	}
	names := map[string]bool{"never-existed": true}
	for n := range m.api {
		names[n] = true
	}
	for _, c := range m.deleted {
		names[c.Name] = true
	}
	for n := range names {
		uc, uerr := up.Get("default", n)
		oc, oerr := ours.Get("default", n)
		if uc != oc || (uerr == nil) != (oerr == nil) {
			p.fail("Get(%s): upstream %v %v, claimstore %v %v", n, rv(uc), uerr, rv(oc), oerr)
		}
	}
	ua, uerr := up.ListAllAllocatedDevices()
	oa, oerr := ours.ListAllAllocatedDevices()
	if uerr != nil || oerr != nil || !ua.Equal(oa) {
		p.fail("ListAllAllocatedDevices: upstream %v %v, claimstore %v %v", ua, uerr, oa, oerr)
	}
	us, uerr := up.GatherAllocatedState()
	os, oerr := ours.GatherAllocatedState()
	if uerr != nil || oerr != nil {
		p.fail("GatherAllocatedState: %v, %v", uerr, oerr)
	}
	if !us.AllocatedDevices.Equal(os.AllocatedDevices) {
		p.fail("AllocatedDevices: upstream %v, claimstore %v", us.AllocatedDevices, os.AllocatedDevices)
	}
	if !us.AllocatedSharedDeviceIDs.Equal(os.AllocatedSharedDeviceIDs) {
		p.fail("AllocatedSharedDeviceIDs: upstream %v, claimstore %v", us.AllocatedSharedDeviceIDs, os.AllocatedSharedDeviceIDs)
	}
	if !apiequality.Semantic.DeepEqual(us.AggregatedCapacity, os.AggregatedCapacity) {
		p.fail("AggregatedCapacity: upstream %v, claimstore %v", us.AggregatedCapacity, os.AggregatedCapacity)
	}
	if p.handedOut != nil && (!p.handedOut.AllocatedDevices.Equal(p.copied.AllocatedDevices) ||
		!p.handedOut.AllocatedSharedDeviceIDs.Equal(p.copied.AllocatedSharedDeviceIDs) ||
		!apiequality.Semantic.DeepEqual(p.handedOut.AggregatedCapacity, p.copied.AggregatedCapacity)) {
		p.fail("the state claimstore handed out at the previous step changed since")
	}
	p.handedOut = os
	p.copied = &structured.AllocatedState{AllocatedDevices: os.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: os.AllocatedSharedDeviceIDs.Clone(), AggregatedCapacity: os.AggregatedCapacity.Clone()}
	uids := map[types.UID]bool{"never-pending": true}
	for uid := range m.pending {
		uids[uid] = true
	}
	for _, c := range m.api {
		uids[c.UID] = true
	}
	for uid := range uids {
		if u, o := up.GetPendingAllocation(uid), ours.GetPendingAllocation(uid); u != o {
			p.fail("GetPendingAllocation(%s): upstream %p, claimstore %p", uid, u, o)
		}
	}
}

func rv(c *resourcev1.ResourceClaim) string {
	if c == nil {
		return "<nil>"
	}
	return c.Name + "@" + c.ResourceVersion
}

// step makes one random change, the same on both trackers, and checks the
// answers that return values give.
func (p *pair) stepOnce(m *model) {
	p.t.Helper()
	up := p.upstream.Claims()
	switch op := m.rng.Intn(100); {
	case op < 15 || len(m.api) < 3: // a new claim, sometimes allocated already
		c := m.newClaim()
		if m.rng.Intn(3) == 0 {
			if a := m.allocate(c); a != nil {
				c = a
			}
		}
		p.what = "add " + rv(c)
		m.api[c.Name] = c
		p.informerAdd(c)
	case op < 25: // the informer delivers an allocation (another scheduler, or our own write)
		c := m.pick(m.api)
		if c.Status.Allocation != nil || m.assumed[c.Name] != nil {
			// While the scheduler's own write is assumed, the API server has
			// that write: the next event of the claim is it or a later one.
			return
		}
		a := m.allocate(c)
		if a == nil {
			return
		}
		a.ResourceVersion = m.nextRV()
		p.what = "informer allocates " + rv(a)
		m.api[a.Name] = a
		delete(m.assumed, a.Name)
		p.informerAdd(a)
	case op < 32: // deallocation
		c := m.pick(m.api)
		if c.Status.Allocation == nil || m.assumed[c.Name] != nil {
			return
		}
		d := c.DeepCopy()
		d.Status = resourcev1.ResourceClaimStatus{}
		d.ResourceVersion = m.nextRV()
		p.what = "informer deallocates " + rv(d)
		m.api[d.Name] = d
		delete(m.assumed, d.Name)
		p.informerAdd(d)
	case op < 40: // a reservation: status changes, allocation stays
		c := m.pick(m.api)
		if c.Status.Allocation == nil || m.assumed[c.Name] != nil {
			return
		}
		d := c.DeepCopy()
		d.Status.ReservedFor = append(d.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
			Resource: "pods", Name: "pod-" + strconv.Itoa(m.rng.Intn(100)),
			UID: types.UID(fmt.Sprintf("%08x-0000-4000-8000-000000000002", m.rng.Intn(1<<30)))})
		d.ResourceVersion = m.nextRV()
		p.what = "informer reserves " + rv(d)
		m.api[d.Name] = d
		delete(m.assumed, d.Name)
		p.informerAdd(d)
	case op < 46: // delete
		c := m.pick(m.api)
		p.what = "delete " + rv(c)
		delete(m.api, c.Name)
		delete(m.assumed, c.Name)
		m.deleted = append(m.deleted, c)
		p.informerDelete(c)
	case op < 60: // Reserve: a pending allocation for an unallocated claim, or a sharer
		var c *resourcev1.ResourceClaim
		if len(m.pending) > 0 && m.rng.Intn(3) == 0 {
			for _, pc := range m.pending {
				c = pc
				break
			}
		} else if m.rng.Intn(8) == 0 {
			c = m.newClaim()
			c.Name = "<extended-resources>"
		} else {
			c = m.pick(m.api)
			if m.assumed[c.Name] != nil {
				c = m.assumed[c.Name]
			}
		}
		a := c
		if c.Status.Allocation == nil {
			if a = m.allocate(c); a == nil {
				return
			}
		}
		p.what = "signal pending " + rv(a)
		uerr := up.SignalClaimPendingAllocation(a.UID, a)
		oerr := p.ours.SignalClaimPendingAllocation(a.UID, a)
		if (uerr == nil) != (oerr == nil) {
			p.fail("SignalClaimPendingAllocation: upstream %v, claimstore %v", uerr, oerr)
		}
		if up.GetPendingAllocation(a.UID) != nil && m.pending[a.UID] == nil {
			m.pending[a.UID] = a
		}
	case op < 72: // Unreserve or PreBind's end: one sharer leaves, or all
		if len(m.pending) == 0 {
			return
		}
		var uid types.UID
		for u := range m.pending {
			uid = u
			break
		}
		force := m.rng.Intn(3) == 0
		p.what = fmt.Sprintf("remove pending %s force=%v", uid, force)
		u := up.MaybeRemoveClaimPendingAllocation(uid, force)
		o := p.ours.MaybeRemoveClaimPendingAllocation(uid, force)
		if u != o {
			p.fail("MaybeRemoveClaimPendingAllocation: upstream %v, claimstore %v", u, o)
		}
		if u {
			delete(m.pending, uid)
		}
	case op < 84: // PreBind's API call succeeded: assume its result
		c := m.pick(m.api)
		if m.assumed[c.Name] != nil {
			return
		}
		a := c
		if c.Status.Allocation == nil {
			if a = m.allocate(c); a == nil {
				return
			}
		} else {
			a = c.DeepCopy()
		}
		a.ResourceVersion = m.nextRV()
		if m.rng.Intn(10) == 0 {
			a.ResourceVersion = "1" // out of sync: both refuse
		}
		p.what = "assume " + rv(a)
		uerr := up.AssumeClaimAfterAPICall(a)
		oerr := p.ours.AssumeClaimAfterAPICall(a)
		if (uerr == nil) != (oerr == nil) {
			p.fail("AssumeClaimAfterAPICall: upstream %v, claimstore %v", uerr, oerr)
		}
		if uerr == nil {
			m.assumed[a.Name] = a
		}
	case op < 92: // the informer catches up with an assumed claim
		a := m.pick(m.assumed)
		if a == nil {
			return
		}
		p.what = "informer delivers assumed " + rv(a)
		m.api[a.Name] = a
		delete(m.assumed, a.Name)
		p.informerAdd(a)
	default: // PreBind failed: restore
		c := m.pick(m.api)
		p.what = "restore " + c.Name
		delete(m.assumed, c.Name)
		up.AssumedClaimRestore("default", c.Name)
		p.ours.AssumedClaimRestore("default", c.Name)
	}
}

// The same random streams to kube-scheduler's DefaultDRAManager and to
// claimstore's Tracker; every answer compared after every step.
func TestTrackerMatchesUpstream(t *testing.T) {
	steps := 6_000
	if s := os.Getenv("CLAIMSTORE_DIFF_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	for _, consumable := range []bool{true, false} {
		for seed := int64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("consumable=%v/seed=%d", consumable, seed), func(t *testing.T) {
				featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate,
					features.DRAConsumableCapacity, consumable)
				store, err := claimstore.Open(ctx, t.TempDir(), claimstore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer store.Close()
				var refused []error
				ours := csk8s.NewTracker(store, csk8s.TrackerOptions{ConsumableCapacity: consumable,
					OnRefused: func(c *resourcev1.ResourceClaim, err error) { refused = append(refused, err) }})
				p := &pair{t: t, upstream: NewUpstream(context.Background()), ours: ours}
				m := &model{rng: rand.New(rand.NewSource(seed)), api: map[string]*resourcev1.ResourceClaim{},
					assumed: map[string]*resourcev1.ResourceClaim{}, pending: map[types.UID]*resourcev1.ResourceClaim{},
					devices: 40}
				for p.step = 0; p.step < steps; p.step++ {
					p.stepOnce(m)
					if len(refused) > 0 {
						p.fail("the store refused a claim the API server accepts: %v", refused[0])
					}
					p.compare(m)
					if p.step%25 == 0 {
						p.allocateOnBoth(m, consumable)
					}
				}
				// The store holds the informer's claims.
				n := 0
				for _, c := range m.api {
					rec, err := store.Get(claimstore.Key{Namespace: c.Namespace, Name: c.Name})
					if err != nil {
						t.Fatalf("%s: %v", c.Name, err)
					}
					got, err := csk8s.FromRecord(rec)
					if err != nil {
						t.Fatal(err)
					}
					if !apiequality.Semantic.DeepEqual(got.Status, c.Status) {
						t.Fatalf("%s: the store's status differs from the informer's", c.Name)
					}
					n++
				}
				t.Logf("%d steps, %d claims at the end, all in the store; the allocator placed %d claims alike on both",
					steps, n, p.allocations)
				if p.allocations == 0 {
					t.Fatal("the allocator placed no claim: the comparison compared nothing")
				}
			})
		}
	}
}

func sortedClaims(from map[string]*resourcev1.ResourceClaim) []*resourcev1.ResourceClaim {
	names := make([]string, 0, len(from))
	for n := range from {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*resourcev1.ResourceClaim, len(names))
	for i, n := range names {
		out[i] = from[n]
	}
	return out
}
