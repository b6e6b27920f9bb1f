// claimstore watch: the store's change feed, as `kubectl get -w
// --output-watch-events` prints a watch (one event per line), on a live
// database (a read-only store following the writer).

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "cli_core.h"
#include "commands.h"

namespace claimstore::cli {
namespace {

constexpr char kWatchUsage[] =
    "Usage: claimstore watch [--from-revision R] [--until-revision N] [-n NS | -A] [-o json]\n"
    "                        [--db DIR]\n"
    "Prints the store's changes as they are committed, from revision R on (default: the\n"
    "changes after now), in revision order, one line per event; with --until-revision,\n"
    "stops once revision N is passed. Safe beside a writer (a live database is followed).\n"
    "-o json prints what `kubectl get -w -o json --output-watch-events` prints, one event\n"
    "per line, with the store revision: {\"type\":\"ADDED\",\"object\":{...},\"revision\":N};\n"
    "`claimstore restore` reads that back. Exits 6 when revision R is no longer in the\n"
    "feed's history (list, then watch from the list's revision + 1).\n";

// The exit code of a watch whose revision was compacted away.
constexpr int kCompactedExit = 6;

struct WatchFlags {
  uint64_t from = 0;
  int64_t until = -1;
  std::string claim_namespace, format;
  bool all_namespaces = false;
};

const char* TypeName(WatchEventType t) {
  switch (t) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kNone:
      break;
  }
  return "";
}

void PrintEvent(const WatchEvent& e, bool json, bool* header) {
  if (json) {
    std::string line = absl::StrCat(R"({"type":")", TypeName(e.type), R"(","object":)");
    AppendClaimJson(*e.record, /*with_type_meta=*/true, &line);
    absl::StrAppend(&line, R"(,"revision":)", e.revision, "}\n");
    std::cout << line << std::flush;
    return;
  }
  if (!*header) {
    std::cout << absl::StrFormat("%-10s %-9s %-20s %s\n", "REVISION", "EVENT", "NAMESPACE", "NAME");
    *header = true;
  }
  std::cout << absl::StrFormat("%-10d %-9s %-20s %s\n", e.revision, TypeName(e.type),
                               e.key.claim_namespace, e.key.name)
            << std::flush;
}

int Watch(const Context& context, const WatchFlags& flags) {
  if (!flags.format.empty() && flags.format != "json") return Usage("-o must be json", kWatchUsage);
  if (flags.all_namespaces && !flags.claim_namespace.empty()) {
    return Usage("-A and -n cannot be used together", kWatchUsage);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  WatchOptions options;
  if (!flags.all_namespaces) {
    options.claim_namespace =
        flags.claim_namespace.empty() ? kDefaultNamespace : flags.claim_namespace;
  }
  absl::StatusOr<std::unique_ptr<Watcher>> watcher = (*store)->Watch(flags.from, options);
  const auto compacted = [](const absl::Status& s) {
    Fail(s);
    return kCompactedExit;
  };
  if (absl::IsOutOfRange(watcher.status())) return compacted(watcher.status());
  if (!watcher.ok()) return Fail(watcher.status());
  const bool json = flags.format == "json";
  bool header = false;
  const auto done = [&] {
    return flags.until >= 0 && (*watcher)->next_revision() > static_cast<uint64_t>(flags.until);
  };
  while (!done()) {
    absl::StatusOr<WatchEvent> e = (*watcher)->Next(absl::Milliseconds(200));
    if (absl::IsDeadlineExceeded(e.status())) continue;
    if (absl::IsOutOfRange(e.status())) return compacted(e.status());
    if (!e.ok()) return Fail(e.status());
    if (flags.until >= 0 && e->revision > static_cast<uint64_t>(flags.until)) break;
    PrintEvent(*e, json, &header);
  }
  return 0;
}

}  // namespace

void AddWatchCommand(CLI::App& app, Context& context) {
  auto flags = std::make_shared<WatchFlags>();
  CLI::App* watch = AddCommand(app, "watch", kWatchUsage, "Print the store's changes as they come");
  watch->add_option("--from-revision", flags->from, "the first revision (default: the next)");
  watch->add_option("--until-revision", flags->until, "stop once this revision is passed");
  watch->add_option("-n,--namespace", flags->claim_namespace,
                    "only this namespace (default: default)");
  watch->add_flag("-A,--all-namespaces", flags->all_namespaces, "every namespace");
  watch->add_option("-o,--output", flags->format, "json");
  watch->callback([&context, flags] { context.exit_code = Watch(context, *flags); });
}

}  // namespace claimstore::cli
