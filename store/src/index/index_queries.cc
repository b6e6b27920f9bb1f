#include "index/index_queries.h"

#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "index/device_rule.h"
#include "index/keys.h"
#include "util/status_macros.h"

namespace claimstore::internal {
namespace {

absl::Status Malformed(absl::string_view index, absl::string_view key) {
  return absl::DataLossError(
      absl::StrCat(index, " index key ", absl::CHexEscape(key), " is malformed"));
}

}  // namespace

absl::StatusOr<ClaimKeys> FindReservations(absl::string_view consumer_uid, IndexScan scan) {
  // An empty uid can mean nothing (every reservation has one).
  if (consumer_uid.empty()) return absl::InvalidArgumentError("consumer uid: Required value");
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
  // Each part given must name something: an empty one would match nothing
  // (or, for the driver, mean "everything", which this call is not for).
  for (const auto& [field, value] :
       {std::pair<const char*, const std::optional<std::string>*>{"pool", &query.pool},
        {"device", &query.device},
        {"shareID", &query.share_id}}) {
    if (value->has_value() && (*value)->empty()) {
      return absl::InvalidArgumentError(absl::StrCat("DeviceQuery.", field, ": Required value"));
    }
  }
  if (query.driver.empty()) return absl::InvalidArgumentError("DeviceQuery.driver: Required value");
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
