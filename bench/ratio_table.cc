// Prints the ratio table of Google Benchmark JSON files whose benchmarks are
// named BM_<Operation>/<backend>/<size-or-input>[/...]: per operation and
// size, claimstore's time and each other backend's time divided by it (above
// 1: claimstore is faster). With repetitions, medians are used.
//
//   ratio_table FILE.json...
#include <simdjson.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace {

// BM_GroupCommitPaired's counters.
struct Paired {
  std::string size;
  double one = 0, two = 0, ratio = 0;
  double ratio_whole = 0;  // 0: not reported
};

struct Result {
  double ns = 0;           // real time per iteration, in ns
  double items_per_s = 0;  // when the benchmark counts items
};

double ToNs(double value, std::string_view unit) {
  if (unit == "us") return value * 1e3;
  if (unit == "ms") return value * 1e6;
  if (unit == "s") return value * 1e9;
  return value;
}

std::string Time(double ns) {
  if (ns >= 1e6) return absl::StrFormat("%.1f ms", ns / 1e6);
  if (ns >= 1e3) return absl::StrFormat("%.2f µs", ns / 1e3);
  return absl::StrFormat("%.0f ns", ns);
}

}  // namespace

int main(int argc, char** argv) {
  // (operation, size) -> backend -> result; keeps the order of first sight.
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::pair<std::string, std::string>, std::map<std::string, Result>> table;
  std::vector<Paired> paired;
  std::set<std::string> backends;
  std::vector<std::string> notes;
  for (int i = 1; i < argc; ++i) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.load(argv[i]).get(doc)) {
      std::fprintf(stderr, "ratio_table: cannot read %s\n", argv[i]);
      return 2;
    }
    simdjson::dom::array benchmarks;
    if (doc["benchmarks"].get_array().get(benchmarks)) continue;
    // Runs repeated with aggregates are read from their median; the others
    // (e.g. a restore run once) from their one iteration entry.
    std::set<std::string> has_median;
    for (simdjson::dom::element b : benchmarks) {
      std::string_view aggregate, run_name;
      if (!b["aggregate_name"].get_string().get(aggregate) && aggregate == "median" &&
          !b["run_name"].get_string().get(run_name)) {
        has_median.insert(std::string(run_name));
      }
    }
    for (simdjson::dom::element b : benchmarks) {
      std::string_view run, aggregate_name;
      Paired p;
      const bool median_or_single =
          b["aggregate_name"].get_string().get(aggregate_name) || aggregate_name == "median";
      if (!b["run_name"].get_string().get(run) && run.rfind("BM_GroupCommitPaired/", 0) == 0 &&
          median_or_single && !b["one_writer"].get_double().get(p.one) &&
          !b["two_writers"].get_double().get(p.two) && !b["ratio"].get_double().get(p.ratio)) {
        if (b["ratio_whole"].get_double().get(p.ratio_whole)) p.ratio_whole = 0;  // absent
        std::vector<std::string> parts = absl::StrSplit(std::string(run), '/');
        p.size = parts.size() > 2 ? parts[2] : "";
        paired.push_back(p);
        continue;
      }
    }
    for (simdjson::dom::element b : benchmarks) {
      std::string_view name, unit, aggregate;
      double real = 0;
      if (b["run_name"].get_string().get(name) || b["real_time"].get_double().get(real) ||
          b["time_unit"].get_string().get(unit)) {
        continue;
      }
      const bool is_aggregate = !b["aggregate_name"].get_string().get(aggregate);
      if (has_median.contains(std::string(name)) ? aggregate != "median" : is_aggregate) continue;
      std::vector<std::string> parts =
          absl::StrSplit(absl::string_view(name.data(), name.size()), '/');
      if (parts.size() < 3 || parts[0].rfind("BM_", 0) != 0) continue;
      std::string op = parts[0].substr(3);
      for (size_t p = 3; p < parts.size(); ++p) {
        if (parts[p].rfind("threads:", 0) == 0) absl::StrAppend(&op, " (", parts[p], ")");
      }
      const std::pair<std::string, std::string> key{op, parts[2]};
      if (!table.contains(key)) order.push_back(key);
      Result& r = table[key][parts[1]];
      r.ns = ToNs(real, unit);
      double items = 0;
      if (!b["items_per_second"].get_double().get(items)) r.items_per_s = items;
      backends.insert(parts[1]);
    }
  }
  backends.erase("claimstore");
  std::vector<std::string> others(backends.begin(), backends.end());
  // Header.
  std::string header = "| operation | size | claimstore |";
  std::string rule = "|---|---|---|";
  for (const std::string& b : others) {
    absl::StrAppend(&header, " ", b, " |");
    absl::StrAppend(&rule, "---|");
  }
  std::printf("%s\n%s\n", header.c_str(), rule.c_str());
  for (const auto& key : order) {
    const auto& row = table[key];
    auto self = row.find("claimstore");
    if (self == row.end()) continue;
    std::string line =
        absl::StrCat("| ", key.first, " | ", key.second, " | ", Time(self->second.ns));
    if (key.first.rfind("Restore", 0) == 0 && self->second.items_per_s > 0) {
      absl::StrAppend(&line, absl::StrFormat(" (%.0f claims/s)", self->second.items_per_s));
    }
    absl::StrAppend(&line, " |");
    for (const std::string& b : others) {
      auto it = row.find(b);
      if (it == row.end()) {
        absl::StrAppend(&line, " |");
      } else {
        absl::StrAppend(&line, absl::StrFormat(" %s (%.2f×) |", Time(it->second.ns),
                                               it->second.ns / self->second.ns));
      }
    }
    std::printf("%s\n", line.c_str());
  }
  // Group commit: the same writes from two threads against one.
  for (const auto& key : order) {
    if (key.first != "ReserveSynced (threads:2)") continue;
    const auto one = table.find({"ReserveSynced (threads:1)", key.second});
    const auto two = table.find(key);
    if (one == table.end()) continue;
    const double a = one->second.at("claimstore").items_per_s;
    const double b = two->second.at("claimstore").items_per_s;
    if (a > 0) {
      std::printf(
          "\nGroup commit (sync_writes, %s claims): 1 thread %.0f writes/s, 2 threads %.0f "
          "writes/s: %.2f× (separate runs, medians)\n",
          key.second.c_str(), a, b, b / a);
    }
  }
  for (const Paired& p : paired) {
    std::printf(
        "Group commit, paired (one and two writers alternating every second, the first "
        "300 ms of each left out, %s claims): 1 writer %.0f writes/s, 2 writers %.0f "
        "writes/s: %.2f×",
        p.size.c_str(), p.one, p.two, p.ratio);
    if (p.ratio_whole > 0) std::printf(" (whole seconds: %.2f×)", p.ratio_whole);
    std::printf("\n");
  }
  std::printf(
      "\nRatios are the other backend's time / claimstore's (above 1: claimstore is "
      "faster).\n");
  return 0;
}
