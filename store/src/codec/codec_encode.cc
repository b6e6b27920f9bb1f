// ClaimRecord → JSON in the API form (Go struct order, Go omitempty rules).

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "k8s/rfc3339.h"
#include "util/json_text.h"

namespace claimstore {
namespace {

using FbString = flatbuffers::String;

absl::string_view View(const FbString* s) {
  return s == nullptr ? absl::string_view() : absl::string_view(s->data(), s->size());
}

bool Empty(const FbString* s) { return s == nullptr || s->size() == 0; }

template <typename T>
bool Empty(const flatbuffers::Vector<T>* v) {
  return v == nullptr || v->size() == 0;
}

// Writes compact JSON, placing commas; keys are trusted ASCII literals.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(*out) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }

  void Key(absl::string_view key) {
    Separate();
    out_.push_back('"');
    out_.append(key.data(), key.size());
    out_.append("\":");
    first_ = true;
  }

  // A key that needs escaping (map keys come from the input).
  void EscapedKey(absl::string_view key) {
    Separate();
    internal::AppendGoJsonString(key, &out_);
    out_.push_back(':');
    first_ = true;
  }

  void String(absl::string_view s) {
    Separate();
    internal::AppendGoJsonString(s, &out_);
  }
  void String(const FbString* s) { String(View(s)); }
  void Int(int64_t v) {
    Separate();
    absl::StrAppend(&out_, v);
  }
  void Bool(bool v) {
    Separate();
    out_.append(v ? "true" : "false");
  }
  void Null() {
    Separate();
    out_.append("null");
  }
  // Already-valid compact JSON (stored RawExtension text); null when absent.
  void Raw(const FbString* json) {
    if (json == nullptr) return Null();
    Separate();
    out_.append(json->data(), json->size());
  }
  void Time(int64_t unix_seconds) {
    Separate();
    out_.push_back('"');
    internal::AppendRfc3339(unix_seconds, &out_);
    out_.push_back('"');
  }

  // Field helpers following Go's encoding rules.
  void StringField(absl::string_view key, const FbString* s) {
    Key(key);
    String(s);
  }
  void OmitEmptyString(absl::string_view key, const FbString* s) {
    if (!Empty(s)) StringField(key, s);
  }
  void PointerString(absl::string_view key, const FbString* s) {
    if (s != nullptr) StringField(key, s);
  }
  void OmitEmptyStrings(absl::string_view key,
                        const flatbuffers::Vector<flatbuffers::Offset<FbString>>* v) {
    if (Empty(v)) return;
    Key(key);
    BeginArray();
    for (const FbString* s : *v) String(s);
    EndArray();
  }
  template <typename T, typename F>
  void Tables(absl::string_view key, const flatbuffers::Vector<flatbuffers::Offset<T>>* v,
              bool omit_empty, F&& write_one) {
    if (omit_empty && Empty(v)) return;
    Key(key);
    if (v == nullptr) return Null();
    BeginArray();
    for (const T* item : *v) write_one(*item);
    EndArray();
  }

 private:
  void Separate() {
    if (!first_) out_.push_back(',');
    first_ = false;
  }
  void Open(char c) {
    Separate();
    out_.push_back(c);
    first_ = true;
  }
  void Close(char c) {
    out_.push_back(c);
    first_ = false;
  }

  std::string& out_;
  bool first_ = true;
};

void WriteToleration(Writer& w, const fb::DeviceToleration& t) {
  w.BeginObject();
  w.OmitEmptyString("key", t.key());
  w.OmitEmptyString("operator", t.operator_());
  w.OmitEmptyString("value", t.value());
  w.OmitEmptyString("effect", t.effect());
  if (t.toleration_seconds().has_value()) {
    w.Key("tolerationSeconds");
    w.Int(*t.toleration_seconds());
  }
  w.EndObject();
}

void WriteResult(Writer& w, const fb::DeviceRequestAllocationResult& r) {
  w.BeginObject();
  w.StringField("request", r.request());
  w.StringField("driver", r.driver());
  w.StringField("pool", r.pool());
  w.StringField("device", r.device());
  if (r.admin_access().has_value()) {
    w.Key("adminAccess");
    w.Bool(*r.admin_access());
  }
  w.Tables("tolerations", r.tolerations(), true,
           [&](const fb::DeviceToleration& t) { WriteToleration(w, t); });
  w.OmitEmptyStrings("bindingConditions", r.binding_conditions());
  w.OmitEmptyStrings("bindingFailureConditions", r.binding_failure_conditions());
  w.PointerString("shareID", r.share_id());
  if (!Empty(r.consumed_capacity())) {
    w.Key("consumedCapacity");
    w.BeginObject();
    for (const fb::QuantityEntry* e : *r.consumed_capacity()) {
      w.EscapedKey(View(e->key()));
      w.String(e->value());
    }
    w.EndObject();
  }
  w.OmitEmptyStrings("skipNodeOperations", r.skip_node_operations());
  w.EndObject();
}

void WriteConfig(Writer& w, const fb::DeviceAllocationConfiguration& c) {
  w.BeginObject();
  w.StringField("source", c.source());
  w.OmitEmptyStrings("requests", c.requests());
  if (c.opaque_present()) {
    w.Key("opaque");
    w.BeginObject();
    w.StringField("driver", c.opaque_driver());
    w.Key("parameters");
    w.Raw(c.opaque_parameters());
    w.EndObject();
  }
  w.EndObject();
}

void WriteRequirement(Writer& w, const fb::NodeSelectorRequirement& r) {
  w.BeginObject();
  w.StringField("key", r.key());
  w.StringField("operator", r.operator_());
  w.OmitEmptyStrings("values", r.values());
  w.EndObject();
}

void WriteNodeSelector(Writer& w, const fb::NodeSelector& s) {
  w.BeginObject();
  w.Tables("nodeSelectorTerms", s.node_selector_terms(), false,
           [&](const fb::NodeSelectorTerm& term) {
             w.BeginObject();
             const auto requirement = [&](const fb::NodeSelectorRequirement& r) {
               WriteRequirement(w, r);
             };
             w.Tables("matchExpressions", term.match_expressions(), true, requirement);
             w.Tables("matchFields", term.match_fields(), true, requirement);
             w.EndObject();
           });
  w.EndObject();
}

void WriteAllocation(Writer& w, const fb::AllocationResult& a) {
  w.BeginObject();
  w.Key("devices");
  w.BeginObject();
  w.Tables("results", a.results(), true,
           [&](const fb::DeviceRequestAllocationResult& r) { WriteResult(w, r); });
  w.Tables("config", a.config(), true,
           [&](const fb::DeviceAllocationConfiguration& c) { WriteConfig(w, c); });
  w.EndObject();
  if (a.node_selector() != nullptr) {
    w.Key("nodeSelector");
    WriteNodeSelector(w, *a.node_selector());
  }
  if (a.allocation_timestamp().has_value()) {
    w.Key("allocationTimestamp");
    w.Time(*a.allocation_timestamp());
  }
  w.EndObject();
}

void WriteCondition(Writer& w, const fb::Condition& c) {
  w.BeginObject();
  w.StringField("type", c.type());
  w.StringField("status", c.status());
  if (c.observed_generation() != 0) {
    w.Key("observedGeneration");
    w.Int(c.observed_generation());
  }
  w.Key("lastTransitionTime");
  if (c.last_transition_time().has_value()) {
    w.Time(*c.last_transition_time());
  } else {
    w.Null();
  }
  w.StringField("reason", c.reason());
  w.StringField("message", c.message());
  w.EndObject();
}

void WriteDeviceStatus(Writer& w, const fb::AllocatedDeviceStatus& d) {
  w.BeginObject();
  w.StringField("driver", d.driver());
  w.StringField("pool", d.pool());
  w.StringField("device", d.device());
  w.PointerString("shareID", d.share_id());
  w.Tables("conditions", d.conditions(), false,
           [&](const fb::Condition& c) { WriteCondition(w, c); });
  if (d.data() != nullptr) {
    w.Key("data");
    w.Raw(d.data());
  }
  if (const fb::NetworkDeviceData* n = d.network_data(); n != nullptr) {
    w.Key("networkData");
    w.BeginObject();
    w.OmitEmptyString("interfaceName", n->interface_name());
    w.OmitEmptyStrings("ips", n->ips());
    w.OmitEmptyString("hardwareAddress", n->hardware_address());
    w.EndObject();
  }
  w.EndObject();
}

void WriteStatus(Writer& w, const fb::ResourceClaimStatus* s) {
  w.BeginObject();
  if (s != nullptr) {
    if (s->allocation() != nullptr) {
      w.Key("allocation");
      WriteAllocation(w, *s->allocation());
    }
    w.Tables("reservedFor", s->reserved_for(), true,
             [&](const fb::ResourceClaimConsumerReference& r) {
               w.BeginObject();
               w.OmitEmptyString("apiGroup", r.api_group());
               w.StringField("resource", r.resource());
               w.StringField("name", r.name());
               w.StringField("uid", r.uid());
               w.EndObject();
             });
    w.Tables("devices", s->devices(), true,
             [&](const fb::AllocatedDeviceStatus& d) { WriteDeviceStatus(w, d); });
  }
  w.EndObject();
}

void WriteMetadata(Writer& w, const fb::ClaimRecord& c) {
  w.BeginObject();
  w.OmitEmptyString("name", c.name());
  w.OmitEmptyString("namespace", c.namespace_());
  w.OmitEmptyString("uid", c.uid());
  w.OmitEmptyString("resourceVersion", c.resource_version());
  if (c.generation() != 0) {
    w.Key("generation");
    w.Int(c.generation());
  }
  w.Key("creationTimestamp");
  if (c.creation_timestamp().has_value()) {
    w.Time(*c.creation_timestamp());
  } else {
    w.Null();
  }
  if (c.deletion_timestamp().has_value()) {
    w.Key("deletionTimestamp");
    w.Time(*c.deletion_timestamp());
  }
  w.EndObject();
}

void WriteSpec(Writer& w, const fb::ClaimRecord& c) {
  w.BeginObject();
  w.Key("devices");
  w.BeginObject();
  w.Tables("requests", c.spec_requests(), false, [&](const fb::SpecRequest& r) {
    w.BeginObject();
    w.StringField("name", r.name());
    if (!Empty(r.subrequests())) {
      w.Key("firstAvailable");
      w.BeginArray();
      for (const FbString* sub : *r.subrequests()) {
        w.BeginObject();
        w.StringField("name", sub);
        w.EndObject();
      }
      w.EndArray();
    }
    w.EndObject();
  });
  w.EndObject();
  w.EndObject();
}

void Finish(std::string compact, const EncodeOptions& options, std::string* out) {
  if (options.indent.empty()) {
    *out = std::move(compact);
  } else {
    internal::IndentJson(compact, options.indent, out);
  }
}

}  // namespace

void AppendClaimJson(const ClaimRecord& record, bool with_type_meta, std::string* out) {
  const fb::ClaimRecord& c = record.table();
  Writer w(out);
  w.BeginObject();
  if (with_type_meta) {
    w.Key("kind");
    w.String("ResourceClaim");
    w.Key("apiVersion");
    w.String("resource.k8s.io/v1");
  }
  w.Key("metadata");
  WriteMetadata(w, c);
  w.Key("spec");
  WriteSpec(w, c);
  w.Key("status");
  WriteStatus(w, c.status());
  w.EndObject();
}

std::string EncodeClaim(const ClaimRecord& record, const EncodeOptions& options) {
  std::string compact;
  compact.reserve(record.bytes().size() * 2);
  AppendClaimJson(record, /*with_type_meta=*/true, &compact);
  std::string out;
  Finish(std::move(compact), options, &out);
  return out;
}

std::string EncodeClaimList(absl::Span<const ClaimRecord> records,
                            absl::string_view resource_version, const EncodeOptions& options) {
  std::string compact;
  Writer w(&compact);
  w.BeginObject();
  w.Key("kind");
  w.String("ResourceClaimList");
  w.Key("apiVersion");
  w.String("resource.k8s.io/v1");
  w.Key("metadata");
  w.BeginObject();
  w.Key("resourceVersion");
  w.String(resource_version);
  w.EndObject();
  w.Key("items");
  w.BeginArray();
  for (size_t i = 0; i < records.size(); ++i) {
    if (i > 0) compact.push_back(',');
    AppendClaimJson(records[i], /*with_type_meta=*/false, &compact);
  }
  w.EndArray();
  w.EndObject();
  std::string out;
  Finish(std::move(compact), options, &out);
  return out;
}

}  // namespace claimstore
