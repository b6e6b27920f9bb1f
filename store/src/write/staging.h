// StagedWrites: what the write group being committed has staged so far,
// for the writes after it in the same group: the RocksDB WriteBatch cannot
// be read, so the records and device-index entries it changes are kept
// beside it. An undo log reverts the write being applied when it is
// refused, as the batch rolls back to its save point.
//
// Thread-safety: none; the write leader alone uses it.
#ifndef CLAIMSTORE_SRC_WRITE_STAGING_H_
#define CLAIMSTORE_SRC_WRITE_STAGING_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "claimstore/claim_record.h"

namespace claimstore::internal {

class StagedWrites {
 public:
  // Forgets everything: a new group starts.
  void Clear();
  // Starts a write: what it stages from here on is what Undo reverts.
  void BeginWrite();
  // Reverts what the current write staged.
  void Undo();

  // The record of `record_key` as staged (nullopt inside: deleted), or null
  // when the group has not staged it.
  const std::optional<ClaimRecord>* FindRecord(const std::string& record_key) const;
  void SetRecord(const std::string& record_key, std::optional<ClaimRecord> record);

  // Adds or removes a device-index key.
  void SetDevice(const std::string& device_key, bool present);
  // `holders` (the device-index keys under `prefix` as published) updated
  // with what the group staged under `prefix`.
  void OverlayDevices(absl::string_view prefix, std::vector<std::string>* holders) const;

 private:
  // Record key -> the record after the group's writes so far (nullopt:
  // deleted).
  absl::flat_hash_map<std::string, std::optional<ClaimRecord>> records_;
  // Device index key -> whether it exists after the group's writes so far.
  absl::btree_map<std::string, bool> devices_;
  // The previous values of what the current write changed (outer nullopt:
  // the key was not staged before).
  std::vector<std::pair<std::string, std::optional<std::optional<ClaimRecord>>>> undo_records_;
  std::vector<std::pair<std::string, std::optional<bool>>> undo_devices_;
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_WRITE_STAGING_H_
