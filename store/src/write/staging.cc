#include "write/staging.h"

#include <algorithm>

#include "absl/strings/match.h"

namespace claimstore::internal {

void StagedWrites::Clear() {
  records_.clear();
  devices_.clear();
  BeginWrite();
}

void StagedWrites::BeginWrite() {
  undo_records_.clear();
  undo_devices_.clear();
}

void StagedWrites::Undo() {
  for (auto it = undo_records_.rbegin(); it != undo_records_.rend(); ++it) {
    if (it->second.has_value()) {
      records_[it->first] = *it->second;
    } else {
      records_.erase(it->first);
    }
  }
  for (auto it = undo_devices_.rbegin(); it != undo_devices_.rend(); ++it) {
    if (it->second.has_value()) {
      devices_[it->first] = *it->second;
    } else {
      devices_.erase(it->first);
    }
  }
  BeginWrite();
}

const std::optional<ClaimRecord>* StagedWrites::FindRecord(const std::string& record_key) const {
  auto it = records_.find(record_key);
  return it == records_.end() ? nullptr : &it->second;
}

void StagedWrites::SetRecord(const std::string& record_key, std::optional<ClaimRecord> record) {
  auto [it, inserted] = records_.try_emplace(record_key);
  undo_records_.emplace_back(
      record_key, inserted ? std::nullopt : std::optional<std::optional<ClaimRecord>>(it->second));
  it->second = std::move(record);
}

void StagedWrites::SetDevice(const std::string& device_key, bool present) {
  auto [it, inserted] = devices_.try_emplace(device_key, present);
  undo_devices_.emplace_back(device_key, inserted ? std::nullopt : std::optional<bool>(it->second));
  it->second = present;
}

void StagedWrites::OverlayDevices(absl::string_view prefix,
                                  std::vector<std::string>* holders) const {
  for (auto it = devices_.lower_bound(prefix);
       it != devices_.end() && absl::StartsWith(it->first, prefix); ++it) {
    auto held = std::find(holders->begin(), holders->end(), it->first);
    if (it->second && held == holders->end()) holders->push_back(it->first);
    if (!it->second && held != holders->end()) holders->erase(held);
  }
}

}  // namespace claimstore::internal
