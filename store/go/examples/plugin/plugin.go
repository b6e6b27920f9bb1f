// Package plugin is the claim side of a DRA scheduler plugin written
// against claimstore, as a plugin author would copy it: PreFilter reads the
// pod's claims and what is allocated, Filter picks free devices, PreBind
// writes the allocations and the reservations with compare-and-set, and
// Unreserve undoes what this cycle wrote when a later step fails.
//
// Several schedulers may run it against one store at once: a write that
// lost a race (the claim changed since PreFilter read it, or a device was
// taken meanwhile) fails with claimstore.ErrConflict, and the pod is
// requeued (ErrRequeue), as kube-scheduler requeues a pod whose claim
// update hit a conflict.
package plugin

import (
	"context"
	"errors"
	"fmt"

	"claimstore.dev/claimstore"
)

// ErrUnschedulable: no candidate device is free for a claim.
var ErrUnschedulable = errors.New("plugin: no free device for a claim")

// ErrRequeue: the cycle lost a race with another scheduler; try the pod
// again (errors.Is(err, claimstore.ErrConflict) holds too).
var ErrRequeue = errors.New("plugin: lost a race, requeue the pod")

// Plugin is safe for concurrent use: each scheduling cycle has its own
// State.
type Plugin struct {
	Store *claimstore.Store
	// NodeName the allocations are restricted to.
	NodeName string
}

// State is what one scheduling cycle knows and decided for one pod.
type State struct {
	pod       claimstore.Consumer
	claims    []claimState
	allocated *claimstore.AllocatedState
}

type claimState struct {
	key     claimstore.Key
	uid     string
	seen    uint64                    // the mod revision PreFilter read
	reserve bool                      // the pod is not yet in reservedFor
	pick    []claimstore.DeviceResult // Filter's choice, for a claim to allocate
	// What PreBind wrote, for Unreserve.
	wroteAllocation, wroteReservation bool
	written                           uint64
}

// PreFilter reads the pod's claims at one snapshot and takes the allocated
// state (constant time): everything Filter needs, for every node.
func (p *Plugin) PreFilter(pod claimstore.Consumer, claims []claimstore.Key) (*State, error) {
	read, err := p.Store.GetMany(claims)
	if err != nil {
		return nil, err
	}
	records := read.Claims
	st := &State{pod: pod}
	for i, c := range records {
		if c == nil {
			return nil, fmt.Errorf("claim %v: %w", claims[i], claimstore.ErrNotFound)
		}
		cs := claimState{key: claims[i], uid: c.UID(), seen: c.ModRevision(), reserve: true}
		for _, r := range c.ReservedFor() {
			if r.UID == pod.UID {
				cs.reserve = false
			}
		}
		st.claims = append(st.claims, cs)
	}
	if st.allocated, err = p.Store.AllocatedDevices(); err != nil {
		return nil, err
	}
	return st, nil
}

// Filter picks, for each claim that is not allocated, the first candidate
// device (of the node's ResourceSlices, in the scheduler's preference) that
// the allocated state shows free. Already allocated claims keep theirs.
func (p *Plugin) Filter(st *State, candidates map[claimstore.Key][]claimstore.DeviceResult) error {
	for i := range st.claims {
		cs := &st.claims[i]
		c, err := p.Store.Get(cs.key)
		if err != nil {
			return err
		}
		if c.Allocation() != nil {
			continue
		}
		cs.pick = nil
		for _, d := range candidates[cs.key] {
			if !st.allocated.Taken(d.Driver, d.Pool, d.Device) {
				cs.pick = []claimstore.DeviceResult{d}
				break
			}
		}
		if cs.pick == nil {
			return fmt.Errorf("claim %v: %w", cs.key, ErrUnschedulable)
		}
	}
	return nil
}

// PreBind writes what the cycle decided: each allocation, then the pod in
// reservedFor, each write conditional on the claim being as PreFilter read
// it (mod revision and uid). On a lost race it undoes its own writes and
// returns ErrRequeue.
func (p *Plugin) PreBind(ctx context.Context, st *State) error {
	defer st.allocated.Close()
	for i := range st.claims {
		cs := &st.claims[i]
		rev := cs.seen
		if cs.pick != nil {
			r, err := p.Store.Allocate(ctx, cs.key, cs.pick, claimstore.AllocateOptions{NodeName: p.NodeName},
				claimstore.Preconditions{ModRevision: &rev, UID: &cs.uid})
			if err != nil {
				return p.fail(ctx, st, err)
			}
			cs.wroteAllocation, cs.written, rev = true, r.Revision, r.Revision
		}
		if cs.reserve {
			r, err := p.Store.Reserve(ctx, cs.key, st.pod, claimstore.Preconditions{ModRevision: &rev, UID: &cs.uid})
			if err != nil {
				return p.fail(ctx, st, err)
			}
			cs.wroteReservation, cs.written = true, r.Revision
		}
	}
	return nil
}

func (p *Plugin) fail(ctx context.Context, st *State, err error) error {
	p.Unreserve(ctx, st)
	if errors.Is(err, claimstore.ErrConflict) {
		return requeueError{err}
	}
	return err
}

// requeueError is ErrRequeue that unwraps to the conflict (Go 1.19 has no
// multiple %w).
type requeueError struct{ conflict error }

func (e requeueError) Error() string        { return ErrRequeue.Error() + ": " + e.conflict.Error() }
func (e requeueError) Is(target error) bool { return target == ErrRequeue }
func (e requeueError) Unwrap() error        { return e.conflict }

// Unreserve undoes what this cycle wrote: the pod leaves reservedFor, and
// an allocation this cycle made is cleared, but only while the claim is as
// this cycle left it (never another scheduler's later write). It also
// releases the cycle's allocated state: call it for every cycle that does
// not bind (a Filter that failed, a later plugin that refused).
func (p *Plugin) Unreserve(ctx context.Context, st *State) {
	st.allocated.Close()
	for i := len(st.claims) - 1; i >= 0; i-- {
		cs := &st.claims[i]
		if cs.wroteReservation {
			if r, err := p.Store.Unreserve(ctx, cs.key, st.pod.UID, claimstore.Preconditions{UID: &cs.uid}); err == nil {
				cs.written = r.Revision
			}
			cs.wroteReservation = false
		}
		if cs.wroteAllocation {
			rev := cs.written
			p.Store.Deallocate(ctx, cs.key, claimstore.Preconditions{ModRevision: &rev, UID: &cs.uid})
			cs.wroteAllocation = false
		}
	}
}
