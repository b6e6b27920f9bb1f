// The write commands: reserve, unreserve, allocate, deallocate, delete.
// Each takes NAME (-n, or NAMESPACE/NAME), --if-revision and
// --if-claim-uid, opens the store for writing (never creating it), and
// prints what changed and the claim's new revision, or that nothing did.

#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "claimstore/allocation.h"
#include "cli_core.h"
#include "commands.h"

namespace claimstore::cli {
namespace {

struct WriteFlags {
  std::string name, claim_namespace;
  std::optional<uint64_t> if_revision;
  std::optional<std::string> claim_uid;
  std::string consumer, consumer_uid, allocation_file;
};

// A write: what it does to the claim, and what it says (the verb of a
// change, and why a no-op is one), as etcdctl and kubectl users read it.
struct Write {
  std::function<absl::StatusOr<WriteResult>(Store&, const ClaimKey&, const WriteFlags&,
                                            const Preconditions&)>
      run;
  std::function<std::string(const WriteFlags&)> changed, unchanged;
};

int RunWrite(const Context& context, const WriteFlags& flags, const Write& write,
             const std::string& usage) {
  absl::StatusOr<ClaimKey> key = ResolveClaim(flags.name, flags.claim_namespace);
  if (!key.ok()) return Usage(std::string(key.status().message()), usage);
  Preconditions pre;
  pre.mod_revision = flags.if_revision;
  pre.uid = flags.claim_uid;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForWriting(context);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<WriteResult> r = write.run(**store, *key, flags, pre);
  if (!r.ok()) return Fail(r.status());
  if (r->changed) {
    std::cout << key->ToString() << " " << write.changed(flags) << "; revision " << r->revision
              << "\n";
  } else {
    std::cout << key->ToString() << " unchanged: " << write.unchanged(flags)
              << "; its revision is still " << r->revision << "\n";
  }
  return 0;
}

absl::StatusOr<ConsumerRef> ParseConsumer(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  if (parts.size() == 3) parts.insert(parts.begin(), "");
  if (parts.size() != 4 || parts[1].empty() || parts[2].empty() || parts[3].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--consumer ", text, ": not [GROUP/]RESOURCE/NAME/UID"));
  }
  return ConsumerRef{parts[0], parts[1], parts[2], parts[3]};
}

std::string ConsumerText(const WriteFlags& f) {
  absl::StatusOr<ConsumerRef> c = ParseConsumer(f.consumer);
  if (!c.ok()) return f.consumer;
  return absl::StrCat(c->api_group.empty() ? "" : c->api_group + "/", c->resource, "/", c->name,
                      " (uid ", c->uid, ")");
}

absl::StatusOr<WriteResult> Reserve(Store& s, const ClaimKey& k, const WriteFlags& f,
                                    const Preconditions& p) {
  absl::StatusOr<ConsumerRef> consumer = ParseConsumer(f.consumer);
  if (!consumer.ok()) return consumer.status();
  return s.Reserve(k, *consumer, p);
}

absl::StatusOr<WriteResult> Unreserve(Store& s, const ClaimKey& k, const WriteFlags& f,
                                      const Preconditions& p) {
  if (f.consumer_uid.empty()) return absl::InvalidArgumentError("--consumer-uid is required");
  return s.Unreserve(k, f.consumer_uid, p);
}

absl::StatusOr<WriteResult> Allocate(Store& s, const ClaimKey& k, const WriteFlags& f,
                                     const Preconditions& p) {
  if (f.allocation_file.empty()) {
    return absl::InvalidArgumentError("-f ALLOCATION.json is required");
  }
  absl::StatusOr<std::string> json = ReadInput(f.allocation_file);
  if (!json.ok()) return json.status();
  absl::StatusOr<Allocation> allocation = Allocation::FromJson(*json);
  if (!allocation.ok())
    return absl::Status(allocation.status().code(),
                        absl::StrCat(f.allocation_file, ": ", allocation.status().message()));
  return s.Allocate(k, *allocation, p);
}

constexpr char kPreconditionUsage[] =
    "  --if-revision N    only if the claim's mod revision is still N (compare-and-set)\n"
    "  --if-claim-uid U   only if the claim's metadata.uid is U (the same incarnation)\n"
    "NAME is in the namespace of -n, else \"default\"; NAMESPACE/NAME names both.\n"
    "Prints what changed and the claim's new revision, or that nothing changed.\n";

}  // namespace

void AddWriteCommands(CLI::App& app, Context& context) {
  // One set of flags for every write command (one runs per process), alive
  // as long as the callbacks that read them.
  const auto flags = std::make_shared<WriteFlags>();
  const auto add = [&](const std::string& name, const std::string& synopsis,
                       const std::string& description, Write write) {
    const std::string usage = absl::StrCat("Usage: claimstore ", name, " NAME ", synopsis,
                                           " [-n NAMESPACE] [--if-revision N] [--if-claim-uid U]",
                                           " [--db DIR]\n", kPreconditionUsage);
    CLI::App* command = AddCommand(app, name, usage, description);
    command->add_option("NAME", flags->name, "NAME, NAMESPACE/NAME or resourceclaim/NAME")
        ->required();
    command->add_option("-n,--namespace", flags->claim_namespace,
                        "the claim's namespace (default \"default\")");
    command->add_option("--if-revision", flags->if_revision,
                        "only if the claim's mod revision is still N (compare-and-set)");
    command->add_option("--if-claim-uid", flags->claim_uid,
                        "only if the claim's metadata.uid is U");
    command->callback([&context, flags, write = std::move(write), usage] {
      context.exit_code = RunWrite(context, *flags, write, usage);
    });
    return command;
  };
  add("reserve", "--consumer [GROUP/]RESOURCE/NAME/UID", "Add a consumer to status.reservedFor",
      {Reserve, [](const WriteFlags& f) { return "reserved for " + ConsumerText(f); },
       [](const WriteFlags& f) { return ConsumerText(f) + " reserves it already"; }})
      ->add_option("--consumer", flags->consumer, "[GROUP/]RESOURCE/NAME/UID, e.g. pods/web-0/UID");
  add("unreserve", "--consumer-uid UID", "Remove a consumer from status.reservedFor",
      {Unreserve,
       [](const WriteFlags& f) { return "no longer reserved for uid " + f.consumer_uid; },
       [](const WriteFlags& f) { return "uid " + f.consumer_uid + " does not reserve it"; }})
      ->add_option("--consumer-uid", flags->consumer_uid, "the consumer's uid");
  add("allocate", "-f ALLOCATION.json", "Set status.allocation",
      {Allocate, [](const WriteFlags&) { return std::string("allocated"); },
       [](const WriteFlags&) { return std::string("it holds this allocation already"); }})
      ->add_option("-f,--filename", flags->allocation_file,
                   "the allocation: status.allocation of a ResourceClaim as JSON "
                   "(an AllocationResult: devices.results, nodeSelector, ...); - for stdin");
  add("deallocate", "", "Clear status.allocation",
      {[](Store& s, const ClaimKey& k, const WriteFlags&, const Preconditions& p) {
         return s.Deallocate(k, p);
       },
       [](const WriteFlags&) { return std::string("deallocated"); },
       [](const WriteFlags&) { return std::string("it is not allocated"); }});
  add("delete", "", "Delete a claim",
      {[](Store& s, const ClaimKey& k, const WriteFlags&, const Preconditions& p) {
         return s.Delete(k, p);
       },
       [](const WriteFlags&) { return std::string("deleted"); },
       [](const WriteFlags&) { return std::string("not stored"); }});
}

}  // namespace claimstore::cli
