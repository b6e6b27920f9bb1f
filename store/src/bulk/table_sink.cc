#include "bulk/table_sink.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "db/rocksdb_status.h"
#include "util/status_macros.h"

namespace claimstore::internal {

TableSink::TableSink(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family, std::string dir,
                     std::string name, uint64_t file_bytes)
    : family_(family),
      options_(db->GetOptions(family)),
      dir_(std::move(dir)),
      name_(std::move(name)),
      file_bytes_(file_bytes) {
  // Write back as it goes (sync_file_range every MiB), so that the fsync of
  // each finished file does not wait for all of it.
  options_.bytes_per_sync = uint64_t{1} << 20;
}

void TableSink::DeleteStoredRange(std::string begin, std::string end) {
  clear_ = true;
  clear_begin_ = std::move(begin);
  clear_end_ = std::move(end);
}

absl::Status TableSink::Open(absl::string_view key) {
  if (writer_ != nullptr && writer_->FileSize() >= file_bytes_) CS_RETURN_IF_ERROR(FinishFile(key));
  if (writer_ == nullptr) CS_RETURN_IF_ERROR(Roll());
  return absl::OkStatus();
}

absl::Status TableSink::Checked(const rocksdb::Status& s, absl::string_view doing) const {
  if (s.ok()) return absl::OkStatus();
  return FromRocksDB(s, absl::StrCat(doing, paths_.back()));
}

absl::Status TableSink::Put(absl::string_view key, absl::string_view value) {
  CS_RETURN_IF_ERROR(Open(key));
  return Checked(writer_->Put(rocksdb::Slice(key.data(), key.size()),
                              rocksdb::Slice(value.data(), value.size())),
                 "writing ");
}

absl::Status TableSink::Delete(absl::string_view key) {
  CS_RETURN_IF_ERROR(Open(key));
  return Checked(writer_->Delete(rocksdb::Slice(key.data(), key.size())), "writing ");
}

absl::Status TableSink::Roll() {
  std::string path = absl::StrCat(dir_, "/", name_, "-", paths_.size(), ".sst");
  // Keeps the written pages cached (the default drops them as it goes):
  // the store reads them right after ingesting.
  writer_ = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(options_), options_,
                                                     family_, /*invalidate_page_cache=*/false);
  paths_.push_back(std::move(path));
  absl::Status s = Checked(writer_->Open(paths_.back()), "creating ");
  if (!s.ok()) paths_.pop_back();
  return s;
}

absl::Status TableSink::FinishFile(absl::string_view upto) {
  if (writer_ == nullptr) return absl::OkStatus();
  std::unique_ptr<rocksdb::SstFileWriter> writer = std::move(writer_);
  if (clear_ && clear_begin_ < upto) {
    CS_RETURN_IF_ERROR(Checked(
        writer->DeleteRange(rocksdb::Slice(clear_begin_), rocksdb::Slice(upto.data(), upto.size())),
        "writing "));
    clear_begin_ = std::string(upto);
  }
  return Checked(writer->Finish(), "finishing ");
}

absl::Status TableSink::Finish() {
  if (clear_ && clear_begin_ < clear_end_ && writer_ == nullptr) CS_RETURN_IF_ERROR(Roll());
  const std::string end = clear_ ? clear_end_ : std::string();
  return FinishFile(end);
}

}  // namespace claimstore::internal
