package k8s

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"claimstore.dev/claimstore"
)

// ObjectOf returns what a record keeps of claim besides its status (the
// Tracker writes it with every claim; Claim.Object reads it back): the
// claim's metadata, without managedFields, and spec, as the API's
// protobuf.
func ObjectOf(claim *resourcev1.ResourceClaim) ([]byte, error) {
	rest := resourcev1.ResourceClaim{ObjectMeta: claim.ObjectMeta, Spec: claim.Spec}
	rest.ManagedFields = nil
	return rest.Marshal()
}

// FromRecord returns the claim a claimstore record holds, as
// resource.k8s.io/v1's type, its status read from the record's fields
// directly (no JSON in between). Metadata and spec come from the object the
// record keeps (ObjectOf) when it keeps one; otherwise they are what
// claimstore keeps of them (name, namespace, uid, resourceVersion,
// generation, creation and deletion timestamps; the spec's request names).
// An error means the record holds a quantity or an object that does not
// parse, which a record written by claimstore never does.
func FromRecord(c *claimstore.Claim) (*resourcev1.ResourceClaim, error) {
	if object := c.Object(); object != nil {
		out := &resourcev1.ResourceClaim{}
		if err := out.Unmarshal(object); err != nil {
			return nil, fmt.Errorf("claim %s/%s: the kept object: %w", c.Namespace(), c.Name(), err)
		}
		out.TypeMeta = metav1.TypeMeta{Kind: "ResourceClaim", APIVersion: resourcev1.SchemeGroupVersion.String()}
		status, err := StatusFromRecord(c)
		if err != nil {
			return nil, fmt.Errorf("claim %s/%s: %w", c.Namespace(), c.Name(), err)
		}
		out.Status = status
		return out, nil
	}
	out := &resourcev1.ResourceClaim{
		TypeMeta: metav1.TypeMeta{Kind: "ResourceClaim", APIVersion: resourcev1.SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{
			Name:            c.Name(),
			Namespace:       c.Namespace(),
			UID:             types.UID(c.UID()),
			ResourceVersion: c.ResourceVersion(),
			Generation:      c.Generation(),
		},
	}
	if t := c.CreationTimestamp(); t != nil {
		out.CreationTimestamp = metav1.NewTime(*t)
	}
	if t := c.DeletionTimestamp(); t != nil {
		out.DeletionTimestamp = ptrTime(*t)
	}
	for _, r := range c.SpecRequests() {
		req := resourcev1.DeviceRequest{Name: r.Name}
		for _, sub := range r.Subrequests {
			req.FirstAvailable = append(req.FirstAvailable, resourcev1.DeviceSubRequest{Name: sub})
		}
		out.Spec.Devices.Requests = append(out.Spec.Devices.Requests, req)
	}
	status, err := StatusFromRecord(c)
	if err != nil {
		return nil, fmt.Errorf("claim %s/%s: %w", c.Namespace(), c.Name(), err)
	}
	out.Status = status
	return out, nil
}

// StatusFromRecord returns a record's status as resource.k8s.io/v1's type.
func StatusFromRecord(c *claimstore.Claim) (resourcev1.ResourceClaimStatus, error) {
	var st resourcev1.ResourceClaimStatus
	if a := c.Allocation(); a != nil {
		alloc, err := allocationOf(a)
		if err != nil {
			return st, err
		}
		st.Allocation = alloc
	}
	if n := c.NumReservedFor(); n > 0 {
		st.ReservedFor = make([]resourcev1.ResourceClaimConsumerReference, n)
		for i := range st.ReservedFor {
			r := c.ReservedForAt(i)
			st.ReservedFor[i] = resourcev1.ResourceClaimConsumerReference{
				APIGroup: r.APIGroup, Resource: r.Resource, Name: r.Name, UID: types.UID(r.UID)}
		}
	}
	for i, d := range c.DeviceStatuses() {
		if i == 0 {
			st.Devices = make([]resourcev1.AllocatedDeviceStatus, 0, len(c.DeviceStatuses()))
		}
		ds := resourcev1.AllocatedDeviceStatus{Driver: d.Driver, Pool: d.Pool, Device: d.Device, ShareID: d.ShareID}
		if d.Conditions != nil {
			ds.Conditions = make([]metav1.Condition, len(d.Conditions))
			for j, cond := range d.Conditions {
				mc := metav1.Condition{Type: cond.Type, Status: metav1.ConditionStatus(cond.Status),
					ObservedGeneration: cond.ObservedGeneration, Reason: cond.Reason, Message: cond.Message}
				if cond.LastTransitionTime != nil {
					mc.LastTransitionTime = metav1.NewTime(*cond.LastTransitionTime)
				}
				ds.Conditions[j] = mc
			}
		}
		if d.Data != nil {
			ds.Data = &runtime.RawExtension{Raw: []byte(d.Data)}
		}
		if nd := d.NetworkData; nd != nil {
			ds.NetworkData = &resourcev1.NetworkDeviceData{InterfaceName: nd.InterfaceName, IPs: nd.IPs,
				HardwareAddress: nd.HardwareAddress}
		}
		st.Devices = append(st.Devices, ds)
	}
	return st, nil
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}

func allocationOf(a *claimstore.Allocation) (*resourcev1.AllocationResult, error) {
	out := &resourcev1.AllocationResult{}
	if a.AllocationTimestamp != nil {
		out.AllocationTimestamp = ptrTime(*a.AllocationTimestamp)
	}
	if a.Results != nil {
		out.Devices.Results = make([]resourcev1.DeviceRequestAllocationResult, len(a.Results))
		for i := range a.Results {
			r, err := resultOf(&a.Results[i])
			if err != nil {
				return nil, fmt.Errorf("status.allocation.devices.results[%d]: %w", i, err)
			}
			out.Devices.Results[i] = r
		}
	}
	if a.Config != nil {
		out.Devices.Config = make([]resourcev1.DeviceAllocationConfiguration, len(a.Config))
		for i, cfg := range a.Config {
			c := resourcev1.DeviceAllocationConfiguration{
				Source: resourcev1.AllocationConfigSource(cfg.Source), Requests: cfg.Requests}
			if cfg.Opaque != nil {
				c.Opaque = &resourcev1.OpaqueDeviceConfiguration{Driver: cfg.Opaque.Driver,
					Parameters: runtime.RawExtension{Raw: []byte(cfg.Opaque.Parameters)}}
			}
			out.Devices.Config[i] = c
		}
	}
	if ns := a.NodeSelector; ns != nil {
		out.NodeSelector = &corev1.NodeSelector{}
		if ns.Terms != nil {
			out.NodeSelector.NodeSelectorTerms = make([]corev1.NodeSelectorTerm, len(ns.Terms))
			for i, t := range ns.Terms {
				out.NodeSelector.NodeSelectorTerms[i] = corev1.NodeSelectorTerm{
					MatchExpressions: requirementsOf(t.MatchExpressions),
					MatchFields:      requirementsOf(t.MatchFields),
				}
			}
		}
	}
	return out, nil
}

func requirementsOf(rs []claimstore.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	if rs == nil {
		return nil
	}
	out := make([]corev1.NodeSelectorRequirement, len(rs))
	for i, r := range rs {
		out[i] = corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOperator(r.Operator), Values: r.Values}
	}
	return out
}

func resultOf(d *claimstore.DeviceResult) (resourcev1.DeviceRequestAllocationResult, error) {
	r := resourcev1.DeviceRequestAllocationResult{
		Request: d.Request, Driver: d.Driver, Pool: d.Pool, Device: d.Device,
		AdminAccess:              d.AdminAccess,
		BindingConditions:        d.BindingConditions,
		BindingFailureConditions: d.BindingFailureConditions,
	}
	if d.ShareID != nil {
		id := types.UID(*d.ShareID)
		r.ShareID = &id
	}
	if d.Tolerations != nil {
		r.Tolerations = make([]resourcev1.DeviceToleration, len(d.Tolerations))
		for i, t := range d.Tolerations {
			r.Tolerations[i] = resourcev1.DeviceToleration{Key: t.Key,
				Operator: resourcev1.DeviceTolerationOperator(t.Operator), Value: t.Value,
				Effect: resourcev1.DeviceTaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds}
		}
	}
	if d.ConsumedCapacity != nil {
		r.ConsumedCapacity = make(map[resourcev1.QualifiedName]resource.Quantity, len(d.ConsumedCapacity))
		for name, q := range d.ConsumedCapacity {
			qty, err := resource.ParseQuantity(q)
			if err != nil {
				return r, fmt.Errorf("consumedCapacity[%s]: %w", name, err)
			}
			r.ConsumedCapacity[resourcev1.QualifiedName(name)] = qty
		}
	}
	if d.SkipNodeOperations != nil {
		r.SkipNodeOperations = make([]resourcev1.SkipNodeOperation, len(d.SkipNodeOperations))
		for i, op := range d.SkipNodeOperations {
			r.SkipNodeOperations[i] = resourcev1.SkipNodeOperation(op)
		}
	}
	return r, nil
}
