package scheduler

import (
	"errors"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"claimstore.dev/claimstore"
)

// The plugin's metrics, on the scheduler's /metrics (component-base's
// legacy registry, which kube-scheduler serves). Each carries the store's
// directory as the label "store".
var (
	writeDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "claimstore", Name: "write_duration_seconds",
		Help:    "Writes of the tracker to the store, by operation (apply: a claim as the API server has it; delete; list: a whole list) and result (ok or the error's code).",
		Buckets: metrics.ExponentialBuckets(0.00001, 2, 20), StabilityLevel: metrics.ALPHA,
	}, []string{"store", "operation", "result"})
	watchLag = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "claimstore", Name: "tracker_watch_lag_seconds",
		Help:    "Time from the API server's write of a claim (its newest managedFields time: whole seconds, the API server's clock) to the tracker applying its watch event; a watch resumed after a restart counts the time it was down.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 300}, StabilityLevel: metrics.ALPHA,
	}, []string{"store"})

	descRevision    = newDesc("store_revision", "The store's revision (the shared mode: etcd's).")
	descClaims      = newDesc("store_claims", "Claims in the store.")
	descPosition    = newDesc("tracker_watch_resource_version", "The resourceVersion of ResourceClaims the tracker resumes its watch from after a restart.")
	descTracked     = newDesc("tracker_claims", "Claims the tracker answers the scheduler with.")
	descPending     = newDesc("tracker_pending_allocations", "Allocations the scheduler signalled and has not yet removed.")
	descHeld        = newDesc("tracker_held_claims", "Claims the tracker counts that the store refused for a device another claim holds (double allocations in the cluster).")
	descSignalled   = newDesc("tracker_pending_allocations_signalled_total", "SignalClaimPendingAllocation calls.")
	descAssumed     = newDesc("tracker_assumed_total", "Claims the scheduler assumed after its API call.")
	descRefused     = newDesc("tracker_refused_total", "Claims of the API server the store refused (a broken rule, a device another claim holds, a full disk).")
	descConflicts   = newDesc("tracker_conflicts_total", "Of the refused claims, those holding a device another claim holds.")
	descFollowing   = newDesc("etcd_following", "With etcdEndpoints: 1 while the ledger's mirror follows etcd, 0 while it cannot.")
	descUnreachable = newDesc("etcd_unreachable_seconds", "With etcdEndpoints: how long the ledger's mirror has not been able to follow etcd (0 while it follows).")
	descLedgerRev   = newDesc("ledger_revision", "With etcdEndpoints: the ledger's revision (etcd's) its mirror has applied.")
	descLedger      = newDesc("ledger_claims", "With etcdEndpoints: claims the ledger holds (allocated or being allocated by any scheduler of the pool).")
	descElsewhere   = newDesc("ledger_elsewhere_claims", "With etcdEndpoints: claims of the ledger the tracker does not count yet (being allocated by another scheduler).")
	descLRefused    = newDesc("ledger_refused_total", "With etcdEndpoints: allocations the ledger refused because another claim holds a device (Reserve failed, the pod is tried again).")
	descLReaped     = newDesc("ledger_reaped_total", "With etcdEndpoints: ledger entries of claims the API server had not allocated, taken out after ledgerReapAfter (a scheduler killed between Reserve and its API write).")
	descLConflicts  = newDesc("ledger_conflicts_total", "With etcdEndpoints: claims the cluster has allocated that the ledger refused (double allocations made without it).")
)

func newDesc(name, help string) *metrics.Desc {
	return metrics.NewDesc("claimstore_"+name, help, []string{"store"}, nil, metrics.ALPHA, "")
}

var registerOnce sync.Once

// registerMetrics registers the plugin's metrics once for the process.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(writeDuration, watchLag)
		legacyregistry.CustomMustRegister(&collector{})
	})
}

// observers are the tracker's hooks that feed the histograms of the store
// in dir.
func observers(dir string) (func(string, time.Duration, error), func(time.Duration)) {
	write := func(op string, took time.Duration, err error) {
		writeDuration.WithLabelValues(dir, op, resultOf(err)).Observe(took.Seconds())
	}
	lag := func(d time.Duration) { watchLag.WithLabelValues(dir).Observe(max(d, 0).Seconds()) }
	return write, lag
}

// resultOf names a write's result: ok, or which of the store's errors.
func resultOf(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{{claimstore.ErrConflict, "conflict"}, {claimstore.ErrInvalid, "invalid"}, {claimstore.ErrNotFound, "not_found"},
		{claimstore.ErrNoSpace, "no_space"}, {claimstore.ErrUnavailable, "unavailable"}, {claimstore.ErrClosed, "closed"}} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	if err == nil {
		return "ok"
	}
	return "error"
}

// collector reads the figures of every tracker at scrape time.
type collector struct {
	metrics.BaseStableCollector
}

func (c *collector) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range []*metrics.Desc{descRevision, descClaims, descPosition, descTracked, descPending, descHeld,
		descSignalled, descAssumed, descRefused, descConflicts, descFollowing, descUnreachable,
		descLedgerRev, descLedger, descElsewhere, descLRefused, descLConflicts, descLReaped} {
		ch <- d
	}
}

func (c *collector) CollectWithStability(ch chan<- metrics.Metric) {
	trackersMu.Lock()
	all := make(map[string]*started, len(trackers))
	for dir, t := range trackers {
		all[dir] = t
	}
	trackersMu.Unlock()
	for dir, s := range all {
		if s.ctx.Err() != nil {
			continue
		}
		t := s.tracker
		gauge := func(d *metrics.Desc, v float64) { ch <- metrics.NewLazyConstMetric(d, metrics.GaugeValue, v, dir) }
		counter := func(d *metrics.Desc, v uint64) {
			ch <- metrics.NewLazyConstMetric(d, metrics.CounterValue, float64(v), dir)
		}
		ts := t.Stats()
		gauge(descPosition, float64(ts.Position))
		gauge(descTracked, float64(ts.Claims))
		gauge(descPending, float64(ts.PendingAllocations))
		gauge(descHeld, float64(ts.Held))
		counter(descSignalled, ts.Signalled)
		counter(descAssumed, ts.Assumed)
		counter(descRefused, ts.Refused)
		counter(descConflicts, ts.Conflicts)
		st, err := t.Store().Stats()
		if err != nil {
			continue
		}
		gauge(descRevision, float64(st.Revision))
		gauge(descClaims, float64(st.Claims))
		if s.ledger != nil {
			gauge(descElsewhere, float64(ts.Elsewhere))
			counter(descLRefused, ts.LedgerRefused)
			counter(descLConflicts, ts.LedgerConflicts)
			counter(descLReaped, ts.LedgerReaped)
			if st, err = s.ledger.Stats(); err != nil {
				continue
			}
			gauge(descLedgerRev, float64(st.Revision))
			gauge(descLedger, float64(st.Claims))
			following, unreachable := 1.0, 0.0
			if !st.EtcdFollowing {
				following = 0
				if !st.EtcdUnreachableSince.IsZero() {
					unreachable = time.Since(st.EtcdUnreachableSince).Seconds()
				}
			}
			gauge(descFollowing, following)
			gauge(descUnreachable, unreachable)
		}
	}
}
