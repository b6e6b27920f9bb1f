#include "db/info_log.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace claimstore::internal {
namespace {

constexpr absl::Duration kRetryEvery = absl::Seconds(1);
constexpr char kOld[] = ".old.";

// The line RocksDB asked for, with a timestamp and the thread, as RocksDB's
// own logger writes it.
std::string FormatLine(const char* format, va_list ap) {
  char stack[512];
  va_list copy;
  va_copy(copy, ap);
  const int n = std::vsnprintf(stack, sizeof(stack), format, copy);
  va_end(copy);
  std::string message;
  if (n < 0) {
    message = "(a log line that could not be formatted)";
  } else if (static_cast<size_t>(n) < sizeof(stack)) {
    message.assign(stack, n);
  } else {
    message.resize(n + 1);
    std::vsnprintf(message.data(), message.size(), format, ap);
    message.resize(n);
  }
  std::string line =
      absl::StrCat(absl::FormatTime("%Y/%m/%d-%H:%M:%E6S ", absl::Now(), absl::LocalTimeZone()),
                   static_cast<uint64_t>(pthread_self()), " ", message);
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  return line;
}

// Moves an existing log at `path` aside (<path>.old.<microseconds>) and
// deletes all but the newest `keep_old` of those. Best effort: a failure
// leaves files behind, nothing worse.
void Rotate(rocksdb::FileSystem& fs, const std::string& path, size_t keep_old) {
  const rocksdb::IOOptions io;
  if (fs.FileExists(path, io, nullptr).ok()) {
    const std::string old = absl::StrCat(path, kOld, absl::ToUnixMicros(absl::Now()));
    fs.RenameFile(path, old, io, nullptr).PermitUncheckedError();
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string prefix = absl::StrCat(path.substr(slash + 1), kOld);
  std::vector<std::string> children;
  if (!fs.GetChildren(dir, io, &children, nullptr).ok()) return;
  std::vector<std::string> old;
  for (const std::string& name : children) {
    if (absl::StartsWith(name, prefix)) old.push_back(name);
  }
  if (old.size() <= keep_old) return;
  // Same-length microsecond stamps sort by time.
  std::sort(old.begin(), old.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  for (size_t i = 0; i + keep_old < old.size(); ++i) {
    fs.DeleteFile(dir + "/" + old[i], io, nullptr).PermitUncheckedError();
  }
}

}  // namespace

std::shared_ptr<InfoLog> InfoLog::Open(std::shared_ptr<rocksdb::FileSystem> fs,
                                       const std::string& path, size_t keep_old) {
  Rotate(*fs, path, keep_old);
  std::shared_ptr<InfoLog> log(new InfoLog(std::move(fs), path));
  MutexLock lock(&log->mu_);
  log->EnsureOpen(absl::Now());
  return log;
}

InfoLog::InfoLog(std::shared_ptr<rocksdb::FileSystem> fs, std::string path)
    : fs_(std::move(fs)), path_(std::move(path)) {}

InfoLog::~InfoLog() { CloseImpl().PermitUncheckedError(); }

rocksdb::Status InfoLog::CloseImpl() {
  MutexLock lock(&mu_);
  shut_ = true;
  if (file_ == nullptr) return rocksdb::Status::OK();
  rocksdb::IOStatus s = file_->Close(rocksdb::IOOptions(), nullptr);
  file_.reset();
  return s;
}

bool InfoLog::EnsureOpen(absl::Time now) {
  if (file_ != nullptr) return true;
  if (now < retry_at_) return false;
  rocksdb::FileOptions options;
  options.use_mmap_writes = false;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  if (!fs_->ReopenWritableFile(path_, options, &file, nullptr).ok()) {
    retry_at_ = now + kRetryEvery;
    return false;
  }
  uint64_t size = 0;
  if (fs_->GetFileSize(path_, rocksdb::IOOptions(), &size, nullptr).ok()) size_ = size;
  file_ = std::move(file);
  return true;
}

bool InfoLog::Write(const std::string& line, absl::Time now) {
  if (file_->Append(line, rocksdb::IOOptions(), nullptr).ok()) {
    size_ += line.size();
    return true;
  }
  // The file is not written again: closed, and reopened (appending) no
  // sooner than a second from now.
  file_->Close(rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  file_.reset();
  retry_at_ = now + kRetryEvery;
  return false;
}

void InfoLog::Logv(const char* format, va_list ap) {
  const std::string line = FormatLine(format, ap);
  const absl::Time now = absl::Now();
  MutexLock lock(&mu_);
  if (shut_ || !EnsureOpen(now)) {
    ++dropped_;
    return;
  }
  if (dropped_ > 0) {
    // A torn line may end the file: start on a line of our own.
    const std::string note = absl::StrCat(
        "\n", absl::FormatTime("%Y/%m/%d-%H:%M:%E6S ", now, absl::LocalTimeZone()),
        "claimstore: ", dropped_, " info log lines dropped: the log could not be written\n");
    if (!Write(note, now)) {
      ++dropped_;
      return;
    }
    dropped_ = 0;
  }
  if (!Write(line, now)) ++dropped_;
}

size_t InfoLog::GetLogFileSize() const {
  MutexLock lock(&mu_);
  return size_;
}

uint64_t InfoLog::dropped() const {
  MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace claimstore::internal
