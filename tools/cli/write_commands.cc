// The write commands: reserve, unreserve, allocate, deallocate, delete.
// Each takes NAMESPACE/NAME and --if-revision, opens the store for writing
// and prints the claim's revision after the write.

#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "claimstore/allocation.h"
#include "cli_core.h"
#include "commands.h"

namespace claimstore::cli {
namespace {

struct WriteFlags {
  std::string name;
  std::optional<uint64_t> if_revision;
  std::string consumer, uid, allocation_file;
};

using WriteFn = std::function<absl::StatusOr<WriteResult>(Store&, const ClaimKey&,
                                                          const WriteFlags&, const Preconditions&)>;

int RunWrite(const Context& context, const WriteFlags& flags, const WriteFn& write) {
  absl::StatusOr<ClaimKey> key = ClaimKey::Parse(flags.name);
  if (!key.ok()) return Fail(key.status());
  Preconditions pre;
  pre.mod_revision = flags.if_revision;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForWriting(context);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<WriteResult> r = write(**store, *key, flags, pre);
  if (!r.ok()) return Fail(r.status());
  std::cout << r->revision << "\n";
  return 0;
}

absl::StatusOr<WriteResult> Reserve(Store& s, const ClaimKey& k, const WriteFlags& f,
                                    const Preconditions& p) {
  std::vector<std::string> parts = absl::StrSplit(f.consumer, '/');
  if (parts.size() == 3) parts.insert(parts.begin(), "");
  if (parts.size() != 4) {
    return absl::InvalidArgumentError("--consumer takes [GROUP/]RESOURCE/NAME/UID");
  }
  return s.Reserve(k, ConsumerRef{parts[0], parts[1], parts[2], parts[3]}, p);
}

absl::StatusOr<WriteResult> Unreserve(Store& s, const ClaimKey& k, const WriteFlags& f,
                                      const Preconditions& p) {
  if (f.uid.empty()) return absl::InvalidArgumentError("--uid is required");
  return s.Unreserve(k, f.uid, p);
}

absl::StatusOr<WriteResult> Allocate(Store& s, const ClaimKey& k, const WriteFlags& f,
                                     const Preconditions& p) {
  if (f.allocation_file.empty()) {
    return absl::InvalidArgumentError("-f ALLOCATION.json is required");
  }
  absl::StatusOr<std::string> json = ReadInput(f.allocation_file);
  if (!json.ok()) return json.status();
  absl::StatusOr<Allocation> allocation = Allocation::FromJson(*json);
  if (!allocation.ok()) return allocation.status();
  return s.Allocate(k, *allocation, p);
}

}  // namespace

void AddWriteCommands(CLI::App& app, Context& context) {
  // One set of flags for every write command (one runs per process), alive
  // as long as the callbacks that read them.
  const auto flags = std::make_shared<WriteFlags>();
  const auto add = [&](const std::string& name, const std::string& usage,
                       const std::string& description, WriteFn write) {
    CLI::App* command = AddCommand(app, name, usage, description);
    command->add_option("NAMESPACE/NAME", flags->name)->required();
    command->add_option("--if-revision", flags->if_revision,
                        "only if the claim's mod revision is still N (compare-and-set)");
    command->callback([&context, flags, write = std::move(write)] {
      context.exit_code = RunWrite(context, *flags, write);
    });
    return command;
  };
  add("reserve",
      "Usage: claimstore [--db DIR] reserve NAMESPACE/NAME --consumer [GROUP/]RESOURCE/NAME/UID "
      "[--if-revision N]\n",
      "Add a consumer to status.reservedFor", Reserve)
      ->add_option("--consumer", flags->consumer, "[GROUP/]RESOURCE/NAME/UID");
  add("unreserve",
      "Usage: claimstore [--db DIR] unreserve NAMESPACE/NAME --uid UID [--if-revision N]\n",
      "Remove a consumer from status.reservedFor", Unreserve)
      ->add_option("--uid", flags->uid, "the consumer's uid");
  add("allocate",
      "Usage: claimstore [--db DIR] allocate NAMESPACE/NAME -f ALLOCATION.json [--if-revision N]\n",
      "Set status.allocation", Allocate)
      ->add_option("-f", flags->allocation_file, "the allocation (an AllocationResult as JSON)");
  add("deallocate", "Usage: claimstore [--db DIR] deallocate NAMESPACE/NAME [--if-revision N]\n",
      "Clear status.allocation",
      [](Store& s, const ClaimKey& k, const WriteFlags&, const Preconditions& p) {
        return s.Deallocate(k, p);
      });
  add("delete", "Usage: claimstore [--db DIR] delete NAMESPACE/NAME [--if-revision N]\n",
      "Delete a claim", [](Store& s, const ClaimKey& k, const WriteFlags&, const Preconditions& p) {
        return s.Delete(k, p);
      });
}

}  // namespace claimstore::cli
