package claimstore_test

import (
	"errors"
	"strings"
	"testing"

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
	results, err := s.ApplyClusterEventsJSON([]byte(events), nil, 11)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || !results[0].Changed || !results[1].Changed || results[1].Revision <= results[0].Revision {
		t.Fatalf("results %+v", results)
	}
	replay, err := s.ApplyClusterEventsJSON(withRV(claimJSON("ns", "a", "{}"), "9"), nil, 9)
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
	if _, err := s.ApplyClusterEventsJSON([]byte(bad), nil, 13); !errors.Is(err, claimstore.ErrInvalid) ||
		!strings.Contains(err.Error(), "status.reservedFor[0]") {
		t.Fatalf("a bad batch: %v", err)
	}
	if st2, _ := s.Stats(); st2.Claims != 2 || st2.Revision != st.Revision || st2.FollowResourceVersion != 11 {
		t.Fatalf("a refused batch changed the store: %+v", st2)
	}
	deleted := `{"type":"DELETED","object":` + string(withRV(claimJSON("ns", "b", "{}"), "14")) + "}"
	if _, err := s.ApplyClusterEventsJSON([]byte(deleted), nil, 14); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(claimstore.Key{Namespace: "ns", Name: "b"}); !errors.Is(err, claimstore.ErrNotFound) {
		t.Fatalf("deleted claim: %v", err)
	}
}
