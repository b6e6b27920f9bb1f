#include "index/index_entries.h"

#include <algorithm>
#include <iterator>

#include "index/keys.h"
#include "record/fb_strings.h"

namespace claimstore::internal {
namespace {

void SortUnique(std::vector<std::string>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

}  // namespace

HoldingKind HoldingKindOf(const fb::DeviceRequestAllocationResult& result) {
  if (result.admin_access().has_value() && *result.admin_access()) return HoldingKind::kAdmin;
  if (result.share_id() != nullptr) return HoldingKind::kShare;
  return HoldingKind::kExclusive;
}

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
      entries.devices.push_back(DeviceKey(View(r->driver()), View(r->pool()), View(r->device()),
                                          HoldingKindOf(*r), View(r->share_id()), ns, name));
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

}  // namespace claimstore::internal
