#include "index_queries.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "device_rule.h"
#include "keys.h"
#include "status_macros.h"

namespace claimstore::internal {
namespace {

absl::Status Malformed(absl::string_view index, absl::string_view key) {
  return absl::DataLossError(
      absl::StrCat(index, " index key ", absl::CHexEscape(key), " is malformed"));
}

}  // namespace

absl::StatusOr<ClaimKeys> FindReservations(absl::string_view consumer_uid, IndexScan scan) {
  std::string prefix;
  AppendComponent(consumer_uid, &prefix);
  ClaimKeys out;
  std::string uid, malformed;
  CS_ASSIGN_OR_RETURN(out.revision, scan(prefix, [&](absl::string_view k) {
                        ClaimKey key;
                        if (!ParseConsumerKey(k, &uid, &key.claim_namespace, &key.name)) {
                          malformed = std::string(k);
                        }
                        out.claims.push_back(std::move(key));
                      }));
  if (!malformed.empty()) return Malformed("consumer", malformed);
  return out;
}

absl::StatusOr<DeviceHoldings> FindHoldings(const DeviceQuery& query, IndexScan scan) {
  if ((query.device.has_value() && !query.pool.has_value()) ||
      (query.share_id.has_value() && !query.device.has_value())) {
    return absl::InvalidArgumentError(
        "a device query names a driver, then optionally a pool, a device and a "
        "shareID, each requiring the one before");
  }
  std::string prefix;
  AppendComponent(query.driver, &prefix);
  if (query.pool.has_value()) AppendComponent(*query.pool, &prefix);
  if (query.device.has_value()) AppendComponent(*query.device, &prefix);
  DeviceHoldings out;
  std::string malformed;
  DeviceKeyParts parts;
  CS_ASSIGN_OR_RETURN(out.revision, scan(prefix, [&](absl::string_view k) {
                        if (!ParseDeviceKey(k, &parts)) {
                          malformed = std::string(k);
                          return;
                        }
                        if (query.share_id.has_value() && parts.share_id != *query.share_id) {
                          return;
                        }
                        out.holdings.push_back(ToHolding(std::move(parts)));
                      }));
  if (!malformed.empty()) return Malformed("device", malformed);
  return out;
}

}  // namespace claimstore::internal
