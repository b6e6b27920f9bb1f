#include "record/record_edit.h"

#include <cstring>
#include <functional>

namespace claimstore::internal {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;
using flatbuffers::String;
using flatbuffers::Vector;

// Deep copies of each table of the schema into one builder.
class Copier {
 public:
  explicit Copier(FlatBufferBuilder* fbb) : fbb_(*fbb) {}

  Offset<String> Str(const String* s) {
    return s == nullptr ? 0 : fbb_.CreateString(s->data(), s->size());
  }

  Offset<Vector<Offset<String>>> Strings(const Vector<Offset<String>>* v) {
    if (v == nullptr) return 0;
    std::vector<Offset<String>> items;
    items.reserve(v->size());
    for (const String* s : *v) items.push_back(Str(s));
    return fbb_.CreateVector(items);
  }

  // A vector of tables, each copied with `copy`; absent stays absent.
  template <typename T, typename F>
  Offset<Vector<Offset<T>>> Tables(const Vector<Offset<T>>* v, F&& copy) {
    if (v == nullptr) return 0;
    std::vector<Offset<T>> items;
    items.reserve(v->size());
    for (const T* t : *v) items.push_back(copy(*t));
    return fbb_.CreateVector(items);
  }

  Offset<fb::DeviceToleration> Toleration(const fb::DeviceToleration& t) {
    return fb::CreateDeviceToleration(fbb_, Str(t.key()), Str(t.operator_()), Str(t.value()),
                                      Str(t.effect()), t.toleration_seconds());
  }

  Offset<fb::DeviceRequestAllocationResult> Result(const fb::DeviceRequestAllocationResult& r) {
    auto tolerations =
        Tables(r.tolerations(), [&](const fb::DeviceToleration& t) { return Toleration(t); });
    auto consumed = Tables(r.consumed_capacity(), [&](const fb::QuantityEntry& e) {
      return fb::CreateQuantityEntry(fbb_, Str(e.key()), Str(e.value()));
    });
    return fb::CreateDeviceRequestAllocationResult(
        fbb_, Str(r.request()), Str(r.driver()), Str(r.pool()), Str(r.device()), r.admin_access(),
        tolerations, Strings(r.binding_conditions()), Strings(r.binding_failure_conditions()),
        Str(r.share_id()), consumed, Strings(r.skip_node_operations()));
  }

  Offset<fb::DeviceAllocationConfiguration> Config(const fb::DeviceAllocationConfiguration& c) {
    return fb::CreateDeviceAllocationConfiguration(fbb_, Str(c.source()), Strings(c.requests()),
                                                   c.opaque_present(), Str(c.opaque_driver()),
                                                   Str(c.opaque_parameters()));
  }

  Offset<fb::NodeSelectorRequirement> Requirement(const fb::NodeSelectorRequirement& r) {
    return fb::CreateNodeSelectorRequirement(fbb_, Str(r.key()), Str(r.operator_()),
                                             Strings(r.values()));
  }

  Offset<fb::NodeSelector> NodeSelector(const fb::NodeSelector* s) {
    if (s == nullptr) return 0;
    const auto requirement = [&](const fb::NodeSelectorRequirement& r) { return Requirement(r); };
    auto terms = Tables(s->node_selector_terms(), [&](const fb::NodeSelectorTerm& t) {
      auto expressions = Tables(t.match_expressions(), requirement);
      auto fields = Tables(t.match_fields(), requirement);
      return fb::CreateNodeSelectorTerm(fbb_, expressions, fields);
    });
    return fb::CreateNodeSelector(fbb_, terms);
  }

  Offset<fb::AllocationResult> Allocation(const fb::AllocationResult* a) {
    if (a == nullptr) return 0;
    auto results =
        Tables(a->results(), [&](const fb::DeviceRequestAllocationResult& r) { return Result(r); });
    auto config =
        Tables(a->config(), [&](const fb::DeviceAllocationConfiguration& c) { return Config(c); });
    auto node_selector = NodeSelector(a->node_selector());
    return fb::CreateAllocationResult(fbb_, results, config, node_selector,
                                      a->allocation_timestamp());
  }

  Offset<fb::ResourceClaimConsumerReference> Consumer(const fb::ResourceClaimConsumerReference& c) {
    return fb::CreateResourceClaimConsumerReference(fbb_, Str(c.api_group()), Str(c.resource()),
                                                    Str(c.name()), Str(c.uid()));
  }

  Offset<fb::ResourceClaimConsumerReference> Consumer(const ConsumerRef& c) {
    auto api_group = c.api_group.empty() ? Offset<String>() : fbb_.CreateString(c.api_group);
    return fb::CreateResourceClaimConsumerReference(fbb_, api_group, fbb_.CreateString(c.resource),
                                                    fbb_.CreateString(c.name),
                                                    fbb_.CreateString(c.uid));
  }

  Offset<fb::Condition> Condition(const fb::Condition& c) {
    return fb::CreateCondition(fbb_, Str(c.type()), Str(c.status()), c.observed_generation(),
                               c.last_transition_time(), Str(c.reason()), Str(c.message()));
  }

  Offset<fb::AllocatedDeviceStatus> DeviceStatus(const fb::AllocatedDeviceStatus& d) {
    auto conditions = Tables(d.conditions(), [&](const fb::Condition& c) { return Condition(c); });
    Offset<fb::NetworkDeviceData> network;
    if (const fb::NetworkDeviceData* n = d.network_data(); n != nullptr) {
      auto interface_name = Str(n->interface_name());
      auto ips = Strings(n->ips());
      network = fb::CreateNetworkDeviceData(fbb_, interface_name, ips, Str(n->hardware_address()));
    }
    return fb::CreateAllocatedDeviceStatus(fbb_, Str(d.driver()), Str(d.pool()), Str(d.device()),
                                           Str(d.share_id()), conditions, Str(d.data()), network);
  }

  Offset<fb::SpecRequest> SpecRequest(const fb::SpecRequest& r) {
    return fb::CreateSpecRequest(fbb_, Str(r.name()), Strings(r.subrequests()));
  }

 private:
  FlatBufferBuilder& fbb_;
};

Offset<fb::ResourceClaimStatus> EditedStatus(Copier& copy, FlatBufferBuilder& fbb,
                                             const fb::ResourceClaimStatus* old,
                                             const StatusEdit& edit) {
  using Part = StatusEdit::Part;
  Offset<fb::AllocationResult> allocation;
  if (edit.allocation == Part::kKeep && old != nullptr) {
    allocation = copy.Allocation(old->allocation());
  } else if (edit.allocation == Part::kReplace) {
    allocation = copy.Allocation(edit.new_allocation);
  }

  Offset<Vector<Offset<fb::ResourceClaimConsumerReference>>> reserved_for;
  if (edit.reserved_for == Part::kKeep && old != nullptr) {
    reserved_for =
        copy.Tables(old->reserved_for(),
                    [&](const fb::ResourceClaimConsumerReference& c) { return copy.Consumer(c); });
  } else if (edit.reserved_for == Part::kReplace) {
    std::vector<Offset<fb::ResourceClaimConsumerReference>> items;
    items.reserve(edit.consumers.size() + 1);
    for (const fb::ResourceClaimConsumerReference* c : edit.consumers) {
      items.push_back(copy.Consumer(*c));
    }
    if (edit.add_consumer != nullptr) items.push_back(copy.Consumer(*edit.add_consumer));
    // An empty list is stored as absent, as the codec does (omitempty).
    if (!items.empty()) reserved_for = fbb.CreateVector(items);
  }

  Offset<Vector<Offset<fb::AllocatedDeviceStatus>>> devices;
  const auto device = [&](const fb::AllocatedDeviceStatus& d) { return copy.DeviceStatus(d); };
  if (edit.devices == Part::kKeep && old != nullptr) {
    devices = copy.Tables(old->devices(), device);
  } else if (edit.devices == Part::kReplace && !edit.new_devices.empty()) {
    std::vector<Offset<fb::AllocatedDeviceStatus>> items;
    items.reserve(edit.new_devices.size());
    for (const fb::AllocatedDeviceStatus* d : edit.new_devices) items.push_back(device(*d));
    devices = fbb.CreateVector(items);
  }
  return fb::CreateResourceClaimStatus(fbb, allocation, reserved_for, devices);
}

}  // namespace

std::string RebuildRecord(const fb::ClaimRecord& old, const StatusEdit& edit) {
  FlatBufferBuilder fbb(1024);
  Copier copy(&fbb);
  auto status = EditedStatus(copy, fbb, old.status(), edit);
  auto spec_requests = copy.Tables(old.spec_requests(),
                                   [&](const fb::SpecRequest& r) { return copy.SpecRequest(r); });
  auto ns = copy.Str(old.namespace_());
  auto name = copy.Str(old.name());
  auto uid = copy.Str(old.uid());
  auto rv = copy.Str(old.resource_version());
  const fb::Revisions revisions =
      old.revisions() != nullptr ? *old.revisions() : fb::Revisions(0, 0, 0);
  Offset<Vector<uint8_t>> object;
  if (edit.object.has_value()) {
    if (!edit.object->empty()) {
      object = fbb.CreateVector(reinterpret_cast<const uint8_t*>(edit.object->data()),
                                edit.object->size());
    }
  } else if (old.object() != nullptr) {
    object = fbb.CreateVector(old.object()->data(), old.object()->size());
  }
  auto root = fb::CreateClaimRecord(
      fbb, ns, name, uid, rv, old.generation(), old.creation_timestamp(), old.deletion_timestamp(),
      spec_requests, status, &revisions, edit.unvalidated.value_or(old.unvalidated()), object);
  fb::FinishClaimRecordBuffer(fbb, root);
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

std::string StampRevisions(absl::string_view bytes, uint64_t create_revision, uint64_t mod_revision,
                           uint64_t version) {
  std::string out;
  StampRevisionsInto(bytes, create_revision, mod_revision, version, &out);
  return out;
}

void StampRevisionsInto(absl::string_view bytes, uint64_t create_revision, uint64_t mod_revision,
                        uint64_t version, std::string* out) {
  out->assign(bytes.data(), bytes.size());
  fb::Revisions* r = fb::GetMutableClaimRecord(out->data())->mutable_revisions();
  if (r == nullptr) {  // bytes from outside without the struct: add it
    *out = RebuildRecord(*fb::GetClaimRecord(bytes.data()), StatusEdit{});
    r = fb::GetMutableClaimRecord(out->data())->mutable_revisions();
  }
  r->mutate_create_revision(create_revision);
  r->mutate_mod_revision(mod_revision);
  r->mutate_version(version);
}

std::string RecordWithStatus(
    const std::function<Offset<fb::ResourceClaimStatus>(FlatBufferBuilder&)>& build_status) {
  FlatBufferBuilder fbb(512);
  auto status = build_status(fbb);
  const fb::Revisions no_revisions(0, 0, 0);
  auto root = fb::CreateClaimRecord(fbb, 0, 0, 0, 0, 0, flatbuffers::nullopt, flatbuffers::nullopt,
                                    0, status, &no_revisions);
  fb::FinishClaimRecordBuffer(fbb, root);
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

}  // namespace claimstore::internal
