// InfoLog: RocksDB's info log (DBOptions::info_log), written by claimstore.
//
// Why: RocksDB's own info logger appends through a WritableFileWriter, and
// Debian's librocksdb is built with assertions on: after one failed append
// (a full disk), the next log line aborts the process. The info log is
// written on opens, flushes, compactions and periodic stats, so a full disk
// would take down the process that embeds the store at any moment. This
// logger writes each line with one Append of the file system's writable
// file (no writer above it that remembers errors); after a failure it
// closes the file and drops lines, reopening (appending) at most once a
// second, and notes how many lines it dropped once writing works again.
//
// At Open an existing log is kept as LOG.old.<microseconds>, the newest
// `keep_old` of those stay, as RocksDB does (kOldInfoLogs for a store's). Nothing here ever fails a
// caller: a log that cannot be written is a log that drops lines.
//
// Thread-safety: safe for concurrent use (RocksDB logs from its background
// threads).
#ifndef CLAIMSTORE_SRC_DB_INFO_LOG_H_
#define CLAIMSTORE_SRC_DB_INFO_LOG_H_

#include <cstdarg>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "util/mutex.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"

namespace claimstore::internal {

// The old info logs a store keeps (RocksDB's keep_log_file_num).
inline constexpr size_t kOldInfoLogs = 3;

class InfoLog final : public rocksdb::Logger {
 public:
  // The info log at `path` (a database's is <dir>/LOG), written through
  // `fs`.
  static std::shared_ptr<InfoLog> Open(std::shared_ptr<rocksdb::FileSystem> fs,
                                       const std::string& path, size_t keep_old);
  ~InfoLog() override;

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;
  size_t GetLogFileSize() const override;

  // Lines dropped since the last one written (tests).
  uint64_t dropped() const;

 private:
  InfoLog(std::shared_ptr<rocksdb::FileSystem> fs, std::string path);
  rocksdb::Status CloseImpl() override;
  // Opens the file for appending unless it is open or a retry is not due.
  bool EnsureOpen(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One Append; on failure closes the file and schedules a retry.
  bool Write(const std::string& line, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<rocksdb::FileSystem> fs_;
  const std::string path_;
  mutable Mutex mu_;
  std::unique_ptr<rocksdb::FSWritableFile> file_ ABSL_GUARDED_BY(mu_);
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_ ABSL_GUARDED_BY(mu_) = false;  // closed: lines are dropped
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_DB_INFO_LOG_H_
