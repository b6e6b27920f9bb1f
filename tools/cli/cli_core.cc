#include "cli_core.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/validation.h"

namespace claimstore::cli {
namespace {

std::map<const CLI::App*, std::string>& Usages() {
  static auto* usages = new std::map<const CLI::App*, std::string>();
  return *usages;
}

std::string State(const ClaimRecord& r) {
  const fb::ResourceClaimStatus* s = r.table().status();
  if (s == nullptr || s->allocation() == nullptr) return "pending";
  if (s->reserved_for() != nullptr && s->reserved_for()->size() > 0) return "reserved";
  return "allocated";
}

std::string Devices(const ClaimRecord& r) {
  const fb::ResourceClaimStatus* s = r.table().status();
  if (s == nullptr || s->allocation() == nullptr || s->allocation()->results() == nullptr) {
    return "<none>";
  }
  // Two, then a count, as kubectl cuts long cells: a claim of every GPU
  // of a node must not widen every row.
  constexpr size_t kShown = 2;
  const auto& results = *s->allocation()->results();
  std::vector<std::string> out;
  for (size_t i = 0; i < results.size() && i < kShown; ++i) {
    const auto* res = results.Get(i);
    out.push_back(
        absl::StrCat(res->driver()->str(), "/", res->pool()->str(), "/", res->device()->str()));
  }
  if (results.size() > kShown) out.push_back(absl::StrCat("+", results.size() - kShown, " more"));
  return out.empty() ? "<none>" : absl::StrJoin(out, ",");
}

}  // namespace

std::string Context::DbPath() const {
  if (!db_flag.empty()) return db_flag;
  if (const char* env = getenv("CLAIMSTORE_DB"); env != nullptr && *env) return env;
  return "./claimstore.db";
}

Options Context::WithShared(Options base) const {
  std::string endpoints = etcd_flag;
  if (endpoints.empty()) {
    if (const char* env = getenv("CLAIMSTORE_ETCD"); env != nullptr) endpoints = env;
  }
  if (endpoints.empty()) return base;
  base.etcd_endpoints = absl::StrSplit(endpoints, ',', absl::SkipEmpty());
  if (!etcd_prefix_flag.empty()) base.etcd_prefix = etcd_prefix_flag;
  base.etcd_ca_file = etcd_cacert_flag;
  base.etcd_cert_file = etcd_cert_flag;
  base.etcd_key_file = etcd_key_flag;
  if (absl::Duration d; !etcd_timeout_flag.empty() && absl::ParseDuration(etcd_timeout_flag, &d)) {
    base.etcd_timeout = d;  // (checked by the flag)
  }
  // The mirror is written by this process: not read-only, and created
  // when missing.
  base.read_only = false;
  base.create_if_missing = true;
  return base;
}

CLI::App* AddCommand(CLI::App& app, const std::string& name, const std::string& usage,
                     const std::string& description) {
  CLI::App* command = app.add_subcommand(name, description);
  Usages()[command] = usage;
  return command;
}

std::string UsageOf(const CLI::App* command) {
  auto it = Usages().find(command);
  return it == Usages().end() ? std::string() : it->second;
}

absl::StatusOr<ClaimKey> ResolveClaim(const std::string& arg, const std::string& claim_namespace) {
  const std::vector<std::string> parts = absl::StrSplit(arg, '/');
  const std::string from_flag = claim_namespace.empty() ? kDefaultNamespace : claim_namespace;
  ClaimKey key;
  if (parts.size() == 1) {
    key = ClaimKey{from_flag, parts[0]};
  } else if (parts.size() == 2 && (parts[0] == "resourceclaim" || parts[0] == "resourceclaims" ||
                                   parts[0] == "resourceclaim.resource.k8s.io")) {
    key = ClaimKey{from_flag, parts[1]};
  } else if (parts.size() == 2) {
    if (!claim_namespace.empty() && claim_namespace != parts[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", arg, "\" names namespace ", parts[0], ", -n names ", claim_namespace));
    }
    key = ClaimKey{parts[0], parts[1]};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", arg, "\" is not NAME, NAMESPACE/NAME or resourceclaim/NAME"));
  }
  if (key.claim_namespace.empty() || key.name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", arg, "\": empty ", key.name.empty() ? "name" : "namespace"));
  }
  return key;
}

std::string ClaimResourceName(const ClaimRecord& r) {
  return absl::StrCat("resourceclaim.resource.k8s.io/", r.name());
}

int ExitCode(const absl::Status& s) {
  if (IsNoSpace(s)) return 5;  // storage, not a rule
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kInvalidArgument:
      return 1;
    case absl::StatusCode::kNotFound:
      return 2;
    case absl::StatusCode::kAborted:
      return 3;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:
      return 4;
    default:
      return 5;
  }
}

int Fail(const absl::Status& s, const std::string& context) {
  const std::string prefix = context.empty() ? "" : context + ": ";
  const std::vector<FieldError> fields = FieldErrorsOf(s);
  if (fields.empty()) {
    std::cerr << "Error: " << prefix << s.message() << "\n";
  } else {
    for (const FieldError& e : fields) std::cerr << "Error: " << prefix << e.ToString() << "\n";
  }
  return ExitCode(s);
}

int Usage(const std::string& message, const std::string& usage) {
  std::cerr << "Error: " << message << "\n" << usage;
  return 1;
}

absl::StatusOr<std::unique_ptr<Store>> OpenForReading(const Context& context) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(
      context.DbPath(), context.WithShared({.create_if_missing = false, .read_only = true}));
  if (!store.ok()) return store.status();
  if (absl::Status s = (*store)->Refresh(); !s.ok()) return s;
  return store;
}

absl::StatusOr<std::unique_ptr<Store>> OpenForWriting(const Context& context, bool create) {
  // One command and exit: the in-memory indexes are read only if the
  // command needs them (a reservation does not).
  return Store::Open(context.DbPath(), context.WithShared({.create_if_missing = create,
                                                           .sync_writes = true,
                                                           .defer_index_load = true}));
}

absl::Status CannotOpen(const std::string& path, int error) {
  return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(error)));
}

void HintReadingStdin(const std::string& what) {
  if (isatty(STDIN_FILENO) == 0) return;
  std::cerr << "Reading " << what << " from standard input (end with Ctrl-D; or give a FILE)\n";
}

absl::StatusOr<std::string> ReadInput(const std::string& path) {
  if (path == "-") {
    HintReadingStdin("claims");
    return std::string(std::istreambuf_iterator<char>(std::cin), {});
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return CannotOpen(path, errno);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void PrintNoResources(const std::string& claim_namespace) {
  if (claim_namespace.empty()) {
    std::cerr << "No resources found\n";
  } else {
    std::cerr << "No resources found in " << claim_namespace << " namespace.\n";
  }
}

void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 3, ' ');
    }
    std::cout << line << "\n";
  }
}

size_t ConsumerCount(const ClaimRecord& r) {
  const fb::ResourceClaimStatus* s = r.table().status();
  return s == nullptr || s->reserved_for() == nullptr ? 0 : s->reserved_for()->size();
}

std::vector<std::string> ClaimRow(const ClaimRecord& r, bool wide, bool namespaced) {
  std::vector<std::string> row = {std::string(r.name()), State(r), absl::StrCat(ConsumerCount(r)),
                                  absl::StrCat(r.mod_revision())};
  if (wide) {
    row.insert(row.begin() + 2, Devices(r));
    row.push_back(r.unvalidated()
                      ? absl::StrCat("no (", ValidateClaimStatus(nullptr, r).size(), " errors)")
                      : "yes");
  }
  if (namespaced) row.insert(row.begin(), std::string(r.claim_namespace()));
  return row;
}

std::vector<std::string> ClaimHeader(bool wide, bool namespaced) {
  std::vector<std::string> h = {"NAME", "STATE", "CONSUMERS", "REVISION"};
  if (wide) {
    h.insert(h.begin() + 2, "DEVICES");
    h.push_back("VALIDATED");
  }
  if (namespaced) h.insert(h.begin(), "NAMESPACE");
  return h;
}

void PrintJsonLines(const std::vector<ClaimRecord>& records) {
  std::string line;
  for (const ClaimRecord& r : records) {
    line.clear();
    AppendClaimJson(r, /*with_type_meta=*/true, &line);
    std::cout << line << "\n";
  }
}

absl::Status ForEachClaimKey(Store& store, const std::function<void(ClaimKey)>& visit) {
  for (ListOptions page_options{.limit = 5000};;) {
    absl::StatusOr<ListPage> page = store.List(page_options);
    if (!page.ok()) return page.status();
    for (const ClaimRecord& r : page->records) {
      visit(ClaimKey{std::string(r.claim_namespace()), std::string(r.name())});
    }
    if (page->continue_token.empty()) return absl::OkStatus();
    page_options.continue_token = page->continue_token;
  }
}

std::string ClaimWhere(const std::string& file, const DecodedClaim& c) {
  return absl::StrCat(file, ": document ", c.document,
                      c.item >= 0 ? absl::StrCat(", item ", c.item) : std::string(), " (",
                      c.record.claim_namespace(), "/", c.record.name(), ")");
}

ScratchDir::ScratchDir() {
  char pattern[] = "/tmp/claimstore-dry-run-XXXXXX";
  if (mkdtemp(pattern) != nullptr) path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

absl::StatusOr<std::unique_ptr<Store>> OpenTarget(const Context& context, bool dry_run,
                                                  std::unique_ptr<ScratchDir>* scratch) {
  const bool shared = !context.WithShared({}).etcd_endpoints.empty();
  if (!dry_run || shared) return OpenForWriting(context, /*create=*/true);  // the one that creates
  // (The indexes are read only if the check needs them.)
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(context.DbPath(), {.create_if_missing = false, .defer_index_load = true});
  if (!absl::IsNotFound(store.status())) return store;
  *scratch = std::make_unique<ScratchDir>();
  return Store::Open((*scratch)->path() + "/db", {.defer_index_load = true});
}

}  // namespace claimstore::cli
