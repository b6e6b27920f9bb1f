#include "index_entries.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "keys.h"

namespace claimstore::internal {
namespace {

absl::string_view View(const flatbuffers::String* s) {
  return s == nullptr ? absl::string_view() : absl::string_view(s->data(), s->size());
}

void SortUnique(std::vector<std::string>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

}  // namespace

IndexEntries ComputeIndexEntries(const fb::ClaimRecord& record) {
  IndexEntries entries;
  const absl::string_view ns = View(record.namespace_());
  const absl::string_view name = View(record.name());
  const fb::ResourceClaimStatus* status = record.status();
  if (status == nullptr) return entries;
  if (const auto* reserved = status->reserved_for(); reserved != nullptr) {
    entries.consumers.reserve(reserved->size());
    for (const fb::ResourceClaimConsumerReference* c : *reserved) {
      entries.consumers.push_back(ConsumerKey(View(c->uid()), ns, name));
    }
    SortUnique(&entries.consumers);
  }
  const fb::AllocationResult* allocation = status->allocation();
  if (allocation != nullptr && allocation->results() != nullptr) {
    entries.devices.reserve(allocation->results()->size());
    for (const fb::DeviceRequestAllocationResult* r : *allocation->results()) {
      HoldingKind kind = HoldingKind::kExclusive;
      if (r->admin_access().has_value() && *r->admin_access()) {
        kind = HoldingKind::kAdmin;
      } else if (r->share_id() != nullptr) {
        kind = HoldingKind::kShare;
      }
      entries.devices.push_back(DeviceKey(View(r->driver()), View(r->pool()),
                                          View(r->device()), kind, View(r->share_id()),
                                          ns, name));
    }
    SortUnique(&entries.devices);
  }
  return entries;
}

std::vector<std::string> Minus(const std::vector<std::string>& a,
                               const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

void FindDoubleHoldings(absl::Span<const absl::string_view> sorted_device_keys,
                        absl::FunctionRef<void(std::string problem)> report) {
  std::vector<DeviceKeyParts> group;  // the holdings of one device
  const auto flush = [&]() {
    for (size_t i = 0; i < group.size(); ++i) {
      for (size_t j = i + 1; j < group.size(); ++j) {
        const DeviceKeyParts& a = group[i];
        const DeviceKeyParts& b = group[j];
        if (a.claim_namespace == b.claim_namespace && a.name == b.name) continue;
        const bool exclusive =
            a.kind == HoldingKind::kExclusive || b.kind == HoldingKind::kExclusive;
        if (exclusive || a.share_id == b.share_id) {
          report(absl::StrCat("device ", a.driver, "/", a.pool, "/", a.device,
                              " is held by both ", a.claim_namespace, "/", a.name, " and ",
                              b.claim_namespace, "/", b.name,
                              exclusive ? " (one exclusively)" : " (the same shareID)"));
        }
      }
    }
    group.clear();
  };
  DeviceKeyParts parts;
  for (absl::string_view key : sorted_device_keys) {
    if (!ParseDeviceKey(key, &parts)) {
      report(absl::StrCat("devices index: malformed key ", absl::CHexEscape(key)));
      continue;
    }
    if (parts.kind == HoldingKind::kAdmin) continue;
    if (!group.empty() && (group[0].driver != parts.driver || group[0].pool != parts.pool ||
                           group[0].device != parts.device)) {
      flush();
    }
    group.push_back(parts);
  }
  flush();
}

}  // namespace claimstore::internal
