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
// error or corruption; 6 a watch's revision is no longer in the change feed
// (re-list); 7 a followed Kubernetes watch stream ended with 410 Gone
// (re-list). Errors go to stderr as "Error: ...", one per line.
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
#include "claimstore/codec.h"
#include "claimstore/store.h"

namespace claimstore::cli {

// What every command shares: the global flags, and the exit code the
// command that ran leaves.
struct Context {
  std::string db_flag;  // --db, empty when not given
  // --etcd URL[,URL...] and --etcd-prefix: the shared mode (the database
  // is then this machine's mirror of etcd).
  std::string etcd_flag;
  std::string etcd_prefix_flag;
  std::string etcd_cacert_flag, etcd_cert_flag, etcd_key_flag;
  std::string etcd_timeout_flag;  // --etcd-timeout, a Go duration ("5s")
  int exit_code = 0;
  // The database: --db, else $CLAIMSTORE_DB, else ./claimstore.db.
  std::string DbPath() const;
  // `base` with the shared mode's options when --etcd (else
  // $CLAIMSTORE_ETCD) names endpoints.
  Options WithShared(Options base) const;
};

// Adds subcommand `name` with its usage text (the first lines of its help)
// and one-line description.
CLI::App* AddCommand(CLI::App& app, const std::string& name, const std::string& usage,
                     const std::string& description);
// The usage text of `command` (what AddCommand was given; the
// application's own for the top level).
std::string UsageOf(const CLI::App* command);

// The claim a command names, as kubectl reads it: NAME in the namespace of
// -n (`claim_namespace`, else "default"), NAMESPACE/NAME, or
// resourceclaim[s][.resource.k8s.io]/NAME. InvalidArgument when the
// argument's namespace and -n differ.
absl::StatusOr<ClaimKey> ResolveClaim(const std::string& arg, const std::string& claim_namespace);
// The namespace kubectl reads when none is given.
inline constexpr char kDefaultNamespace[] = "default";
// kubectl's -o name of a claim.
std::string ClaimResourceName(const ClaimRecord& r);

// The exit code of an error (see the top of this file).
int ExitCode(const absl::Status& s);
// Prints the error (validation errors one per field), prefixed by
// `context` when given, and returns its exit code.
int Fail(const absl::Status& s, const std::string& context = "");
// A usage error: the message and the command's usage on stderr; 1.
int Usage(const std::string& message, const std::string& usage);

// The store, read-only (a secondary instance, safe beside a writer) and
// caught up; or for writing (synced writes). Only `create` makes a
// database where there is none (restore): a mistyped --db is NotFound.
absl::StatusOr<std::unique_ptr<Store>> OpenForReading(const Context& context);
absl::StatusOr<std::unique_ptr<Store>> OpenForWriting(const Context& context, bool create = false);

// A whole file, or standard input for "-". NotFound, with the reason
// (`x.json: cannot open: No such file or directory`), when it cannot be
// opened.
absl::StatusOr<std::string> ReadInput(const std::string& path);
// The error for a file that cannot be opened, from errno.
absl::Status CannotOpen(const std::string& path, int error);
// On a terminal, says on stderr that standard input is being read (a
// command waiting silently looks hung).
void HintReadingStdin(const std::string& what);

// A kubectl-like table on stdout: columns padded to their widest cell.
void PrintTable(const std::vector<std::vector<std::string>>& rows);
// What a table says where it would have no rows, on stderr as kubectl
// does: `No resources found in NS namespace.` (or `No resources found`).
void PrintNoResources(const std::string& claim_namespace);
// The claim table's header and a claim's row: `wide` with DEVICES (the
// first two, then `+N more`) and VALIDATED; `namespaced` with NAMESPACE
// first (kubectl prints it for -A only).
std::vector<std::string> ClaimHeader(bool wide, bool namespaced);
std::vector<std::string> ClaimRow(const ClaimRecord& r, bool wide, bool namespaced);
// How many consumers reserve the claim.
size_t ConsumerCount(const ClaimRecord& r);

// Claims as JSON lines (kind and apiVersion on each).
void PrintJsonLines(const std::vector<ClaimRecord>& records);

// Where a decoded claim stood in input `file`: "FILE: document D, item I
// (NS/NAME)".
std::string ClaimWhere(const std::string& file, const DecodedClaim& c);

// A directory of its own under /tmp, removed with its contents.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The store a write of claims from input goes to (restore, apply): opened
// for writing, created when missing; for a dry run, the database as it is
// (opened with its indexes loaded when needed) or, where there is none, an
// empty one in *scratch. In the shared mode, the mirror (a dry run checks
// against etcd's claims).
absl::StatusOr<std::unique_ptr<Store>> OpenTarget(const Context& context, bool dry_run,
                                                  std::unique_ptr<ScratchDir>* scratch);

// Every claim of `store` in key order, a page at a time.
absl::Status ForEachClaimKey(Store& store, const std::function<void(ClaimKey)>& visit);

}  // namespace claimstore::cli

#endif  // CLAIMSTORE_TOOLS_CLI_CLI_CORE_H_
