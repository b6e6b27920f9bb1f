// claimstore: restore and dump a cluster's claim state, inspect it live,
// reserve and release from the shell. Uses the public API only.
//
// This file builds the command line (CLI11: subcommands, typed flags,
// --help everywhere, unknown flags refused) from the command groups in
// commands.h and runs the one given. Exit codes and error output:
// cli_core.h.

#include <iostream>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli_core.h"
#include "commands.h"

namespace claimstore::cli {
namespace {

constexpr char kUsage[] =
    "Usage: claimstore COMMAND [ARGS...] [--db DIR]   (--db, anywhere, defaults to "
    "$CLAIMSTORE_DB, else ./claimstore.db)\n"
    "       claimstore COMMAND [ARGS...] --etcd URL[,URL...] [--etcd-prefix P] [--db DIR]\n"
    "                          the shared mode: etcd holds the claims, --db is this machine's "
    "mirror\n"
    "                          (TLS: https:// URLs, --etcd-cacert F [--etcd-cert F --etcd-key F];\n"
    "                          --etcd-timeout D: one request's deadline, default 5s)\n"
    "Commands:\n"
    "  restore [FILE...|-]     load claims (any form), all-or-nothing; creates the database\n"
    "  apply -f FILE [--dry-run]  write claims whole, all-or-nothing (kubectl apply's output)\n"
    "  dump [-o json|jsonl|yaml]\n"
    "  get NAME [-n NS]        list [-n NS | -A] [-o wide|name|json]\n"
    "  find --consumer-uid UID find --device DRIVER[/POOL[/DEVICE[/SHAREID]]]\n"
    "  allocated [--device DRIVER[/POOL[/DEVICE]]] [-o wide|json]   per device: holders, capacity\n"
    "  reserve, unreserve, allocate, deallocate, delete NAME [-n NS] ...\n"
    "  watch [--from-revision R] [--until-revision N] [-n NS | -A] [-o json]\n"
    "  follow [FILE|-]         apply a Kubernetes watch stream as it arrives\n"
    "  verify [--repair]       stats      backup DIR\n"
    "  generate --claims N     decode [FILE...]   demo (the main job)\n"
    "Every command takes --help.\n";

// Help as the tool has always printed it: the command's usage text first,
// then its flags as CLI11 lists them (the top level lists commands in its
// usage text instead).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return CLI::Formatter::make_help(app, name, mode);
    if (app->get_parent() == nullptr) return kUsage;
    std::string help = UsageOf(app);
    help += make_positionals(app);
    help += make_groups(app, mode);
    return help;
  }
};

// The innermost command that was given (the application when none).
const CLI::App* GivenCommand(const CLI::App& app) {
  const CLI::App* given = &app;
  while (!given->get_subcommands().empty()) given = given->get_subcommands().front();
  return given;
}

}  // namespace

int Main(int argc, char** argv) {
  Context context;
  CLI::App app("claimstore", "claimstore");
  app.formatter(std::make_shared<HelpFormatter>());
  app.add_option("--db", context.db_flag,
                 "the database (default $CLAIMSTORE_DB, else ./claimstore.db)");
  app.add_option("--etcd", context.etcd_flag,
                 "URL[,URL...]: the shared mode, etcd's client URLs (default $CLAIMSTORE_ETCD); "
                 "the database is then this machine's mirror of etcd");
  app.add_option("--etcd-prefix", context.etcd_prefix_flag,
                 "the prefix of the store's keys in etcd (default /claimstore/)");
  app.add_option("--etcd-cacert", context.etcd_cacert_flag,
                 "TLS (https:// URLs): the CA that signed etcd's certificates (PEM), as etcdctl's "
                 "--cacert");
  app.add_option("--etcd-cert", context.etcd_cert_flag,
                 "TLS: this client's certificate (PEM), as etcdctl's --cert");
  app.add_option("--etcd-key", context.etcd_key_flag,
                 "TLS: this client's key (PEM), as etcdctl's --key");
  app.add_option("--etcd-timeout", context.etcd_timeout_flag,
                 "the deadline of one etcd request, fail-over included (default 5s); a restore "
                 "through etcd that keeps the stored claims holds writes for six times it, "
                 "renewed while it runs")
      ->check([](const std::string& v) -> std::string {
        absl::Duration d;
        if (absl::ParseDuration(v, &d) && d > absl::ZeroDuration() && d <= absl::Hours(24))
          return "";
        return "a duration above 0 and at most 24h, as 5s or 500ms";
      });
  // Global flags anywhere, before or after the command, as kubectl takes them.
  app.fallthrough();
  AddRestoreCommand(app, context);
  AddApplyCommand(app, context);
  AddReadCommands(app, context);
  AddWriteCommands(app, context);
  AddAllocatedCommand(app, context);
  AddWatchCommand(app, context);
  AddFollowCommand(app, context);
  AddMaintenanceCommands(app, context);
  AddDemoCommands(app, context);
  app.require_subcommand(1);
  if (argc <= 1) {  // nothing asked: say what can be
    std::cout << kUsage;
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    const CLI::App* command = GivenCommand(app);
    if (command == &app && !app.remaining().empty()) {
      return Usage(absl::StrCat("unknown command \"", app.remaining().front(), "\""), kUsage);
    }
    return Usage(e.what(), command == &app ? kUsage : UsageOf(command));
  }
  return context.exit_code;
}

}  // namespace claimstore::cli

int main(int argc, char** argv) { return claimstore::cli::Main(argc, argv); }
