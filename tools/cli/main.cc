// claimstore: restore and dump a cluster's claim state, inspect it live,
// reserve and release from the shell. Uses the public API only.
//
// Exit codes: 0 success; 1 invalid input or usage; 2 not found; 3 conflict
// (revision mismatch, device held by another claim); 4 refused by a rule
// (not allocated, still reserved, 256 consumers, being deleted); 5 storage
// error or corruption. Errors go to stderr as "Error: ...", one per line.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "claimstore/store.h"
#include "claimstore/validation.h"

namespace claimstore::cli {
namespace {

// --- Arguments -------------------------------------------------------------

// The arguments of one command: positionals and --flags (with values).
class Args {
 public:
  Args(std::vector<std::string> argv, std::set<std::string> value_flags,
       std::set<std::string> bool_flags)
      : value_flags_(std::move(value_flags)), bool_flags_(std::move(bool_flags)) {
    for (size_t i = 0; i < argv.size(); ++i) {
      const std::string& a = argv[i];
      if (a.size() > 1 && a[0] == '-' && a != "-") {
        std::string name = a, value;
        const size_t eq = a.find('=');
        if (eq != std::string::npos) {
          name = a.substr(0, eq);
          value = a.substr(eq + 1);
        }
        if (name == "-h" || name == "--help") {
          help_ = true;
        } else if (value_flags_.count(name)) {
          if (eq == std::string::npos) {
            if (i + 1 >= argv.size()) {
              error_ = absl::StrCat("flag ", name, " needs a value");
              return;
            }
            value = argv[++i];
          }
          values_[name] = value;
        } else if (bool_flags_.count(name) && eq == std::string::npos) {
          values_[name] = "true";
        } else {
          error_ = absl::StrCat("unknown flag ", name);
          return;
        }
      } else {
        positional_.push_back(a);
      }
    }
  }
  bool help() const { return help_; }
  const std::string& error() const { return error_; }
  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(const std::string& flag) const { return values_.count(flag) > 0; }
  std::string Get(const std::string& flag, const std::string& fallback = "") const {
    auto it = values_.find(flag);
    return it == values_.end() ? fallback : it->second;
  }

 private:
  std::set<std::string> value_flags_, bool_flags_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  std::string error_;
  bool help_ = false;
};

// --- Errors and exit codes -------------------------------------------------

int ExitCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk: return 0;
    case absl::StatusCode::kInvalidArgument: return 1;
    case absl::StatusCode::kNotFound: return 2;
    case absl::StatusCode::kAborted: return 3;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted: return 4;
    default: return 5;
  }
}

// Prints the error (validation errors one per field) and returns its exit code.
int Fail(const absl::Status& s, const std::string& context = "") {
  const std::string prefix = context.empty() ? "" : context + ": ";
  const std::vector<FieldError> fields = FieldErrorsOf(s);
  if (fields.empty()) {
    std::cerr << "Error: " << prefix << s.message() << "\n";
  } else {
    for (const FieldError& e : fields) std::cerr << "Error: " << prefix << e.ToString() << "\n";
  }
  return ExitCode(s);
}

int Usage(const std::string& message, const char* usage) {
  std::cerr << "Error: " << message << "\n" << usage;
  return 1;
}

// --- Input and output ----------------------------------------------------------

absl::StatusOr<std::string> ReadInput(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string DbPath(const Args& args) {
  if (args.Has("--db")) return args.Get("--db");
  if (const char* env = getenv("CLAIMSTORE_DB"); env != nullptr && *env) return env;
  return "./claimstore.db";
}

absl::StatusOr<std::unique_ptr<Store>> OpenForReading(const Args& args) {
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(DbPath(args), {.create_if_missing = false, .read_only = true});
  if (!store.ok()) return store.status();
  if (absl::Status s = (*store)->Refresh(); !s.ok()) return s;
  return store;
}

absl::StatusOr<std::unique_ptr<Store>> OpenForWriting(const Args& args) {
  return Store::Open(DbPath(args), {.sync_writes = true});
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
  std::vector<std::string> out;
  for (const auto* res : *s->allocation()->results()) {
    out.push_back(absl::StrCat(res->driver()->str(), "/", res->pool()->str(), "/",
                               res->device()->str()));
  }
  return absl::StrJoin(out, ",");
}

size_t Consumers(const ClaimRecord& r) {
  const fb::ResourceClaimStatus* s = r.table().status();
  return s == nullptr || s->reserved_for() == nullptr ? 0 : s->reserved_for()->size();
}

// A kubectl-like table: columns padded to their widest cell.
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

std::vector<std::string> Row(const ClaimRecord& r, bool wide) {
  std::vector<std::string> row = {std::string(r.claim_namespace()), std::string(r.name()),
                                  State(r), absl::StrCat(Consumers(r)),
                                  absl::StrCat(r.mod_revision())};
  if (wide) row.insert(row.begin() + 3, Devices(r));
  return row;
}

std::vector<std::string> Header(bool wide) {
  std::vector<std::string> h = {"NAMESPACE", "NAME", "STATE", "CONSUMERS", "REVISION"};
  if (wide) h.insert(h.begin() + 3, "DEVICES");
  return h;
}

// A minimal YAML rendering of JSON (block style), for -o yaml.
void AppendYaml(const std::string& json, std::string* out);

// --- Commands --------------------------------------------------------------

constexpr char kGenerateUsage[] =
    "Usage: claimstore generate --claims N [--seed S]\n"
    "Prints N realistic claims as a ResourceClaimList (JSON lines with -o jsonl).\n";

int Generate(const std::vector<std::string>& argv) {
  Args args(argv, {"--claims", "--seed", "-o"}, {});
  if (args.help()) return std::cout << kGenerateUsage, 0;
  if (!args.error().empty()) return Usage(args.error(), kGenerateUsage);
  uint64_t n = 0, seed = 1;
  if (!absl::SimpleAtoi(args.Get("--claims"), &n) || !absl::SimpleAtoi(args.Get("--seed", "1"), &seed)) {
    return Usage("--claims N (and --seed S) must be whole numbers", kGenerateUsage);
  }
  const bool lines = args.Get("-o", "json") == "jsonl";
  std::string out = lines ? "" : R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1","metadata":{"resourceVersion":""},"items":[)";
  for (uint64_t i = 0; i < n; ++i) {
    if (!lines && i > 0) out += ",";
    out += GenerateClaimJson(i, seed);
    if (lines) out += "\n";
    if (out.size() > (1 << 20)) {
      std::cout << out;
      out.clear();
    }
  }
  if (!lines) out += "]}\n";
  std::cout << out;
  return 0;
}

constexpr char kRestoreUsage[] =
    "Usage: claimstore [--db DIR] restore [FILE...|-] [--dry-run] [--no-validate] [--replace]\n"
    "Reads claims in any form (claim, list, kubectl List, JSON lines, watch events),\n"
    "checks everything, then writes: nothing is written if any item is bad.\n"
    "  --dry-run      only check\n"
    "  --no-validate  skip semantic validation (decoding stays strict)\n"
    "  --replace      empty the database first: afterwards it holds exactly the input\n";

// An input's bytes, mapped read-only (stdin is spooled to a temporary file
// first), so that even a multi-gigabyte dump is not copied onto the heap.
class InputFile {
 public:
  static absl::StatusOr<std::unique_ptr<InputFile>> Open(const std::string& path) {
    auto file = std::unique_ptr<InputFile>(new InputFile());
    std::string name = path;
    if (path == "-") {
      char pattern[] = "/tmp/claimstore-stdin-XXXXXX";
      const int fd = mkstemp(pattern);
      if (fd < 0) return absl::InternalError("cannot spool standard input");
      file->spool_ = pattern;
      char buf[1 << 16];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) {
        if (write(fd, buf, n) != static_cast<ssize_t>(n)) {
          close(fd);
          return absl::InternalError("cannot spool standard input");
        }
      }
      close(fd);
      name = pattern;
    }
    file->fd_ = open(name.c_str(), O_RDONLY);
    if (file->fd_ < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
    struct stat st;
    if (fstat(file->fd_, &st) != 0) return absl::InternalError(absl::StrCat(path, ": cannot stat"));
    file->size_ = static_cast<size_t>(st.st_size);
    if (file->size_ > 0) {
      void* data = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, file->fd_, 0);
      if (data == MAP_FAILED) return absl::InternalError(absl::StrCat(path, ": cannot map"));
      file->data_ = static_cast<const char*>(data);
      madvise(data, file->size_, MADV_SEQUENTIAL);  // read once, front to back
    }
    return file;
  }
  // Gives the pages read so far back to the kernel (they are re-read from
  // the file on the next pass), so the input does not pile up in memory.
  void Release() const {
    if (data_ != nullptr) madvise(const_cast<char*>(data_), size_, MADV_DONTNEED);
  }
  ~InputFile() {
    if (data_ != nullptr) munmap(const_cast<char*>(data_), size_);
    if (fd_ >= 0) close(fd_);
    if (!spool_.empty()) unlink(spool_.c_str());
  }
  absl::string_view text() const { return absl::string_view(data_ != nullptr ? data_ : "", size_); }

 private:
  InputFile() = default;
  int fd_ = -1;
  const char* data_ = nullptr;
  size_t size_ = 0;
  std::string spool_;
};

// What restore keeps of each claim between its two passes: where its final
// version is, and what it holds (for the conflict check). Not the record.
struct RestoreEntry {
  uint64_t ordinal = 0;  // of the claim's last occurrence in the input
  bool deleted = false;  // the last occurrence was a DELETED watch event
  std::vector<std::string> exclusive, shares;  // device ids; "id\x1fshareID"
};

// A progress line on a terminal, nothing when stderr is piped.
class Progress {
 public:
  explicit Progress(const char* what) : what_(what), tty_(isatty(STDERR_FILENO) != 0) {}
  void Tick(uint64_t n) {
    if (tty_ && n % 10000 == 0) std::fprintf(stderr, "\r%s: %llu claims", what_, (unsigned long long)n);
  }
  void Done(uint64_t n) {
    if (tty_) std::fprintf(stderr, "\r%s: %llu claims, done\n", what_, (unsigned long long)n);
  }

 private:
  const char* what_;
  bool tty_;
};

// A failed bulk load wrote nothing of the input; the claims it was to
// replace were deleted before it.
int BulkFailed(const absl::Status& s, size_t deleted) {
  std::cerr << "Error: " << s.message() << "\n"
            << "Error: restore failed: nothing of the input was written";
  if (deleted > 0) std::cerr << "; the " << deleted << " claim(s) it replaces were deleted";
  std::cerr << "\n";
  return ExitCode(s);
}

int Restore(const std::vector<std::string>& argv, const Args& global) {
  Args args(argv, {}, {"--dry-run", "--no-validate", "--replace"});
  if (args.help()) return std::cout << kRestoreUsage, 0;
  if (!args.error().empty()) return Usage(args.error(), kRestoreUsage);
  std::vector<std::string> names = args.positional();
  if (names.empty()) names.push_back("-");
  std::vector<std::unique_ptr<InputFile>> inputs;
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<InputFile>> f = InputFile::Open(name);
    if (!f.ok()) return Fail(f.status());
    inputs.push_back(*std::move(f));
  }
  const bool validate = !args.Has("--no-validate");

  // Pass 1: decode and check everything; keep keys and holdings only.
  std::map<ClaimKey, RestoreEntry> entries;
  uint64_t ordinal = 0;
  bool reported = false;  // the errors were printed one per field already
  Progress check("checking");
  for (size_t f = 0; f < inputs.size(); ++f) {
    absl::Status s = DecodeClaims(inputs[f]->text(), [&](DecodedClaim c) -> absl::Status {
      const std::string where =
          absl::StrCat(names[f], ": document ", c.document,
                       c.item >= 0 ? absl::StrCat(", item ", c.item) : std::string(), " (",
                       c.record.claim_namespace(), "/", c.record.name(), ")");
      check.Tick(++ordinal);
      if (c.record.claim_namespace().empty() || c.record.name().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": metadata.namespace and metadata.name: Required value"));
      }
      const bool deleted = c.event == WatchEventType::kDeleted;
      if (validate && !deleted) {
        if (absl::Status v = ValidationStatus(ValidateClaimStatus(nullptr, c.record)); !v.ok()) {
          for (const FieldError& e : FieldErrorsOf(v)) {
            std::cerr << "Error: " << where << ": " << e.ToString() << "\n";
          }
          reported = true;
          return v;
        }
      }
      RestoreEntry& entry = entries[ClaimKey{std::string(c.record.claim_namespace()),
                                             std::string(c.record.name())}];
      entry = RestoreEntry{ordinal, deleted, {}, {}};
      const fb::ResourceClaimStatus* st = c.record.table().status();
      if (deleted || st == nullptr || st->allocation() == nullptr ||
          st->allocation()->results() == nullptr) {
        return absl::OkStatus();
      }
      for (const auto* r : *st->allocation()->results()) {
        if (r->admin_access().has_value() && *r->admin_access()) continue;  // never conflicts
        std::string id = absl::StrCat(r->driver()->str(), "/", r->pool()->str(), "/", r->device()->str());
        if (r->share_id() == nullptr) {
          entry.exclusive.push_back(std::move(id));
        } else {
          entry.shares.push_back(absl::StrCat(id, "\x1f", r->share_id()->str()));
        }
      }
      return absl::OkStatus();
    });
    inputs[f]->Release();
    if (!s.ok()) {
      if (!reported) std::cerr << "Error: " << names[f] << ": " << s.message() << "\n";
      std::cerr << "Error: restore refused: nothing was written\n";
      return ExitCode(s);
    }
  }
  check.Done(ordinal);

  // Two claims of the input holding one device in conflicting ways (RULES.md b).
  if (validate) {
    std::map<std::string, std::string> exclusive_holder;          // device → claim
    std::map<std::string, std::set<std::string>> share_holders;   // device → claims
    std::map<std::string, std::string> share_holder;              // device+share → claim
    std::vector<std::string> clashes;
    for (const auto& [key, entry] : entries) {
      if (entry.deleted) continue;
      const std::string claim = key.ToString();
      for (const std::string& id : entry.exclusive) {
        auto [it, fresh] = exclusive_holder.emplace(id, claim);
        if (!fresh && it->second != claim) clashes.push_back(absl::StrCat(id, " is held by both ", it->second, " and ", claim));
      }
      for (const std::string& share : entry.shares) {
        auto [it, fresh] = share_holder.emplace(share, claim);
        if (!fresh && it->second != claim) {
          clashes.push_back(absl::StrCat(share.substr(0, share.find('\x1f')), " is held by both ",
                                         it->second, " and ", claim, " (the same shareID)"));
        }
        share_holders[share.substr(0, share.find('\x1f'))].insert(claim);
      }
    }
    for (const auto& [id, claims] : share_holders) {
      auto it = exclusive_holder.find(id);
      if (it == exclusive_holder.end()) continue;
      for (const std::string& claim : claims) {
        if (claim != it->second) clashes.push_back(absl::StrCat(id, " is held by both ", it->second, " and ", claim));
      }
    }
    if (!clashes.empty()) {
      for (const std::string& c : clashes) std::cerr << "Error: device " << c << "\n";
      std::cerr << "Error: restore refused: nothing was written\n";
      return 1;
    }
  }
  if (args.Has("--dry-run")) {
    std::cout << "checked " << ordinal << " item(s): " << entries.size() << " claim(s), nothing written\n";
    return 0;
  }

  absl::StatusOr<std::unique_ptr<Store>> store = OpenForWriting(global);
  if (!store.ok()) return Fail(store.status());
  // The claims that go first: with --replace every stored claim, else those
  // the input deletes or replaces, so that their devices are free.
  std::vector<ClaimKey> to_delete;
  size_t stored = 0;
  for (ListOptions page_options{.limit = 5000};;) {
    absl::StatusOr<ListPage> page = (*store)->List(page_options);
    if (!page.ok()) return Fail(page.status());
    stored += page->records.size();
    for (const ClaimRecord& r : page->records) {
      ClaimKey key{std::string(r.claim_namespace()), std::string(r.name())};
      if (args.Has("--replace") || entries.count(key)) to_delete.push_back(std::move(key));
    }
    if (page->continue_token.empty()) break;
    page_options.continue_token = page->continue_token;
  }
  for (const ClaimKey& key : to_delete) {
    absl::StatusOr<WriteResult> r = (*store)->Delete(key);
    if (!r.ok() && !absl::IsNotFound(r.status())) return Fail(r.status());
  }

  // Pass 2: decode again, writing each claim's final version: into a bulk
  // load when the store is now empty (all or nothing, several times
  // faster), else in batches.
  std::unique_ptr<BulkLoad> bulk;
  if (to_delete.size() == stored) {
    absl::StatusOr<std::unique_ptr<BulkLoad>> started = (*store)->StartBulkLoad();
    if (!started.ok()) return Fail(started.status());
    bulk = *std::move(started);
  }
  std::vector<ClaimRecord> chunk;
  uint64_t written = 0, seen = 0;
  Progress progress("restoring");
  const auto flush = [&]() -> absl::Status {
    if (chunk.empty() || bulk != nullptr) return absl::OkStatus();
    absl::StatusOr<std::vector<WriteResult>> r = (*store)->PutAll(chunk);
    if (!r.ok()) return r.status();
    written += chunk.size();
    chunk.clear();
    progress.Tick(written - written % 10000);
    return absl::OkStatus();
  };
  for (size_t f = 0; f < inputs.size(); ++f) {
    absl::Status s = DecodeClaims(inputs[f]->text(), [&](DecodedClaim c) -> absl::Status {
      ++seen;
      const auto it = entries.find(ClaimKey{std::string(c.record.claim_namespace()),
                                            std::string(c.record.name())});
      if (it == entries.end() || it->second.ordinal != seen || it->second.deleted) {
        return absl::OkStatus();  // a later version follows, or it was deleted
      }
      if (bulk != nullptr) {
        progress.Tick(++written);
        return bulk->Add(c.record);
      }
      chunk.push_back(std::move(c.record));
      return chunk.size() == 5000 ? flush() : absl::OkStatus();
    });
    if (s.ok()) s = flush();
    inputs[f]->Release();
    if (!s.ok() && bulk == nullptr) {
      std::cerr << "Error: restore stopped after " << written << " claim(s) were written: "
                << s.message() << "\n";
      return ExitCode(s);
    }
    if (!s.ok()) return BulkFailed(s, to_delete.size());
  }
  if (bulk != nullptr) {
    if (absl::Status s = bulk->Commit().status(); !s.ok()) return BulkFailed(s, to_delete.size());
  }
  progress.Done(written);
  // A bulk load lands in its final shape; batches and deletions need a
  // compaction so that reads do not wait behind them.
  if (bulk == nullptr || !to_delete.empty()) {
    if (absl::Status s = (*store)->Compact(); !s.ok()) return Fail(s);
  }
  absl::StatusOr<StoreStats> stats = (*store)->Stats();
  std::cout << "restored " << written << " claim(s) from " << ordinal << " item(s); revision "
            << (stats.ok() ? stats->revision : 0) << "\n";
  return 0;
}

constexpr char kDumpUsage[] =
    "Usage: claimstore [--db DIR] dump [-o json|jsonl|yaml]\n"
    "Prints every claim at one snapshot, in namespace/name order.\n";

int Dump(const std::vector<std::string>& argv, const Args& global) {
  Args args(argv, {"-o"}, {});
  if (args.help()) return std::cout << kDumpUsage, 0;
  if (!args.error().empty()) return Usage(args.error(), kDumpUsage);
  const std::string format = args.Get("-o", "json");
  if (format != "json" && format != "jsonl" && format != "yaml") {
    return Usage("-o must be json, jsonl or yaml", kDumpUsage);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(global);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<ListPage> all = (*store)->List({});  // one snapshot
  if (!all.ok()) return Fail(all.status());
  if (format == "jsonl") {
    std::string line;
    for (const ClaimRecord& r : all->records) {
      line.clear();
      AppendClaimJson(r, /*with_type_meta=*/true, &line);
      std::cout << line << "\n";
    }
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

constexpr char kGetUsage[] = "Usage: claimstore [--db DIR] get NAMESPACE/NAME [-o json|yaml|wide]\n";

int Get(const std::vector<std::string>& argv, const Args& global) {
  Args args(argv, {"-o"}, {});
  if (args.help()) return std::cout << kGetUsage, 0;
  if (!args.error().empty()) return Usage(args.error(), kGetUsage);
  if (args.positional().size() != 1) return Usage("get takes one NAMESPACE/NAME", kGetUsage);
  absl::StatusOr<ClaimKey> key = ClaimKey::Parse(args.positional()[0]);
  if (!key.ok()) return Fail(key.status());
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(global);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<ClaimRead> read = (*store)->Get(*key);
  if (!read.ok()) return Fail(read.status());
  const std::string format = args.Get("-o", "");
  if (format == "json") {
    std::cout << EncodeClaim(read->record, {.indent = "    "}) << "\n";
  } else if (format == "yaml") {
    std::string yaml;
    AppendYaml(EncodeClaim(read->record), &yaml);
    std::cout << yaml;
  } else if (format.empty() || format == "wide") {
    PrintTable({Header(format == "wide"), Row(read->record, format == "wide")});
  } else {
    return Usage("-o must be json, yaml or wide", kGetUsage);
  }
  return 0;
}

constexpr char kListUsage[] = "Usage: claimstore [--db DIR] list [-n NAMESPACE] [-o name|wide|json]\n";

int List(const std::vector<std::string>& argv, const Args& global) {
  Args args(argv, {"-n", "-o"}, {});
  if (args.help()) return std::cout << kListUsage, 0;
  if (!args.error().empty()) return Usage(args.error(), kListUsage);
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(global);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<ListPage> page = (*store)->List({.claim_namespace = args.Get("-n")});
  if (!page.ok()) return Fail(page.status());
  const std::string format = args.Get("-o", "");
  if (format == "name") {
    for (const ClaimRecord& r : page->records) std::cout << r.claim_namespace() << "/" << r.name() << "\n";
  } else if (format == "json") {
    std::cout << EncodeClaimList(page->records, absl::StrCat(page->revision), {.indent = "    "}) << "\n";
  } else if (format.empty() || format == "wide") {
    std::vector<std::vector<std::string>> rows = {Header(format == "wide")};
    for (const ClaimRecord& r : page->records) rows.push_back(Row(r, format == "wide"));
    PrintTable(rows);
  } else {
    return Usage("-o must be name, wide or json", kListUsage);
  }
  return 0;
}

constexpr char kFindUsage[] =
    "Usage: claimstore [--db DIR] find --consumer UID\n"
    "       claimstore [--db DIR] find --device DRIVER[/POOL[/DEVICE[/SHAREID]]]\n";

int Find(const std::vector<std::string>& argv, const Args& global) {
  Args args(argv, {"--consumer", "--device"}, {});
  if (args.help()) return std::cout << kFindUsage, 0;
  if (!args.error().empty()) return Usage(args.error(), kFindUsage);
  if (args.Has("--consumer") == args.Has("--device")) {
    return Usage("give exactly one of --consumer and --device", kFindUsage);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(global);
  if (!store.ok()) return Fail(store.status());
  if (args.Has("--consumer")) {
    absl::StatusOr<ClaimKeys> claims = (*store)->ClaimsReservedFor(args.Get("--consumer"));
    if (!claims.ok()) return Fail(claims.status());
    for (const ClaimKey& k : claims->claims) std::cout << k.ToString() << "\n";
    return 0;
  }
  std::vector<std::string> parts = absl::StrSplit(args.Get("--device"), '/');
  if (parts.empty() || parts[0].empty() || parts.size() > 4) {
    return Usage("--device takes DRIVER[/POOL[/DEVICE[/SHAREID]]]", kFindUsage);
  }
  DeviceQuery q{parts[0], {}, {}, {}};
  if (parts.size() > 1) q.pool = parts[1];
  if (parts.size() > 2) q.device = parts[2];
  if (parts.size() > 3) q.share_id = parts[3];
  absl::StatusOr<DeviceHoldings> h = (*store)->ClaimsUsingDevice(q);
  if (!h.ok()) return Fail(h.status());
  std::vector<std::vector<std::string>> rows = {{"DEVICE", "HOLDING", "CLAIM"}};
  for (const DeviceHolding& d : h->holdings) {
    const std::string holding = d.kind == HoldingKind::kExclusive ? "exclusive"
                                : d.kind == HoldingKind::kShare   ? "share " + d.share_id
                                                                  : "admin-access";
    rows.push_back({absl::StrCat(d.driver, "/", d.pool, "/", d.device), holding, d.claim.ToString()});
  }
  PrintTable(rows);
  return 0;
}

// The write commands share: NAMESPACE/NAME, --if-revision, printing the revision.
struct WriteCommand {
  const char* usage;
  std::set<std::string> value_flags;
  std::function<absl::StatusOr<WriteResult>(Store&, const ClaimKey&, const Args&,
                                            const Preconditions&)>
      run;
};

int RunWrite(const WriteCommand& command, const std::vector<std::string>& argv,
             const Args& global) {
  std::set<std::string> flags = command.value_flags;
  flags.insert("--if-revision");
  Args args(argv, flags, {});
  if (args.help()) return std::cout << command.usage, 0;
  if (!args.error().empty()) return Usage(args.error(), command.usage);
  if (args.positional().size() != 1) return Usage("give one NAMESPACE/NAME", command.usage);
  absl::StatusOr<ClaimKey> key = ClaimKey::Parse(args.positional()[0]);
  if (!key.ok()) return Fail(key.status());
  Preconditions pre;
  if (args.Has("--if-revision")) {
    uint64_t revision = 0;
    if (!absl::SimpleAtoi(args.Get("--if-revision"), &revision)) {
      return Usage("--if-revision takes a revision number", command.usage);
    }
    pre.mod_revision = revision;
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForWriting(global);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<WriteResult> r = command.run(**store, *key, args, pre);
  if (!r.ok()) return Fail(r.status());
  std::cout << r->revision << "\n";
  return 0;
}

const std::map<std::string, WriteCommand>& WriteCommands() {
  static const auto* commands = new std::map<std::string, WriteCommand>{
      {"reserve",
       {"Usage: claimstore [--db DIR] reserve NAMESPACE/NAME --consumer [GROUP/]RESOURCE/NAME/UID "
        "[--if-revision N]\n",
        {"--consumer"},
        [](Store& s, const ClaimKey& k, const Args& a, const Preconditions& p) -> absl::StatusOr<WriteResult> {
          std::vector<std::string> parts = absl::StrSplit(a.Get("--consumer"), '/');
          if (parts.size() == 3) parts.insert(parts.begin(), "");
          if (parts.size() != 4) {
            return absl::InvalidArgumentError("--consumer takes [GROUP/]RESOURCE/NAME/UID");
          }
          return s.Reserve(k, ConsumerRef{parts[0], parts[1], parts[2], parts[3]}, p);
        }}},
      {"unreserve",
       {"Usage: claimstore [--db DIR] unreserve NAMESPACE/NAME --uid UID [--if-revision N]\n",
        {"--uid"},
        [](Store& s, const ClaimKey& k, const Args& a, const Preconditions& p) -> absl::StatusOr<WriteResult> {
          if (!a.Has("--uid")) return absl::InvalidArgumentError("--uid is required");
          return s.Unreserve(k, a.Get("--uid"), p);
        }}},
      {"allocate",
       {"Usage: claimstore [--db DIR] allocate NAMESPACE/NAME -f ALLOCATION.json [--if-revision N]\n",
        {"-f"},
        [](Store& s, const ClaimKey& k, const Args& a, const Preconditions& p) -> absl::StatusOr<WriteResult> {
          if (!a.Has("-f")) return absl::InvalidArgumentError("-f ALLOCATION.json is required");
          absl::StatusOr<std::string> json = ReadInput(a.Get("-f"));
          if (!json.ok()) return json.status();
          absl::StatusOr<Allocation> allocation = Allocation::FromJson(*json);
          if (!allocation.ok()) return allocation.status();
          return s.Allocate(k, *allocation, p);
        }}},
      {"deallocate",
       {"Usage: claimstore [--db DIR] deallocate NAMESPACE/NAME [--if-revision N]\n",
        {},
        [](Store& s, const ClaimKey& k, const Args&, const Preconditions& p) {
          return s.Deallocate(k, p);
        }}},
      {"delete",
       {"Usage: claimstore [--db DIR] delete NAMESPACE/NAME [--if-revision N]\n",
        {},
        [](Store& s, const ClaimKey& k, const Args&, const Preconditions& p) {
          return s.Delete(k, p);
        }}},
  };
  return *commands;
}

constexpr char kVerifyUsage[] =
    "Usage: claimstore [--db DIR] verify [--repair]\n"
    "Reads every record, recomputes every index entry and compares; exit 0 only when clean.\n";

int Verify(const std::vector<std::string>& argv, const Args& global) {
  Args args(argv, {}, {"--repair"});
  if (args.help()) return std::cout << kVerifyUsage, 0;
  if (!args.error().empty()) return Usage(args.error(), kVerifyUsage);
  absl::StatusOr<std::unique_ptr<Store>> store =
      args.Has("--repair") ? OpenForWriting(global) : OpenForReading(global);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<VerifyReport> report = (*store)->Verify(args.Has("--repair"));
  if (!report.ok()) return Fail(report.status());
  for (const std::string& p : report->problems) std::cerr << "Error: " << p << "\n";
  std::cout << report->records << " claim(s), " << report->index_entries << " index entries, "
            << report->problems.size() << " problem(s)" << (report->repaired ? ", indexes rebuilt" : "")
            << "\n";
  return report->problems.empty() || report->repaired ? 0 : 5;
}

constexpr char kStatsUsage[] = "Usage: claimstore [--db DIR] stats\n";

int Stats(const std::vector<std::string>& argv, const Args& global) {
  Args args(argv, {}, {});
  if (args.help()) return std::cout << kStatsUsage, 0;
  if (!args.error().empty()) return Usage(args.error(), kStatsUsage);
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(global);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<StoreStats> s = (*store)->Stats();
  if (!s.ok()) return Fail(s.status());
  PrintTable({{"claims", absl::StrCat(s->claims)},
              {"allocated", absl::StrCat(s->allocated)},
              {"reserved", absl::StrCat(s->reserved)},
              {"consumer index entries", absl::StrCat(s->consumer_entries)},
              {"device index entries", absl::StrCat(s->device_entries)},
              {"revision", absl::StrCat(s->revision)},
              {"size on disk (bytes)", absl::StrCat(s->size_on_disk_bytes)}});
  return 0;
}

constexpr char kBackupUsage[] = "Usage: claimstore [--db DIR] backup DIR\n";

int Backup(const std::vector<std::string>& argv, const Args& global) {
  Args args(argv, {}, {});
  if (args.help()) return std::cout << kBackupUsage, 0;
  if (!args.error().empty()) return Usage(args.error(), kBackupUsage);
  if (args.positional().size() != 1) return Usage("backup takes one DIR", kBackupUsage);
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForWriting(global);
  if (!store.ok()) return Fail(store.status());
  if (absl::Status s = (*store)->Backup(args.positional()[0]); !s.ok()) return Fail(s);
  std::cout << "backup written to " << args.positional()[0] << "\n";
  return 0;
}

constexpr char kDecodeUsage[] =
    "Usage: claimstore decode [-o json|jsonl] [FILE...|-]\n"
    "Decodes claims in any input form and prints them back in the API form.\n";

int Decode(const std::vector<std::string>& argv) {
  Args args(argv, {"-o"}, {});
  if (args.help()) return std::cout << kDecodeUsage, 0;
  if (!args.error().empty()) return Usage(args.error(), kDecodeUsage);
  const std::string format = args.Get("-o", "json");
  if (format != "json" && format != "jsonl") return Usage("-o must be json or jsonl", kDecodeUsage);
  std::vector<std::string> files = args.positional();
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
    std::string line;
    for (const ClaimRecord& r : records) {
      line.clear();
      AppendClaimJson(r, /*with_type_meta=*/true, &line);
      std::cout << line << "\n";
    }
  } else {
    std::cout << EncodeClaimList(records, "", {.indent = "    "}) << "\n";
  }
  return 0;
}

// YAML: JSON is valid YAML, but operators expect block style. A small
// converter over the compact JSON the encoder writes (strings stay quoted
// JSON strings, which YAML reads as the same values).
void AppendYamlValue(absl::string_view json, size_t* pos, int indent, bool in_list_item,
                     std::string* out);

void SkipString(absl::string_view json, size_t* pos) {
  ++*pos;
  while (json[*pos] != '"') *pos += json[*pos] == '\\' ? 2 : 1;
  ++*pos;
}

void AppendYamlValue(absl::string_view json, size_t* pos, int indent, bool in_list_item,
                     std::string* out) {
  const std::string pad(indent, ' ');
  const char c = json[*pos];
  if (c == '{' || c == '[') {
    const bool object = c == '{';
    ++*pos;
    if (json[*pos] == (object ? '}' : ']')) {
      ++*pos;
      *out += object ? " {}\n" : " []\n";
      return;
    }
    if (!in_list_item) *out += "\n";
    bool first = true;
    while (true) {
      if (object) {
        const size_t start = *pos;
        SkipString(json, pos);
        const absl::string_view key = json.substr(start, *pos - start);
        ++*pos;  // ':'
        *out += (first && in_list_item) ? "" : pad;
        absl::StrAppend(out, key.substr(1, key.size() - 2), ":");
        AppendYamlValue(json, pos, indent + 2, false, out);
      } else {
        absl::StrAppend(out, pad, "-");
        const char next = json[*pos];
        if (next == '{' || next == '[') {
          *out += " ";
          AppendYamlValue(json, pos, indent + 2, true, out);
        } else {
          AppendYamlValue(json, pos, indent + 2, false, out);
        }
      }
      first = false;
      if (json[*pos] == ',') {
        ++*pos;
        continue;
      }
      ++*pos;  // closing bracket
      return;
    }
  }
  const size_t start = *pos;
  if (c == '"') {
    SkipString(json, pos);
  } else {
    while (*pos < json.size() && json[*pos] != ',' && json[*pos] != '}' && json[*pos] != ']') ++*pos;
  }
  absl::StrAppend(out, " ", json.substr(start, *pos - start), "\n");
}

void AppendYaml(const std::string& json, std::string* out) {
  size_t pos = 0;
  std::string body;
  AppendYamlValue(json, &pos, 0, true, &body);
  *out += body;
}

// --- The main job ------------------------------------------------------------

int Demo(const Args& global) {
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::time_point since) {
    return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
  };
  const std::string db = DbPath(global);
  constexpr int kClaims = 10000;
  std::cout << "== claimstore main job on " << db << "\n";
  auto t = Clock::now();
  std::vector<ClaimRecord> records;
  for (int i = 0; i < kClaims; ++i) records.push_back(*DecodeClaim(GenerateClaimJson(i, 7)));
  std::printf("generate + decode %d claims: %.0f ms\n", kClaims, ms(t));

  t = Clock::now();
  // The demo empties its database first, so it only ever touches one it
  // created itself: never an operator's real claim state.
  const std::string marker = db + "/CLAIMSTORE_DEMO";
  const bool ours = std::ifstream(marker).good();
  auto opened = Store::Open(db, {});
  if (!opened.ok()) return Fail(opened.status());
  Store& store = **opened;
  if (!ours) {
    auto stats = store.Stats();
    if (!stats.ok()) return Fail(stats.status());
    if (stats->claims > 0) {
      std::cerr << "Error: " << db << " holds " << stats->claims
                << " claim(s) the demo did not write; the demo empties its database, so it "
                   "refuses this one (use --db to point it elsewhere)\n";
      return 4;
    }
    std::ofstream(marker) << "created by claimstore demo\n";
  }
  std::vector<ClaimKey> existing;
  for (ListOptions o{.limit = 5000};;) {  // start from an empty database
    auto page = store.List(o);
    if (!page.ok()) return Fail(page.status());
    for (const auto& r : page->records) existing.push_back({std::string(r.claim_namespace()), std::string(r.name())});
    if (page->continue_token.empty()) break;
    o.continue_token = page->continue_token;
  }
  for (const ClaimKey& k : existing) (void)store.Delete(k);
  for (size_t i = 0; i < records.size(); i += 2500) {
    const size_t n = std::min<size_t>(2500, records.size() - i);
    if (auto r = store.PutAll({records.data() + i, n}); !r.ok()) return Fail(r.status());
  }
  if (absl::Status s = store.Compact(); !s.ok()) return Fail(s);
  std::printf("restore (validate + write + compact) %d claims: %.0f ms\n", kClaims, ms(t));

  // What a scheduler asks.
  const ClaimRecord& sample = records[3];
  const std::string pod = sample.table().status()->reserved_for()->Get(0)->uid()->str();
  t = Clock::now();
  auto mine = store.ClaimsReservedFor(pod);
  std::printf("claims of pod %s: %zu (%.3f ms)\n", pod.c_str(), mine->claims.size(), ms(t));
  const auto* res = sample.table().status()->allocation()->results()->Get(0);
  t = Clock::now();
  auto who = store.ClaimsUsingDevice({res->driver()->str(), res->pool()->str(), res->device()->str(), {}});
  std::printf("holders of %s/%s/%s: %s (%.3f ms)\n", res->driver()->c_str(), res->pool()->c_str(),
              res->device()->c_str(), who->holdings.at(0).claim.ToString().c_str(), ms(t));
  t = Clock::now();
  auto pool = store.ClaimsUsingDevice({"gpu.example.com", "node-5", {}, {}});
  std::printf("allocations in pool gpu.example.com/node-5: %zu (%.3f ms)\n", pool->holdings.size(), ms(t));

  // Reserve and release.
  const ClaimKey key{std::string(sample.claim_namespace()), std::string(sample.name())};
  t = Clock::now();
  auto reserved = store.Reserve(key, {"", "pods", "demo-pod", "demo-pod-uid"});
  auto released = store.Unreserve(key, "demo-pod-uid");
  if (!reserved.ok() || !released.ok()) return Fail(reserved.ok() ? released.status() : reserved.status());
  std::printf("reserve + unreserve %s: revisions %llu, %llu (%.3f ms)\n", key.ToString().c_str(),
              (unsigned long long)reserved->revision, (unsigned long long)released->revision, ms(t));

  // Two schedulers race for the last free consumer slot.
  const ClaimKey contested = key;
  for (int i = 0; Consumers(store.Get(contested)->record) < 255; ++i) {
    (void)store.Reserve(contested, {"", "pods", absl::StrCat("filler-", i), absl::StrCat("filler-uid-", i)});
  }
  absl::Status results[2];
  t = Clock::now();
  {
    std::thread a([&] { results[0] = store.Reserve(contested, {"", "pods", "sched-a", "uid-a"}).status(); });
    std::thread b([&] { results[1] = store.Reserve(contested, {"", "pods", "sched-b", "uid-b"}).status(); });
    a.join();
    b.join();
  }
  for (int i = 0; i < 2; ++i) {
    std::printf("scheduler %c: %s\n", 'a' + i,
                results[i].ok() ? "reserved the last slot"
                                : absl::StrCat("requeue (", results[i].message(), ")").c_str());
  }
  std::printf("race: %.3f ms; exactly one winner: %s\n", ms(t),
              results[0].ok() != results[1].ok() ? "yes" : "NO");

  t = Clock::now();
  auto all = store.List({});
  std::string dump = EncodeClaimList(all->records, absl::StrCat(all->revision));
  std::printf("dump: %zu claims, %zu bytes of JSON (%.0f ms)\n", all->records.size(), dump.size(), ms(t));
  t = Clock::now();
  auto report = store.Verify(false);
  std::printf("verify: %zu problem(s) in %llu claims, %llu index entries (%.0f ms)\n",
              report->problems.size(), (unsigned long long)report->records,
              (unsigned long long)report->index_entries, ms(t));
  return report->problems.empty() && results[0].ok() != results[1].ok() ? 0 : 1;
}

constexpr char kUsage[] =
    "Usage: claimstore [--db DIR] COMMAND [ARGS...]   (--db defaults to $CLAIMSTORE_DB, "
    "else ./claimstore.db)\n"
    "Commands:\n"
    "  restore [FILE...|-]     load claims (any form), all-or-nothing\n"
    "  dump [-o json|jsonl|yaml]\n"
    "  get NAMESPACE/NAME      list [-n NAMESPACE]\n"
    "  find --consumer UID     find --device DRIVER[/POOL[/DEVICE[/SHAREID]]]\n"
    "  reserve, unreserve, allocate, deallocate, delete NAMESPACE/NAME ...\n"
    "  verify [--repair]       stats      backup DIR\n"
    "  generate --claims N     decode [FILE...]   demo (the main job)\n"
    "Every command takes --help.\n";

}  // namespace

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Args global({}, {}, {});
  std::vector<std::string> global_args;
  size_t i = 0;
  while (i < args.size() && args[i].rfind("--db", 0) == 0) {
    global_args.push_back(args[i]);
    if (args[i] == "--db" && i + 1 < args.size()) global_args.push_back(args[++i]);
    ++i;
  }
  global = Args(global_args, {"--db"}, {});
  if (!global.error().empty()) return Usage(global.error(), kUsage);
  if (i >= args.size() || args[i] == "-h" || args[i] == "--help") {
    std::cout << kUsage;
    return i >= args.size() ? 1 : 0;
  }
  const std::string command = args[i];
  const std::vector<std::string> rest(args.begin() + i + 1, args.end());
  if (command == "restore") return Restore(rest, global);
  if (command == "dump") return Dump(rest, global);
  if (command == "get") return Get(rest, global);
  if (command == "list") return List(rest, global);
  if (command == "find") return Find(rest, global);
  if (command == "verify") return Verify(rest, global);
  if (command == "stats") return Stats(rest, global);
  if (command == "backup") return Backup(rest, global);
  if (command == "generate") return Generate(rest);
  if (command == "decode") return Decode(rest);
  if (command == "demo") return Demo(global);
  if (auto it = WriteCommands().find(command); it != WriteCommands().end()) {
    return RunWrite(it->second, rest, global);
  }
  return Usage(absl::StrCat("unknown command \"", command, "\""), kUsage);
}

}  // namespace claimstore::cli

int main(int argc, char** argv) { return claimstore::cli::Main(argc, argv); }
