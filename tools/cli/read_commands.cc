// The read commands: get, list, find, dump, stats, and decode (which reads
// files, not the store). Each opens the store read-only, so it works beside
// a running writer.

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "claimstore/codec.h"
#include "cli_core.h"
#include "commands.h"
#include "yaml.h"

namespace claimstore::cli {
namespace {

constexpr char kGetUsage[] = "Usage: claimstore [--db DIR] get NAMESPACE/NAME [-o json|yaml|wide]\n";
constexpr char kListUsage[] = "Usage: claimstore [--db DIR] list [-n NAMESPACE] [-o name|wide|json]\n";
constexpr char kFindUsage[] =
    "Usage: claimstore [--db DIR] find --consumer UID\n"
    "       claimstore [--db DIR] find --device DRIVER[/POOL[/DEVICE[/SHAREID]]]\n";
constexpr char kDumpUsage[] =
    "Usage: claimstore [--db DIR] dump [-o json|jsonl|yaml]\n"
    "Prints every claim at one snapshot, in namespace/name order.\n";
constexpr char kStatsUsage[] = "Usage: claimstore [--db DIR] stats\n";
constexpr char kDecodeUsage[] =
    "Usage: claimstore decode [-o json|jsonl] [FILE...|-]\n"
    "Decodes claims in any input form and prints them back in the API form.\n";

struct ReadFlags {
  std::string name, format, claim_namespace, consumer, device;
  std::vector<std::string> files;
};

int Get(const Context& context, const ReadFlags& flags) {
  absl::StatusOr<ClaimKey> key = ClaimKey::Parse(flags.name);
  if (!key.ok()) return Fail(key.status());
  const std::string& format = flags.format;
  if (!format.empty() && format != "json" && format != "yaml" && format != "wide") {
    return Usage("-o must be json, yaml or wide", kGetUsage);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<ClaimRead> read = (*store)->Get(*key);
  if (!read.ok()) return Fail(read.status());
  if (format == "json") {
    std::cout << EncodeClaim(read->record, {.indent = "    "}) << "\n";
  } else if (format == "yaml") {
    std::string yaml;
    AppendYaml(EncodeClaim(read->record), &yaml);
    std::cout << yaml;
  } else {
    PrintTable({ClaimHeader(format == "wide"), ClaimRow(read->record, format == "wide")});
  }
  return 0;
}

int List(const Context& context, const ReadFlags& flags) {
  const std::string& format = flags.format;
  if (!format.empty() && format != "name" && format != "json" && format != "wide") {
    return Usage("-o must be name, wide or json", kListUsage);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<ListPage> page = (*store)->List({.claim_namespace = flags.claim_namespace});
  if (!page.ok()) return Fail(page.status());
  if (format == "name") {
    for (const ClaimRecord& r : page->records) {
      std::cout << r.claim_namespace() << "/" << r.name() << "\n";
    }
  } else if (format == "json") {
    std::cout << EncodeClaimList(page->records, absl::StrCat(page->revision), {.indent = "    "})
              << "\n";
  } else {
    std::vector<std::vector<std::string>> rows = {ClaimHeader(format == "wide")};
    for (const ClaimRecord& r : page->records) rows.push_back(ClaimRow(r, format == "wide"));
    PrintTable(rows);
  }
  return 0;
}

absl::StatusOr<DeviceQuery> ParseDeviceQuery(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  if (parts.empty() || parts[0].empty() || parts.size() > 4) {
    return absl::InvalidArgumentError("--device takes DRIVER[/POOL[/DEVICE[/SHAREID]]]");
  }
  DeviceQuery q{parts[0], {}, {}, {}};
  if (parts.size() > 1) q.pool = parts[1];
  if (parts.size() > 2) q.device = parts[2];
  if (parts.size() > 3) q.share_id = parts[3];
  return q;
}

std::string HoldingName(const DeviceHolding& d) {
  switch (d.kind) {
    case HoldingKind::kExclusive: return "exclusive";
    case HoldingKind::kShare: return "share " + d.share_id;
    case HoldingKind::kAdminAccess: return "admin-access";
  }
  return "";
}

int Find(const Context& context, const ReadFlags& flags) {
  if (flags.consumer.empty() == flags.device.empty()) {
    return Usage("give exactly one of --consumer and --device", kFindUsage);
  }
  absl::StatusOr<DeviceQuery> query;
  if (!flags.device.empty()) {
    query = ParseDeviceQuery(flags.device);
    if (!query.ok()) return Usage(std::string(query.status().message()), kFindUsage);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  if (!flags.consumer.empty()) {
    absl::StatusOr<ClaimKeys> claims = (*store)->ClaimsReservedFor(flags.consumer);
    if (!claims.ok()) return Fail(claims.status());
    for (const ClaimKey& k : claims->claims) std::cout << k.ToString() << "\n";
    return 0;
  }
  absl::StatusOr<DeviceHoldings> h = (*store)->ClaimsUsingDevice(*query);
  if (!h.ok()) return Fail(h.status());
  std::vector<std::vector<std::string>> rows = {{"DEVICE", "HOLDING", "CLAIM"}};
  for (const DeviceHolding& d : h->holdings) {
    rows.push_back({absl::StrCat(d.driver, "/", d.pool, "/", d.device), HoldingName(d),
                    d.claim.ToString()});
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
    AppendYaml(json, &yaml);
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
  get->add_option("NAMESPACE/NAME", flags->name)->required();
  get->add_option("-o", flags->format, "json, yaml or wide");
  get->callback([&context, flags] { context.exit_code = Get(context, *flags); });

  CLI::App* list = AddCommand(app, "list", kListUsage, "List claims");
  list->add_option("-n", flags->claim_namespace, "only this namespace");
  list->add_option("-o", flags->format, "name, wide or json");
  list->callback([&context, flags] { context.exit_code = List(context, *flags); });

  CLI::App* find = AddCommand(app, "find", kFindUsage, "Find claims by consumer or device");
  find->add_option("--consumer", flags->consumer, "the consumer's uid");
  find->add_option("--device", flags->device, "DRIVER[/POOL[/DEVICE[/SHAREID]]]");
  find->callback([&context, flags] { context.exit_code = Find(context, *flags); });

  CLI::App* dump = AddCommand(app, "dump", kDumpUsage, "Print every claim");
  dump->add_option("-o", flags->format, "json, jsonl or yaml");
  dump->callback([&context, flags] { context.exit_code = Dump(context, *flags); });

  CLI::App* stats = AddCommand(app, "stats", kStatsUsage, "Counts of claims and index entries");
  stats->callback([&context] { context.exit_code = Stats(context); });

  CLI::App* decode = AddCommand(app, "decode", kDecodeUsage, "Decode claims and print them back");
  decode->add_option("FILE", flags->files, "input files; - or none for standard input");
  decode->add_option("-o", flags->format, "json or jsonl");
  decode->callback([&context, flags] { context.exit_code = Decode(*flags); });
}

}  // namespace claimstore::cli
