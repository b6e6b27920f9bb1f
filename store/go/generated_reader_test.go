package claimstore

import (
	"encoding/json"
	"strconv"
	"time"
	"unsafe"

	flatbuffers "github.com/google/flatbuffers/go"

	"claimstore.dev/claimstore/internal/fb"
)

// The record read through the code flatc --go generates from
// schema/claim.fbs (internal/fb) and FlatBuffers' official Go runtime: the
// reader Claim would be with them. It reads every field as record.go's
// reader does (TestGeneratedReaderReadsAsTheHandWrittenOne: the schema
// compiler's offsets check the hand-written ones), and BenchmarkReader
// measures the two in one run. The hand-written reader stays: it is the
// faster (bench/RESULTS.md, "The record reader"), because the runtime's
// Table.Offset and Table.ByteVector, which every field read goes through,
// are not inlined.

// genView returns a string's bytes as a string without a copy: they are the
// record's, which nothing modifies (as record.go's view).
func genView(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// genOptStr is nil for an absent string (the generated accessors return nil
// for it and an empty, non-nil slice for a present "").
func genOptStr(b []byte) *string {
	if b == nil {
		return nil
	}
	s := genView(b)
	return &s
}

func genOptTime(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := time.Unix(*v, 0).UTC()
	return &t
}

// genHas reports whether field `id` of a table is present. The generated
// accessors read an absent vector as an empty one; the API tells the two
// apart for nodeSelectorTerms and conditions, and the record keeps the
// difference.
func genHas(t flatbuffers.Table, id int) bool {
	return t.Offset(flatbuffers.VOffsetT(4+2*id)) != 0
}

// genStrs returns vector of strings field `id` of t (nil when absent) through
// its generated accessor.
func genStrs(t flatbuffers.Table, id int, at func(int) []byte) []string {
	o := t.Offset(flatbuffers.VOffsetT(4 + 2*id))
	if o == 0 {
		return nil
	}
	out := make([]string, t.VectorLen(flatbuffers.UOffsetT(o)))
	for i := range out {
		out[i] = genView(at(i))
	}
	return out
}

// genOutOfRange panics as a slice index would, naming the accessor, the index
// and how many `items` there are.
func genOutOfRange(accessor string, i, n int, items string) {
	panic("claimstore: " + accessor + "(" + strconv.Itoa(i) + ") of " + strconv.Itoa(n) + " " + items)
}

type genClaim struct {
	b   []byte
	rec fb.ClaimRecord
}

func newGenClaim(b []byte) *genClaim {
	c := &genClaim{}
	c.init(b)
	return c
}

func (c *genClaim) init(b []byte) {
	c.b = b
	c.rec.Init(b, flatbuffers.GetUOffsetT(b))
}

// Key returns the claim's namespace and name.
func (c *genClaim) Key() Key { return Key{c.Namespace(), c.Name()} }

func (c *genClaim) Namespace() string { return genView(c.rec.Namespace()) }
func (c *genClaim) Name() string      { return genView(c.rec.Name()) }
func (c *genClaim) UID() string       { return genView(c.rec.Uid()) }

// ResourceVersion is metadata.resourceVersion as imported (opaque).
func (c *genClaim) ResourceVersion() string { return genView(c.rec.ResourceVersion()) }
func (c *genClaim) Generation() int64       { return c.rec.Generation() }

// CreationTimestamp and DeletionTimestamp are nil when absent.
func (c *genClaim) CreationTimestamp() *time.Time { return genOptTime(c.rec.CreationTimestamp()) }
func (c *genClaim) DeletionTimestamp() *time.Time { return genOptTime(c.rec.DeletionTimestamp()) }

// CreateRevision, ModRevision and Version are the store's revisions of the
// claim, as etcd keeps them: the revision that created it, the one that
// last changed it (what Preconditions.ModRevision compares), and how many
// times it was written.
func (c *genClaim) CreateRevision() uint64 {
	var r fb.Revisions
	if c.rec.Revisions(&r) == nil {
		return 0
	}
	return r.CreateRevision()
}

func (c *genClaim) ModRevision() uint64 {
	var r fb.Revisions
	if c.rec.Revisions(&r) == nil {
		return 0
	}
	return r.ModRevision()
}

func (c *genClaim) Version() uint64 {
	var r fb.Revisions
	if c.rec.Revisions(&r) == nil {
		return 0
	}
	return r.Version()
}

// Unvalidated is true for a claim loaded with validation off that breaks a
// format or limit rule.
func (c *genClaim) Unvalidated() bool { return c.rec.Unvalidated() }

// status reads status into st; false when the claim has none.
func (c *genClaim) status(st *fb.ResourceClaimStatus) bool { return c.rec.Status(st) != nil }

// Object returns the rest of the Kubernetes object the record keeps
// (metadata and spec without the status, as the writer encoded it: the
// Kubernetes module's Tracker writes protobuf), or nil. A view into the
// claim's buffer: do not change it.
func (c *genClaim) Object() []byte {
	b := c.rec.ObjectBytes()
	if len(b) == 0 {
		return nil
	}
	return b[:len(b):len(b)]
}

// SpecRequests returns the spec's request names, in order (nil when the
// claim was written without spec.devices.requests).
func (c *genClaim) SpecRequests() []SpecRequest {
	n := c.rec.SpecRequestsLength()
	if !genHas(c.rec.Table(), 7) {
		return nil
	}
	out := make([]SpecRequest, n)
	var r fb.SpecRequest
	for i := range out {
		c.rec.SpecRequests(&r, i)
		out[i] = SpecRequest{genView(r.Name()), genStrs(r.Table(), 1, r.Subrequests)}
	}
	return out
}

// NumReservedFor, ReservedForAt and ReservedBy read status.reservedFor
// without allocating (ReservedFor returns it as a slice).
func (c *genClaim) NumReservedFor() int {
	var st fb.ResourceClaimStatus
	if !c.status(&st) {
		return 0
	}
	return st.ReservedForLength()
}

// ReservedForAt returns entry i; it panics unless 0 <= i < NumReservedFor(),
// as a slice index would.
func (c *genClaim) ReservedForAt(i int) Consumer {
	var st fb.ResourceClaimStatus
	n := 0
	if c.status(&st) {
		n = st.ReservedForLength()
	}
	if uint(i) >= uint(n) {
		genOutOfRange("ReservedForAt", i, n, "consumers")
	}
	var r fb.ResourceClaimConsumerReference
	st.ReservedFor(&r, i)
	return genConsumerOf(&r)
}

func genConsumerOf(r *fb.ResourceClaimConsumerReference) Consumer {
	return Consumer{genView(r.ApiGroup()), genView(r.Resource()), genView(r.Name()), genView(r.Uid())}
}

// ReservedBy reports whether reservedFor holds the consumer uid.
func (c *genClaim) ReservedBy(uid string) bool {
	var st fb.ResourceClaimStatus
	if !c.status(&st) {
		return false
	}
	var r fb.ResourceClaimConsumerReference
	for i, n := 0, st.ReservedForLength(); i < n; i++ {
		st.ReservedFor(&r, i)
		if genView(r.Uid()) == uid {
			return true
		}
	}
	return false
}

// ReservedFor returns status.reservedFor, in order.
func (c *genClaim) ReservedFor() []Consumer {
	var st fb.ResourceClaimStatus
	if !c.status(&st) || !genHas(st.Table(), 1) {
		return nil
	}
	out := make([]Consumer, st.ReservedForLength())
	var r fb.ResourceClaimConsumerReference
	for i := range out {
		st.ReservedFor(&r, i)
		out[i] = genConsumerOf(&r)
	}
	return out
}

func genRequirements(t flatbuffers.Table, id int, n int, at func(*fb.NodeSelectorRequirement, int) bool) []NodeSelectorRequirement {
	if !genHas(t, id) {
		return nil
	}
	out := make([]NodeSelectorRequirement, n)
	var r fb.NodeSelectorRequirement
	for i := range out {
		at(&r, i)
		out[i] = NodeSelectorRequirement{genView(r.Key()), genView(r.Operator()), genStrs(r.Table(), 2, r.Values)}
	}
	return out
}

func (c *genClaim) allocation(a *fb.AllocationResult) bool {
	var st fb.ResourceClaimStatus
	return c.status(&st) && st.Allocation(a) != nil
}

// Allocated, NumResults and ResultAt read the allocation's device results
// without allocating for the core fields (Allocation returns all of it).
func (c *genClaim) Allocated() bool {
	var a fb.AllocationResult
	return c.allocation(&a)
}

// NumResults is the number of device results (0 when not allocated).
func (c *genClaim) NumResults() int {
	var a fb.AllocationResult
	if !c.allocation(&a) {
		return 0
	}
	return a.ResultsLength()
}

// ResultAt returns device result i, every field as Allocation has it; it
// panics unless 0 <= i < NumResults(), as a slice index would. The core
// fields (request, driver, pool, device) cost no allocation; shareID,
// adminAccess and the lists do when the result has them.
func (c *genClaim) ResultAt(i int) DeviceResult {
	var a fb.AllocationResult
	n := 0
	if c.allocation(&a) {
		n = a.ResultsLength()
	}
	if uint(i) >= uint(n) {
		genOutOfRange("ResultAt", i, n, "results")
	}
	var r fb.DeviceRequestAllocationResult
	a.Results(&r, i)
	return genResultOf(&r)
}

func genResultOf(r *fb.DeviceRequestAllocationResult) DeviceResult {
	var d DeviceResult
	d.Request, d.Driver, d.Pool, d.Device = genView(r.Request()), genView(r.Driver()), genView(r.Pool()), genView(r.Device())
	d.AdminAccess = r.AdminAccess()
	t := r.Table()
	if genHas(t, 5) {
		d.Tolerations = make([]DeviceToleration, r.TolerationsLength())
		var tol fb.DeviceToleration
		for i := range d.Tolerations {
			r.Tolerations(&tol, i)
			d.Tolerations[i] = DeviceToleration{Key: genView(tol.Key()), Operator: genView(tol.Operator()),
				Value: genView(tol.Value()), Effect: genView(tol.Effect()), TolerationSeconds: tol.TolerationSeconds()}
		}
	}
	d.BindingConditions = genStrs(t, 6, r.BindingConditions)
	d.BindingFailureConditions = genStrs(t, 7, r.BindingFailureConditions)
	d.ShareID = genOptStr(r.ShareId())
	if genHas(t, 9) {
		n := r.ConsumedCapacityLength()
		d.ConsumedCapacity = make(map[string]string, n)
		var q fb.QuantityEntry
		for i := 0; i < n; i++ {
			r.ConsumedCapacity(&q, i)
			d.ConsumedCapacity[genView(q.Key())] = genView(q.Value())
		}
	}
	d.SkipNodeOperations = genStrs(t, 10, r.SkipNodeOperations)
	return d
}

// Allocation returns status.allocation, or nil when the claim is not
// allocated.
func (c *genClaim) Allocation() *Allocation {
	var at fb.AllocationResult
	if !c.allocation(&at) {
		return nil
	}
	a := &Allocation{AllocationTimestamp: genOptTime(at.AllocationTimestamp())}
	t := at.Table()
	if genHas(t, 0) {
		a.Results = make([]DeviceResult, at.ResultsLength())
		var r fb.DeviceRequestAllocationResult
		for i := range a.Results {
			at.Results(&r, i)
			a.Results[i] = genResultOf(&r)
		}
	}
	if genHas(t, 1) {
		a.Config = make([]DeviceAllocationConfiguration, at.ConfigLength())
		var cfg fb.DeviceAllocationConfiguration
		for i := range a.Config {
			at.Config(&cfg, i)
			a.Config[i] = DeviceAllocationConfiguration{Source: genView(cfg.Source()),
				Requests: genStrs(cfg.Table(), 1, cfg.Requests)}
			if cfg.OpaquePresent() {
				a.Config[i].Opaque = &OpaqueDeviceConfiguration{Driver: genView(cfg.OpaqueDriver())}
				if params := cfg.OpaqueParameters(); params != nil {
					a.Config[i].Opaque.Parameters = json.RawMessage(genView(params))
				}
			}
		}
	}
	var ns fb.NodeSelector
	if at.NodeSelector(&ns) != nil {
		a.NodeSelector = &NodeSelector{}
		if genHas(ns.Table(), 0) {
			a.NodeSelector.Terms = make([]NodeSelectorTerm, ns.NodeSelectorTermsLength())
			var term fb.NodeSelectorTerm
			for i := range a.NodeSelector.Terms {
				ns.NodeSelectorTerms(&term, i)
				tt := term.Table()
				a.NodeSelector.Terms[i] = NodeSelectorTerm{
					MatchExpressions: genRequirements(tt, 0, term.MatchExpressionsLength(), term.MatchExpressions),
					MatchFields:      genRequirements(tt, 1, term.MatchFieldsLength(), term.MatchFields),
				}
			}
		}
	}
	return a
}

// DeviceStatuses returns status.devices, in order.
func (c *genClaim) DeviceStatuses() []DeviceStatus {
	var st fb.ResourceClaimStatus
	if !c.status(&st) || !genHas(st.Table(), 2) {
		return nil
	}
	out := make([]DeviceStatus, st.DevicesLength())
	var t fb.AllocatedDeviceStatus
	var ct fb.Condition
	var nd fb.NetworkDeviceData
	for i := range out {
		st.Devices(&t, i)
		d := &out[i]
		d.Driver, d.Pool, d.Device, d.ShareID = genView(t.Driver()), genView(t.Pool()), genView(t.Device()), genOptStr(t.ShareId())
		if genHas(t.Table(), 4) {
			d.Conditions = make([]Condition, t.ConditionsLength())
			for j := range d.Conditions {
				t.Conditions(&ct, j)
				d.Conditions[j] = Condition{Type: genView(ct.Type()), Status: genView(ct.Status()),
					ObservedGeneration: ct.ObservedGeneration(), LastTransitionTime: genOptTime(ct.LastTransitionTime()),
					Reason: genView(ct.Reason()), Message: genView(ct.Message())}
			}
		}
		if data := t.Data(); data != nil {
			d.Data = json.RawMessage(genView(data))
		}
		if t.NetworkData(&nd) != nil {
			d.NetworkData = &NetworkDeviceData{genView(nd.InterfaceName()), genStrs(nd.Table(), 1, nd.Ips), genView(nd.HardwareAddress())}
		}
	}
	return out
}
