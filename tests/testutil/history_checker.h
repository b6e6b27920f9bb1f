// The linearizability checker of the reliability tests: given concurrent
// calls, each recorded with its call and return times and what it returned,
// is there an order of them that (a) respects real time: a call that
// returned before another was called comes first, and (b) replayed through
// the sequential model (claim_model.h) gives every call exactly what it
// returned: status code, changed or not, and revision?
//
// The search is Wing & Gong's, with memoised (calls done, model state)
// pairs as in Lowe's and Porcupine's checkers. A call that leaves the model
// as it was (a refusal, a no-op, a read) and matches where the search
// stands is taken at once without branching: wherever a linearization puts
// it, it can be moved there (it changes nothing, and every call that
// returned before it was called is already placed). That keeps histories of
// many refused calls, as races produce, cheap to check.
//
// Two kinds of history:
//   - kDense: a local store, whose revisions count its commits; the model
//     gives a change the next revision.
//   - kObserved: the shared mode, whose revisions are etcd's; other keys'
//     writes advance them too. A change takes the revision the call
//     observed, which must be past every change placed before it: etcd's
//     revisions order the changes, and real time must agree.
// In both, a call that returned Unavailable (its outcome unknown: a write
// cut off by a lost connection or a leader change) may have taken effect at
// any time after it was called, or never: the search tries both. Its
// revision, if it took effect, is either the next one or one that a no-op
// or a read reported as a claim's.
//
// Thread-safety: none; a function of its arguments.
#ifndef CLAIMSTORE_TESTS_TESTUTIL_HISTORY_CHECKER_H_
#define CLAIMSTORE_TESTS_TESTUTIL_HISTORY_CHECKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "testutil/claim_model.h"

namespace claimstore::testing {

struct Call {
  int thread = 0;  // who made the call (a thread, or process and thread)
  ModelOp op;
  int64_t call_ns = 0, return_ns = 0;  // one clock for every caller
  ModelOutcome outcome;
};

enum class Revisions { kDense, kObserved };

// True when `calls` (at most 64) are linearizable from `start`.
bool Linearizable(const ClaimModel& start, const std::vector<Call>& calls, Revisions revisions);

// The calls, a line each: "  t3 [call, return] reserve c pod-1 -> changed @7".
std::string Describe(const std::vector<Call>& calls);

// The current time on the clock calls are recorded with (CLOCK_MONOTONIC:
// one clock for every process of the machine).
int64_t NowNs();

}  // namespace claimstore::testing

#endif  // CLAIMSTORE_TESTS_TESTUTIL_HISTORY_CHECKER_H_
