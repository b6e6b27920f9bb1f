package claimstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"claimstore.dev/claimstore"
)

func withRV(claim []byte, rv string) []byte {
	return []byte(strings.Replace(string(claim), `"uid":`, `"resourceVersion":"`+rv+`","uid":`, 1))
}

// What claimstore follow and the Kubernetes Tracker write: the cluster's
// claims as it has them, a position that only moves forward, replays
// skipped, and a bad batch refused whole.
func TestApplyClusterEventsJSON(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	events := `{"type":"ADDED","object":` + string(withRV(claimJSON("ns", "a", "{}"), "10")) + "}\n" +
		`{"type":"ADDED","object":` + string(withRV(claimJSON("ns", "b", "{}"), "11")) + "}\n"
	results, err := s.ApplyClusterEventsJSON(ctx, []byte(events), nil, 11)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || !results[0].Changed || !results[1].Changed || results[1].Revision <= results[0].Revision {
		t.Fatalf("results %+v", results)
	}
	replay, err := s.ApplyClusterEventsJSON(ctx, withRV(claimJSON("ns", "a", "{}"), "9"), nil, 9)
	if err != nil || len(replay) != 1 || replay[0].Changed {
		t.Fatalf("replay of an older version: %+v %v", replay, err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.FollowResourceVersion != 11 || st.Claims != 2 {
		t.Fatalf("position %d, %d claims; want 11 and 2", st.FollowResourceVersion, st.Claims)
	}
	bad := string(withRV(claimJSON("ns", "c", "{}"), "12")) + "\n" +
		string(withRV(claimJSON("ns", "d", `{"reservedFor":[{"resource":"pods"}]}`), "13"))
	if _, err := s.ApplyClusterEventsJSON(ctx, []byte(bad), nil, 13); !errors.Is(err, claimstore.ErrInvalid) ||
		!strings.Contains(err.Error(), "status.reservedFor[0]") {
		t.Fatalf("a bad batch: %v", err)
	}
	if st2, _ := s.Stats(); st2.Claims != 2 || st2.Revision != st.Revision || st2.FollowResourceVersion != 11 {
		t.Fatalf("a refused batch changed the store: %+v", st2)
	}
	deleted := `{"type":"DELETED","object":` + string(withRV(claimJSON("ns", "b", "{}"), "14")) + "}"
	if _, err := s.ApplyClusterEventsJSON(ctx, []byte(deleted), nil, 14); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(claimstore.Key{Namespace: "ns", Name: "b"}); !errors.Is(err, claimstore.ErrNotFound) {
		t.Fatalf("deleted claim: %v", err)
	}
}

// A write with a context that has ended is not made; Watcher.Next returns
// when its own context ends, and the watcher stays usable.
func TestContextsOfWritesAndNext(t *testing.T) {
	s, _ := open(t, claimstore.Options{})
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.PutJSON(done, claimJSON("ns", "a", "{}"), claimstore.Preconditions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutJSON with an ended context: %v", err)
	}
	if _, err := s.Get(claimstore.Key{Namespace: "ns", Name: "a"}); !errors.Is(err, claimstore.ErrNotFound) {
		t.Fatalf("a write with an ended context was made: %v", err)
	}
	if _, err := claimstore.Open(done, t.TempDir(), claimstore.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with an ended context: %v", err)
	}
	w, err := s.Watch(ctx, 0, claimstore.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	short, cancelShort := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancelShort()
	began := time.Now()
	if _, err := w.Next(short); !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 500*time.Millisecond {
		t.Fatalf("Next with a 30 ms context: %v after %v", err, time.Since(began))
	}
	if _, err := s.PutJSON(ctx, claimJSON("ns", "b", "{}"), claimstore.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	if e, err := w.Next(ctx); err != nil || e.Key.Name != "b" {
		t.Fatalf("the watcher after a Next that timed out: %v %v", e.Key, err)
	}
}
