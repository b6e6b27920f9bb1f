// FaultFileSystem: a RocksDB FileSystemWrapper for the fault tests, after
// RocksDB's own FaultInjectionTestFS and SQLite's I/O-error tests.
//
//   - Power loss: it remembers how much of each file written through it was
//     synced, and which new files' directory was synced since they were
//     created. PowerCut() makes every later operation fail (the machine is
//     off: nothing more reaches the disk); DropUnsyncedData() then truncates
//     each file to its synced size and deletes files whose directory entry
//     was never synced, which is what a disk may keep after power loss.
//   - I/O errors: FailNth() fails the n-th write (Append), sync (Sync, Fsync,
//     directory Fsync) or read (sequential, random, MultiRead) from now on,
//     once, with EIO or ENOSPC. A failed write first writes half its bytes,
//     as a torn write does.
//   - A failing writer: FailWriter() fails every write and sync of one kind
//     of file RocksDB writes (the info log, the write-ahead logs, the
//     MANIFEST, ...; or all files and directories, a full disk) until Heal().
//
// Thread-safety: safe for concurrent use (RocksDB calls it from its
// background threads).
#ifndef CLAIMSTORE_TESTS_TESTUTIL_FAULT_FS_H_
#define CLAIMSTORE_TESTS_TESTUTIL_FAULT_FS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "rocksdb/file_system.h"

namespace claimstore::testing {

class FaultFileSystem : public rocksdb::FileSystemWrapper {
 public:
  enum class Op { kWrite, kSync, kRead };
  enum class Error { kEIO, kNoSpace };
  // The files of one writer, by name: LOG, *.log, MANIFEST-*, OPTIONS-*,
  // the table files of flushes and compactions (*.sst in the database
  // directory), of bulk loads (in bulk-load.tmp/); kAll: every file and
  // directory sync.
  enum class Writer { kAll, kInfoLog, kWal, kManifest, kOptions, kTable, kBulkTable };
  static const char* WriterName(Writer w);

  FaultFileSystem() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  static const char* kClassName() { return "ClaimstoreFaultFileSystem"; }
  const char* Name() const override { return kClassName(); }

  // --- I/O errors ---
  // Fails the n-th (from 1) operation of kind `op` from now on, once. With
  // `only_suffix`, only operations on files whose path ends with it count
  // (".log": the write-ahead log, not a background flush's or compaction's
  // files; reads have no path and never match).
  void FailNth(Op op, uint64_t n, Error error, std::string_view only_suffix = {});
  // Operations of kind `op` since the last FailNth or ResetCounts.
  uint64_t Count(Op op) const;
  // Whether the armed failure happened.
  bool Fired() const;
  void ResetCounts();
  // Fails every write and sync of `writer`'s files with `error` from now
  // until Heal(); Failures() counts them.
  void FailWriter(Writer writer, Error error);
  void Heal();
  uint64_t Failures() const;
  // Writes (appends) to `writer`'s files since the last FailWriter or
  // Heal, failed or not.
  uint64_t WritesTo(Writer writer) const;

  // Called before each write (append) to a file, with the file's writer,
  // outside the file system's lock: a test may hold a background job there.
  void SetWriteHook(std::function<void(Writer)> hook);

  // Reads of files whose path contains `part` are neither counted nor
  // failed (empty: none spared). See BulkLoadUnderIoErrorsIsAllOrNothing.
  void SpareReadsOf(const std::string& part);

  // --- Power loss ---
  void PowerCut();
  bool PoweredOff() const;
  // After PowerCut() and closing the database: leaves only synced data on
  // disk and powers the file system back on. Forgets what it tracked.
  absl::Status DropUnsyncedData();

  // Called by the file and directory wrappers.
  rocksdb::IOStatus Inject(Op op, std::string_view path = {});
  void Appended(const std::string& path, uint64_t bytes);
  void Synced(const std::string& path);
  void DirectorySynced(const std::string& dir);
  void Truncated(const std::string& path, uint64_t size);

  // FileSystem.
  rocksdb::IOStatus NewSequentialFile(const std::string& f, const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSSequentialFile>* r,
                                      rocksdb::IODebugContext* d) override;
  rocksdb::IOStatus NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& o,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                        rocksdb::IODebugContext* d) override;
  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* d) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* d) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* d) override;
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& o,
                                 std::unique_ptr<rocksdb::FSDirectory>* r,
                                 rocksdb::IODebugContext* d) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& dst,
                               const rocksdb::IOOptions& o, rocksdb::IODebugContext* d) override;
  rocksdb::IOStatus DeleteFile(const std::string& f, const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* d) override;

 private:
  struct FileState {
    uint64_t size = 0, synced = 0;
    bool entry_synced = false;  // its directory was synced since it was created
  };
  rocksdb::IOStatus Wrap(const std::string& path, bool created,
                         std::unique_ptr<rocksdb::FSWritableFile>* file);

  mutable std::mutex mu_;
  bool powered_ = true;
  std::map<std::string, FileState> files_;  // written through this file system
  std::array<uint64_t, 3> counts_{};
  bool armed_ = false, fired_ = false;
  Op armed_op_ = Op::kWrite;
  uint64_t armed_n_ = 0;
  uint64_t armed_count_ = 0;  // operations that count towards armed_n_
  std::string armed_suffix_;
  std::string spared_reads_;
  std::function<void(Writer)> write_hook_;
  bool writer_failing_ = false;
  Writer failing_writer_ = Writer::kAll;
  Error writer_error_ = Error::kNoSpace;
  uint64_t writer_failures_ = 0;
  std::array<uint64_t, 7> writes_to_{};
  Error error_ = Error::kEIO;
};

}  // namespace claimstore::testing

#endif  // CLAIMSTORE_TESTS_TESTUTIL_FAULT_FS_H_
