// The status rules (docs/validation-rules.md: each rule by name), in the order the API server
// applies them (validateResourceClaimStatusUpdate): reservedFor, devices,
// the reservedFor invariants, then the allocation.
#include "claimstore/validation.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "claimstore/claim_generated.h"
#include "k8s/claim_limits.h"
#include "k8s/k8s_formats.h"
#include "k8s/quantity.h"
#include "record/fb_strings.h"
#include "validation/store_validation.h"

namespace claimstore {
namespace {

using internal::GoQuote;
using internal::View;
using Type = FieldError::Type;

constexpr char kPayloadUrl[] = "type.claimstore.dev/field-errors";

template <typename T>
size_t Size(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// Limits: claim_limits.h.
using internal::kMaxBindingConditions;
using internal::kMaxConditions;
using internal::kMaxConfig;
using internal::kMaxConfigRequests;
using internal::kMaxDriver;
using internal::kMaxHardwareAddress;
using internal::kMaxInterfaceName;
using internal::kMaxIps;
using internal::kMaxMessage;
using internal::kMaxPool;
using internal::kMaxRawBytes;
using internal::kMaxReason;
using internal::kMaxReservedFor;
using internal::kMaxResults;

// A field path, built on the stack as the validator descends and turned into
// text only when an error names it: valid claims cost no string work.
struct Path {
  const Path* parent = nullptr;
  absl::string_view name;  // a field name, or empty for an index
  size_t index = 0;

  Path Child(absl::string_view child) const { return Path{this, child, 0}; }
  Path Index(size_t i) const { return Path{this, {}, i}; }

  std::string ToString() const {
    std::string out = parent != nullptr ? parent->ToString() : std::string();
    if (name.empty()) {
      absl::StrAppend(&out, "[", index, "]");
    } else {
      absl::StrAppend(&out, out.empty() ? "" : ".", name);
    }
    return out;
  }
};

// A device as the API server keys it: driver, pool, device and shareID (an
// absent shareID is distinct from every value).
using DeviceKey =
    std::tuple<absl::string_view, absl::string_view, absl::string_view, bool, absl::string_view>;

constexpr char kRequestRefDetail[] =
    "must be the name of a request in the claim or the name of a request and a "
    "subrequest separated by '/'";

// The rules that hold for every stored claim, validated or not (FieldError::
// identity_rule): what makes the claim's lists maps and its reservations
// references the consumer index can key.
bool IsIdentityRule(absl::string_view rule) {
  return rule == "reservedFor.required" || rule == "reservedFor.unique" ||
         rule == "reservedFor.needs_allocation" || rule == "devices.unique" ||
         rule == "conditions.type_unique";
}

class Validator {
 public:
  Validator(const fb::ClaimRecord* current, const fb::ClaimRecord& updated,
            const internal::ValidatorOptions& options)
      : current_(current), updated_(updated), walk_past_limits_(options.walk_past_limits) {
    if (const auto* requests = updated.spec_requests(); requests != nullptr) {
      has_request_names_ = true;
      for (const fb::SpecRequest* r : *requests) {
        request_names_.insert(std::string(View(r->name())));
        if (r->subrequests() != nullptr) {
          for (const flatbuffers::String* sub : *r->subrequests()) {
            request_names_.insert(absl::StrCat(View(r->name()), "/", View(sub)));
          }
        }
      }
    }
  }

  std::vector<FieldError> Run() {
    const fb::ResourceClaimStatus* status = updated_.status();
    if (status == nullptr) return std::move(errors_);
    const Path root{nullptr, "status", 0};
    ReservedFor(status, root);
    Devices(status, root);
    ReservedForInvariants(status, root);
    Allocation(status, root);
    return std::move(errors_);
  }

 private:
  // Errors ------------------------------------------------------------------

  void Add(const char* rule, Type type, const Path& field, std::string value, std::string detail,
           bool update_rule = false) {
    errors_.push_back(FieldError{type, field.ToString(), std::move(value), std::move(detail), rule,
                                 update_rule, IsIdentityRule(rule)});
  }
  void Required(const char* rule, const Path& field, std::string detail = "") {
    Add(rule, Type::kRequired, field, "", std::move(detail));
  }
  void Invalid(const char* rule, const Path& field, absl::string_view value, std::string detail) {
    Add(rule, Type::kInvalid, field, GoQuote(value), std::move(detail));
  }
  void TooMany(const char* rule, const Path& field, size_t actual, size_t limit) {
    Add(rule, Type::kTooMany, field, absl::StrCat(actual),
        absl::StrCat("must have at most ", limit, " items"));
  }
  void TooLong(const char* rule, const Path& field, size_t limit) {
    Add(rule, Type::kTooLong, field, "", absl::StrCat("may not be more than ", limit, " bytes"));
  }
  void Duplicate(const char* rule, const Path& field, absl::string_view value) {
    Add(rule, Type::kDuplicate, field, GoQuote(value), "");
  }
  void NotSupported(const char* rule, const Path& field, absl::string_view value,
                    std::initializer_list<const char*> supported) {
    std::vector<std::string> quoted;
    for (const char* s : supported) quoted.push_back(GoQuote(s));
    Add(rule, Type::kNotSupported, field, GoQuote(value),
        absl::StrCat("supported values: ", absl::StrJoin(quoted, ", ")));
  }
  void Forbidden(const char* rule, const Path& field, std::string detail, bool update = false) {
    Add(rule, Type::kForbidden, field, "", std::move(detail), update);
  }
  void EachInvalid(const char* rule, const Path& field, absl::string_view value,
                   const std::vector<std::string>& messages) {
    for (const std::string& m : messages) Invalid(rule, field, value, m);
  }

  // Names -----------------------------------------------------------------

  // ValidateCSIDriverName: required, at most 63, a DNS subdomain once lower-cased.
  void DriverName(absl::string_view name, const Path& field) {
    if (name.empty()) Required("driver.format", field);
    if (name.size() > kMaxDriver) TooLong("driver.format", field, kMaxDriver);
    if (std::none_of(name.begin(), name.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
      return EachInvalid("driver.format", field, name, internal::IsDns1123Subdomain(name));
    }
    std::string lower(name);  // only names with upper case need the copy
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    EachInvalid("driver.format", field, name, internal::IsDns1123Subdomain(lower));
  }

  void PoolName(absl::string_view name, const Path& field) {
    if (name.empty()) return Required("pool.format", field);
    if (name.size() > kMaxPool) TooLong("pool.format", field, kMaxPool);
    for (absl::string_view part : absl::StrSplit(name, '/')) {
      EachInvalid("pool.format", field, part, internal::IsDns1123Subdomain(part));
    }
  }

  void DeviceName(absl::string_view name, const Path& field) {
    if (name.empty()) return Required("device.format", field);
    EachInvalid("device.format", field, name, internal::IsDns1123Label(name));
  }

  void ShareId(const flatbuffers::String* share, const Path& field) {
    if (share == nullptr || internal::IsLowercaseUuid(View(share))) return;
    Invalid("shareID.format", field, View(share),
            "uid must be in RFC 4122 normalized form, "
            "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters");
  }

  void QualifiedName(const char* rule, absl::string_view name, const Path& field) {
    EachInvalid(rule, field, name, internal::IsQualifiedName(name));
  }

  // validateRequestNameRef.
  void RequestRef(const char* rule, absl::string_view name, const Path& field) {
    if (name.empty()) return Required(rule, field);
    std::vector<absl::string_view> segments = absl::StrSplit(name, '/');
    if (segments.size() > 2) return Invalid(rule, field, name, kRequestRefDetail);
    for (absl::string_view s : segments) {
      EachInvalid(rule, field, s, internal::IsDns1123Label(s));
    }
    if (has_request_names_ && !request_names_.contains(name)) {
      Invalid("request.in_spec", field, name, kRequestRefDetail);
    }
  }

  // RawExtension (data, parameters): present, at most 10 KiB as stored, a JSON
  // object.
  void RawObject(const char* rule, const flatbuffers::String* raw, const Path& field) {
    if (raw == nullptr || raw->size() == 0) return Required(rule, field);
    if (raw->size() > kMaxRawBytes) return TooLong(rule, field, kMaxRawBytes);
    const absl::string_view text = View(raw);
    if (text == "null") return Required(rule, field);
    if (text.front() != '{') {
      Add(rule, Type::kInvalid, field, "\"<value omitted>\"",
          "parameters must be a valid JSON object");
    }
  }

  // status.reservedFor ---------------------------------------------------------

  void ReservedFor(const fb::ResourceClaimStatus* status, const Path& root) {
    const auto* reserved = status->reserved_for();
    const Path field = root.Child("reservedFor");
    if (Size(reserved) > kMaxReservedFor && !ReservedForDoesNotGrow(reserved)) {
      TooMany("reservedFor.max", field, reserved->size(), kMaxReservedFor);
      if (!walk_past_limits_) return;
    }
    if (reserved == nullptr) return;
    absl::flat_hash_set<absl::string_view> uids;
    uids.reserve(reserved->size());
    for (size_t i = 0; i < reserved->size(); ++i) {
      const fb::ResourceClaimConsumerReference* r = reserved->Get(i);
      const Path item = field.Index(i);
      if (View(r->resource()).empty()) Required("reservedFor.required", item.Child("resource"));
      if (View(r->name()).empty()) Required("reservedFor.required", item.Child("name"));
      if (View(r->uid()).empty()) Required("reservedFor.required", item.Child("uid"));
    }
    for (size_t i = 0; i < reserved->size(); ++i) {
      const absl::string_view uid = View(reserved->Get(i)->uid());
      if (!uids.insert(uid).second) {
        Duplicate("reservedFor.unique", field.Index(i), uid);
      }
    }
  }

  void ReservedForInvariants(const fb::ResourceClaimStatus* status, const Path& root) {
    const auto* reserved = status->reserved_for();
    if (Size(reserved) == 0) return;
    if (status->allocation() == nullptr) {
      return Forbidden("reservedFor.needs_allocation", root.Child("reservedFor"),
                       "may not be specified when `allocated` is not set");
    }
    if (!updated_.deletion_timestamp().has_value()) return;
    // While the claim is being deleted, entries may go but none may come: a
    // rule about a change, so none for a claim not held before (a restore
    // or a mirror loads state; it does not update).
    if (current_ == nullptr) return;
    absl::flat_hash_set<std::string> before;
    const fb::ResourceClaimStatus* old = current_->status();
    if (old != nullptr && old->reserved_for() != nullptr) {
      for (const auto* r : *old->reserved_for()) before.insert(ConsumerKey(*r));
    }
    for (const auto* r : *reserved) {
      if (!before.contains(ConsumerKey(*r))) {
        return Forbidden("reservedFor.no_add_while_deleting", root.Child("reservedFor"),
                         "new entries may not be added while `deallocationRequested` or "
                         "`deletionTimestamp` are set",
                         /*update=*/true);
      }
    }
  }

  static std::string ConsumerKey(const fb::ResourceClaimConsumerReference& r) {
    return absl::StrCat(View(r.api_group()), "\x1f", View(r.resource()), "\x1f", View(r.name()),
                        "\x1f", View(r.uid()));
  }

  // status.devices ----------------------------------------------------------------

  static DeviceKey KeyOf(absl::string_view driver, absl::string_view pool, absl::string_view device,
                         const flatbuffers::String* share) {
    return DeviceKey{driver, pool, device, share != nullptr, View(share)};
  }
  static std::string DeviceId(const DeviceKey& k) {
    std::string id = absl::StrCat(std::get<0>(k), "/", std::get<1>(k), "/", std::get<2>(k));
    if (std::get<3>(k)) absl::StrAppend(&id, "/", std::get<4>(k));
    return id;
  }

  void Devices(const fb::ResourceClaimStatus* status, const Path& root) {
    const auto* devices = status->devices();
    if (devices == nullptr) return;
    const Path field = root.Child("devices");
    absl::flat_hash_set<DeviceKey> allocated;
    if (status->allocation() != nullptr && status->allocation()->results() != nullptr) {
      for (const auto* r : *status->allocation()->results()) {
        allocated.insert(
            KeyOf(View(r->driver()), View(r->pool()), View(r->device()), r->share_id()));
      }
    }
    const absl::flat_hash_map<DeviceKey, const fb::AllocatedDeviceStatus*> before = OldDevices();
    absl::flat_hash_set<DeviceKey> seen;
    for (size_t i = 0; i < devices->size(); ++i) {
      const fb::AllocatedDeviceStatus* d = devices->Get(i);
      const Path item = field.Index(i);
      // Ratcheting: an entry the write leaves as it was is not re-validated.
      if (auto it = before.find(
              KeyOf(View(d->driver()), View(d->pool()), View(d->device()), d->share_id()));
          it != before.end() && DeviceStatusEq(it->second, d)) {
        continue;
      }
      DriverName(View(d->driver()), item.Child("driver"));
      PoolName(View(d->pool()), item.Child("pool"));
      DeviceName(View(d->device()), item.Child("device"));
      ShareId(d->share_id(), item.Child("shareID"));
      const DeviceKey key =
          KeyOf(View(d->driver()), View(d->pool()), View(d->device()), d->share_id());
      if (!allocated.contains(key)) {
        Invalid("devices.allocated", item, DeviceId(key),
                "must be an allocated device in the claim");
      }
      Conditions(d->conditions(), item.Child("conditions"));
      if (d->data() != nullptr) RawObject("devices.data", d->data(), item.Child("data"));
      NetworkData(d->network_data(), item.Child("networkData"));
    }
    for (size_t i = 0; i < devices->size(); ++i) {
      const fb::AllocatedDeviceStatus* d = devices->Get(i);
      const DeviceKey key =
          KeyOf(View(d->driver()), View(d->pool()), View(d->device()), d->share_id());
      if (!seen.insert(key).second) Duplicate("devices.unique", field.Index(i), DeviceId(key));
    }
  }

  // Ratcheting (what an update leaves unchanged is not re-validated, as
  // the API server's declarative validation does): the stored claim's
  // device statuses by key, none for a claim not held before.
  absl::flat_hash_map<DeviceKey, const fb::AllocatedDeviceStatus*> OldDevices() const {
    absl::flat_hash_map<DeviceKey, const fb::AllocatedDeviceStatus*> out;
    const fb::ResourceClaimStatus* old = current_ != nullptr ? current_->status() : nullptr;
    if (old == nullptr || old->devices() == nullptr) return out;
    for (const fb::AllocatedDeviceStatus* d : *old->devices()) {
      out.emplace(KeyOf(View(d->driver()), View(d->pool()), View(d->device()), d->share_id()), d);
    }
    return out;
  }

  // A reservedFor list over its limit that an update does not lengthen
  // (kept, or shortened: an Unreserve) is not refused for its length. More
  // lenient than the API server, whose ratcheting covers only an unchanged
  // list: there a claim stored with 300 reservations could not lose them
  // one Unreserve at a time, nor then be deallocated.
  bool ReservedForDoesNotGrow(
      const flatbuffers::Vector<flatbuffers::Offset<fb::ResourceClaimConsumerReference>>* now)
      const {
    const fb::ResourceClaimStatus* old = current_ != nullptr ? current_->status() : nullptr;
    return old != nullptr && Size(now) <= Size(old->reserved_for());
  }

  static bool ConditionEq(const fb::Condition* a, const fb::Condition* b) {
    return StrEq(a->type(), b->type()) && StrEq(a->status(), b->status()) &&
           a->observed_generation() == b->observed_generation() &&
           a->last_transition_time() == b->last_transition_time() &&
           StrEq(a->reason(), b->reason()) && StrEq(a->message(), b->message());
  }

  static bool DeviceStatusEq(const fb::AllocatedDeviceStatus* a,
                             const fb::AllocatedDeviceStatus* b) {
    const fb::NetworkDeviceData* na = a->network_data();
    const fb::NetworkDeviceData* nb = b->network_data();
    const bool network_equal =
        (na == nullptr) == (nb == nullptr) &&
        (na == nullptr || (StrEq(na->interface_name(), nb->interface_name()) &&
                           StrEq(na->hardware_address(), nb->hardware_address()) &&
                           StrListEq(na->ips(), nb->ips())));
    return network_equal && (a->conditions() == nullptr) == (b->conditions() == nullptr) &&
           ListEq(a->conditions(), b->conditions(), ConditionEq) && PtrStrEq(a->data(), b->data());
  }

  void Conditions(const flatbuffers::Vector<flatbuffers::Offset<fb::Condition>>* conditions,
                  const Path& field) {
    if (Size(conditions) > kMaxConditions) {
      TooMany("conditions.max", field, conditions->size(), kMaxConditions);
      if (!walk_past_limits_) return;
    }
    if (conditions == nullptr) return;
    absl::flat_hash_set<absl::string_view> types;
    for (size_t i = 0; i < conditions->size(); ++i) {
      const fb::Condition* c = conditions->Get(i);
      const Path item = field.Index(i);
      if (!types.insert(View(c->type())).second) {
        Duplicate("conditions.type_unique", item.Child("type"), View(c->type()));
      }
      QualifiedName("conditions.type", View(c->type()), item.Child("type"));
      const absl::string_view st = View(c->status());
      if (st != "True" && st != "False" && st != "Unknown") {
        NotSupported("conditions.status", item.Child("status"), st, {"False", "True", "Unknown"});
      }
      if (c->observed_generation() < 0) {
        Add("conditions.observed_generation", Type::kInvalid, item.Child("observedGeneration"),
            absl::StrCat(c->observed_generation()), "must be greater than or equal to zero");
      }
      if (!c->last_transition_time().has_value()) {
        Required("conditions.last_transition_time", item.Child("lastTransitionTime"),
                 "must be set");
      }
      const absl::string_view reason = View(c->reason());
      if (reason.empty()) {
        Required("conditions.reason", item.Child("reason"), "must be set");
      } else {
        EachInvalid("conditions.reason", item.Child("reason"), reason,
                    internal::IsValidConditionReason(reason));
        if (reason.size() > kMaxReason)
          TooLong("conditions.reason", item.Child("reason"), kMaxReason);
      }
      if (View(c->message()).size() > kMaxMessage) {
        TooLong("conditions.message", item.Child("message"), kMaxMessage);
      }
    }
  }

  void NetworkData(const fb::NetworkDeviceData* n, const Path& field) {
    if (n == nullptr) return;
    if (View(n->interface_name()).size() > kMaxInterfaceName) {
      TooLong("networkData.interfaceName", field.Child("interfaceName"), kMaxInterfaceName);
    }
    if (View(n->hardware_address()).size() > kMaxHardwareAddress) {
      TooLong("networkData.hardwareAddress", field.Child("hardwareAddress"), kMaxHardwareAddress);
    }
    const auto* ips = n->ips();
    const Path ips_field = field.Child("ips");
    if (Size(ips) > kMaxIps) {
      TooMany("networkData.ips.max", ips_field, ips->size(), kMaxIps);
      if (!walk_past_limits_) return;
    }
    if (ips == nullptr) return;
    absl::flat_hash_set<absl::string_view> seen;
    for (size_t i = 0; i < ips->size(); ++i) {
      const absl::string_view ip = View(ips->Get(i));
      if (std::string problem = internal::InterfaceAddressProblem(ip); !problem.empty()) {
        Invalid("networkData.ips.format", ips_field.Index(i), ip, problem);
      }
    }
    for (size_t i = 0; i < ips->size(); ++i) {
      const absl::string_view ip = View(ips->Get(i));
      if (!seen.insert(ip).second) {
        Duplicate("networkData.ips.unique", ips_field.Index(i), ip);
      }
    }
  }

  // status.allocation -------------------------------------------------------------

  void Allocation(const fb::ResourceClaimStatus* status, const Path& root) {
    const fb::AllocationResult* allocation = status->allocation();
    if (allocation == nullptr) return;
    const fb::ResourceClaimStatus* old = current_ != nullptr ? current_->status() : nullptr;
    if (old != nullptr && old->allocation() != nullptr) {
      // Ratcheting: a stored allocation is only compared, never re-validated.
      if (!AllocationsEqual(*old->allocation(), *allocation)) {
        Add("allocation.immutable", Type::kInvalid, root.Child("allocation"), "",
            "field is immutable", /*update_rule=*/true);
      }
      return;
    }
    const Path alloc = root.Child("allocation");
    const Path field = alloc.Child("devices");
    const Path results_field = field.Child("results");
    const auto* results = allocation->results();
    if (Size(results) > kMaxResults) {
      TooMany("results.max", results_field, results->size(), kMaxResults);
    }
    if (results != nullptr && (walk_past_limits_ || Size(results) <= kMaxResults)) {
      for (size_t i = 0; i < results->size(); ++i) Result(*results->Get(i), results_field.Index(i));
    }
    const Path config_field = field.Child("config");
    const auto* config = allocation->config();
    if (Size(config) > kMaxConfig) {
      TooMany("config.max", config_field, config->size(), kMaxConfig);
    }
    if (config != nullptr && (walk_past_limits_ || Size(config) <= kMaxConfig)) {
      for (size_t i = 0; i < config->size(); ++i) Config(*config->Get(i), config_field.Index(i));
    }
    if (allocation->node_selector() != nullptr) {
      NodeSelector(*allocation->node_selector(), alloc.Child("nodeSelector"));
    }
  }

  void Result(const fb::DeviceRequestAllocationResult& r, const Path& item) {
    RequestRef("request.format", View(r.request()), item.Child("request"));
    DriverName(View(r.driver()), item.Child("driver"));
    PoolName(View(r.pool()), item.Child("pool"));
    DeviceName(View(r.device()), item.Child("device"));
    ShareId(r.share_id(), item.Child("shareID"));
    if (const auto* tolerations = r.tolerations(); tolerations != nullptr) {
      const Path list = item.Child("tolerations");
      for (size_t i = 0; i < tolerations->size(); ++i)
        Toleration(*tolerations->Get(i), list.Index(i));
    }
    BindingConditions(r, item);
    if (const auto* skip = r.skip_node_operations(); skip != nullptr) {
      absl::flat_hash_set<absl::string_view> seen;
      const Path list = item.Child("skipNodeOperations");
      for (size_t i = 0; i < skip->size(); ++i) {
        const absl::string_view op = View(skip->Get(i));
        const Path field = list.Index(i);
        if (op != "NodePrepareResources" && op != "NodeUnprepareResources" && op != "*") {
          NotSupported("skipNodeOperations.values", field, op,
                       {"*", "NodePrepareResources", "NodeUnprepareResources"});
        }
        if (!seen.insert(op).second) Duplicate("skipNodeOperations.unique", field, op);
      }
    }
  }

  void Toleration(const fb::DeviceToleration& t, const Path& item) {
    if (!View(t.key()).empty()) QualifiedName("tolerations.key", View(t.key()), item.Child("key"));
    const absl::string_view op = View(t.operator_());
    if (!op.empty() && op != "Equal" && op != "Exists") {  // empty defaults to Equal
      NotSupported("tolerations.operator", item.Child("operator"), op, {"Equal", "Exists"});
    }
    const absl::string_view effect = View(t.effect());
    if (!effect.empty() && effect != "None" && effect != "NoSchedule" && effect != "NoExecute") {
      NotSupported("tolerations.effect", item.Child("effect"), effect,
                   {"NoExecute", "NoSchedule", "None"});
    }
  }

  void BindingConditions(const fb::DeviceRequestAllocationResult& r, const Path& item) {
    const auto* binding = r.binding_conditions();
    const auto* failure = r.binding_failure_conditions();
    struct List {
      const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* values;
      const char* name;
    };
    bool over = false;
    absl::flat_hash_set<absl::string_view> binding_set;
    for (const List& list :
         {List{binding, "bindingConditions"}, List{failure, "bindingFailureConditions"}}) {
      const Path field = item.Child(list.name);
      if (Size(list.values) > kMaxBindingConditions) {
        TooMany("bindingConditions.max", field, list.values->size(), kMaxBindingConditions);
        over = true;
        if (!walk_past_limits_) continue;
      }
      if (list.values == nullptr) continue;
      absl::flat_hash_set<absl::string_view> seen;
      for (size_t i = 0; i < list.values->size(); ++i) {
        const absl::string_view v = View(list.values->Get(i));
        const Path entry = field.Index(i);
        QualifiedName("bindingConditions.format", v, entry);
        if (!seen.insert(v).second) Duplicate("bindingConditions.unique", entry, v);
        if (list.values == binding) {
          binding_set.insert(v);
        } else if (binding_set.contains(v)) {
          Invalid("bindingConditions.no_overlap", entry, v,
                  "bindingFailureConditions must not overlap with bindingConditions");
        }
      }
    }
    if (over) return;
    if (Size(binding) == 0 && Size(failure) > 0) {
      // Go prints the empty list with %#v.
      Add("bindingConditions.both_or_neither", Type::kInvalid, item.Child("bindingConditions"),
          "[]string(nil)", "bindingConditions are required to use bindingFailureConditions");
    }
    if (Size(failure) == 0 && Size(binding) > 0) {
      Add("bindingConditions.both_or_neither", Type::kInvalid,
          item.Child("bindingFailureConditions"), "[]string(nil)",
          "bindingFailureConditions are required to use bindingConditions");
    }
  }

  void Config(const fb::DeviceAllocationConfiguration& c, const Path& item) {
    const absl::string_view source = View(c.source());
    if (source.empty()) {
      Required("config.source", item.Child("source"));
    } else if (source != "FromClaim" && source != "FromClass") {
      NotSupported("config.source", item.Child("source"), source, {"FromClaim", "FromClass"});
    }
    const auto* requests = c.requests();
    const Path requests_field = item.Child("requests");
    if (Size(requests) > kMaxConfigRequests) {
      TooMany("config.requests.max", requests_field, requests->size(), kMaxConfigRequests);
    }
    if (requests != nullptr && (walk_past_limits_ || Size(requests) <= kMaxConfigRequests)) {
      absl::flat_hash_set<absl::string_view> seen;
      for (size_t i = 0; i < requests->size(); ++i) {
        const absl::string_view name = View(requests->Get(i));
        const Path entry = requests_field.Index(i);
        RequestRef("config.requests.format", name, entry);
        if (!seen.insert(name).second) Duplicate("config.requests.unique", entry, name);
      }
    }
    const Path opaque = item.Child("opaque");
    if (!c.opaque_present()) return Required("config.opaque", opaque);
    DriverName(View(c.opaque_driver()), opaque.Child("driver"));
    RawObject("config.parameters", c.opaque_parameters(), opaque.Child("parameters"));
  }

  void NodeSelector(const fb::NodeSelector& s, const Path& field) {
    const auto* terms = s.node_selector_terms();
    const Path terms_field = field.Child("nodeSelectorTerms");
    if (Size(terms) == 0) {
      return Required("nodeSelector.terms", terms_field,
                      "must have at least one node selector term");
    }
    for (size_t i = 0; i < terms->size(); ++i) {
      const fb::NodeSelectorTerm* term = terms->Get(i);
      const Path t = terms_field.Index(i);
      if (const auto* e = term->match_expressions(); e != nullptr) {
        const Path list = t.Child("matchExpressions");
        for (size_t j = 0; j < e->size(); ++j) Expression(*e->Get(j), list.Index(j));
      }
      if (const auto* f = term->match_fields(); f != nullptr) {
        const Path list = t.Child("matchFields");
        for (size_t j = 0; j < f->size(); ++j) FieldSelector(*f->Get(j), list.Index(j));
      }
    }
  }

  void Expression(const fb::NodeSelectorRequirement& r, const Path& item) {
    const absl::string_view op = View(r.operator_());
    const size_t n = Size(r.values());
    if (op == "In" || op == "NotIn") {
      if (n == 0) {
        Required("nodeSelector.operator", item.Child("values"),
                 "must be specified when `operator` is 'In' or 'NotIn'");
      }
    } else if (op == "Exists" || op == "DoesNotExist") {
      if (n > 0) {
        Forbidden("nodeSelector.operator", item.Child("values"),
                  "may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
      }
    } else if (op == "Gt" || op == "Lt") {
      if (n != 1) {
        Required("nodeSelector.operator", item.Child("values"),
                 "must be specified single value when `operator` is 'Lt' or 'Gt'");
      }
    } else {
      Invalid("nodeSelector.operator", item.Child("operator"), op, "not a valid selector operator");
    }
    QualifiedName("nodeSelector.key", View(r.key()), item.Child("key"));
    const Path values = item.Child("values");
    for (size_t k = 0; k < n; ++k) {
      const absl::string_view v = View(r.values()->Get(k));
      EachInvalid("nodeSelector.values", values.Index(k), v, internal::IsValidLabelValue(v));
    }
  }

  void FieldSelector(const fb::NodeSelectorRequirement& r, const Path& item) {
    const absl::string_view op = View(r.operator_());
    const size_t n = Size(r.values());
    if (op == "In" || op == "NotIn") {
      if (n != 1) {
        Required("nodeSelector.field_values", item.Child("values"),
                 "must be only one value when `operator` is 'In' or 'NotIn' for node field "
                 "selector");
      }
    } else {
      Invalid("nodeSelector.field_operator", item.Child("operator"), op,
              "not a valid selector operator");
    }
    if (View(r.key()) != "metadata.name") {
      return Invalid("nodeSelector.field_key", item.Child("key"), View(r.key()),
                     "not a valid field selector key");
    }
    const Path values = item.Child("values");
    for (size_t k = 0; k < n; ++k) {
      const absl::string_view v = View(r.values()->Get(k));
      EachInvalid("nodeSelector.node_name", values.Index(k), v, internal::IsDns1123Subdomain(v));
    }
  }

  // Semantic equality (apiequality.Semantic.DeepEqual) of two allocations:
  // quantities by value, absent and empty lists alike, pointers (shareID,
  // adminAccess, tolerationSeconds, nodeSelector, timestamp) by presence.
  static bool StrEq(const flatbuffers::String* a, const flatbuffers::String* b) {
    return View(a) == View(b);
  }
  static bool PtrStrEq(const flatbuffers::String* a, const flatbuffers::String* b) {
    return (a == nullptr) == (b == nullptr) && View(a) == View(b);
  }
  template <typename T, typename Eq>
  static bool ListEq(const flatbuffers::Vector<T>* a, const flatbuffers::Vector<T>* b, Eq&& eq) {
    if (Size(a) != Size(b)) return false;
    for (size_t i = 0; i < Size(a); ++i) {
      if (!eq(a->Get(i), b->Get(i))) return false;
    }
    return true;
  }
  static bool StrListEq(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* a,
                        const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* b) {
    return ListEq(a, b, [](auto x, auto y) { return View(x) == View(y); });
  }
  static bool QuantityEq(absl::string_view a, absl::string_view b) {
    if (a == b) return true;
    absl::StatusOr<internal::Quantity> qa = internal::Quantity::Parse(a);
    absl::StatusOr<internal::Quantity> qb = internal::Quantity::Parse(b);
    return qa.ok() && qb.ok() && qa->Compare(*qb) == 0;
  }
  static bool RequirementEq(const fb::NodeSelectorRequirement* a,
                            const fb::NodeSelectorRequirement* b) {
    return StrEq(a->key(), b->key()) && StrEq(a->operator_(), b->operator_()) &&
           StrListEq(a->values(), b->values());
  }
  static bool ResultEq(const fb::DeviceRequestAllocationResult* a,
                       const fb::DeviceRequestAllocationResult* b) {
    return StrEq(a->request(), b->request()) && StrEq(a->driver(), b->driver()) &&
           StrEq(a->pool(), b->pool()) && StrEq(a->device(), b->device()) &&
           a->admin_access() == b->admin_access() && PtrStrEq(a->share_id(), b->share_id()) &&
           ListEq(a->tolerations(), b->tolerations(),
                  [](const fb::DeviceToleration* x, const fb::DeviceToleration* y) {
                    return StrEq(x->key(), y->key()) && StrEq(x->operator_(), y->operator_()) &&
                           StrEq(x->value(), y->value()) && StrEq(x->effect(), y->effect()) &&
                           x->toleration_seconds() == y->toleration_seconds();
                  }) &&
           StrListEq(a->binding_conditions(), b->binding_conditions()) &&
           StrListEq(a->binding_failure_conditions(), b->binding_failure_conditions()) &&
           ListEq(a->consumed_capacity(), b->consumed_capacity(),
                  [](const fb::QuantityEntry* x, const fb::QuantityEntry* y) {
                    return StrEq(x->key(), y->key()) &&
                           QuantityEq(View(x->value()), View(y->value()));
                  }) &&
           StrListEq(a->skip_node_operations(), b->skip_node_operations());
  }
  static bool AllocationsEqual(const fb::AllocationResult& a, const fb::AllocationResult& b) {
    const bool selectors_equal =
        (a.node_selector() == nullptr) == (b.node_selector() == nullptr) &&
        (a.node_selector() == nullptr ||
         ListEq(a.node_selector()->node_selector_terms(), b.node_selector()->node_selector_terms(),
                [](const fb::NodeSelectorTerm* x, const fb::NodeSelectorTerm* y) {
                  return ListEq(x->match_expressions(), y->match_expressions(), RequirementEq) &&
                         ListEq(x->match_fields(), y->match_fields(), RequirementEq);
                }));
    return selectors_equal && a.allocation_timestamp() == b.allocation_timestamp() &&
           ListEq(a.results(), b.results(), ResultEq) &&
           ListEq(a.config(), b.config(),
                  [](const fb::DeviceAllocationConfiguration* x,
                     const fb::DeviceAllocationConfiguration* y) {
                    return StrEq(x->source(), y->source()) &&
                           StrListEq(x->requests(), y->requests()) &&
                           x->opaque_present() == y->opaque_present() &&
                           StrEq(x->opaque_driver(), y->opaque_driver()) &&
                           PtrStrEq(x->opaque_parameters(), y->opaque_parameters());
                  });
  }

  const fb::ClaimRecord* current_;
  const fb::ClaimRecord& updated_;
  const bool walk_past_limits_;
  bool has_request_names_ = false;
  absl::flat_hash_set<std::string> request_names_;
  std::vector<FieldError> errors_;
};

}  // namespace

const char* FieldError::TypeName(Type type) {
  switch (type) {
    case Type::kRequired:
      return "Required value";
    case Type::kInvalid:
      return "Invalid value";
    case Type::kDuplicate:
      return "Duplicate value";
    case Type::kTooMany:
      return "Too many";
    case Type::kTooLong:
      return "Too long";
    case Type::kNotSupported:
      return "Unsupported value";
    case Type::kForbidden:
      return "Forbidden";
  }
  return "Invalid value";
}

std::string FieldError::ToString() const {
  std::string out = absl::StrCat(field, ": ", TypeName(type));
  if (!value.empty()) absl::StrAppend(&out, ": ", value);
  if (!detail.empty()) absl::StrAppend(&out, ": ", detail);
  return out;
}

const std::vector<std::string>& ValidationRules() {
  static const auto* rules = new std::vector<std::string>{"reservedFor.max",
                                                          "reservedFor.required",
                                                          "reservedFor.unique",
                                                          "reservedFor.needs_allocation",
                                                          "reservedFor.no_add_while_deleting",
                                                          "devices.allocated",
                                                          "devices.unique",
                                                          "devices.data",
                                                          "conditions.max",
                                                          "conditions.type",
                                                          "conditions.type_unique",
                                                          "conditions.status",
                                                          "conditions.observed_generation",
                                                          "conditions.last_transition_time",
                                                          "conditions.reason",
                                                          "conditions.message",
                                                          "networkData.interfaceName",
                                                          "networkData.hardwareAddress",
                                                          "networkData.ips.max",
                                                          "networkData.ips.format",
                                                          "networkData.ips.unique",
                                                          "allocation.immutable",
                                                          "results.max",
                                                          "request.format",
                                                          "request.in_spec",
                                                          "driver.format",
                                                          "pool.format",
                                                          "device.format",
                                                          "shareID.format",
                                                          "tolerations.key",
                                                          "tolerations.operator",
                                                          "tolerations.effect",
                                                          "bindingConditions.max",
                                                          "bindingConditions.format",
                                                          "bindingConditions.unique",
                                                          "bindingConditions.no_overlap",
                                                          "bindingConditions.both_or_neither",
                                                          "skipNodeOperations.values",
                                                          "skipNodeOperations.unique",
                                                          "config.max",
                                                          "config.source",
                                                          "config.requests.max",
                                                          "config.requests.format",
                                                          "config.requests.unique",
                                                          "config.opaque",
                                                          "config.parameters",
                                                          "nodeSelector.terms",
                                                          "nodeSelector.operator",
                                                          "nodeSelector.key",
                                                          "nodeSelector.values",
                                                          "nodeSelector.field_values",
                                                          "nodeSelector.field_operator",
                                                          "nodeSelector.field_key",
                                                          "nodeSelector.node_name"};
  return *rules;
}

namespace internal {

std::vector<FieldError> ValidateStatusTables(const fb::ClaimRecord* current,
                                             const fb::ClaimRecord& updated,
                                             const ValidatorOptions& options) {
  return Validator(current, updated, options).Run();
}

}  // namespace internal

std::vector<FieldError> ValidateClaimStatus(const ClaimRecord* current,
                                            const ClaimRecord& updated) {
  return internal::ValidateStatusTables(current != nullptr ? &current->table() : nullptr,
                                        updated.table(), {});
}

absl::Status ValidationStatus(const std::vector<FieldError>& errors) {
  if (errors.empty()) return absl::OkStatus();
  const bool update =
      std::any_of(errors.begin(), errors.end(), [](const FieldError& e) { return e.update_rule; });
  std::vector<std::string> lines;
  for (const FieldError& e : errors) lines.push_back(e.ToString());
  std::string message = errors.size() == 1
                            ? lines[0]
                            : absl::StrCat(errors.size(), " errors: ", absl::StrJoin(lines, "; "));
  absl::Status status =
      update ? absl::FailedPreconditionError(message) : absl::InvalidArgumentError(message);
  // The payload: one error per line, fields separated by \x1f.
  std::string payload;
  for (const FieldError& e : errors) {
    absl::StrAppend(&payload, static_cast<int>(e.type), "\x1f", e.field, "\x1f", e.value, "\x1f",
                    e.detail, "\x1f", e.rule, "\x1f", e.update_rule ? "1" : "0", "\x1f",
                    e.identity_rule ? "1" : "0", "\x1e");
  }
  status.SetPayload(kPayloadUrl, absl::Cord(payload));
  return status;
}

std::vector<FieldError> FieldErrorsOf(const absl::Status& status) {
  std::vector<FieldError> out;
  absl::optional<absl::Cord> payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return out;
  const std::string text(*payload);
  for (absl::string_view line : absl::StrSplit(text, '\x1e', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, '\x1f');
    if (f.size() != 7) continue;
    FieldError e;
    e.type = static_cast<Type>(std::atoi(f[0].c_str()));
    e.field = f[1];
    e.value = f[2];
    e.detail = f[3];
    e.rule = f[4];
    e.update_rule = f[5] == "1";
    e.identity_rule = f[6] == "1";
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace claimstore
