#include "testutil/fault_fs.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"

namespace claimstore::testing {
namespace {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;
using Op = FaultFileSystem::Op;

std::string DirOf(const std::string& path) {
  return std::filesystem::path(path).parent_path().lexically_normal().string();
}

class FaultWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultWritableFile(FaultFileSystem* fs, std::string path,
                    std::unique_ptr<rocksdb::FSWritableFile> target)
      : FSWritableFileOwnerWrapper(std::move(target)), fs_(fs), path_(std::move(path)) {}

  IOStatus Append(const Slice& data, const IOOptions& o, IODebugContext* d) override {
    IOStatus s = fs_->Inject(Op::kWrite, path_);
    if (!s.ok()) {
      if (!s.IsIOError() || s.ToString().find("injected") == std::string::npos) return s;
      // A torn write: half of it reaches the file.
      const Slice half(data.data(), data.size() / 2);
      if (target()->Append(half, o, d).ok()) fs_->Appended(path_, half.size());
      return s;
    }
    s = target()->Append(data, o, d);
    if (s.ok()) fs_->Appended(path_, data.size());
    return s;
  }
  IOStatus Append(const Slice& data, const IOOptions& o, const rocksdb::DataVerificationInfo&,
                  IODebugContext* d) override {
    return Append(data, o, d);
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& o,
                            IODebugContext* d) override {
    IOStatus s = fs_->Inject(Op::kWrite, path_);
    if (!s.ok()) return s;
    s = target()->PositionedAppend(data, offset, o, d);
    if (s.ok()) fs_->Appended(path_, data.size());
    return s;
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& o,
                            const rocksdb::DataVerificationInfo&, IODebugContext* d) override {
    return PositionedAppend(data, offset, o, d);
  }
  IOStatus Truncate(uint64_t size, const IOOptions& o, IODebugContext* d) override {
    IOStatus s = target()->Truncate(size, o, d);
    if (s.ok()) fs_->Truncated(path_, size);
    return s;
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* d) override {
    IOStatus s = fs_->Inject(Op::kSync, path_);
    if (s.ok()) s = target()->Sync(o, d);
    if (s.ok()) fs_->Synced(path_);
    return s;
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* d) override {
    IOStatus s = fs_->Inject(Op::kSync, path_);
    if (s.ok()) s = target()->Fsync(o, d);
    if (s.ok()) fs_->Synced(path_);
    return s;
  }
  // Neither a write nor a durability point, but nothing moves while the
  // power is off.
  IOStatus RangeSync(uint64_t offset, uint64_t n, const IOOptions& o, IODebugContext* d) override {
    if (fs_->PoweredOff()) return IOStatus::IOError("power cut");
    return target()->RangeSync(offset, n, o, d);
  }
  IOStatus Flush(const IOOptions& o, IODebugContext* d) override {
    if (fs_->PoweredOff()) return IOStatus::IOError("power cut");
    return target()->Flush(o, d);
  }

 private:
  FaultFileSystem* fs_;
  std::string path_;
};

class FaultSequentialFile : public rocksdb::FSSequentialFileOwnerWrapper {
 public:
  FaultSequentialFile(FaultFileSystem* fs, std::unique_ptr<rocksdb::FSSequentialFile> target)
      : FSSequentialFileOwnerWrapper(std::move(target)), fs_(fs) {}
  IOStatus Read(size_t n, const IOOptions& o, Slice* result, char* scratch,
                IODebugContext* d) override {
    IOStatus s = fs_->Inject(Op::kRead);
    if (!s.ok()) return s;
    return target()->Read(n, o, result, scratch, d);
  }
  IOStatus PositionedRead(uint64_t offset, size_t n, const IOOptions& o, Slice* result,
                          char* scratch, IODebugContext* d) override {
    IOStatus s = fs_->Inject(Op::kRead);
    if (!s.ok()) return s;
    return target()->PositionedRead(offset, n, o, result, scratch, d);
  }

 private:
  FaultFileSystem* fs_;
};

class FaultRandomAccessFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  FaultRandomAccessFile(FaultFileSystem* fs, std::unique_ptr<rocksdb::FSRandomAccessFile> target)
      : FSRandomAccessFileOwnerWrapper(std::move(target)), fs_(fs) {}
  IOStatus Read(uint64_t offset, size_t n, const IOOptions& o, Slice* result, char* scratch,
                IODebugContext* d) const override {
    IOStatus s = fs_->Inject(Op::kRead);
    if (!s.ok()) return s;
    return target()->Read(offset, n, o, result, scratch, d);
  }
  IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t n, const IOOptions& o,
                     IODebugContext* d) override {
    IOStatus s = fs_->Inject(Op::kRead);
    if (!s.ok()) {
      for (size_t i = 0; i < n; ++i) reqs[i].status = s;
      return s;
    }
    return target()->MultiRead(reqs, n, o, d);
  }
  // Asynchronous reads would bypass the injection: refuse them, so that
  // RocksDB reads synchronously.
  IOStatus ReadAsync(rocksdb::FSReadRequest&, const IOOptions&,
                     std::function<void(const rocksdb::FSReadRequest&, void*)>, void*, void**,
                     rocksdb::IOHandleDeleter*, IODebugContext*) override {
    return IOStatus::NotSupported("ReadAsync");
  }

 private:
  FaultFileSystem* fs_;
};

class FaultDirectory : public rocksdb::FSDirectoryWrapper {
 public:
  FaultDirectory(FaultFileSystem* fs, std::string path,
                 std::unique_ptr<rocksdb::FSDirectory> target)
      : FSDirectoryWrapper(std::move(target)), fs_(fs), path_(std::move(path)) {}
  IOStatus Fsync(const IOOptions& o, IODebugContext* d) override {
    return FsyncWithDirOptions(o, d, rocksdb::DirFsyncOptions());
  }
  IOStatus FsyncWithDirOptions(const IOOptions& o, IODebugContext* d,
                               const rocksdb::DirFsyncOptions& options) override {
    IOStatus s = fs_->Inject(Op::kSync, path_);
    if (s.ok()) s = FSDirectoryWrapper::FsyncWithDirOptions(o, d, options);
    if (s.ok()) fs_->DirectorySynced(path_);
    return s;
  }

 private:
  FaultFileSystem* fs_;
  std::string path_;
};

}  // namespace

void FaultFileSystem::FailNth(Op op, uint64_t n, Error error, std::string_view only_suffix) {
  std::lock_guard<std::mutex> lock(mu_);
  counts_ = {};
  armed_count_ = 0;
  armed_suffix_ = std::string(only_suffix);
  armed_ = true;
  fired_ = false;
  armed_op_ = op;
  armed_n_ = n;
  error_ = error;
}

uint64_t FaultFileSystem::Count(Op op) const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_[static_cast<size_t>(op)];
}

bool FaultFileSystem::Fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

void FaultFileSystem::ResetCounts() {
  std::lock_guard<std::mutex> lock(mu_);
  counts_ = {};
  armed_ = false;
}

bool FaultFileSystem::PoweredOff() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !powered_;
}

void FaultFileSystem::PowerCut() {
  std::lock_guard<std::mutex> lock(mu_);
  powered_ = false;
}

absl::Status FaultFileSystem::DropUnsyncedData() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [path, state] : files_) {
    std::error_code ec;
    if (!state.entry_synced) {
      std::filesystem::remove(path, ec);
    } else if (std::filesystem::exists(path, ec)) {
      std::filesystem::resize_file(path, state.synced, ec);
    }
    if (ec)
      return absl::InternalError(
          absl::StrCat("dropping unsynced data of ", path, ": ", ec.message()));
  }
  files_.clear();
  powered_ = true;
  return absl::OkStatus();
}

void FaultFileSystem::SpareReadsOf(const std::string& part) {
  std::lock_guard<std::mutex> lock(mu_);
  spared_reads_ = part;
}

namespace {

using Writer = FaultFileSystem::Writer;

// Whose file `path` is (kAll: a directory, or a file of no writer below).
Writer WriterOf(std::string_view path) {
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (name == "LOG") return Writer::kInfoLog;
  if (name.ends_with(".log")) return Writer::kWal;
  if (name.starts_with("MANIFEST-")) return Writer::kManifest;
  if (name.starts_with("OPTIONS-")) return Writer::kOptions;
  if (name.ends_with(".sst")) {
    return path.find("/bulk-load.tmp/") != std::string_view::npos ? Writer::kBulkTable
                                                                  : Writer::kTable;
  }
  return Writer::kAll;
}

IOStatus Injected(FaultFileSystem::Error error) {
  if (error == FaultFileSystem::Error::kNoSpace) return IOStatus::NoSpace("injected ENOSPC");
  return IOStatus::IOError("injected EIO");
}

}  // namespace

const char* FaultFileSystem::WriterName(Writer w) {
  switch (w) {
    case Writer::kAll:
      return "every file";
    case Writer::kInfoLog:
      return "the info log";
    case Writer::kWal:
      return "the write-ahead log";
    case Writer::kManifest:
      return "the MANIFEST";
    case Writer::kOptions:
      return "the OPTIONS file";
    case Writer::kTable:
      return "flush and compaction table files";
    case Writer::kBulkTable:
      return "bulk-load table files";
  }
  return "?";
}

void FaultFileSystem::FailWriter(Writer writer, Error error) {
  std::lock_guard<std::mutex> lock(mu_);
  writer_failing_ = true;
  failing_writer_ = writer;
  writer_error_ = error;
  writer_failures_ = 0;
  writes_to_ = {};
}

void FaultFileSystem::Heal() {
  std::lock_guard<std::mutex> lock(mu_);
  writer_failing_ = false;
  writes_to_ = {};
}

uint64_t FaultFileSystem::Failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writer_failures_;
}

uint64_t FaultFileSystem::WritesTo(Writer writer) const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_to_[static_cast<size_t>(writer)];
}

void FaultFileSystem::SetWriteHook(std::function<void(Writer)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  write_hook_ = std::move(hook);
}

IOStatus FaultFileSystem::Inject(Op op, std::string_view path) {
  if (op == Op::kWrite) {
    std::function<void(Writer)> hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hook = write_hook_;
    }
    if (hook) hook(WriterOf(path));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!powered_) return IOStatus::IOError("power cut");
  ++counts_[static_cast<size_t>(op)];
  if (op != Op::kRead) {
    const Writer writer = WriterOf(path);
    if (op == Op::kWrite) ++writes_to_[static_cast<size_t>(writer)];
    if (writer_failing_ && (failing_writer_ == Writer::kAll || failing_writer_ == writer)) {
      ++writer_failures_;
      return Injected(writer_error_);
    }
  }
  if (!armed_ || op != armed_op_) return IOStatus::OK();
  if (!armed_suffix_.empty() && !path.ends_with(armed_suffix_)) return IOStatus::OK();
  if (++armed_count_ != armed_n_) return IOStatus::OK();
  armed_ = false;
  fired_ = true;
  return Injected(error_);
}

void FaultFileSystem::Appended(const std::string& path, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  files_[path].size += bytes;
}

void FaultFileSystem::Synced(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  FileState& f = files_[path];
  f.synced = f.size;
}

void FaultFileSystem::DirectorySynced(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string normal = std::filesystem::path(dir).lexically_normal().string();
  for (auto& [path, state] : files_) {
    if (DirOf(path) == normal) state.entry_synced = true;
  }
}

void FaultFileSystem::Truncated(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  FileState& f = files_[path];
  f.size = std::min(f.size, size);
  f.synced = std::min(f.synced, size);
}

IOStatus FaultFileSystem::Wrap(const std::string& path, bool created,
                               std::unique_ptr<rocksdb::FSWritableFile>* file) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (created) {
      files_[path] = FileState{};
    } else if (!files_.contains(path)) {
      // Reopened: what it holds already counts as durable.
      std::error_code ec;
      const uint64_t size = std::filesystem::file_size(path, ec);
      files_[path] = FileState{ec ? 0 : size, ec ? 0 : size, true};
    }
  }
  *file = std::make_unique<FaultWritableFile>(this, path, std::move(*file));
  return IOStatus::OK();
}

IOStatus FaultFileSystem::NewSequentialFile(const std::string& f, const rocksdb::FileOptions& o,
                                            std::unique_ptr<rocksdb::FSSequentialFile>* r,
                                            IODebugContext* d) {
  if (PoweredOff()) return IOStatus::IOError("power cut");
  IOStatus s = target()->NewSequentialFile(f, o, r, d);
  if (s.ok()) *r = std::make_unique<FaultSequentialFile>(this, std::move(*r));
  return s;
}

IOStatus FaultFileSystem::NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& o,
                                              std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                              IODebugContext* d) {
  if (PoweredOff()) return IOStatus::IOError("power cut");
  IOStatus s = target()->NewRandomAccessFile(f, o, r, d);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!spared_reads_.empty() && f.find(spared_reads_) != std::string::npos) return s;
  }
  if (s.ok()) *r = std::make_unique<FaultRandomAccessFile>(this, std::move(*r));
  return s;
}

IOStatus FaultFileSystem::NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                          std::unique_ptr<rocksdb::FSWritableFile>* r,
                                          IODebugContext* d) {
  if (PoweredOff()) return IOStatus::IOError("power cut");
  IOStatus s = target()->NewWritableFile(f, o, r, d);
  return s.ok() ? Wrap(f, /*created=*/true, r) : s;
}

IOStatus FaultFileSystem::ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                             std::unique_ptr<rocksdb::FSWritableFile>* r,
                                             IODebugContext* d) {
  if (PoweredOff()) return IOStatus::IOError("power cut");
  IOStatus s = target()->ReopenWritableFile(f, o, r, d);
  return s.ok() ? Wrap(f, /*created=*/false, r) : s;
}

IOStatus FaultFileSystem::ReuseWritableFile(const std::string& f, const std::string& old,
                                            const rocksdb::FileOptions& o,
                                            std::unique_ptr<rocksdb::FSWritableFile>* r,
                                            IODebugContext* d) {
  if (PoweredOff()) return IOStatus::IOError("power cut");
  IOStatus s = target()->ReuseWritableFile(f, old, o, r, d);
  if (!s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    files_.erase(old);
  }
  return Wrap(f, /*created=*/true, r);
}

IOStatus FaultFileSystem::NewDirectory(const std::string& name, const IOOptions& o,
                                       std::unique_ptr<rocksdb::FSDirectory>* r,
                                       IODebugContext* d) {
  if (PoweredOff()) return IOStatus::IOError("power cut");
  IOStatus s = target()->NewDirectory(name, o, r, d);
  if (s.ok()) *r = std::make_unique<FaultDirectory>(this, name, std::move(*r));
  return s;
}

IOStatus FaultFileSystem::RenameFile(const std::string& src, const std::string& dst,
                                     const IOOptions& o, IODebugContext* d) {
  if (PoweredOff()) return IOStatus::IOError("power cut");
  std::error_code ec;
  const bool replaces = std::filesystem::exists(dst, ec);
  IOStatus s = target()->RenameFile(src, dst, o, d);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(src);
  if (it == files_.end()) {
    files_.erase(dst);
    return s;
  }
  FileState state = it->second;
  files_.erase(it);
  // Replacing a name keeps one of the two files under it after power loss;
  // taking the new one (its data is synced by then) rather than emulating
  // the old one's return keeps the model simple.
  if (replaces) state.entry_synced = true;
  files_[dst] = state;
  return s;
}

IOStatus FaultFileSystem::DeleteFile(const std::string& f, const IOOptions& o, IODebugContext* d) {
  if (PoweredOff()) return IOStatus::IOError("power cut");
  IOStatus s = target()->DeleteFile(f, o, d);
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    files_.erase(f);
  }
  return s;
}

}  // namespace claimstore::testing
