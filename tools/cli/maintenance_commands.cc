// The maintenance commands: verify (and repair), backup.

#include <iostream>
#include <memory>
#include <string>

#include "cli_core.h"
#include "commands.h"

namespace claimstore::cli {
namespace {

constexpr char kVerifyUsage[] =
    "Usage: claimstore verify [--repair] [--db DIR]\n"
    "Reads every record, recomputes every index entry and compares; exit 0 only when clean.\n";
constexpr char kBackupUsage[] =
    "Usage: claimstore backup DIR [--db DIR]\n"
    "Writes a consistent copy of the database (one revision) to DIR, which must not exist;\n"
    "works while another process writes the database.\n";

int Verify(const Context& context, bool repair) {
  absl::StatusOr<std::unique_ptr<Store>> store =
      repair ? OpenForWriting(context) : OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<VerifyReport> report = (*store)->Verify(repair);
  if (!report.ok()) return Fail(report.status());
  for (const std::string& p : report->problems) std::cerr << "Error: " << p << "\n";
  std::cout << report->records << " claim(s), " << report->index_entries << " index entries, "
            << report->problems.size() << " problem(s)"
            << (report->repaired ? ", indexes rebuilt" : "") << "\n";
  return report->problems.empty() || report->repaired ? 0 : 5;
}

// Read-only: a consistent copy while a scheduler holds the database.
int Backup(const Context& context, const std::string& dir) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  if (absl::Status s = (*store)->Backup(dir); !s.ok()) return Fail(s);
  std::cout << "backup written to " << dir << "\n";
  return 0;
}

}  // namespace

void AddMaintenanceCommands(CLI::App& app, Context& context) {
  const auto repair = std::make_shared<bool>(false);
  CLI::App* verify = AddCommand(app, "verify", kVerifyUsage, "Check records against indexes");
  verify->add_flag("--repair", *repair, "rewrite the indexes from the records");
  verify->callback([&context, repair] { context.exit_code = Verify(context, *repair); });

  const auto dir = std::make_shared<std::string>();
  CLI::App* backup = AddCommand(app, "backup", kBackupUsage, "Write a consistent copy");
  backup->add_option("DIR", *dir, "where the copy goes (must not exist)")->required();
  backup->callback([&context, dir] { context.exit_code = Backup(context, *dir); });
}

}  // namespace claimstore::cli
