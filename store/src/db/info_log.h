// InfoLog: RocksDB's info log (DBOptions::info_log), written by claimstore,
// because RocksDB's own logger (Debian's 7.8, assertions on) aborts the
// process on the line after a failed append. Each line is one Append; after
// a failure the file is closed and lines are dropped (and counted) until a
// reopen works, at most once a second. Open moves an existing log aside
// (LOG.old.<microseconds>) and keeps the newest `keep_old` of those.
// Nothing here ever fails a caller.
//
// Thread-safety: safe for concurrent use (RocksDB logs from its background
// threads).
//
// Why and how: docs/reliability.md, "The info log".
#ifndef CLAIMSTORE_SRC_DB_INFO_LOG_H_
#define CLAIMSTORE_SRC_DB_INFO_LOG_H_

#include <cstdarg>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "util/mutex.h"

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
