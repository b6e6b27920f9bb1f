// claimstore restore: claims in any input form into the store, in two
// passes over the (mapped) input. Pass 1 decodes and validates everything
// and keeps each claim's key, where its last version is and what it holds;
// the device rule (FindDeviceConflicts, the check Allocate makes) then runs
// over the final versions of the whole input. Nothing is written when any
// of it fails. Then the claims the input replaces (all of them with
// --replace) are deleted, and pass 2 decodes again and writes each claim's
// final version: as one bulk load when the store is empty by then, else in
// batches.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "claimstore/codec.h"
#include "claimstore/validation.h"
#include "cli_core.h"
#include "commands.h"

namespace claimstore::cli {
namespace {

constexpr char kRestoreUsage[] =
    "Usage: claimstore [--db DIR] restore [FILE...|-] [--dry-run] [--no-validate] [--replace]\n"
    "Reads claims in any form (claim, list, kubectl List, JSON lines, watch events),\n"
    "checks everything, then writes: nothing is written if any item is bad.\n"
    "  --dry-run      only check\n"
    "  --no-validate  skip semantic validation (decoding stays strict)\n"
    "  --replace      empty the database first: afterwards it holds exactly the input\n";

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
      absl::StatusOr<std::string> spooled = file->SpoolStdin();
      if (!spooled.ok()) return spooled.status();
      name = *spooled;
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

// What restore keeps of each claim between its two passes: where its final
// version is, and what it holds (for the device check). Not the record.
struct RestoreEntry {
  uint64_t ordinal = 0;  // of the claim's last occurrence in the input
  bool deleted = false;  // the last occurrence was a DELETED watch event
  std::vector<DeviceHolding> holdings;
};

// A progress line on a terminal, nothing when stderr is piped.
class Progress {
 public:
  explicit Progress(const char* what) : what_(what), tty_(isatty(STDERR_FILENO) != 0) {}
  void Tick(uint64_t n) {
    if (tty_ && n % 10000 == 0) {
      std::fprintf(stderr, "\r%s: %llu claims", what_, static_cast<unsigned long long>(n));
    }
  }
  void Done(uint64_t n) {
    if (tty_) std::fprintf(stderr, "\r%s: %llu claims, done\n", what_, static_cast<unsigned long long>(n));
  }

 private:
  const char* what_;
  bool tty_;
};

// The input after pass 1.
struct CheckedInput {
  std::vector<std::string> names;
  std::vector<std::unique_ptr<InputFile>> files;
  std::map<ClaimKey, RestoreEntry> entries;
  uint64_t items = 0;
};

int Refused(const absl::Status& s) {
  std::cerr << "Error: restore refused: nothing was written\n";
  return ExitCode(s);
}

// Pass 1 over one file: decode and validate every item, keep its entry.
absl::Status CheckFile(size_t f, bool validate, CheckedInput* input, Progress* progress,
                       bool* reported) {
  return DecodeClaims(input->files[f]->text(), [&](DecodedClaim c) -> absl::Status {
    const std::string where =
        absl::StrCat(input->names[f], ": document ", c.document,
                     c.item >= 0 ? absl::StrCat(", item ", c.item) : std::string(), " (",
                     c.record.claim_namespace(), "/", c.record.name(), ")");
    progress->Tick(++input->items);
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
        *reported = true;
        return v;
      }
    }
    RestoreEntry& entry = input->entries[ClaimKey{std::string(c.record.claim_namespace()),
                                                  std::string(c.record.name())}];
    entry = RestoreEntry{input->items, deleted, {}};
    if (!deleted) entry.holdings = DeviceHoldingsOf(c.record);
    return absl::OkStatus();
  });
}

// Pass 1 over every file; the exit code of a refusal, or 0.
int CheckInputs(const RestoreFlags& flags, CheckedInput* input) {
  input->names = flags.files;
  if (input->names.empty()) input->names.push_back("-");
  for (const std::string& name : input->names) {
    absl::StatusOr<std::unique_ptr<InputFile>> f = InputFile::Open(name);
    if (!f.ok()) return Fail(f.status());
    input->files.push_back(*std::move(f));
  }
  Progress check("checking");
  for (size_t f = 0; f < input->files.size(); ++f) {
    bool reported = false;  // the errors were printed one per field already
    absl::Status s = CheckFile(f, !flags.no_validate, input, &check, &reported);
    input->files[f]->Release();
    if (!s.ok()) {
      if (!reported) std::cerr << "Error: " << input->names[f] << ": " << s.message() << "\n";
      return Refused(s);
    }
  }
  check.Done(input->items);
  return 0;
}

// Two claims of the input holding one device in ways that exclude each
// other: the check Allocate makes, over the final versions of the input.
int CheckDevices(const CheckedInput& input) {
  std::vector<DeviceHolding> holdings;
  for (const auto& [key, entry] : input.entries) {
    holdings.insert(holdings.end(), entry.holdings.begin(), entry.holdings.end());
  }
  const std::vector<std::string> clashes = FindDeviceConflicts(holdings);
  if (clashes.empty()) return 0;
  for (const std::string& c : clashes) std::cerr << "Error: " << c << "\n";
  std::cerr << "Error: restore refused: nothing was written\n";
  return 1;
}

// A failed bulk load wrote nothing of the input; the claims it was to
// replace were deleted before it.
int BulkFailed(const absl::Status& s, size_t deleted) {
  std::cerr << "Error: " << s.message() << "\n"
            << "Error: restore failed: nothing of the input was written";
  if (deleted > 0) std::cerr << "; the " << deleted << " claim(s) it replaces were deleted";
  std::cerr << "\n";
  return ExitCode(s);
}

// Deletes the claims that go first: with --replace every stored claim,
// else those the input deletes or replaces, so that their devices are free.
// Sets *empty when no stored claim is left.
absl::StatusOr<size_t> DeleteReplaced(Store& store, const CheckedInput& input, bool replace,
                                      bool* empty) {
  std::vector<ClaimKey> to_delete;
  size_t stored = 0;
  absl::Status listed = ForEachClaimKey(store, [&](ClaimKey key) {
    ++stored;
    if (replace || input.entries.count(key)) to_delete.push_back(std::move(key));
  });
  if (!listed.ok()) return listed;
  for (const ClaimKey& key : to_delete) {
    absl::StatusOr<WriteResult> r = store.Delete(key);
    if (!r.ok() && !absl::IsNotFound(r.status())) return r.status();
  }
  *empty = to_delete.size() == stored;
  return to_delete.size();
}

// Pass 2: decode again, writing each claim's final version into `bulk`
// when given, else in batches of PutAll.
int WriteClaims(Store& store, CheckedInput& input, BulkLoad* bulk, size_t deleted,
                uint64_t* written) {
  std::vector<ClaimRecord> chunk;
  uint64_t seen = 0;
  Progress progress("restoring");
  const auto flush = [&]() -> absl::Status {
    if (chunk.empty() || bulk != nullptr) return absl::OkStatus();
    absl::StatusOr<std::vector<WriteResult>> r = store.PutAll(chunk);
    if (!r.ok()) return r.status();
    *written += chunk.size();
    chunk.clear();
    progress.Tick(*written - *written % 10000);
    return absl::OkStatus();
  };
  for (size_t f = 0; f < input.files.size(); ++f) {
    absl::Status s = DecodeClaims(input.files[f]->text(), [&](DecodedClaim c) -> absl::Status {
      ++seen;
      const auto it = input.entries.find(
          ClaimKey{std::string(c.record.claim_namespace()), std::string(c.record.name())});
      if (it == input.entries.end() || it->second.ordinal != seen || it->second.deleted) {
        return absl::OkStatus();  // a later version follows, or it was deleted
      }
      if (bulk != nullptr) {
        progress.Tick(++*written);
        return bulk->Add(c.record);
      }
      chunk.push_back(std::move(c.record));
      return chunk.size() == 5000 ? flush() : absl::OkStatus();
    });
    if (s.ok()) s = flush();
    input.files[f]->Release();
    if (!s.ok() && bulk == nullptr) {
      std::cerr << "Error: restore stopped after " << *written
                << " claim(s) were written: " << s.message() << "\n";
      return ExitCode(s);
    }
    if (!s.ok()) return BulkFailed(s, deleted);
  }
  progress.Done(*written);
  return 0;
}

int Restore(const Context& context, const RestoreFlags& flags) {
  CheckedInput input;
  if (int code = CheckInputs(flags, &input); code != 0) return code;
  if (!flags.no_validate) {
    if (int code = CheckDevices(input); code != 0) return code;
  }
  if (flags.dry_run) {
    std::cout << "checked " << input.items << " item(s): " << input.entries.size()
              << " claim(s), nothing written\n";
    return 0;
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForWriting(context);
  if (!store.ok()) return Fail(store.status());
  bool empty = false;
  absl::StatusOr<size_t> deleted = DeleteReplaced(**store, input, flags.replace, &empty);
  if (!deleted.ok()) return Fail(deleted.status());
  // Into a store that is empty now: one bulk load (all or nothing, several
  // times faster).
  std::unique_ptr<BulkLoad> bulk;
  if (empty) {
    absl::StatusOr<std::unique_ptr<BulkLoad>> started = (*store)->StartBulkLoad();
    if (!started.ok()) return Fail(started.status());
    bulk = *std::move(started);
  }
  uint64_t written = 0;
  if (int code = WriteClaims(**store, input, bulk.get(), *deleted, &written); code != 0) {
    return code;
  }
  if (bulk != nullptr) {
    if (absl::Status s = bulk->Commit().status(); !s.ok()) return BulkFailed(s, *deleted);
  }
  // A bulk load lands in its final shape; batches and deletions need a
  // compaction so that reads do not wait behind them.
  if (bulk == nullptr || *deleted > 0) {
    if (absl::Status s = (*store)->Compact(); !s.ok()) return Fail(s);
  }
  absl::StatusOr<StoreStats> stats = (*store)->Stats();
  std::cout << "restored " << written << " claim(s) from " << input.items << " item(s); revision "
            << (stats.ok() ? stats->revision : 0) << "\n";
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
                    "skip semantic validation (decoding stays strict)");
  restore->add_flag("--replace", flags->replace, "empty the database first");
  restore->callback([&context, flags] { context.exit_code = Restore(context, *flags); });
}

}  // namespace claimstore::cli
