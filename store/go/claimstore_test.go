package claimstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"claimstore.dev/claimstore"
)

const (
	driver = "gpu.example.com"
	pool   = "pool-a"
	shareA = "11111111-1111-4111-8111-111111111111"
	shareB = "22222222-2222-4222-8222-222222222222"
)

func open(t testing.TB, opts claimstore.Options) (*claimstore.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	s, err := claimstore.Open(ctx, dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func claimJSON(ns, name, status string) []byte {
	return []byte(`{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"` + name +
		`","namespace":"` + ns + `","uid":"uid-` + name + `"},"status":` + status + `}`)
}

func allocatedJSON(devices ...string) string {
	var rs []string
	for _, d := range devices {
		rs = append(rs, `{"request":"req","driver":"`+driver+`","pool":"`+pool+`","device":"`+d+`"}`)
	}
	return `{"allocation":{"devices":{"results":[` + strings.Join(rs, ",") + `]}}}`
}

func put(t testing.TB, s *claimstore.Store, ns, name, status string) claimstore.WriteResult {
	t.Helper()
	r, err := s.PutJSON(ctx, claimJSON(ns, name, status), claimstore.Preconditions{})
	if err != nil {
		t.Fatalf("PutJSON %s/%s: %v", ns, name, err)
	}
	return r
}

func pod(uid string) claimstore.Consumer {
	return claimstore.Consumer{Resource: "pods", Name: "pod-" + uid, UID: uid}
}

func u64(v uint64) *uint64  { return &v }
func strp(s string) *string { return &s }

// The JSON shape of a claim's status, decoded by encoding/json: what the
// record reader must agree with.
type jsonRequirement struct {
	Key, Operator string
	Values        []string
}
type jsonStatus struct {
	Allocation *struct {
		Devices struct {
			Results []struct {
				Request, Driver, Pool, Device string
				AdminAccess                   *bool
				Tolerations                   []claimstore.DeviceToleration
				BindingConditions             []string
				BindingFailureConditions      []string
				ShareID                       *string `json:"shareID"`
				ConsumedCapacity              map[string]string
				SkipNodeOperations            []string
			}
			Config []struct {
				Source   string
				Requests []string
				Opaque   *struct {
					Driver     string
					Parameters json.RawMessage
				}
			}
		}
		NodeSelector *struct {
			NodeSelectorTerms []struct {
				MatchExpressions, MatchFields []jsonRequirement
			}
		}
		AllocationTimestamp *time.Time
	}
	ReservedFor []claimstore.Consumer
	Devices     []struct {
		Driver, Pool, Device string
		ShareID              *string `json:"shareID"`
		Conditions           []claimstore.Condition
		Data                 json.RawMessage
		NetworkData          *struct {
			InterfaceName   string
			IPs             []string `json:"ips"`
			HardwareAddress string
		}
	}
}

func compact(t *testing.T, raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func requirements(rs []jsonRequirement) []claimstore.NodeSelectorRequirement {
	var out []claimstore.NodeSelectorRequirement
	for _, r := range rs {
		out = append(out, claimstore.NodeSelectorRequirement(r))
	}
	return out
}

// Every field the record reader gives equals what encoding/json reads from
// the fixture that has every field set.
func TestClaimReadsEveryFieldInPlace(t *testing.T) {
	input, err := os.ReadFile("../../tests/testdata/k8s/fixtures/ResourceClaim.roundtrip.json")
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := claimstore.Decode(input)
	if err != nil {
		t.Fatal(err)
	}
	if len(decoded) != 1 || decoded[0].Event != claimstore.EventNone {
		t.Fatalf("decoded %+v", decoded)
	}
	c := decoded[0].Claim
	var doc struct {
		Metadata struct {
			Name, Namespace, UID, ResourceVersion string
			Generation                            int64
			CreationTimestamp, DeletionTimestamp  *time.Time
		}
		Status jsonStatus
	}
	if err := json.Unmarshal(input, &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Metadata
	if c.Name() != m.Name || c.Namespace() != m.Namespace || c.UID() != m.UID ||
		c.ResourceVersion() != m.ResourceVersion || c.Generation() != m.Generation {
		t.Errorf("metadata: %s %s %s %s %d, want %+v", c.Name(), c.Namespace(), c.UID(),
			c.ResourceVersion(), c.Generation(), m)
	}
	if !c.CreationTimestamp().Equal(*m.CreationTimestamp) || !c.DeletionTimestamp().Equal(*m.DeletionTimestamp) {
		t.Errorf("timestamps %v %v", c.CreationTimestamp(), c.DeletionTimestamp())
	}
	st := doc.Status
	if !reflect.DeepEqual(c.ReservedFor(), st.ReservedFor) {
		t.Errorf("ReservedFor() = %+v, want %+v", c.ReservedFor(), st.ReservedFor)
	}

	want := &claimstore.Allocation{}
	ja := st.Allocation
	for _, r := range ja.Devices.Results {
		want.Results = append(want.Results, claimstore.DeviceResult{
			Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device,
			ShareID: r.ShareID, AdminAccess: r.AdminAccess, ConsumedCapacity: r.ConsumedCapacity,
			Tolerations: r.Tolerations, BindingConditions: r.BindingConditions,
			BindingFailureConditions: r.BindingFailureConditions, SkipNodeOperations: r.SkipNodeOperations,
		})
	}
	for _, cfg := range ja.Devices.Config {
		w := claimstore.DeviceAllocationConfiguration{Source: cfg.Source, Requests: cfg.Requests}
		if cfg.Opaque != nil {
			w.Opaque = &claimstore.OpaqueDeviceConfiguration{Driver: cfg.Opaque.Driver,
				Parameters: compact(t, cfg.Opaque.Parameters)}
		}
		want.Config = append(want.Config, w)
	}
	want.NodeSelector = &claimstore.NodeSelector{}
	for _, term := range ja.NodeSelector.NodeSelectorTerms {
		want.NodeSelector.Terms = append(want.NodeSelector.Terms, claimstore.NodeSelectorTerm{
			MatchExpressions: requirements(term.MatchExpressions), MatchFields: requirements(term.MatchFields)})
	}
	ts := ja.AllocationTimestamp.UTC()
	want.AllocationTimestamp = &ts
	if got := c.Allocation(); !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Errorf("Allocation():\n got %s\nwant %s", gj, wj)
	}

	var wantDevices []claimstore.DeviceStatus
	for _, d := range st.Devices {
		w := claimstore.DeviceStatus{Driver: d.Driver, Pool: d.Pool, Device: d.Device, ShareID: d.ShareID,
			Data: compact(t, d.Data)}
		for _, cond := range d.Conditions {
			tt := cond.LastTransitionTime.UTC()
			cond.LastTransitionTime = &tt
			w.Conditions = append(w.Conditions, cond)
		}
		if d.NetworkData != nil {
			nd := claimstore.NetworkDeviceData(*d.NetworkData)
			w.NetworkData = &nd
		}
		wantDevices = append(wantDevices, w)
	}
	if got := c.DeviceStatuses(); !reflect.DeepEqual(got, wantDevices) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(wantDevices)
		t.Errorf("DeviceStatuses():\n got %s\nwant %s", gj, wj)
	}

	// The accessors that do not allocate agree with the slices.
	if c.NumResults() != len(want.Results) || !c.Allocated() {
		t.Errorf("NumResults() = %d", c.NumResults())
	}
	for i := range want.Results {
		if got := c.ResultAt(i); !reflect.DeepEqual(got, want.Results[i]) {
			t.Errorf("ResultAt(%d) = %+v", i, got)
		}
	}
	if c.NumReservedFor() != len(st.ReservedFor) {
		t.Errorf("NumReservedFor() = %d", c.NumReservedFor())
	}
	for i, r := range st.ReservedFor {
		if got := c.ReservedForAt(i); got != r {
			t.Errorf("ReservedForAt(%d) = %+v", i, got)
		}
		if !c.ReservedBy(r.UID) {
			t.Errorf("ReservedBy(%q) = false", r.UID)
		}
	}
	if c.ReservedBy("nobody") {
		t.Errorf("ReservedBy(nobody) = true")
	}

	// The claim's JSON, as the C++ codec writes it, decodes back to the same record.
	js, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	again, err := claimstore.Decode(js)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again[0].Claim.Bytes(), c.Bytes()) {
		t.Errorf("JSON() does not decode to the same record")
	}
	indented, err := c.JSONIndent("    ")
	if err != nil || !bytes.Contains(indented, []byte("\n    \"apiVersion\": \"resource.k8s.io/v1\"")) {
		t.Errorf("JSONIndent: %v\n%s", err, indented)
	}
}

// Lists the API tells apart when absent or empty (nodeSelectorTerms,
// conditions) read as nil and as an empty non-nil slice.
func TestAbsentAndEmptyListsStayApart(t *testing.T) {
	withEmpty, err := claimstore.Decode(claimJSON("ns", "a", `{"allocation":{"devices":{"results":[{"request":"req",`+
		`"driver":"`+driver+`","pool":"`+pool+`","device":"gpu-0"}]},"nodeSelector":{"nodeSelectorTerms":[]}},`+
		`"devices":[{"driver":"`+driver+`","pool":"`+pool+`","device":"gpu-0","conditions":[]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	withNone, err := claimstore.Decode(claimJSON("ns", "a", `{"allocation":{"devices":{"results":[{"request":"req",`+
		`"driver":"`+driver+`","pool":"`+pool+`","device":"gpu-0"}]},"nodeSelector":{}},`+
		`"devices":[{"driver":"`+driver+`","pool":"`+pool+`","device":"gpu-0"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e, n := withEmpty[0].Claim, withNone[0].Claim
	if terms := e.Allocation().NodeSelector.Terms; terms == nil || len(terms) != 0 {
		t.Errorf("nodeSelectorTerms: [] read as %#v", terms)
	}
	if terms := n.Allocation().NodeSelector.Terms; terms != nil {
		t.Errorf("absent nodeSelectorTerms read as %#v", terms)
	}
	if c := e.DeviceStatuses()[0].Conditions; c == nil || len(c) != 0 {
		t.Errorf("conditions: [] read as %#v", c)
	}
	if c := n.DeviceStatuses()[0].Conditions; c != nil {
		t.Errorf("absent conditions read as %#v", c)
	}
}

func TestGetRevisionsAndUnallocatedClaim(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	r := put(t, s, "ns", "a", "{}")
	if !r.Changed || r.Revision != 1 {
		t.Fatalf("PutJSON = %+v", r)
	}
	put(t, s, "ns", "a", `{"allocation":{"devices":{"results":[]}}}`)
	c, err := s.Get(claimstore.Key{"ns", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if c.CreateRevision() != 1 || c.ModRevision() != 2 || c.Version() != 2 || c.Key() != (claimstore.Key{"ns", "a"}) {
		t.Errorf("revisions %d %d %d", c.CreateRevision(), c.ModRevision(), c.Version())
	}
	if a := c.Allocation(); a == nil || len(a.Results) != 0 || a.NodeSelector != nil {
		t.Errorf("Allocation() = %+v", a)
	}
	if c.ReservedFor() != nil || c.DeviceStatuses() != nil || c.CreationTimestamp() != nil {
		t.Errorf("absent fields are not nil")
	}
	put(t, s, "ns", "b", "{}")
	b, _ := s.Get(claimstore.Key{"ns", "b"})
	if b.Allocation() != nil || b.Allocated() || b.NumResults() != 0 || b.NumReservedFor() != 0 || b.ReservedBy("x") {
		t.Errorf("an unallocated claim has an allocation")
	}
	// Past the end: a panic naming the index, never another field's bytes.
	for name, f := range map[string]func(){
		"ResultAt(0) of an unallocated claim":  func() { b.ResultAt(0) },
		"ReservedForAt(0) without consumers":   func() { b.ReservedForAt(0) },
		"ResultAt(1) of an allocation of none": func() { c.ResultAt(1) },
		"ResultAt(-1)":                         func() { c.ResultAt(-1) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "claimstore: ") {
					t.Errorf("%s: recovered %v", name, r)
				}
			}()
			f()
		}()
	}
}

func TestEveryErrorCode(t *testing.T) {
	s, dir := open(t, claimstore.Options{})
	key := claimstore.Key{"ns", "a"}

	_, err := s.Get(key)
	var e *claimstore.Error
	if !errors.Is(err, claimstore.ErrNotFound) || !errors.As(err, &e) || e.Code != claimstore.CodeNotFound ||
		!strings.Contains(e.Message, "ns/a") {
		t.Errorf("Get of a missing claim: %v", err)
	}

	// Invalid: the field errors, and nothing written.
	_, err = s.PutJSON(ctx, claimJSON("ns", "a", `{"reservedFor":[{"resource":"pods","name":"p"}]}`), claimstore.Preconditions{})
	if !errors.Is(err, claimstore.ErrInvalid) || !errors.As(err, &e) || len(e.Fields) == 0 ||
		e.Fields[0].Type != "Required value" || !strings.HasPrefix(e.Fields[0].Field, "status.reservedFor[0].") {
		t.Errorf("invalid claim: %v (%+v)", err, e)
	}
	if st, _ := s.Stats(); st.Claims != 0 || st.Revision != 0 {
		t.Errorf("a refused write changed the store: %+v", st)
	}
	_, err = s.PutJSON(ctx, []byte(`{"kind":`), claimstore.Preconditions{})
	if !errors.Is(err, claimstore.ErrInvalid) {
		t.Errorf("truncated JSON: %v", err)
	}

	// Refused: reserve an unallocated claim.
	put(t, s, "ns", "a", "{}")
	_, err = s.Reserve(ctx, key, pod("u1"), claimstore.Preconditions{})
	if !errors.Is(err, claimstore.ErrRefused) {
		t.Errorf("Reserve of an unallocated claim: %v", err)
	}

	// Conflict on a stale revision, with the current revision.
	put(t, s, "ns", "a", allocatedJSON("gpu-0"))
	_, err = s.Reserve(ctx, key, pod("u1"), claimstore.Preconditions{ModRevision: u64(1)})
	var ce *claimstore.ConflictError
	if !errors.Is(err, claimstore.ErrConflict) || !errors.As(err, &ce) || ce.CurrentRevision != 2 || len(ce.Holders) != 0 {
		t.Errorf("stale revision: %v (%+v)", err, ce)
	}
	_, err = s.Reserve(ctx, key, pod("u1"), claimstore.Preconditions{UID: strp("someone-else")})
	if !errors.Is(err, claimstore.ErrConflict) {
		t.Errorf("wrong uid: %v", err)
	}

	// Conflict on a held device, naming the holder.
	put(t, s, "ns", "b", "{}")
	_, err = s.AllocateJSON(ctx, claimstore.Key{"ns", "b"}, []byte(allocatedJSON("gpu-0")[len(`{"allocation":`):len(allocatedJSON("gpu-0"))-1]), nil, claimstore.Preconditions{})
	if !errors.As(err, &ce) || len(ce.Holders) != 1 || ce.Holders[0] != key {
		t.Errorf("held device: %v (%+v)", err, ce)
	}

	// Exhausted at 256 consumers.
	for i := 0; i < 256; i++ {
		if _, err := s.Reserve(ctx, key, pod("u"+strconv.Itoa(i)), claimstore.Preconditions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Reserve(ctx, key, pod("one-more"), claimstore.Preconditions{}); !errors.Is(err, claimstore.ErrExhausted) {
		t.Errorf("257th consumer: %v", err)
	}

	// Corrupt: bytes that are no record.
	decoded, _ := claimstore.Decode(claimJSON("ns", "c", "{}"))
	bad := append([]byte(nil), decoded[0].Claim.Bytes()...)
	for i := 4; i < 12 && i < len(bad); i++ {
		bad[i] = 0xff
	}
	if _, err := claimstore.Decode([]byte("[1,")); !errors.Is(err, claimstore.ErrInvalid) {
		t.Errorf("Decode of bad JSON: %v", err)
	}
	corrupt, err := s.Put(ctx, claimFromBytes(t, bad), claimstore.Preconditions{})
	if !errors.Is(err, claimstore.ErrCorrupt) {
		t.Errorf("Put of corrupt bytes: %+v %v", corrupt, err)
	}

	// Unavailable: a second writer.
	if _, err := claimstore.Open(ctx, dir, claimstore.Options{}); !errors.Is(err, claimstore.ErrUnavailable) {
		t.Errorf("second writer: %v", err)
	}
	// ErrorIfMissing.
	if _, err := claimstore.Open(ctx, filepath.Join(t.TempDir(), "none"), claimstore.Options{ErrorIfMissing: true}); err == nil {
		t.Errorf("ErrorIfMissing opened a missing database")
	}

	// Closed.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(key); !errors.Is(err, claimstore.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, claimstore.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

// claimFromBytes makes a *Claim of arbitrary bytes through the codec's
// round trip: Decode of a claim, then Put of the given bytes by way of an
// exported path (Claim has no public constructor, so the test overwrites a
// decoded claim's bytes in place).
func claimFromBytes(t *testing.T, b []byte) *claimstore.Claim {
	decoded, err := claimstore.Decode(claimJSON("ns", "x", "{}"))
	if err != nil {
		t.Fatal(err)
	}
	c := decoded[0].Claim
	raw := c.Bytes()
	if len(raw) < len(b) {
		b = b[:len(raw)]
	}
	copy(raw, b)
	return c
}

func TestReadsAndIndexes(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	for i := 0; i < 5; i++ {
		put(t, s, "ns", "c"+strconv.Itoa(i), allocatedJSON("gpu-"+strconv.Itoa(i)))
	}
	put(t, s, "other", "x", "{}")
	if _, err := s.Reserve(ctx, claimstore.Key{"ns", "c1"}, pod("p1"), claimstore.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, claimstore.Key{"ns", "c3"}, pod("p1"), claimstore.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	reserved, err := s.ClaimsReservedFor("p1")
	if err != nil || reserved.Revision != 8 || !reflect.DeepEqual(reserved.Keys, []claimstore.Key{{"ns", "c1"}, {"ns", "c3"}}) {
		t.Errorf("ClaimsReservedFor = %+v %v", reserved, err)
	}
	if _, err := s.ClaimsReservedFor(""); !errors.Is(err, claimstore.ErrInvalid) {
		t.Errorf("ClaimsReservedFor(\"\"): %v", err)
	}
	using, err := s.ClaimsUsingDevice(claimstore.DeviceQuery{Driver: driver, Pool: pool, Device: "gpu-2"})
	holdings := using.Holdings
	if err != nil || len(holdings) != 1 || holdings[0].Claim != (claimstore.Key{"ns", "c2"}) ||
		holdings[0].Kind != claimstore.HoldingExclusive {
		t.Errorf("ClaimsUsingDevice = %+v %v", holdings, err)
	}
	all, _ := s.ClaimsUsingDevice(claimstore.DeviceQuery{Driver: driver})
	if len(all.Holdings) != 5 || all.Revision != 8 {
		t.Errorf("holdings of the driver: %+v", all)
	}
	if _, err := s.ClaimsUsingDevice(claimstore.DeviceQuery{}); !errors.Is(err, claimstore.ErrInvalid) {
		t.Errorf("query without a driver: %v", err)
	}

	var names []string
	token := ""
	for {
		page, err := s.List(claimstore.ListOptions{Namespace: "ns", Limit: 2, Continue: token})
		if err != nil {
			t.Fatal(err)
		}
		if page.Revision != 8 {
			t.Errorf("page revision %d", page.Revision)
		}
		for _, c := range page.Claims {
			names = append(names, c.Name())
		}
		if token = page.Continue; token == "" {
			break
		}
	}
	if !reflect.DeepEqual(names, []string{"c0", "c1", "c2", "c3", "c4"}) {
		t.Errorf("List: %v", names)
	}
	read, err := s.GetMany([]claimstore.Key{{"ns", "c4"}, {"ns", "nope"}, {"other", "x"}})
	claims := read.Claims
	if err != nil || read.Revision != 8 || len(claims) != 3 || claims[0].Name() != "c4" || claims[1] != nil || claims[2].Name() != "x" {
		t.Errorf("GetMany = %+v %v", read, err)
	}

	// All walks every claim, page by page.
	names = nil
	for c, err := range s.All(ctx, claimstore.ListOptions{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, c.Namespace()+"/"+c.Name())
	}
	if !reflect.DeepEqual(names, []string{"ns/c0", "ns/c1", "ns/c2", "ns/c3", "ns/c4", "other/x"}) {
		t.Errorf("All: %v", names)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for c, err := range s.All(done, claimstore.ListOptions{}) {
		if c != nil || !errors.Is(err, context.Canceled) {
			t.Errorf("All with an ended context: %v %v", c, err)
		}
	}

	st, err := s.Stats()
	if err != nil || st.Claims != 6 || st.Allocated != 5 || st.Reserved != 2 || st.Revision != 8 {
		t.Errorf("Stats = %+v %v", st, err)
	}
	report, err := s.Verify(false)
	if err != nil || report.Records != 6 || len(report.Problems) != 0 || report.Repaired {
		t.Errorf("Verify = %+v %v", report, err)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if err := s.Backup(backup); err != nil {
		t.Fatal(err)
	}
	copyStore, err := claimstore.Open(ctx, backup, claimstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer copyStore.Close()
	if st, _ := copyStore.Stats(); st.Claims != 6 || st.Revision != 8 {
		t.Errorf("backup: %+v", st)
	}
	if _, err := copyStore.Delete(ctx, claimstore.Key{"ns", "c0"}, claimstore.Preconditions{}); !errors.Is(err, claimstore.ErrRefused) {
		t.Errorf("write to a read-only store: %v", err)
	}
}

func TestAllocateSharesCapacityAndTheAllocatedState(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	for _, n := range []string{"a", "b", "c", "admin"} {
		put(t, s, "ns", n, "{}")
	}
	limit := []claimstore.DeviceCapacity{{Driver: driver, Pool: pool, Device: "gpu-0", Capacity: map[string]string{"memory": "6Gi"}}}
	share := func(id, mem string) claimstore.DeviceResult {
		return claimstore.DeviceResult{Request: "req", Driver: driver, Pool: pool, Device: "gpu-0",
			ShareID: strp(id), ConsumedCapacity: map[string]string{"memory": mem}}
	}
	exclusive := claimstore.DeviceResult{Request: "req", Driver: driver, Pool: pool, Device: "gpu-1"}
	when := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r, err := s.Allocate(ctx, claimstore.Key{"ns", "a"}, []claimstore.DeviceResult{share(shareA, "4Gi"), exclusive},
		claimstore.AllocateOptions{NodeName: "node-1", AllocationTimestamp: when, Capacity: limit}, claimstore.Preconditions{})
	if err != nil || !r.Changed {
		t.Fatalf("Allocate = %+v %v", r, err)
	}
	c, _ := s.Get(claimstore.Key{"ns", "a"})
	a := c.Allocation()
	if len(a.Results) != 2 || *a.Results[0].ShareID != shareA || a.Results[0].ConsumedCapacity["memory"] != "4Gi" ||
		!a.AllocationTimestamp.Equal(when) || a.NodeSelector.Terms[0].MatchFields[0].Values[0] != "node-1" {
		t.Errorf("allocation as stored: %+v", a)
	}

	// Past the limit: a conflict naming the capacity.
	_, err = s.Allocate(ctx, claimstore.Key{"ns", "b"}, []claimstore.DeviceResult{share(shareB, "4Gi")},
		claimstore.AllocateOptions{Capacity: limit}, claimstore.Preconditions{})
	if !errors.Is(err, claimstore.ErrConflict) || !strings.Contains(err.Error(), "limit 6Gi") {
		t.Errorf("over-commit: %v", err)
	}
	if _, err := s.Allocate(ctx, claimstore.Key{"ns", "b"}, []claimstore.DeviceResult{share(shareB, "2Gi")},
		claimstore.AllocateOptions{Capacity: limit}, claimstore.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllocateJSON(ctx, claimstore.Key{"ns", "admin"}, []byte(`{"devices":{"results":[{"request":"req","driver":"`+
		driver+`","pool":"`+pool+`","device":"gpu-1","adminAccess":true}]}}`), nil, claimstore.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	_, err = s.AllocateJSON(ctx, claimstore.Key{"ns", "c"}, []byte(`{"devices":{"results":[{"request":1}]}}`), nil, claimstore.Preconditions{})
	if !errors.Is(err, claimstore.ErrInvalid) || !strings.Contains(err.Error(), "status.allocation.devices.results[0].request") {
		t.Errorf("bad allocation JSON: %v", err)
	}
	_, err = s.Allocate(ctx, claimstore.Key{"ns", "c"}, []claimstore.DeviceResult{{Request: "req", Driver: driver, Pool: pool,
		Device: "gpu-7", BindingConditions: []string{"x"}}}, claimstore.AllocateOptions{}, claimstore.Preconditions{})
	if !errors.Is(err, claimstore.ErrInvalid) {
		t.Errorf("read-only fields in Allocate: %v", err)
	}

	state, err := s.AllocatedDevices()
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	st, _ := s.Stats()
	if state.Revision() != st.Revision || state.Len() != 2 {
		t.Errorf("state at %d with %d devices; store at %d", state.Revision(), state.Len(), st.Revision)
	}
	// Writes after the snapshot do not change it; it outlives the store.
	if _, err := s.Deallocate(ctx, claimstore.Key{"ns", "b"}, claimstore.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	d, ok := state.Find(driver, pool, "gpu-0")
	want := claimstore.AllocatedDevice{Driver: driver, Pool: pool, Device: "gpu-0",
		Shares: []claimstore.DeviceShare{
			{ShareID: shareA, Claim: claimstore.Key{"ns", "a"}, ConsumedCapacity: map[string]string{"memory": "4Gi"}},
			{ShareID: shareB, Claim: claimstore.Key{"ns", "b"}, ConsumedCapacity: map[string]string{"memory": "2Gi"}}},
		ConsumedCapacity: map[string]string{"memory": "6Gi"}}
	if !ok || !reflect.DeepEqual(d, want) || !d.Taken() {
		t.Errorf("Find(gpu-0) = %+v %v", d, ok)
	}
	d, ok = state.Find(driver, pool, "gpu-1")
	if !ok || d.Exclusive == nil || *d.Exclusive != (claimstore.Key{"ns", "a"}) ||
		!reflect.DeepEqual(d.AdminAccess, []claimstore.Key{{"ns", "admin"}}) {
		t.Errorf("Find(gpu-1) = %+v %v", d, ok)
	}
	if _, ok := state.Find(driver, pool, "gpu-2"); ok || state.Taken(driver, pool, "gpu-2") || !state.Taken(driver, pool, "gpu-1") {
		t.Errorf("gpu-2 is not held")
	}
	asked := []string{"gpu-2", "gpu-1", "gpu-0", "", "gpu-10"}
	var taken []bool
	for round := 0; round < 2; round++ { // the second reuses the first's slice
		taken = state.TakenMany(driver, pool, asked, taken)
		for i, d := range asked {
			if taken[i] != state.Taken(driver, pool, d) {
				t.Errorf("TakenMany(%s) = %v, Taken says otherwise", d, taken[i])
			}
		}
	}
	if got := state.TakenMany(driver, pool, nil, taken); len(got) != 0 {
		t.Errorf("TakenMany of nothing: %v", got)
	}
	devices := state.Devices("", "")
	if len(devices) != 2 || devices[0].Device != "gpu-0" || devices[1].Device != "gpu-1" ||
		!reflect.DeepEqual(devices[0], want) {
		t.Errorf("Devices = %+v", devices)
	}
	if len(state.Devices(driver, "other-pool")) != 0 || len(state.Devices(driver, pool)) != 2 {
		t.Errorf("Devices of a pool")
	}
	state.Close()
	if _, ok := state.Find(driver, pool, "gpu-0"); ok {
		t.Errorf("Find after Close found a device")
	}
}

// race runs call(0..n-1) on n goroutines released at once and returns
// their errors.
func race(n int, call func(g int) error) []error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			<-start
			errs[g] = call(g)
		}(g)
	}
	close(start)
	wg.Wait()
	return errs
}

// 16 goroutines race for the last consumer slot: exactly one wins, 15 are
// told ErrExhausted.
func TestRaceForTheLastConsumerSlot(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	key := claimstore.Key{"ns", "a"}
	put(t, s, "ns", "a", allocatedJSON("gpu-0"))
	for i := 0; i < 255; i++ {
		if _, err := s.Reserve(ctx, key, pod("u"+strconv.Itoa(i)), claimstore.Preconditions{}); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 5; round++ {
		errs := race(16, func(g int) error {
			_, err := s.Reserve(ctx, key, pod("racer-"+strconv.Itoa(round)+"-"+strconv.Itoa(g)), claimstore.Preconditions{})
			return err
		})
		won, exhausted := -1, 0
		for g, err := range errs {
			switch {
			case err == nil:
				if won >= 0 {
					t.Fatalf("round %d: two winners", round)
				}
				won = g
			case errors.Is(err, claimstore.ErrExhausted):
				exhausted++
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if won < 0 || exhausted != 15 {
			t.Fatalf("round %d: winner %d, exhausted %d", round, won, exhausted)
		}
		c, err := s.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(c.ReservedFor()); n != 256 {
			t.Fatalf("round %d: %d consumers", round, n)
		}
		// Get read it again into a buffer of its size (it is larger than
		// any first buffer Get tries, 16 KiB at most), whole: as GetMany
		// reads it.
		many, err := s.GetMany([]claimstore.Key{key})
		if err != nil || len(c.Bytes()) <= 512 || !bytes.Equal(c.Bytes(), many.Claims[0].Bytes()) {
			t.Fatalf("round %d: Get read %d bytes, GetMany %v", round, len(c.Bytes()), err)
		}
		if _, err := s.Unreserve(ctx, key, "racer-"+strconv.Itoa(round)+"-"+strconv.Itoa(won), claimstore.Preconditions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// 16 goroutines race to allocate one device: one wins, 15 get ErrConflict
// naming the winner.
// raceForDevice has 16 goroutines (spread over stores) allocate the device
// to claims ns/c0..c15 at once; exactly one wins, every loser gets a
// ConflictError naming the winner and the device. Returns the winner.
func raceForDevice(t *testing.T, stores []*claimstore.Store, device string) claimstore.Key {
	t.Helper()
	errs := race(16, func(g int) error {
		_, err := stores[g%len(stores)].Allocate(ctx, claimstore.Key{"ns", "c" + strconv.Itoa(g)},
			[]claimstore.DeviceResult{{Request: "req", Driver: driver, Pool: pool, Device: device}},
			claimstore.AllocateOptions{}, claimstore.Preconditions{})
		return err
	})
	winner := claimstore.Key{}
	for g, err := range errs {
		if err == nil {
			if winner.Name != "" {
				t.Fatalf("%s: two winners: %v and c%d", device, winner, g)
			}
			winner = claimstore.Key{"ns", "c" + strconv.Itoa(g)}
		}
	}
	if winner.Name == "" {
		t.Fatalf("%s: no winner: %v", device, errs)
	}
	for _, err := range errs {
		if err == nil {
			continue
		}
		var ce *claimstore.ConflictError
		if !errors.As(err, &ce) || len(ce.Holders) != 1 || ce.Holders[0] != winner || !strings.Contains(ce.Message, device) {
			t.Fatalf("%s: a loser was told %v; the winner is %v", device, err, winner)
		}
	}
	return winner
}

func TestRaceForOneDevice(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	for g := 0; g < 16; g++ {
		put(t, s, "ns", "c"+strconv.Itoa(g), "{}")
	}
	for round := 0; round < 5; round++ {
		winner := raceForDevice(t, []*claimstore.Store{s}, "gpu-"+strconv.Itoa(round))
		if _, err := s.Deallocate(ctx, winner, claimstore.Preconditions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// Compare-and-set on a seen revision: of goroutines that read the same
// revision and write with it, exactly one wins; the others learn the
// current revision, re-read, and retry until each has written once.
func TestCompareAndSetOnASeenRevision(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	key := claimstore.Key{"ns", "a"}
	put(t, s, "ns", "a", allocatedJSON("gpu-0"))
	c, _ := s.Get(key)
	seen := c.ModRevision()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rev := seen
			for {
				_, err := s.Reserve(ctx, key, pod("cas-"+strconv.Itoa(g)), claimstore.Preconditions{ModRevision: u64(rev)})
				var ce *claimstore.ConflictError
				if errors.As(err, &ce) {
					mu.Lock()
					conflicts++
					mu.Unlock()
					if ce.CurrentRevision <= rev {
						t.Errorf("current revision %d not past the seen %d", ce.CurrentRevision, rev)
						return
					}
					rev = ce.CurrentRevision
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if rev == seen {
					wins++
				}
				mu.Unlock()
				return
			}
		}(g)
	}
	wg.Wait()
	if wins != 1 || conflicts < 7 {
		t.Errorf("%d writes won on the first seen revision, %d conflicts", wins, conflicts)
	}
	c, _ = s.Get(key)
	if len(c.ReservedFor()) != 8 || c.ModRevision() != seen+8 {
		t.Errorf("%d consumers at revision %d", len(c.ReservedFor()), c.ModRevision())
	}
}

// A watcher sees every change, in order, while 4 goroutines write.
func TestWatchSeesEveryChange(t *testing.T) {
	s, _ := open(t, claimstore.Options{FeedRecordsBefore: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := s.Watch(ctx, 1, claimstore.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const writers, each = 4, 50
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				name := "w" + strconv.Itoa(g) + "-" + strconv.Itoa(i%5)
				if _, err := s.PutJSON(ctx, claimJSON("ns", name, "{}"), claimstore.Preconditions{}); err != nil {
					t.Error(err)
				}
			}
		}(g)
	}
	seen := map[string]int{}
	for rev := uint64(1); rev <= writers*each; rev++ {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Revision != rev || ev.Claim == nil || ev.Claim.ModRevision() != rev || ev.Claim.Key() != ev.Key {
			t.Fatalf("event %+v at revision %d", ev, rev)
		}
		seen[ev.Key.Name]++
		want := claimstore.EventModified
		if seen[ev.Key.Name] == 1 {
			want = claimstore.EventAdded
		}
		if ev.Type != want || (want == claimstore.EventModified) != (ev.Before != nil) {
			t.Fatalf("revision %d: %v (before %v), want %v", rev, ev.Type, ev.Before != nil, want)
		}
	}
	wg.Wait()
	if w.NextRevision() != writers*each+1 {
		t.Errorf("NextRevision = %d", w.NextRevision())
	}
	if _, err := s.Delete(ctx, claimstore.Key{"ns", "w0-0"}, claimstore.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	ev, err := w.Next(ctx)
	if err != nil || ev.Type != claimstore.EventDeleted || ev.Claim == nil || ev.Before == nil {
		t.Errorf("delete event %+v %v", ev, err)
	}

	// Cancelling the context ends a waiting Next.
	done := make(chan error)
	go func() {
		_, err := w.Next(ctx)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Next after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after its context was cancelled")
	}

	// Close of the store ends a waiting Next of another watcher.
	w2, err := s.Watch(context.Background(), 0, claimstore.WatchOptions{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := w2.Next(context.Background())
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	if err := <-done; !errors.Is(err, claimstore.ErrClosed) {
		t.Errorf("Next after the store's Close: %v", err)
	}
	w2.Close()
}

func TestWatchOfCompactedRevisions(t *testing.T) {
	s, _ := open(t, claimstore.Options{FeedHistoryRevisions: 1})
	for i := 0; i < 5; i++ {
		put(t, s, "ns", "c"+strconv.Itoa(i), "{}")
	}
	_, err := s.Watch(context.Background(), 1, claimstore.WatchOptions{})
	var ce *claimstore.CompactedError
	if !errors.Is(err, claimstore.ErrCompacted) || !errors.As(err, &ce) || ce.CompactRevision < 1 {
		t.Errorf("watch from 1: %v", err)
	}
	s2, _ := open(t, claimstore.Options{DisableFeed: true})
	if _, err := s2.Watch(context.Background(), 0, claimstore.WatchOptions{}); !errors.Is(err, claimstore.ErrRefused) {
		t.Errorf("watch without a feed: %v", err)
	}
}

// rss is the process's resident memory in bytes.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// No leak: open/close cycles and reads, after a warm-up, leave the
// resident memory where it was (a leaked store or record per iteration
// would grow it by far more than the bound).
func TestNoLeakOverOpenCloseAndReads(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := filepath.Join(t.TempDir(), "db")
	cycle := func(reads int) {
		s, err := claimstore.Open(ctx, dir, claimstore.Options{BlockCacheBytes: 1 << 20, WriteBufferBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		put(t, s, "ns", "a", allocatedJSON("gpu-0"))
		for i := 0; i < reads; i++ {
			c, err := s.Get(claimstore.Key{"ns", "a"})
			if err != nil || c.Allocation() == nil {
				t.Fatal(err)
			}
			if _, err := s.Get(claimstore.Key{"ns", "missing"}); !errors.Is(err, claimstore.ErrNotFound) {
				t.Fatal(err)
			}
			if i%100 == 0 {
				a, _ := s.AllocatedDevices()
				a.Find(driver, pool, "gpu-0")
				a.Close()
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		cycle(2000)
	}
	runtime_GC()
	before := rss(t)
	for i := 0; i < 100; i++ {
		cycle(2000)
	}
	runtime_GC()
	after := rss(t)
	t.Logf("resident memory %d MiB -> %d MiB over 100 open/close cycles and 400,000 reads", before>>20, after>>20)
	if after-before > 16<<20 {
		t.Errorf("resident memory grew by %d MiB", (after-before)>>20)
	}
}

// Decode reads YAML as it reads JSON (kubectl get -o yaml, documents
// separated by ---), and a refusal names the YAML's line and column.
func TestDecodeReadsYaml(t *testing.T) {
	backup := []byte("apiVersion: v1\nkind: List\nitems:\n" +
		"- apiVersion: resource.k8s.io/v1\n  kind: ResourceClaim\n" +
		"  metadata: {name: a, namespace: ns, uid: u-a}\n  status: {}\n" +
		"- apiVersion: resource.k8s.io/v1\n  kind: ResourceClaim\n" +
		"  metadata: {name: b, namespace: ns, uid: u-b, generation: 0x10}\n  status: {}\n")
	decoded, err := claimstore.Decode(backup)
	if err != nil {
		t.Fatal(err)
	}
	if len(decoded) != 2 || decoded[0].Claim.Name() != "a" || decoded[1].Claim.Name() != "b" {
		t.Fatalf("decoded %d claims: %+v", len(decoded), decoded)
	}
	bad := bytes.Replace(backup, []byte("name: b"), []byte("name: [b]"), 1)
	_, err = claimstore.Decode(bad)
	if !errors.Is(err, claimstore.ErrInvalid) ||
		!strings.Contains(err.Error(), "line 8, column 3 (document 0, byte ") ||
		!strings.Contains(err.Error(), "items[1].metadata.name: expected a string") {
		t.Fatalf("a bad item: %v", err)
	}
}

// TakenMany against Taken, device by device: candidates from a pool far
// larger than the batch (looked up one by one past the walk's budget), a
// batch that covers the pool (one walk), names past the pool's last
// device, duplicates, and other pools around it.
func TestTakenManyAgreesWithTaken(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	// Neighbouring pools whose names differ in one byte, of each length
	// the walk compares differently (under 4, 4 to 7, 8 to 16, over 16).
	pools := []string{"a-pool", "a-poom", "big", "bih", "pool-0123456", "pool-0123457",
		"a-very-long-pool-name-x", "a-very-long-pool-name-y"}
	for k, p := range pools {
		last := 300 // the first of two neighbours ends earlier: a walk past its end finds the other's
		if k%2 == 0 {
			last = 150
		}
		for i := 0; i < last; i += 1 + i%3 {
			name := p + "-" + strconv.Itoa(i)
			dev := fmt.Sprintf("dev-%03d", i)
			status := `{"allocation":{"devices":{"results":[{"request":"req","driver":"` + driver + `","pool":"` + p +
				`","device":"` + dev + `"}]}}}`
			claim := `{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"` + name +
				`","namespace":"ns","uid":"uid-` + name + `"},"spec":{"devices":{"requests":[{"name":"req"}]}},"status":` + status + `}`
			if _, err := s.PutJSON(ctx, []byte(claim), claimstore.Preconditions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	state, err := s.AllocatedDevices()
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	rng := rand.New(rand.NewSource(1))
	var taken []bool
	for round := 0; round < 200; round++ {
		n := 1 + rng.Intn(400)
		if round%3 == 0 {
			n = 1 + rng.Intn(5) // small batches of a large pool: past the walk's budget
		}
		asked := make([]string, n)
		for i := range asked {
			asked[i] = fmt.Sprintf("dev-%03d", rng.Intn(330)) // some past the pool's last device
		}
		p := append(pools, "a-poon", "pool-0123458")[rng.Intn(len(pools)+2)] // two held by none
		taken = state.TakenMany(driver, p, asked, taken)
		for i, d := range asked {
			if taken[i] != state.Taken(driver, p, d) {
				t.Fatalf("round %d: TakenMany(%s/%s) = %v, Taken says otherwise", round, p, d, taken[i])
			}
		}
	}
}
