// claimstore restore: claims in any input form into the store, in one
// pass over the (mapped) input and one atomic commit: each claim is
// decoded, validated and prepared once, on both cores (the largest input
// ordinal of a claim wins, so a watch stream folds in
// order; a DELETED event deletes); Commit checks the device rule across
// the result (the input against itself and against the stored claims that
// stay) and writes everything in one ingestion, or nothing. A stored claim
// the input holds is replaced; with --replace the database holds exactly
// the input afterwards.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "claimstore/codec.h"
#include "claimstore/validation.h"
#include "cli_core.h"
#include "commands.h"

namespace claimstore::cli {
namespace {

constexpr char kRestoreUsage[] =
    "Usage: claimstore restore [FILE...|-] [--dry-run] [--no-validate] [--replace] [--db DIR]\n"
    "Reads claims in any form (claim, list, kubectl List, JSON lines, watch events),\n"
    "checks everything, then writes it in one atomic commit: nothing is written if any\n"
    "item is bad or two claims would hold a device in ways that exclude each other.\n"
    "A stored claim the input holds is replaced; others are kept.\n"
    "  --dry-run      only check (against the database as it is)\n"
    "  --no-validate  enforce identity rules only (list-map keys, consumer references,\n"
    "                 the device rule); a claim breaking a format or limit rule is\n"
    "                 loaded marked unvalidated (get -o wide, stats); decoding stays strict\n"
    "  --replace      afterwards the database holds exactly the input\n";

struct RestoreFlags {
  std::vector<std::string> files;
  bool dry_run = false, no_validate = false, replace = false;
};

// An input's bytes, mapped read-only (stdin is spooled to a temporary file
// first), so that even a multi-gigabyte dump is not copied onto the heap.
class InputFile {
 public:
  static absl::StatusOr<std::unique_ptr<InputFile>> Open(const std::string& path) {
    auto file = std::unique_ptr<InputFile>(new InputFile());
    std::string name = path;
    if (path == "-") {
      HintReadingStdin("claims to restore");
      absl::StatusOr<std::string> spooled = file->SpoolStdin();
      if (!spooled.ok()) return spooled.status();
      name = *spooled;
    }
    file->fd_ = open(name.c_str(), O_RDONLY);
    if (file->fd_ < 0) return CannotOpen(path, errno);
    if (!file->spool_.empty()) {
      // Gone from the directory once open: nothing is left behind, even
      // when the process is killed.
      unlink(file->spool_.c_str());
      file->spool_.clear();
    }
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
    if (!spool_.empty()) unlink(spool_.c_str());  // spooled, never opened
  }
  absl::string_view text() const { return absl::string_view(data_ != nullptr ? data_ : "", size_); }

 private:
  InputFile() = default;

  // Standard input into a temporary file; its path.
  absl::StatusOr<std::string> SpoolStdin() {
    char pattern[] = "/tmp/claimstore-stdin-XXXXXX";
    const int fd = mkstemp(pattern);
    if (fd < 0) return absl::InternalError("cannot spool standard input");
    spool_ = pattern;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) {
      if (write(fd, buf, n) != static_cast<ssize_t>(n)) {
        close(fd);
        return absl::InternalError("cannot spool standard input");
      }
    }
    close(fd);
    return spool_;
  }

  int fd_ = -1;
  const char* data_ = nullptr;
  size_t size_ = 0;
  std::string spool_;
};

// Progress lines on a terminal, nothing when stderr is not one: a line per
// long phase (reading, sorting, checking, writing, committing), rewritten
// at most ten times a second with the claims done, claims/s and an ETA
// where the total is known, and ended with the phase's time.
// Thread-safety: every method may be called from any thread.
class Progress {
 public:
  Progress() : tty_(isatty(STDERR_FILENO) != 0) {}
  ~Progress() { Finish(); }

  // In `phase`: `done` claims of `total` (0: not known); `fraction` of the
  // phase done, for the ETA (negative: not known).
  void Update(const char* phase, uint64_t done, uint64_t total, double fraction) {
    if (!tty_) return;
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (phase_ != phase) {
      EndLine(now);
      phase_ = phase;
      start_ = now;
      printed_ = {};
    }
    done_ = done;
    total_ = total;
    fraction_ = fraction;
    if (now - printed_ < std::chrono::milliseconds(100)) return;
    printed_ = now;
    Print(now, "");
  }
  // Ends the line of the phase under way.
  void Finish() {
    if (!tty_) return;
    std::lock_guard<std::mutex> lock(mu_);
    EndLine(std::chrono::steady_clock::now());
  }

 private:
  using Clock = std::chrono::steady_clock;
  void EndLine(Clock::time_point now) {
    if (phase_.empty()) return;
    if (total_ > 0) done_ = total_;
    fraction_ = -1;
    Print(now, "\n");
    phase_.clear();
  }
  void Print(Clock::time_point now, const char* end) const {
    const double seconds = std::chrono::duration<double>(now - start_).count();
    std::string line = absl::StrCat("\r", phase_, ":");
    if (done_ > 0) {
      absl::StrAppend(&line, " ", done_, total_ > 0 ? absl::StrCat(" of ", total_) : "", " claims");
      if (seconds > 0)
        absl::StrAppend(&line, " (", static_cast<uint64_t>(done_ / seconds), " claims/s)");
    }
    const char* comma = done_ > 0 ? "," : "";
    if (*end == '\n') {
      absl::StrAppend(&line, comma, " done in ", absl::StrFormat("%.1f", seconds), " s");
    } else if (fraction_ > 0.01 && fraction_ < 1 && seconds >= 0.5) {
      absl::StrAppend(&line, comma, " ", static_cast<int>(fraction_ * 100), "%, ETA ",
                      static_cast<int>(seconds * (1 - fraction_) / fraction_ + 0.5), " s");
    }
    absl::StrAppend(&line, "\x1b[K", end);  // clear what a longer line left
    std::fputs(line.c_str(), stderr);
  }

  const bool tty_;
  std::mutex mu_;
  std::string phase_;  // guarded by mu_, as everything below
  Clock::time_point start_, printed_;
  uint64_t done_ = 0, total_ = 0;
  double fraction_ = -1;
};

// The refused claim that comes first in the input, of those refused by
// concurrent decoders (BulkLoad::Add's error and where the claim stood).
class FirstRefusal {
 public:
  void Offer(uint64_t ordinal, absl::Status error, std::string where) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.ok() && ordinal >= ordinal_) return;
    ordinal_ = ordinal;
    error_ = std::move(error);
    where_ = std::move(where);
  }
  // The error (OK when none) and where the claim stood.
  absl::Status Take(std::string* where) {
    std::lock_guard<std::mutex> lock(mu_);
    *where = where_;
    return error_;
  }

 private:
  std::mutex mu_;
  uint64_t ordinal_ = 0;  // guarded by mu_
  absl::Status error_;    // guarded by mu_
  std::string where_;     // guarded by mu_
};

int Refused(const absl::Status& s) {
  std::cerr << "Error: restore refused: nothing was written\n";
  return ExitCode(s) == 5 ? 5 : 1;
}

// Opens the inputs, mapped.
absl::StatusOr<std::vector<std::unique_ptr<InputFile>>> OpenInputs(
    const std::vector<std::string>& names) {
  std::vector<std::unique_ptr<InputFile>> files;
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<InputFile>> f = InputFile::Open(name);
    if (!f.ok()) return f.status();
    files.push_back(*std::move(f));
  }
  return files;
}

// Prints a refused claim's errors (validation errors one per field).
int ClaimRefused(const absl::Status& s, const std::string& where) {
  const std::vector<FieldError> fields = FieldErrorsOf(s);
  if (fields.empty()) {
    std::cerr << "Error: " << where << ": " << s.message() << "\n";
  } else {
    for (const FieldError& e : fields)
      std::cerr << "Error: " << where << ": " << e.ToString() << "\n";
  }
  return Refused(s);
}

// Decodes every input into `load` on both cores (each claim decoded,
// validated and added once), numbering the claims across inputs in input
// order. The exit code of a refusal, or 0; *items counts what was read.
int DecodeInputs(const std::vector<std::string>& names,
                 const std::vector<std::unique_ptr<InputFile>>& files, BulkLoad* load,
                 uint64_t* items, Progress* progress) {
  uint64_t input_bytes = 0, bytes_before = 0;  // of all inputs; of the files before
  for (const auto& f : files) input_bytes += f->text().size();
  std::atomic<uint64_t> read{0}, furthest{0};
  uint64_t base = 0;  // the ordinals of the files before
  const int threads = std::max(2u, std::thread::hardware_concurrency());
  for (size_t f = 0; f < files.size(); ++f) {
    FirstRefusal refusal;
    std::atomic<uint64_t> last{0};  // the largest ordinal of this file
    absl::Status s = DecodeClaimsConcurrently(files[f]->text(), threads, [&](DecodedClaim c) {
      const uint64_t n = ++read;
      if (n % 1024 == 0) {
        uint64_t at = furthest.load();
        while (bytes_before + c.offset > at &&
               !furthest.compare_exchange_weak(at, bytes_before + c.offset)) {
        }
        progress->Update("reading", n, 0,
                         input_bytes > 0 ? static_cast<double>(furthest.load()) / input_bytes : -1);
      }
      uint64_t seen = last.load();
      while (c.ordinal > seen && !last.compare_exchange_weak(seen, c.ordinal)) {
      }
      const uint64_t ordinal = base + c.ordinal;
      absl::Status added;
      if (c.record.claim_namespace().empty() || c.record.name().empty()) {
        added = absl::InvalidArgumentError("metadata.namespace and metadata.name: Required value");
      } else if (c.event == WatchEventType::kDeleted) {
        added = load->Delete(
            ClaimKey{std::string(c.record.claim_namespace()), std::string(c.record.name())},
            ordinal);
      } else {
        added = load->Add(c.record, ordinal);
      }
      if (added.ok()) return absl::OkStatus();
      refusal.Offer(ordinal, std::move(added), ClaimWhere(names[f], c));
      return absl::CancelledError("a claim was refused");  // stops decoding
    });
    bytes_before += files[f]->text().size();
    files[f]->Release();
    base += last.load() + 1;
    if (!s.ok()) progress->Finish();
    if (absl::IsCancelled(s)) {
      std::string where;
      const absl::Status refused = refusal.Take(&where);
      return ClaimRefused(refused, where);
    }
    if (!s.ok()) {
      std::cerr << "Error: " << names[f] << ": " << s.message() << "\n";
      return Refused(s);
    }
  }
  *items = read.load();
  progress->Update("reading", *items, *items, 1);
  return 0;
}

// Where the claims an error names (ClaimsOf) stood in the input, their
// last occurrence each: decodes the input again (an error path only).
void PrintWhereClaimsStood(const absl::Status& error, const std::vector<std::string>& names,
                           const std::vector<std::unique_ptr<InputFile>>& files) {
  const std::vector<ClaimKey> claims = ClaimsOf(error);
  if (claims.empty()) return;
  std::map<ClaimKey, std::string> where;
  for (size_t f = 0; f < files.size(); ++f) {
    (void)DecodeClaims(files[f]->text(), [&](DecodedClaim c) {
      const ClaimKey key{std::string(c.record.claim_namespace()), std::string(c.record.name())};
      if (std::find(claims.begin(), claims.end(), key) != claims.end())
        where[key] = ClaimWhere(names[f], c);
      return absl::OkStatus();
    });
  }
  for (const ClaimKey& key : claims) {
    auto it = where.find(key);
    std::cerr << "Error: " << key.ToString() << ": "
              << (it == where.end() ? "stored, not in the input" : "in " + it->second) << "\n";
  }
}

int Restore(const Context& context, const RestoreFlags& flags) {
  std::vector<std::string> names = flags.files;
  if (names.empty()) names.push_back("-");
  absl::StatusOr<std::vector<std::unique_ptr<InputFile>>> files = OpenInputs(names);
  if (!files.ok()) return Fail(files.status());
  std::unique_ptr<ScratchDir> scratch;
  // A refused restore changes nothing on disk: not even the database it
  // would have created. (Created here: no database before, the same empty
  // one after, at revision 0; a database another process made meanwhile
  // and wrote to is left alone. A directory that was there stays.)
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool no_database = !flags.dry_run && !fs::exists(context.DbPath() + "/CURRENT", ec) && !ec;
  const bool directory_was_there = fs::exists(context.DbPath(), ec);
  absl::StatusOr<std::unique_ptr<Store>> store = OpenTarget(context, flags.dry_run, &scratch);
  if (!store.ok()) return Fail(store.status());
  const auto refused = [&](int code) {
    if (!no_database) return code;
    const absl::StatusOr<StoreStats> stats = (*store)->Stats();
    if (!stats.ok() || stats->revision != 0 || stats->claims != 0) return code;
    store->reset();
    std::error_code ignored;
    fs::remove_all(context.DbPath(), ignored);
    if (directory_was_there) fs::create_directory(context.DbPath(), ignored);
    return code;
  };
  Progress progress;
  absl::StatusOr<std::unique_ptr<BulkLoad>> load = (*store)->StartBulkLoad(
      {.replace_all = flags.replace,
       .validate = !flags.no_validate,
       .progress = [&progress](const BulkLoadProgress& p) {
         progress.Update(p.phase, p.done, p.total,
                         p.total > 0 ? static_cast<double>(p.done) / p.total : -1);
       }});
  if (!load.ok()) return refused(Fail(load.status()));
  uint64_t items = 0;
  if (int code = DecodeInputs(names, *files, load->get(), &items, &progress); code != 0) {
    progress.Finish();
    load->reset();
    return refused(code);
  }
  const absl::StatusOr<BulkLoadResult> result =
      flags.dry_run ? (*load)->DryRun() : (*load)->Commit();
  progress.Finish();
  if (!result.ok()) {
    std::cerr << "Error: " << result.status().message() << "\n";
    PrintWhereClaimsStood(result.status(), names, *files);
    load->reset();
    return refused(Refused(result.status()));
  }
  const std::string unvalidated =
      result->unvalidated == 0
          ? ""
          : absl::StrCat("; ", result->unvalidated,
                         " unvalidated (breaking format or limit rules: get -o wide)");
  if (flags.dry_run) {
    std::cout << "checked " << items << " item(s): " << result->claims << " claim(s)" << unvalidated
              << ", nothing written\n";
    return 0;
  }
  std::cout << "restored " << result->claims << " claim(s) from " << items << " item(s); revision "
            << result->revision;
  if (result->replaced > 0 || result->deleted > 0) {
    std::cout << "; " << result->replaced << " replaced, " << result->deleted << " deleted";
  }
  std::cout << unvalidated << "\n";
  return 0;
}

}  // namespace

void AddRestoreCommand(CLI::App& app, Context& context) {
  const auto flags = std::make_shared<RestoreFlags>();
  CLI::App* restore =
      AddCommand(app, "restore", kRestoreUsage, "Load claims (any form), all or nothing");
  restore->add_option("FILE", flags->files, "input files; - or none for standard input");
  restore->add_flag("--dry-run", flags->dry_run, "only check");
  restore->add_flag("--no-validate", flags->no_validate,
                    "enforce identity rules only; mark claims breaking others");
  restore->add_flag("--replace", flags->replace, "empty the database first");
  restore->callback([&context, flags] { context.exit_code = Restore(context, *flags); });
}

}  // namespace claimstore::cli
