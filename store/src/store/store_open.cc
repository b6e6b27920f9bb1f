// Opening a store: RocksDB's options, atomic creation of a new database,
// the open itself (primary or secondary), the format version, and then the
// store over it: StoreImpl (writable) or ReadOnlyStore.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "claimstore/store.h"
#include "db/database.h"
#include "db/info_log.h"
#include "db/rocksdb_status.h"
#include "index/keys.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/listener.h"
#include "rocksdb/table.h"
#include "rocksdb/transaction_log.h"
#include "rocksdb/write_batch.h"
#include "store/read_only_store.h"
#include "store/snapshot_reads.h"
#include "store/store_impl.h"
#include "store/store_testing.h"
#include "util/status_macros.h"

namespace claimstore {

Store::~Store() = default;

// Stores that hold no records in memory read a copy and lend it.
absl::Status Store::GetInPlace(absl::string_view claim_namespace, absl::string_view name,
                               RecordVisitor read) const {
  absl::StatusOr<ClaimRead> got = Get(ClaimKey{std::string(claim_namespace), std::string(name)});
  if (!got.ok()) return got.status();
  read(got->record, got->revision);
  return absl::OkStatus();
}
BulkLoad::~BulkLoad() = default;

namespace internal {
namespace {

// The column families, in the order of Database::handles_.
const std::vector<std::string>& FamilyNames() {
  static const auto* names = new std::vector<std::string>{rocksdb::kDefaultColumnFamilyName,
                                                          kRecordsFamily,
                                                          kConsumersFamily,
                                                          kDevicesFamily,
                                                          kMetaFamily,
                                                          kFeedFamily};
  return *names;
}

rocksdb::ColumnFamilyOptions FamilyOptions(const Options& options,
                                           const std::shared_ptr<rocksdb::Cache>& cache,
                                           const std::string& name) {
  rocksdb::ColumnFamilyOptions family;
  // The store switches the memtables itself at write_buffer_bytes of
  // writes (StoreImpl::PrepareMemtables); RocksDB's own switch, inside a
  // commit's write, is a backstop for memtables that take more memory
  // than the writes' bytes.
  family.write_buffer_size = 2 * options.write_buffer_bytes;
  switch (options.compression) {
    case Compression::kNone:
      family.compression = rocksdb::kNoCompression;
      break;
    case Compression::kLZ4:
      family.compression = rocksdb::kLZ4Compression;
      break;
    case Compression::kZstd:
      family.compression = rocksdb::kZSTD;
      break;
  }
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  // Index and filter blocks live in the block cache too, so that memory stays
  // within block_cache_bytes + memtables.
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;  // evicted last
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  // Bloom filters serve point lookups: of records (reads that miss the
  // record cache, and every create). The index families are only ever
  // scanned by prefix, where a whole-key filter cannot help: none there
  // (no CPU to build them in flushes and bulk loads, no cache to hold them).
  if (name == kRecordsFamily || name == kMetaFamily) {
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  }
  table.format_version = 5;
  // The feed is read in revision order, a stretch at a time (watchers
  // catching up): large blocks mean fewer reads and fewer decompressions
  // per event; nothing reads single events often.
  if (name == kFeedFamily) table.block_size = 64 << 10;
  family.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return family;
}

std::vector<rocksdb::ColumnFamilyDescriptor> FamilyDescriptors(const Options& options) {
  // A tenth of the cache is reserved for index and filter blocks, so that
  // data blocks cannot push them out.
  const std::shared_ptr<rocksdb::Cache> cache = rocksdb::NewLRUCache(
      options.block_cache_bytes, /*num_shard_bits=*/-1, /*strict_capacity_limit=*/false,
      /*high_pri_pool_ratio=*/0.1);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : FamilyNames()) {
    descriptors.emplace_back(name, FamilyOptions(options, cache, name));
  }
  return descriptors;
}

rocksdb::DBOptions DatabaseOptions(const Options& options, rocksdb::Env* env) {
  rocksdb::DBOptions db_options;
  db_options.max_background_jobs = 2;
  db_options.keep_log_file_num = kOldInfoLogs;
  // The meta family takes a few bytes per write and would never fill its
  // memtable, keeping every WAL file alive; past this total RocksDB flushes
  // the families that hold the oldest WAL, which bounds disk use and the
  // replay at the next open.
  db_options.max_total_wal_size = 4 * options.write_buffer_bytes;
  // Recovery tolerates an incomplete last record (a write torn by a crash,
  // never acknowledged) but not corruption before it: RocksDB's default
  // (point-in-time) would silently drop every write after a bad record.
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  db_options.paranoid_checks = true;
  // A record and its index entries live in different column families but
  // one WriteBatch; flushing the families one at a time can tear it. After
  // a failed WAL sync the log holds a batch the memtables do not: a later
  // flush of one family moves that family past the log, and recovery then
  // replays the batch into the other families only (the I/O-error sweep of
  // fault_test found index entries without their record this way). Atomic
  // flushes move all families past a log together.
  db_options.atomic_flush = true;
  // No automatic resume after a background error: the store takes no
  // writes after a failed commit until it is reopened, so RocksDB's resume
  // thread could only race with the close. (A power cut under concurrent
  // synced writers aborted Debian's librocksdb at close, asserting in
  // ~ColumnFamilySet, in 2 of 80 runs of fault_test's power-loss test
  // before this, and 1 of 160 after.)
  db_options.max_bgerror_resume_count = 0;
  db_options.env = env;
  return db_options;
}

// claimstore's info log in `dir` (info_log.h: RocksDB's own aborts the
// process on the line after a failed write).
void SetInfoLog(const std::string& dir, rocksdb::DBOptions* db_options) {
  db_options->info_log =
      InfoLog::Open(db_options->env->GetFileSystem(), dir + "/LOG", kOldInfoLogs);
}

// RocksDB does not always say which file it found corrupt (WAL recovery
// reports only "checksum mismatch"): then the error lists the files that can
// hold it, the write-ahead logs and the manifest.
absl::Status WithSuspectFiles(const std::string& path, absl::Status s) {
  if (!absl::IsDataLoss(s)) return s;
  const std::string message(s.message());
  if (message.find(".log") != std::string::npos || message.find(".sst") != std::string::npos ||
      message.find("MANIFEST") != std::string::npos) {
    return s;
  }
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, ".log") || absl::StartsWith(name, "MANIFEST-")) files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  return absl::DataLossError(
      absl::StrCat(message, " (in one of ", path, "/{", absl::StrJoin(files, ","), "})"));
}

// Whether a database is at `path`. One that exists (it has a CURRENT file)
// must have claimstore's column families; failing to list them is an
// error, not a reason to create a new database over it.
// A database of format version 1 has no feed family; *has_feed says.
absl::StatusOr<bool> CheckExisting(const std::string& path, const rocksdb::DBOptions& db_options,
                                   bool* has_feed) {
  std::error_code ec;
  *has_feed = true;
  if (!std::filesystem::exists(path + "/CURRENT", ec)) return false;
  std::vector<std::string> existing;
  CS_RETURN_IF_ERROR(WithSuspectFiles(
      path, FromRocksDB(rocksdb::DB::ListColumnFamilies(db_options, path, &existing),
                        absl::StrCat("opening ", path))));
  for (const std::string& name : FamilyNames()) {
    if (std::find(existing.begin(), existing.end(), name) == existing.end()) {
      if (name == kFeedFamily) {
        *has_feed = false;
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is not a claimstore database (it has no column family \"", name, "\")"));
    }
  }
  return true;
}

// Writes what a new database starts with (format version, revision 0),
// synced, and closes it.
absl::Status InitializeDatabase(const std::string& staging, const std::string& path,
                                const rocksdb::DBOptions& db_options,
                                const std::vector<rocksdb::ColumnFamilyDescriptor>& descriptors) {
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  CS_RETURN_IF_ERROR(
      FromRocksDB(rocksdb::DB::Open(db_options, staging, descriptors, &handles, &raw),
                  absl::StrCat("creating ", path)));
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string version, zero;
  AppendUint64(kFormatVersion, &version);
  AppendUint64(0, &zero);
  rocksdb::WriteBatch batch;
  batch.Put(handles[4], kFormatVersionKey, version);
  batch.Put(handles[4], kRevisionKey, zero);
  rocksdb::WriteOptions sync;
  sync.sync = true;
  rocksdb::Status s = db->Write(sync, &batch);
  for (rocksdb::ColumnFamilyHandle* h : handles) db->DestroyColumnFamilyHandle(h);
  if (s.ok()) s = db->Close();
  return FromRocksDB(s, absl::StrCat("creating ", path));
}

// Creates a complete, empty database at `path`: built in a sibling directory
// and then renamed into place, so that a process killed while creating
// leaves either nothing or a whole database, never a half-made one that
// later opens refuse.
absl::Status CreateDatabase(const std::string& path, rocksdb::DBOptions db_options,
                            const std::vector<rocksdb::ColumnFamilyDescriptor>& descriptors) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  fs::create_directories(parent, ec);
  const std::string prefix = target.filename().string() + ".creating.";
  // Leftovers of creations that were interrupted.
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(entry.path(), ec);
  }
  const std::string staging = absl::StrCat(path, ".creating.", getpid());
  fs::create_directories(staging, ec);
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  SetInfoLog(staging, &db_options);
  CS_RETURN_IF_ERROR(InitializeDatabase(staging, path, db_options, descriptors));
  // rename(2) is atomic, and replaces `path` if it is an empty directory.
  if (std::rename(staging.c_str(), path.c_str()) != 0) {
    const int error = errno;
    fs::remove_all(staging, ec);
    std::vector<std::string> existing;
    if (rocksdb::DB::ListColumnFamilies(db_options, path, &existing).ok()) {
      return absl::OkStatus();  // another process created it meanwhile
    }
    return absl::FailedPreconditionError(absl::StrCat("cannot create a database at ", path, ": ",
                                                      std::strerror(error),
                                                      " (is it a directory that is not empty?)"));
  }
  return absl::OkStatus();
}

// The format version, written at creation and checked at every open; a
// writable open of an older database moves it to this version (its only
// change, the feed family, was added by the open).
absl::Status CheckFormatVersion(const std::string& path, rocksdb::DB* db,
                                rocksdb::ColumnFamilyHandle* meta, bool writable) {
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), meta, kFormatVersionKey, &value);
  if (s.IsNotFound())
    return absl::DataLossError(absl::StrCat(path, ": the format version is missing"));
  CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the format version"));
  uint64_t version = 0;
  if (!ParseUint64(ToView(value), &version)) {
    return absl::DataLossError(absl::StrCat(path, ": the format version is malformed"));
  }
  if (version > kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(path, " has database format version ",
                                                      version, "; this claimstore reads up to ",
                                                      kFormatVersion, ": use a newer claimstore"));
  }
  if (version < kFormatVersion && writable) {
    std::string encoded;
    AppendUint64(kFormatVersion, &encoded);
    rocksdb::WriteOptions sync;
    sync.sync = true;
    CS_RETURN_IF_ERROR(FromRocksDB(db->Put(sync, meta, kFormatVersionKey, encoded),
                                   "upgrading the format version"));
  }
  return absl::OkStatus();
}

// RocksDB 7.8 starts a new write-ahead log at every open and keeps the
// last one while nothing was written to it (the oldest log a family needs
// only moves at a flush): a database opened often with no write in
// between (the tool's reads, a scheduler restarting) gathered an empty
// file per open, each one read again at every later open (RocksDB #11313,
// fixed in 8.3). Deleted here once this open holds the database's lock:
// an empty log older than the current one holds nothing any recovery
// needs, as long as the manifest does not list the logs
// (track_and_verify_wals_in_manifest, left off). Best effort: a log not
// deleted is read at the next open, as before.
void DeleteEmptyOldLogs(const std::string& path, rocksdb::DB* db, rocksdb::Env* env) {
  std::unique_ptr<rocksdb::LogFile> current;
  std::vector<std::string> children;
  if (!db->GetCurrentWalFile(&current).ok() || current == nullptr ||
      !env->GetChildren(path, &children).ok()) {
    return;
  }
  for (const std::string& name : children) {
    uint64_t number = 0, size = 0;
    if (!absl::EndsWith(name, ".log") ||
        !absl::SimpleAtoi(absl::string_view(name).substr(0, name.size() - 4), &number) ||
        number >= current->LogNumber()) {
      continue;
    }
    const std::string file = path + "/" + name;
    if (env->GetFileSize(file, &size).ok() && size == 0) (void)env->DeleteFile(file);
  }
}

}  // namespace

StoreImpl::StoreImpl(std::unique_ptr<Database> db, const Options& options)
    : options_(options),
      write_options_([&] {
        rocksdb::WriteOptions w;
        w.sync = options.sync_writes;
        return w;
      }()),
      db_(std::move(db)),
      published_(options.record_cache_bytes),
      writes_(WriteGroup::Options{.gather = options.sync_writes},
              [this](absl::Span<WriteGroup::Writer* const> group) {
                writes_.leader.AssertHeld();
                CommitGroup(group);
              }) {
  const Database* database = db_.get();
  published_.SetAllocatedLoader([database](const Pin& at,
                                           const std::vector<std::string>* device_keys) {
    return AllocatedFromIndexAt(*database, ReadPoint{at.snapshot.get(), at.revision}, device_keys);
  });
}

StoreImpl::~StoreImpl() = default;

absl::StatusOr<std::unique_ptr<Store>> StoreImpl::Create(std::unique_ptr<Database> db,
                                                         const Options& options) {
  // Table files of a bulk load that a crash interrupted: never ingested.
  std::error_code ec;
  std::filesystem::remove_all(db->BulkDir(), ec);
  auto store = std::unique_ptr<StoreImpl>(new StoreImpl(std::move(db), options));
  {
    Exclusive exclusive(&store->writes_);
    CS_ASSIGN_OR_RETURN(store->revision_, store->db_->ReadRevision(nullptr));
    CS_RETURN_IF_ERROR(store->OpenFeed());
    CS_RETURN_IF_ERROR(store->ResetPublished());
  }
  return std::unique_ptr<Store>(std::move(store));
}

namespace {

// Both indexes, read whole at `at` (kept in memory from then on): one
// family on a thread of its own, the other on the caller's, as a store
// that opens has nothing else to do.
absl::Status LoadIndexes(const Database& db, const Pin& at, BucketedKeys* consumers,
                         BucketedKeys* devices) {
  const ReadPoint point{at.snapshot.get(), at.revision};
  const auto load = [&db, &point](rocksdb::ColumnFamilyHandle* family, BucketedKeys* index) {
    std::unique_ptr<KeyScan> scan = db.Scan(family, "", point, /*fill_cache=*/false);
    for (scan->SeekToFirst(); scan->Valid(); scan->Next()) index->AppendSorted(scan->key());
    return FromRocksDB(scan->status(), "loading the indexes");
  };
  absl::Status devices_loaded;
  std::thread thread([&] { devices_loaded = load(db.devices(), devices); });
  absl::Status consumers_loaded = load(db.consumers(), consumers);
  thread.join();
  CS_RETURN_IF_ERROR(consumers_loaded);
  return devices_loaded;
}

}  // namespace

absl::Status StoreImpl::ResetPublished() {
  SnapshotRef snapshot = db_->MakeSnapshot();
  const Database* db = db_.get();
  if (options_.defer_index_load) {
    published_.ResetDeferred(revision_, std::move(snapshot),
                             [db](const Pin& at, BucketedKeys* consumers, BucketedKeys* devices) {
                               return LoadIndexes(*db, at, consumers, devices);
                             });
    return absl::OkStatus();
  }
  BucketedKeys consumers = PublishedState::NewConsumerIndex();
  BucketedKeys devices = PublishedState::NewDeviceIndex();
  CS_RETURN_IF_ERROR(LoadIndexes(*db, Pin{revision_, snapshot}, &consumers, &devices));
  published_.Reset(revision_, std::move(snapshot), std::move(consumers), std::move(devices));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                         const Options& options,
                                                         rocksdb::Env* env) {
  auto database = std::unique_ptr<Database>(new Database());
  database->path_ = path;
  database->fs_ = std::make_shared<DatabaseFileSystem>(
      env != nullptr ? env->GetFileSystem() : rocksdb::FileSystem::Default());
  database->env_ = rocksdb::NewCompositeEnv(database->fs_);
  rocksdb::DBOptions db_options = DatabaseOptions(options, database->env_.get());
  database->errors_ = std::make_shared<ErrorPolicy>();
  db_options.listeners.push_back(database->errors_);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors = FamilyDescriptors(options);

  bool has_feed = true;
  CS_ASSIGN_OR_RETURN(const bool exists, CheckExisting(path, db_options, &has_feed));
  if (!exists && (options.read_only || !options.create_if_missing)) {
    return absl::NotFoundError(absl::StrCat("no claimstore database at ", path));
  }
  rocksdb::DB* raw = nullptr;
  if (options.read_only) {
    char pattern[] = "/tmp/claimstore-secondary-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      return absl::InternalError("cannot create a directory for the secondary instance");
    }
    database->secondary_dir_ = pattern;
    db_options.max_open_files = -1;         // required by secondary instances
    if (!has_feed) descriptors.pop_back();  // feed() is null
    SetInfoLog(database->secondary_dir_, &db_options);
    CS_RETURN_IF_ERROR(WithSuspectFiles(
        path, FromRocksDB(rocksdb::DB::OpenAsSecondary(db_options, path, database->secondary_dir_,
                                                       descriptors, &database->handles_, &raw),
                          absl::StrCat("opening ", path, " read-only"))));
  } else {
    if (!exists) CS_RETURN_IF_ERROR(CreateDatabase(path, db_options, descriptors));
    db_options.create_missing_column_families = true;  // the feed of a version-1 database
    SetInfoLog(path, &db_options);
    CS_RETURN_IF_ERROR(WithSuspectFiles(
        path,
        FromRocksDB(rocksdb::DB::Open(db_options, path, descriptors, &database->handles_, &raw),
                    absl::StrCat("opening ", path))));
  }
  database->db_.reset(raw);
  if (!options.read_only) DeleteEmptyOldLogs(path, raw, database->env_.get());
  CS_RETURN_IF_ERROR(CheckFormatVersion(path, raw, database->meta(), !options.read_only));
  return database;
}

absl::StatusOr<std::unique_ptr<Store>> OpenStoreWithEnv(absl::string_view path,
                                                        const Options& options, rocksdb::Env* env) {
  CS_ASSIGN_OR_RETURN(std::unique_ptr<Database> database,
                      Database::Open(std::string(path), options, env));
  if (options.read_only) return ReadOnlyStore::Create(std::move(database));
  return StoreImpl::Create(std::move(database), options);
}

uint64_t LevelZeroFilesForTesting(Store& store) {
  auto* impl = dynamic_cast<StoreImpl*>(&store);
  return impl == nullptr ? 0 : impl->LevelZeroFiles();
}

}  // namespace internal

}  // namespace claimstore
