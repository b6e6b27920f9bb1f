// TableSink: writes sorted key/values of one column family as table (SST)
// files for ingestion (bulk loads), a new file every `file_bytes` so that
// later compactions work on files of the usual size. Files are synced when
// finished (SstFileWriter::Finish). Not thread-safe; one sink per thread.
#ifndef CLAIMSTORE_SRC_BULK_TABLE_SINK_H_
#define CLAIMSTORE_SRC_BULK_TABLE_SINK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "rocksdb/db.h"
#include "rocksdb/sst_file_writer.h"

namespace claimstore::internal {

class TableSink {
 public:
  // Files go to `dir`/`name`-N.sst, written with the family's options
  // (compression, filters, and the database's file system).
  TableSink(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family, std::string dir, std::string name,
            uint64_t file_bytes = uint64_t{64} << 20);
  TableSink(const TableSink&) = delete;
  TableSink& operator=(const TableSink&) = delete;
  // REQUIRES: `key` sorts after every key put or deleted before.
  absl::Status Put(absl::string_view key, absl::string_view value);
  // A deletion of `key` (a tombstone: it hides the key's stored value once
  // ingested). REQUIRES: as Put.
  absl::Status Delete(absl::string_view key);
  // Makes the sink's files also delete every stored key in [begin, end)
  // that they do not put: range tombstones, each file's from its first key
  // (`begin` for the first) to the next file's (`end` for the last). Each
  // tombstone covers only its own file's range, so the files do not overlap
  // (each goes to the lowest level it fits), and the keys it must not
  // delete are its own file's, which share its sequence number and win
  // over it (a tombstone hides only older entries). A tombstone reaching
  // into another file of the same ingestion would delete that file's keys
  // if RocksDB gave the other file an older number: keep them apart. Even
  // with nothing put, Finish then leaves a file.
  // REQUIRES: before any Put or Delete; every key put is in [begin, end).
  void DeleteStoredRange(std::string begin, std::string end);
  // Finishes the last file.
  absl::Status Finish();
  // The finished files, in key order.
  const std::vector<std::string>& paths() const { return paths_; }
  rocksdb::ColumnFamilyHandle* family() const { return family_; }

 private:
  // A file to write to: the open one, or a new one when it is full.
  // `key` is the next key to be written.
  absl::Status Open(absl::string_view key);
  absl::Status Roll();
  // `s` as an absl::Status naming the open file ("<doing><path>").
  absl::Status Checked(const rocksdb::Status& s, absl::string_view doing) const;
  // Finishes the open file, its tombstone up to `upto` (with a range).
  absl::Status FinishFile(absl::string_view upto);

  rocksdb::ColumnFamilyHandle* family_;
  rocksdb::Options options_;
  std::string dir_, name_;
  uint64_t file_bytes_;
  std::unique_ptr<rocksdb::SstFileWriter> writer_;  // the open file, if any
  std::vector<std::string> paths_;
  bool clear_ = false;
  std::string clear_begin_, clear_end_;  // what is left to delete
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_BULK_TABLE_SINK_H_
