// apply -f FILE...: claims written whole, as kubectl apply writes objects,
// all or nothing in one PutAll, with kubectl's line per object (created,
// configured, unchanged).

#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "claimstore/bulk_load.h"
#include "claimstore/codec.h"
#include "claimstore/validation.h"
#include "cli_core.h"
#include "commands.h"

namespace claimstore::cli {
namespace {

constexpr char kApplyUsage[] =
    "Usage: claimstore apply -f FILE [-f FILE...] [--dry-run] [-o name] [--db DIR]\n"
    "Writes each claim of the files whole, as kubectl apply writes objects, all or nothing\n"
    "in one write: nothing is written if any claim is bad or would hold a device that\n"
    "another claim holds. The files hold claims in any form restore reads (a claim, a\n"
    "list, YAML documents, JSON lines); - is standard input. Prints a line per claim,\n"
    "resourceclaim.resource.k8s.io/NAME created, configured or unchanged; an unchanged\n"
    "claim is not written. Creates the database when there is none. Through etcd\n"
    "(--etcd) the write is one etcd Txn: at most 128 operations (a claim one, a device\n"
    "it holds two); restore takes any number.\n"
    "  -f, --filename FILE  a file of claims, - for standard input (repeatable)\n"
    "  --dry-run            check against the database as it is; write nothing\n"
    "  -o name              print resourceclaim.resource.k8s.io/NAME only\n";

struct ApplyFlags {
  std::vector<std::string> files;
  bool dry_run = false;
  std::string output;
};

// One claim of the input, and where it stood.
struct Item {
  ClaimRecord record;
  std::string where;
};

int Refused(int code) {
  std::cerr << "Error: apply refused: nothing was written\n";
  return code;
}

// Every claim of the files, in input order; the exit code of a refusal, or
// 0.
int ReadItems(const std::vector<std::string>& files, std::vector<Item>* items) {
  for (const std::string& file : files) {
    absl::StatusOr<std::string> text = ReadInput(file);
    if (!text.ok()) return Refused(Fail(text.status()));
    absl::Status refused;
    std::string where;
    const absl::Status s = DecodeClaims(*text, [&](DecodedClaim c) {
      where = ClaimWhere(file, c);
      if (c.event == WatchEventType::kDeleted) {
        refused = absl::InvalidArgumentError(
            "a DELETED watch event: apply writes claims (restore and follow apply deletions)");
      } else if (c.record.claim_namespace().empty() || c.record.name().empty()) {
        refused =
            absl::InvalidArgumentError("metadata.namespace and metadata.name: Required value");
      } else {
        items->push_back(Item{std::move(c.record), where});
        return absl::OkStatus();
      }
      return refused;
    });
    if (!refused.ok()) return Refused(Fail(refused, where));
    if (!s.ok()) return Refused(Fail(s, file));
  }
  return 0;
}

// PutAll's "item I (NS/NAME): ..." (a write of one claim: its error alone)
// with the item's place in the input instead.
int WriteRefused(const absl::Status& s, const std::vector<size_t>& written,
                 const std::vector<Item>& items) {
  size_t i = 0;
  const std::string message(s.message());
  if (std::sscanf(message.c_str(), "item %zu (", &i) == 1 && i < written.size()) {
    const size_t colon = message.find("): ");
    if (colon != std::string::npos) {
      std::cerr << "Error: " << items[written[i]].where << ": " << message.substr(colon + 3)
                << "\n";
      return Refused(ExitCode(s));
    }
  }
  if (written.size() == 1) return Refused(Fail(s, items[written[0]].where));  // no "item 0"
  return Refused(Fail(s));
}

int Apply(const Context& context, const ApplyFlags& flags) {
  if (flags.files.empty()) return Usage("apply needs -f FILE (- for standard input)", kApplyUsage);
  if (!flags.output.empty() && flags.output != "name") {
    return Usage(absl::StrCat("-o ", flags.output, ": apply prints -o name only"), kApplyUsage);
  }
  std::vector<Item> items;
  if (int code = ReadItems(flags.files, &items); code != 0) return code;
  std::unique_ptr<ScratchDir> scratch;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenTarget(context, flags.dry_run, &scratch);
  if (!store.ok()) return Fail(store.status());
  // What each claim becomes, in input order, against what is stored: as
  // kubectl says it, and only what changes is written.
  struct Now {
    std::optional<ClaimRecord> record;
    std::string json;
  };
  std::map<std::string, Now> state;  // NS/NAME -> the claim as the items so far leave it
  std::vector<std::string> verbs;
  std::vector<size_t> written;  // items to write, in input order
  for (size_t i = 0; i < items.size(); ++i) {
    const ClaimRecord& r = items[i].record;
    const ClaimKey key{std::string(r.claim_namespace()), std::string(r.name())};
    auto it = state.find(key.ToString());
    if (it == state.end()) {
      absl::StatusOr<ClaimRead> stored = (*store)->Get(key);
      if (!stored.ok() && !absl::IsNotFound(stored.status())) return Fail(stored.status());
      Now now;
      if (stored.ok()) {
        now.json = EncodeClaim(stored->record);
        now.record = std::move(stored->record);
      }
      it = state.emplace(key.ToString(), std::move(now)).first;
    }
    std::string json = EncodeClaim(r);
    if (it->second.record.has_value() && it->second.json == json) {
      verbs.push_back("unchanged");
      continue;
    }
    if (flags.dry_run) {
      // The rules of the write (those about a change too), as PutAll
      // checks it.
      const std::vector<FieldError> errors =
          ValidateClaimStatus(it->second.record.has_value() ? &*it->second.record : nullptr, r);
      if (!errors.empty()) return Refused(Fail(ValidationStatus(errors), items[i].where));
    }
    verbs.push_back(it->second.record.has_value() ? "configured" : "created");
    it->second = Now{r, std::move(json)};
    written.push_back(i);
  }
  std::vector<ClaimRecord> records;
  records.reserve(written.size());
  for (size_t i : written) records.push_back(items[i].record);
  if (flags.dry_run) {
    // And the device rule, against the stored claims and each other, as
    // a load of them checks it; nothing written.
    absl::StatusOr<std::unique_ptr<BulkLoad>> load = (*store)->StartBulkLoad({});
    if (!load.ok()) return Fail(load.status());
    for (size_t w = 0; w < records.size(); ++w) {
      if (absl::Status s = (*load)->Add(records[w], w); !s.ok()) {
        return Refused(Fail(s, items[written[w]].where));
      }
    }
    if (absl::StatusOr<BulkLoadResult> checked = (*load)->DryRun(); !checked.ok()) {
      return Refused(Fail(checked.status()));
    }
  } else if (!records.empty()) {
    absl::StatusOr<std::vector<WriteResult>> put = (*store)->PutAll(records);
    if (!put.ok()) return WriteRefused(put.status(), written, items);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    std::cout << ClaimResourceName(items[i].record);
    if (flags.output.empty()) {
      std::cout << " " << verbs[i] << (flags.dry_run ? " (dry run)" : "");
    }
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

void AddApplyCommand(CLI::App& app, Context& context) {
  const auto flags = std::make_shared<ApplyFlags>();
  CLI::App* apply =
      AddCommand(app, "apply", kApplyUsage, "Write claims whole from files, all or nothing");
  apply->add_option("-f,--filename", flags->files, "a file of claims, - for standard input");
  apply->add_flag("--dry-run", flags->dry_run, "check; write nothing");
  apply->add_option("-o,--output", flags->output, "name");
  apply->callback([&context, flags] { context.exit_code = Apply(context, *flags); });
}

}  // namespace claimstore::cli
