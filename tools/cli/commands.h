// The command groups of the claimstore tool, each registering its
// subcommands on the application (one file each).
#ifndef CLAIMSTORE_TOOLS_CLI_COMMANDS_H_
#define CLAIMSTORE_TOOLS_CLI_COMMANDS_H_

#include "CLI/CLI.hpp"
#include "cli_core.h"

namespace claimstore::cli {

// restore (restore.cc).
void AddRestoreCommand(CLI::App& app, Context& context);
// apply -f (apply_command.cc).
void AddApplyCommand(CLI::App& app, Context& context);
// get, list, find, dump, stats, decode (read_commands.cc).
void AddReadCommands(CLI::App& app, Context& context);
// reserve, unreserve, allocate, deallocate, delete (write_commands.cc).
void AddWriteCommands(CLI::App& app, Context& context);
// follow (follow_command.cc).
void AddFollowCommand(CLI::App& app, Context& context);
// allocated (allocated_command.cc).
void AddAllocatedCommand(CLI::App& app, Context& context);
// watch (watch_command.cc).
void AddWatchCommand(CLI::App& app, Context& context);
// verify, backup (maintenance_commands.cc).
void AddMaintenanceCommands(CLI::App& app, Context& context);
// demo, the main job, and generate (demo.cc).
void AddDemoCommands(CLI::App& app, Context& context);

}  // namespace claimstore::cli

#endif  // CLAIMSTORE_TOOLS_CLI_COMMANDS_H_
