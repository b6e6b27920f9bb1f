package claimstore

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"time"
	"unsafe"
)

// The record format (schema/claim.fbs) read in place: a FlatBuffers table is
// a signed offset to its vtable followed by its fields; the vtable holds,
// per field id, the field's offset in the table (0: absent). The C library
// verified every record before it reached Go.

type fbTable struct {
	b   []byte
	pos uint32
}

func u16(b []byte, at uint32) uint32 { return uint32(binary.LittleEndian.Uint16(b[at:])) }
func u32(b []byte, at uint32) uint32 { return binary.LittleEndian.Uint32(b[at:]) }
func u64(b []byte, at uint32) uint64 { return binary.LittleEndian.Uint64(b[at:]) }

func rootTable(b []byte) fbTable { return fbTable{b, u32(b, 0)} }

// field returns the absolute position of field `id`, or 0 when absent.
func (t fbTable) field(id uint32) uint32 {
	vt := uint32(int64(t.pos) - int64(int32(u32(t.b, t.pos))))
	if 4+2*id >= u16(t.b, vt) {
		return 0
	}
	off := u16(t.b, vt+4+2*id)
	if off == 0 {
		return 0
	}
	return t.pos + off
}

func (t fbTable) deref(at uint32) uint32 { return at + u32(t.b, at) }

// strAt returns the string at `at` without a copy: its bytes are the
// record's, which nothing modifies (Claim.Bytes says so).
func (t fbTable) strAt(at uint32) string {
	s := t.deref(at)
	n := u32(t.b, s)
	if n == 0 {
		return ""
	}
	b := t.b[s+4 : s+4+n]
	return *(*string)(unsafe.Pointer(&b))
}

func (t fbTable) str(id uint32) string {
	if at := t.field(id); at != 0 {
		return t.strAt(at)
	}
	return ""
}

func (t fbTable) optStr(id uint32) *string {
	if at := t.field(id); at != 0 {
		s := t.strAt(at)
		return &s
	}
	return nil
}

func (t fbTable) sub(id uint32) (fbTable, bool) {
	if at := t.field(id); at != 0 {
		return fbTable{t.b, t.deref(at)}, true
	}
	return fbTable{}, false
}

// vec returns the position of the first element and the length of vector
// field `id`; present is false when the field is absent.
func (t fbTable) vec(id uint32) (first uint32, n int, present bool) {
	at := t.field(id)
	if at == 0 {
		return 0, 0, false
	}
	v := t.deref(at)
	return v + 4, int(u32(t.b, v)), true
}

// tables and strings return nil for an absent vector and an empty non-nil
// slice for a present empty one (the schema keeps the difference where the
// API does: nodeSelectorTerms, conditions).
func (t fbTable) tables(id uint32) []fbTable {
	first, n, present := t.vec(id)
	if !present {
		return nil
	}
	out := make([]fbTable, n)
	for i := range out {
		out[i] = t.tableAt(first, i)
	}
	return out
}

// tableAt is the i-th table of a vector whose first element is at `first`
// (no allocation, for the hot accessors).
func (t fbTable) tableAt(first uint32, i int) fbTable {
	return fbTable{t.b, t.deref(first + 4*uint32(i))}
}

// vecLen is the length of vector field `id` of t; 0 when t is absent (ok
// false) or the field is.
func vecLen(t fbTable, ok bool, id uint32) int {
	if !ok {
		return 0
	}
	_, n, _ := t.vec(id)
	return n
}

// vecTableAt is table i of vector field `id` of t (absent: ok false), with
// a slice index's bounds check: out of range, it panics naming the
// accessor, the index and how many `items` there are.
func vecTableAt(t fbTable, ok bool, id uint32, i int, accessor, items string) fbTable {
	n, first := 0, uint32(0)
	if ok {
		first, n, _ = t.vec(id)
	}
	if uint(i) >= uint(n) {
		panic("claimstore: " + accessor + "(" + strconv.Itoa(i) + ") of " + strconv.Itoa(n) + " " + items)
	}
	return t.tableAt(first, i)
}

func (t fbTable) strings(id uint32) []string {
	first, n, present := t.vec(id)
	if !present {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = t.strAt(first + 4*uint32(i))
	}
	return out
}

func (t fbTable) i64(id uint32) (int64, bool) {
	if at := t.field(id); at != 0 {
		return int64(u64(t.b, at)), true
	}
	return 0, false
}

func (t fbTable) optBool(id uint32) *bool {
	if at := t.field(id); at != 0 {
		v := t.b[at] != 0
		return &v
	}
	return nil
}

func (t fbTable) optTime(id uint32) *time.Time {
	if v, ok := t.i64(id); ok {
		tm := time.Unix(v, 0).UTC()
		return &tm
	}
	return nil
}

func (t fbTable) quantities(id uint32) map[string]string {
	entries := t.tables(id)
	if entries == nil {
		return nil
	}
	m := make(map[string]string, len(entries))
	for _, e := range entries {
		m[e.str(0)] = e.str(1)
	}
	return m
}

// A Claim is one ResourceClaim as the store keeps it: its identity, the
// store's revisions and its status, read in place from the record bytes
// (no JSON on the way). A Claim is immutable and independent of its Store:
// keep it and read it from any goroutine. The strings its accessors return
// share the record's bytes (no copy): keeping one keeps the record (its
// exact size, a few hundred bytes for most claims) alive. Lists are nil
// when absent and empty non-nil when present but empty (which the codec
// keeps only where the API tells the two apart: nodeSelectorTerms,
// conditions).
type Claim struct {
	b    []byte
	root fbTable
}

func newClaim(b []byte) *Claim { return &Claim{b: b, root: rootTable(b)} }

// Bytes returns the record (the FlatBuffers bytes of schema/claim.fbs), as
// Store.Put takes it. The caller must not modify it: the strings of the
// accessors are views of it.
func (c *Claim) Bytes() []byte { return c.b }

// Key returns the claim's namespace and name.
func (c *Claim) Key() Key { return Key{c.Namespace(), c.Name()} }

func (c *Claim) Namespace() string { return c.root.str(0) }
func (c *Claim) Name() string      { return c.root.str(1) }
func (c *Claim) UID() string       { return c.root.str(2) }

// ResourceVersion is metadata.resourceVersion as imported (opaque).
func (c *Claim) ResourceVersion() string { return c.root.str(3) }
func (c *Claim) Generation() int64 {
	v, _ := c.root.i64(4)
	return v
}

// CreationTimestamp and DeletionTimestamp are nil when absent.
func (c *Claim) CreationTimestamp() *time.Time { return c.root.optTime(5) }
func (c *Claim) DeletionTimestamp() *time.Time { return c.root.optTime(6) }

func (c *Claim) revisions(i uint32) uint64 {
	at := c.root.field(9)
	if at == 0 {
		return 0
	}
	return u64(c.b, at+8*i)
}

// CreateRevision, ModRevision and Version are the store's revisions of the
// claim, as etcd keeps them: the revision that created it, the one that
// last changed it (what Preconditions.ModRevision compares), and how many
// times it was written.
func (c *Claim) CreateRevision() uint64 { return c.revisions(0) }
func (c *Claim) ModRevision() uint64    { return c.revisions(1) }
func (c *Claim) Version() uint64        { return c.revisions(2) }

// Unvalidated is true for a claim loaded with validation off that breaks a
// format or limit rule.
func (c *Claim) Unvalidated() bool {
	b := c.root.optBool(10)
	return b != nil && *b
}

func (c *Claim) status() (fbTable, bool) { return c.root.sub(8) }

// Object returns the rest of the Kubernetes object the record keeps
// (metadata and spec without the status, as the writer encoded it: the
// Kubernetes module's Tracker writes protobuf), or nil. A view into the
// claim's buffer: do not change it.
func (c *Claim) Object() []byte {
	first, n, present := c.root.vec(11)
	if !present || n == 0 {
		return nil
	}
	return c.b[first : first+uint32(n) : first+uint32(n)]
}

// SpecRequest is the name of one of spec.devices.requests and the names of
// its firstAvailable sub-requests: what claimstore keeps of a claim's spec.
type SpecRequest struct {
	Name        string
	Subrequests []string
}

// SpecRequests returns the spec's request names, in order (nil when the
// claim was written without spec.devices.requests).
func (c *Claim) SpecRequests() []SpecRequest {
	ts := c.root.tables(7)
	if ts == nil {
		return nil
	}
	out := make([]SpecRequest, len(ts))
	for i, t := range ts {
		out[i] = SpecRequest{t.str(0), t.strings(1)}
	}
	return out
}

// Consumer is an entry of status.reservedFor.
type Consumer struct {
	APIGroup, Resource, Name, UID string
}

// NumReservedFor, ReservedForAt and ReservedBy read status.reservedFor
// without allocating (ReservedFor returns it as a slice).
func (c *Claim) NumReservedFor() int {
	st, ok := c.status()
	return vecLen(st, ok, 1)
}

// ReservedForAt returns entry i; it panics unless 0 <= i < NumReservedFor(),
// as a slice index would.
func (c *Claim) ReservedForAt(i int) Consumer {
	st, ok := c.status()
	t := vecTableAt(st, ok, 1, i, "ReservedForAt", "consumers")
	return Consumer{t.str(0), t.str(1), t.str(2), t.str(3)}
}

// ReservedBy reports whether reservedFor holds the consumer uid.
func (c *Claim) ReservedBy(uid string) bool {
	st, ok := c.status()
	if !ok {
		return false
	}
	first, n, _ := st.vec(1)
	for i := 0; i < n; i++ {
		if st.tableAt(first, i).str(3) == uid {
			return true
		}
	}
	return false
}

// ReservedFor returns status.reservedFor, in order.
func (c *Claim) ReservedFor() []Consumer {
	st, ok := c.status()
	if !ok {
		return nil
	}
	first, n, present := st.vec(1)
	if !present {
		return nil
	}
	out := make([]Consumer, n)
	for i := range out {
		t := st.tableAt(first, i)
		out[i] = Consumer{t.str(0), t.str(1), t.str(2), t.str(3)}
	}
	return out
}

// DeviceToleration is resource/v1 DeviceToleration.
type DeviceToleration struct {
	Key, Operator, Value, Effect string
	TolerationSeconds            *int64
}

// DeviceResult is one allocated device (DeviceRequestAllocationResult).
// Store.Allocate reads Request through ConsumedCapacity; the other fields
// are read from stored claims only (Allocate refuses them: use
// AllocateJSON for allocations that carry them).
type DeviceResult struct {
	Request, Driver, Pool, Device string
	// ShareID is set for a share of a shared device.
	ShareID *string
	// AdminAccess true: admin access, which never conflicts.
	AdminAccess *bool
	// ConsumedCapacity of a share: capacity name to quantity.
	ConsumedCapacity map[string]string

	Tolerations              []DeviceToleration
	BindingConditions        []string
	BindingFailureConditions []string
	SkipNodeOperations       []string
}

// NodeSelectorRequirement, NodeSelectorTerm, NodeSelector: core/v1.
type NodeSelectorRequirement struct {
	Key, Operator string
	Values        []string
}
type NodeSelectorTerm struct {
	MatchExpressions, MatchFields []NodeSelectorRequirement
}
type NodeSelector struct {
	Terms []NodeSelectorTerm
}

// DeviceAllocationConfiguration is an entry of status.allocation.devices.config.
type DeviceAllocationConfiguration struct {
	Source   string
	Requests []string
	// Opaque is nil when absent.
	Opaque *OpaqueDeviceConfiguration
}
type OpaqueDeviceConfiguration struct {
	Driver     string
	Parameters json.RawMessage
}

// Allocation is status.allocation.
type Allocation struct {
	Results             []DeviceResult
	Config              []DeviceAllocationConfiguration
	NodeSelector        *NodeSelector
	AllocationTimestamp *time.Time
}

func requirements(ts []fbTable) []NodeSelectorRequirement {
	if ts == nil {
		return nil
	}
	out := make([]NodeSelectorRequirement, len(ts))
	for i, t := range ts {
		out[i] = NodeSelectorRequirement{t.str(0), t.str(1), t.strings(2)}
	}
	return out
}

func (c *Claim) allocation() (fbTable, bool) {
	st, ok := c.status()
	if !ok {
		return fbTable{}, false
	}
	return st.sub(0)
}

// Allocated, NumResults and ResultAt read the allocation's device results
// without allocating for the core fields (Allocation returns all of it).
func (c *Claim) Allocated() bool {
	_, ok := c.allocation()
	return ok
}

// NumResults is the number of device results (0 when not allocated).
func (c *Claim) NumResults() int {
	at, ok := c.allocation()
	return vecLen(at, ok, 0)
}

// ResultAt returns device result i, every field as Allocation has it; it
// panics unless 0 <= i < NumResults(), as a slice index would. The core
// fields (request, driver, pool, device) cost no allocation; shareID,
// adminAccess and the lists do when the result has them.
func (c *Claim) ResultAt(i int) DeviceResult {
	at, ok := c.allocation()
	return resultOf(vecTableAt(at, ok, 0, i, "ResultAt", "results"))
}

func resultOf(r fbTable) DeviceResult {
	var d DeviceResult
	d.Request, d.Driver, d.Pool, d.Device = r.str(0), r.str(1), r.str(2), r.str(3)
	d.AdminAccess = r.optBool(4)
	if tols := r.tables(5); tols != nil {
		d.Tolerations = make([]DeviceToleration, 0, len(tols))
		for _, t := range tols {
			tol := DeviceToleration{Key: t.str(0), Operator: t.str(1), Value: t.str(2), Effect: t.str(3)}
			if v, ok := t.i64(4); ok {
				tol.TolerationSeconds = &v
			}
			d.Tolerations = append(d.Tolerations, tol)
		}
	}
	d.BindingConditions = r.strings(6)
	d.BindingFailureConditions = r.strings(7)
	d.ShareID = r.optStr(8)
	d.ConsumedCapacity = r.quantities(9)
	d.SkipNodeOperations = r.strings(10)
	return d
}

// Allocation returns status.allocation, or nil when the claim is not
// allocated.
func (c *Claim) Allocation() *Allocation {
	st, ok := c.status()
	if !ok {
		return nil
	}
	at, ok := st.sub(0)
	if !ok {
		return nil
	}
	a := &Allocation{AllocationTimestamp: at.optTime(3)}
	if first, n, present := at.vec(0); present {
		a.Results = make([]DeviceResult, n)
		for i := range a.Results {
			a.Results[i] = resultOf(at.tableAt(first, i))
		}
	}
	if cfgs := at.tables(1); cfgs != nil {
		a.Config = make([]DeviceAllocationConfiguration, 0, len(cfgs))
	}
	for _, t := range at.tables(1) {
		cfg := DeviceAllocationConfiguration{Source: t.str(0), Requests: t.strings(1)}
		if p := t.optBool(2); p != nil && *p {
			cfg.Opaque = &OpaqueDeviceConfiguration{Driver: t.str(3)}
			if params := t.optStr(4); params != nil {
				cfg.Opaque.Parameters = json.RawMessage(*params)
			}
		}
		a.Config = append(a.Config, cfg)
	}
	if ns, ok := at.sub(2); ok {
		a.NodeSelector = &NodeSelector{}
		if terms := ns.tables(0); terms != nil {
			a.NodeSelector.Terms = make([]NodeSelectorTerm, 0, len(terms))
			for _, term := range terms {
				a.NodeSelector.Terms = append(a.NodeSelector.Terms, NodeSelectorTerm{
					MatchExpressions: requirements(term.tables(0)),
					MatchFields:      requirements(term.tables(1)),
				})
			}
		}
	}
	return a
}

// Condition is meta/v1 Condition.
type Condition struct {
	Type, Status       string
	ObservedGeneration int64
	LastTransitionTime *time.Time
	Reason, Message    string
}

// NetworkDeviceData is resource/v1 NetworkDeviceData.
type NetworkDeviceData struct {
	InterfaceName   string
	IPs             []string
	HardwareAddress string
}

// DeviceStatus is an entry of status.devices (AllocatedDeviceStatus).
type DeviceStatus struct {
	Driver, Pool, Device string
	ShareID              *string
	Conditions           []Condition
	// Data is the driver's opaque data as compacted JSON (nil when absent).
	Data        json.RawMessage
	NetworkData *NetworkDeviceData
}

// DeviceStatuses returns status.devices, in order.
func (c *Claim) DeviceStatuses() []DeviceStatus {
	st, ok := c.status()
	if !ok {
		return nil
	}
	ts := st.tables(2)
	if ts == nil {
		return nil
	}
	out := make([]DeviceStatus, len(ts))
	for i, t := range ts {
		d := &out[i]
		d.Driver, d.Pool, d.Device, d.ShareID = t.str(0), t.str(1), t.str(2), t.optStr(3)
		if conds := t.tables(4); conds != nil {
			d.Conditions = make([]Condition, 0, len(conds))
		}
		for _, ct := range t.tables(4) {
			cond := Condition{Type: ct.str(0), Status: ct.str(1), LastTransitionTime: ct.optTime(3),
				Reason: ct.str(4), Message: ct.str(5)}
			cond.ObservedGeneration, _ = ct.i64(2)
			d.Conditions = append(d.Conditions, cond)
		}
		if data := t.optStr(5); data != nil {
			d.Data = json.RawMessage(*data)
		}
		if nd, ok := t.sub(6); ok {
			d.NetworkData = &NetworkDeviceData{nd.str(0), nd.strings(1), nd.str(2)}
		}
	}
	return out
}
