// The read commands: get, list, find, dump, stats, and decode (which reads
// files, not the store). Each opens the store read-only, so it works beside
// a running writer.

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "claimstore/codec.h"
#include "cli_core.h"
#include "commands.h"
#include "jsonpath.h"
#include "kubectl_yaml.h"

namespace claimstore::cli {
namespace {

constexpr char kGetUsage[] =
    "Usage: claimstore get NAME [-n NAMESPACE] [-o json|yaml|wide|name|jsonpath=T] [--db DIR]\n"
    "       claimstore get NAMESPACE/NAME ...\n"
    "NAME is in the namespace of -n, else \"default\", as kubectl reads it.\n";
constexpr char kListUsage[] =
    "Usage: claimstore list [-n NAMESPACE | -A] [-o wide|name|json|jsonpath=T] [--db DIR]\n"
    "Lists the claims of one namespace (-n, else \"default\") or of all (-A), as\n"
    "kubectl get resourceclaims does. -o jsonpath='{.items[*].metadata.name}' reads\n"
    "fields of the list as kubectl's JSONPath does (fields, [N], [*], {range}...{end}).\n";
constexpr char kFindUsage[] =
    "Usage: claimstore find --consumer-uid UID [-n NAMESPACE] [--db DIR]\n"
    "       claimstore find --device DRIVER[/POOL[/DEVICE[/SHAREID]]] [-n NAMESPACE]\n"
    "Finds the claims a consumer reserves, or that hold a device, in every namespace\n"
    "(consumers and devices are cluster-wide) unless -n narrows it.\n";
constexpr char kDumpUsage[] =
    "Usage: claimstore dump [-o json|jsonl|yaml] [--db DIR]\n"
    "Prints every claim at one snapshot, in namespace/name order.\n";
constexpr char kStatsUsage[] = "Usage: claimstore stats [--db DIR]\n";
constexpr char kDecodeUsage[] =
    "Usage: claimstore decode [-o json|jsonl] [FILE...|-]\n"
    "Decodes claims in any input form and prints them back in the API form.\n";

struct ReadFlags {
  std::string name, format, claim_namespace, consumer_uid, device;
  bool all_namespaces = false;
  std::vector<std::string> files;
};

// -o jsonpath=TEMPLATE over `json`, printed as kubectl prints it (no
// newline of its own).
int PrintJsonPath(const std::string& templ, const std::string& json) {
  absl::StatusOr<std::string> text = ApplyJsonPath(templ, json);
  if (!text.ok()) return Fail(text.status());
  std::cout << *text;
  return 0;
}

int Get(const Context& context, const ReadFlags& flags) {
  const std::string& format = flags.format;
  if (!format.empty() && format != "json" && format != "yaml" && format != "wide" &&
      format != "name" && !absl::StartsWith(format, "jsonpath=")) {
    return Usage("-o must be json, yaml, wide, name or jsonpath=TEMPLATE", kGetUsage);
  }
  absl::StatusOr<ClaimKey> key = ResolveClaim(flags.name, flags.claim_namespace);
  if (!key.ok()) return Usage(std::string(key.status().message()), kGetUsage);
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<ClaimRead> read = (*store)->Get(*key);
  if (!read.ok()) return Fail(read.status());
  if (format == "json") {
    std::cout << EncodeClaim(read->record, {.indent = "    "}) << "\n";
  } else if (format == "yaml") {
    std::string yaml;
    if (!AppendYaml(EncodeClaim(read->record), &yaml)) {
      return Fail(absl::InternalError("cannot write the claim as YAML"));
    }
    std::cout << yaml;
  } else if (format == "name") {
    std::cout << ClaimResourceName(read->record) << "\n";
  } else if (absl::StartsWith(format, "jsonpath=")) {
    return PrintJsonPath(format.substr(9), EncodeClaim(read->record));
  } else {
    const bool wide = format == "wide";
    PrintTable({ClaimHeader(wide, false), ClaimRow(read->record, wide, false)});
  }
  return 0;
}

int List(const Context& context, const ReadFlags& flags) {
  const std::string& format = flags.format;
  if (!format.empty() && format != "name" && format != "json" && format != "wide" &&
      !absl::StartsWith(format, "jsonpath=")) {
    return Usage("-o must be wide, name, json or jsonpath=TEMPLATE", kListUsage);
  }
  if (flags.all_namespaces && !flags.claim_namespace.empty()) {
    return Usage("give -n NAMESPACE or -A, not both", kListUsage);
  }
  const std::string claim_namespace =
      flags.all_namespaces
          ? ""
          : (flags.claim_namespace.empty() ? kDefaultNamespace : flags.claim_namespace);
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<ListPage> page = (*store)->List({.claim_namespace = claim_namespace});
  if (!page.ok()) return Fail(page.status());
  if (format == "json") {
    std::cout << EncodeClaimList(page->records, absl::StrCat(page->revision), {.indent = "    "})
              << "\n";
    return 0;
  }
  if (absl::StartsWith(format, "jsonpath=")) {
    return PrintJsonPath(format.substr(9),
                         EncodeClaimList(page->records, absl::StrCat(page->revision), {}));
  }
  if (page->records.empty()) {
    PrintNoResources(claim_namespace);
    return 0;
  }
  if (format == "name") {
    for (const ClaimRecord& r : page->records) std::cout << ClaimResourceName(r) << "\n";
    return 0;
  }
  const bool wide = format == "wide";
  std::vector<std::vector<std::string>> rows = {ClaimHeader(wide, flags.all_namespaces)};
  for (const ClaimRecord& r : page->records)
    rows.push_back(ClaimRow(r, wide, flags.all_namespaces));
  PrintTable(rows);
  return 0;
}

absl::StatusOr<DeviceQuery> ParseDeviceQuery(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  static constexpr const char* kParts[] = {"DRIVER", "POOL", "DEVICE", "SHAREID"};
  if (parts.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device ", text, ": more than DRIVER/POOL/DEVICE/SHAREID"));
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--device ", text, ": ", kParts[i], " is empty (DRIVER[/POOL[/DEVICE[/SHAREID]]])"));
    }
  }
  DeviceQuery q{parts[0], {}, {}, {}};
  if (parts.size() > 1) q.pool = parts[1];
  if (parts.size() > 2) q.device = parts[2];
  if (parts.size() > 3) q.share_id = parts[3];
  return q;
}

std::string HoldingName(const DeviceHolding& d) {
  switch (d.kind) {
    case HoldingKind::kExclusive:
      return "exclusive";
    case HoldingKind::kShare:
      return "share " + d.share_id;
    case HoldingKind::kAdminAccess:
      return "admin-access";
  }
  return "";
}

int Find(const Context& context, const ReadFlags& flags) {
  if (flags.consumer_uid.empty() == flags.device.empty()) {
    return Usage("give exactly one of --consumer-uid and --device", kFindUsage);
  }
  if (flags.all_namespaces && !flags.claim_namespace.empty()) {
    return Usage("give -n NAMESPACE or -A, not both", kFindUsage);
  }
  absl::StatusOr<DeviceQuery> query;
  if (!flags.device.empty()) {
    query = ParseDeviceQuery(flags.device);
    if (!query.ok()) return Usage(std::string(query.status().message()), kFindUsage);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  const auto wanted = [&flags](const ClaimKey& k) {
    return flags.claim_namespace.empty() || k.claim_namespace == flags.claim_namespace;
  };
  std::vector<std::vector<std::string>> rows;
  if (!flags.consumer_uid.empty()) {
    absl::StatusOr<ClaimKeys> claims = (*store)->ClaimsReservedFor(flags.consumer_uid);
    if (!claims.ok()) return Fail(claims.status());
    rows.push_back({"NAMESPACE", "NAME"});
    for (const ClaimKey& k : claims->claims) {
      if (wanted(k)) rows.push_back({k.claim_namespace, k.name});
    }
  } else {
    absl::StatusOr<DeviceHoldings> h = (*store)->ClaimsUsingDevice(*query);
    if (!h.ok()) return Fail(h.status());
    rows.push_back({"NAMESPACE", "NAME", "DEVICE", "HOLDING"});
    for (const DeviceHolding& d : h->holdings) {
      if (!wanted(d.claim)) continue;
      rows.push_back({d.claim.claim_namespace, d.claim.name,
                      absl::StrCat(d.driver, "/", d.pool, "/", d.device), HoldingName(d)});
    }
  }
  if (rows.size() == 1) {
    PrintNoResources(flags.claim_namespace);
    return 0;
  }
  PrintTable(rows);
  return 0;
}

int Dump(const Context& context, const ReadFlags& flags) {
  const std::string format = flags.format.empty() ? "json" : flags.format;
  if (format != "json" && format != "jsonl" && format != "yaml") {
    return Usage("-o must be json, jsonl or yaml", kDumpUsage);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<ListPage> all = (*store)->List({});  // one snapshot
  if (!all.ok()) return Fail(all.status());
  if (format == "jsonl") {
    PrintJsonLines(all->records);
    return 0;
  }
  const std::string json = EncodeClaimList(all->records, absl::StrCat(all->revision),
                                           {.indent = format == "json" ? "    " : ""});
  if (format == "json") {
    std::cout << json << "\n";
  } else {
    std::string yaml;
    if (!AppendYaml(json, &yaml))
      return Fail(absl::InternalError("cannot write the claims as YAML"));
    std::cout << yaml;
  }
  return 0;
}

int Stats(const Context& context) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<StoreStats> s = (*store)->Stats();
  if (!s.ok()) return Fail(s.status());
  PrintTable({{"claims", absl::StrCat(s->claims)},
              {"allocated", absl::StrCat(s->allocated)},
              {"reserved", absl::StrCat(s->reserved)},
              {"unvalidated", absl::StrCat(s->unvalidated)},
              {"consumer index entries", absl::StrCat(s->consumer_entries)},
              {"device index entries", absl::StrCat(s->device_entries)},
              {"revision", absl::StrCat(s->revision)},
              {"feed from revision", absl::StrCat(s->feed_compact_revision + 1)},
              {"follow resourceVersion", absl::StrCat(s->follow_resource_version)},
              {"size on disk (bytes)", absl::StrCat(s->size_on_disk_bytes)}});
  return 0;
}

int Decode(const ReadFlags& flags) {
  const std::string format = flags.format.empty() ? "json" : flags.format;
  if (format != "json" && format != "jsonl") return Usage("-o must be json or jsonl", kDecodeUsage);
  std::vector<std::string> files = flags.files;
  if (files.empty()) files.push_back("-");
  std::vector<ClaimRecord> records;
  for (const std::string& file : files) {
    absl::StatusOr<std::string> input = ReadInput(file);
    if (!input.ok()) return Fail(input.status());
    absl::Status s = DecodeClaims(*input, [&](DecodedClaim c) {
      records.push_back(std::move(c.record));
      return absl::OkStatus();
    });
    if (!s.ok()) return Fail(s, file);
  }
  if (format == "jsonl") {
    PrintJsonLines(records);
  } else {
    std::cout << EncodeClaimList(records, "", {.indent = "    "}) << "\n";
  }
  return 0;
}

}  // namespace

void AddReadCommands(CLI::App& app, Context& context) {
  // The flags live as long as the application (the callbacks hold them).
  const auto flags = std::make_shared<ReadFlags>();
  CLI::App* get = AddCommand(app, "get", kGetUsage, "Print one claim");
  get->add_option("NAME", flags->name, "NAME, NAMESPACE/NAME or resourceclaim/NAME")->required();
  get->add_option("-n,--namespace", flags->claim_namespace,
                  "the claim's namespace (default \"default\")");
  get->add_option("-o,--output", flags->format, "json, yaml, wide, name or jsonpath=TEMPLATE");
  get->callback([&context, flags] { context.exit_code = Get(context, *flags); });

  CLI::App* list = AddCommand(app, "list", kListUsage, "List claims");
  list->add_option("-n,--namespace", flags->claim_namespace,
                   "this namespace (default \"default\")");
  list->add_flag("-A,--all-namespaces", flags->all_namespaces, "every namespace");
  list->add_option("-o,--output", flags->format, "wide, name, json or jsonpath=TEMPLATE");
  list->callback([&context, flags] { context.exit_code = List(context, *flags); });

  CLI::App* find = AddCommand(app, "find", kFindUsage, "Find claims by consumer or device");
  find->add_option("--consumer-uid", flags->consumer_uid, "the consumer's uid");
  find->add_option("--device", flags->device, "DRIVER[/POOL[/DEVICE[/SHAREID]]]");
  find->add_option("-n,--namespace", flags->claim_namespace, "only claims of this namespace");
  find->add_flag("-A,--all-namespaces", flags->all_namespaces, "every namespace (the default)");
  find->callback([&context, flags] { context.exit_code = Find(context, *flags); });

  CLI::App* dump = AddCommand(app, "dump", kDumpUsage, "Print every claim");
  dump->add_option("-o,--output", flags->format, "json, jsonl or yaml");
  dump->callback([&context, flags] { context.exit_code = Dump(context, *flags); });

  CLI::App* stats = AddCommand(app, "stats", kStatsUsage, "Counts of claims and index entries");
  stats->callback([&context] { context.exit_code = Stats(context); });

  CLI::App* decode = AddCommand(app, "decode", kDecodeUsage, "Decode claims and print them back");
  decode->add_option("FILE", flags->files, "input files; - or none for standard input");
  decode->add_option("-o,--output", flags->format, "json or jsonl");
  decode->callback([&context, flags] { context.exit_code = Decode(*flags); });
}

}  // namespace claimstore::cli
