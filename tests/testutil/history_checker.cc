#include "testutil/history_checker.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace claimstore::testing {
namespace {

bool Indeterminate(const Call& call) { return call.outcome.code == absl::StatusCode::kUnavailable; }

bool Changes(const Call& call) {
  return call.outcome.code == absl::StatusCode::kOk && call.outcome.changed;
}

std::string Fingerprint(const ClaimModel& model) {
  std::string out = absl::StrCat(model.revision());
  for (const auto& [name, claim] : model.claims())
    absl::StrAppend(&out, ";", name, claim.ToString());
  return out;
}

class Search {
 public:
  Search(const std::vector<Call>& calls, Revisions revisions)
      : calls_(calls), revisions_(revisions) {
    for (size_t i = 0; i < calls.size(); ++i) {
      if (!Indeterminate(calls[i])) required_ |= Bit(i);
      const ModelOutcome& o = calls[i].outcome;
      if (o.code == absl::StatusCode::kOk && !o.changed) reported_.push_back(o.revision);
      if (o.read.has_value()) {
        reported_.push_back(o.read->mod_revision);
        reported_.push_back(o.read->create_revision);
      }
    }
  }

  bool Run(ClaimModel model, uint64_t done) {
    // Calls that change nothing and match here are taken at once.
    for (bool took = true; took;) {
      took = false;
      const int64_t first_return = FirstReturn(done);
      for (size_t i = 0; i < calls_.size() && !took; ++i) {
        const Call& c = calls_[i];
        if ((done & Bit(i)) != 0 || Indeterminate(c) || Changes(c) || c.call_ns > first_return) {
          continue;
        }
        ClaimModel next = model;
        if (Apply(&next, c.op, c.outcome) == c.outcome && next == model) {
          done |= Bit(i);
          took = true;
        }
      }
    }
    if ((done & required_) == required_) return true;
    if (!seen_.insert({done, Fingerprint(model)}).second) return false;
    const int64_t first_return = FirstReturn(done);
    for (size_t i = 0; i < calls_.size(); ++i) {
      const Call& c = calls_[i];
      if ((done & Bit(i)) != 0 || c.call_ns > first_return) continue;
      if (!Indeterminate(c)) {
        ClaimModel next = model;
        if (Apply(&next, c.op, c.outcome) == c.outcome && Run(std::move(next), done | Bit(i))) {
          return true;
        }
        continue;
      }
      // It took effect here, at one of the revisions it may have had (or
      // never: the other branches, which leave it undone).
      std::vector<uint64_t> candidates = {model.revision() + 1};
      if (revisions_ == Revisions::kObserved) {
        for (uint64_t r : reported_) {
          if (r > model.revision() + 1) candidates.push_back(r);
        }
      }
      for (uint64_t r : candidates) {
        ClaimModel next = model;
        Apply(&next, c.op, ModelOutcome{absl::StatusCode::kOk, true, r, std::nullopt});
        if (!(next == model) && Run(std::move(next), done | Bit(i))) return true;
      }
    }
    return false;
  }

 private:
  static uint64_t Bit(size_t i) { return uint64_t{1} << i; }

  ModelOutcome Apply(ClaimModel* model, const ModelOp& op, const ModelOutcome& observed) const {
    return revisions_ == Revisions::kDense ? model->Apply(op) : model->ApplyObserved(op, observed);
  }

  // The earliest return of a call not yet placed whose outcome is known:
  // only calls made before it may go next.
  int64_t FirstReturn(uint64_t done) const {
    int64_t first = INT64_MAX;
    for (size_t i = 0; i < calls_.size(); ++i) {
      if ((done & Bit(i)) == 0 && !Indeterminate(calls_[i]))
        first = std::min(first, calls_[i].return_ns);
    }
    return first;
  }

  const std::vector<Call>& calls_;
  const Revisions revisions_;
  uint64_t required_ = 0;
  std::vector<uint64_t> reported_;  // the revisions no-ops and reads reported
  std::set<std::pair<uint64_t, std::string>> seen_;
};

}  // namespace

bool Linearizable(const ClaimModel& start, const std::vector<Call>& calls, Revisions revisions) {
  if (calls.size() > 64) {
    std::fprintf(stderr, "Linearizable: %zu calls, more than the 64 it checks\n", calls.size());
    std::abort();
  }
  return Search(calls, revisions).Run(start, 0);
}

std::string Describe(const std::vector<Call>& calls) {
  std::vector<std::string> lines;
  for (const Call& c : calls) {
    lines.push_back(absl::StrCat("  t", c.thread, " [", c.call_ns, ", ", c.return_ns, "] ",
                                 c.op.ToString(), " -> ", c.outcome.ToString()));
  }
  return absl::StrJoin(lines, "\n");
}

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace claimstore::testing
