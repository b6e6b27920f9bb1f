// The shared core of the claimstore tool: the global flags, exit codes and
// error output, opening the store, reading input, and printing tables.
// Each command group (restore.cc, read_commands.cc, write_commands.cc,
// maintenance_commands.cc, demo.cc) registers its subcommands on the CLI11
// application with Add...Commands; main.cc runs it. The tool uses the
// public API only, like any other consumer.
//
// Exit codes: 0 success; 1 invalid input or usage; 2 not found; 3 conflict
// (revision mismatch, device held by another claim); 4 refused by a rule
// (not allocated, still reserved, 256 consumers, being deleted); 5 storage
// error or corruption. Errors go to stderr as "Error: ...", one per line.
#ifndef CLAIMSTORE_TOOLS_CLI_CLI_CORE_H_
#define CLAIMSTORE_TOOLS_CLI_CLI_CORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "claimstore/claim_record.h"
#include "claimstore/store.h"

namespace claimstore::cli {

// What every command shares: the global flags, and the exit code the
// command that ran leaves.
struct Context {
  std::string db_flag;  // --db, empty when not given
  int exit_code = 0;
  // The database: --db, else $CLAIMSTORE_DB, else ./claimstore.db.
  std::string DbPath() const;
};

// Adds subcommand `name` with its usage text (the first lines of its help)
// and one-line description.
CLI::App* AddCommand(CLI::App& app, const std::string& name, const std::string& usage,
                     const std::string& description);
// The usage text of `command` (what AddCommand was given; the
// application's own for the top level).
std::string UsageOf(const CLI::App* command);

// The exit code of an error (see the top of this file).
int ExitCode(const absl::Status& s);
// Prints the error (validation errors one per field), prefixed by
// `context` when given, and returns its exit code.
int Fail(const absl::Status& s, const std::string& context = "");
// A usage error: the message and the command's usage on stderr; 1.
int Usage(const std::string& message, const std::string& usage);

// The store, read-only (a secondary instance, safe beside a writer) and
// caught up; or for writing (synced writes).
absl::StatusOr<std::unique_ptr<Store>> OpenForReading(const Context& context);
absl::StatusOr<std::unique_ptr<Store>> OpenForWriting(const Context& context);

// A whole file, or standard input for "-". NotFound when it cannot be
// opened.
absl::StatusOr<std::string> ReadInput(const std::string& path);

// A kubectl-like table on stdout: columns padded to their widest cell.
void PrintTable(const std::vector<std::vector<std::string>>& rows);
// The claim table's header and a claim's row (`wide`: with DEVICES).
std::vector<std::string> ClaimHeader(bool wide);
std::vector<std::string> ClaimRow(const ClaimRecord& r, bool wide);
// How many consumers reserve the claim.
size_t ConsumerCount(const ClaimRecord& r);

// Claims as JSON lines (kind and apiVersion on each).
void PrintJsonLines(const std::vector<ClaimRecord>& records);

// Every claim of `store` in key order, a page at a time.
absl::Status ForEachClaimKey(Store& store, const std::function<void(ClaimKey)>& visit);

}  // namespace claimstore::cli

#endif  // CLAIMSTORE_TOOLS_CLI_CLI_CORE_H_
