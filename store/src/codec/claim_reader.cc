#include "codec/claim_reader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "k8s/quantity.h"
#include "k8s/rfc3339.h"
#include "record/record_factory.h"

namespace claimstore::internal {

bool IsSupportedApiVersion(absl::string_view v) {
  return v == "resource.k8s.io/v1" || v == "resource.k8s.io/v1beta2" ||
         v == "resource.k8s.io/v1beta1";
}

// A vector of offsets (strings or tables), each read by read_one; the
// element offsets are gathered in a pooled scratch vector, since FlatBuffers
// wants every element finished before the vector starts.
template <typename T, typename ReadOne>
absl::Status ClaimReader::ReadOffsetList(od::value& v, TableListOff<T>* out, bool keep_empty,
                                         ReadOne&& read_one) {
  std::vector<flatbuffers::uoffset_t>& items = pool_.Acquire();
  bool present = false;
  absl::Status s = ReadArray(v, &present, [&](od::value& e) {
    Offset<T> item;
    CS_RETURN_IF_ERROR(read_one(e, &item));
    items.push_back(item.o);
    return absl::OkStatus();
  });
  if (s.ok() && present && (keep_empty || !items.empty())) {
    fbb_.StartVector(items.size(), sizeof(flatbuffers::uoffset_t));
    for (size_t i = items.size(); i-- > 0;) {
      fbb_.PushElement(Offset<T>(items[i]));
    }
    *out = TableListOff<T>(fbb_.EndVector(items.size()));
  }
  pool_.Release();
  return s;
}

// A list of tables, each read by read_one(value, &offset).
template <typename T, typename ReadOne>
absl::Status ClaimReader::ReadTableList(od::value& v, TableListOff<T>* out, bool keep_empty,
                                        ReadOne&& read_one) {
  return ReadOffsetList<T>(v, out, keep_empty, read_one);
}

// A JSON string, or null (absent: *out stays 0).
absl::Status ClaimReader::ReadString(od::value& v, StrOff* out) {
  absl::string_view s;
  bool present = false;
  CS_RETURN_IF_ERROR(ReadStringView(v, &s, &present));
  if (present) *out = fbb_.CreateString(s.data(), s.size());
  return absl::OkStatus();
}

// metav1.Time: RFC 3339 string or null; Go's zero time is null too.
absl::Status ClaimReader::ReadTime(od::value& v, std::optional<int64_t>* out) {
  absl::string_view s;
  bool present = false;
  CS_RETURN_IF_ERROR(ReadStringView(v, &s, &present));
  if (!present) return absl::OkStatus();
  absl::StatusOr<int64_t> t = ParseRfc3339(s);
  if (!t.ok()) return Fail(t.status().message());
  if (*t != kGoZeroTimeUnixSeconds) *out = *t;
  return absl::OkStatus();
}

// runtime.RawExtension: any JSON value, kept compacted; null is absent.
absl::Status ClaimReader::ReadRaw(od::value& v, StrOff* out) {
  CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
  if (type == od::json_type::null) return absl::OkStatus();
  CS_ASSIGN_OR_RETURN(absl::string_view raw, RawText(v, type));
  scratch_.clear();
  if (absl::Status s = CompactJson(raw, &scratch_, DepthLeft(),
                                   /*utf8_validated=*/true);
      !s.ok()) {
    return Fail(s.message());
  }
  *out = fbb_.CreateString(scratch_);
  return absl::OkStatus();
}

// resource.Quantity, stored in the text the API server writes for it.
absl::Status ClaimReader::ReadQuantity(od::value& v, std::string* out) {
  CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
  if (type != od::json_type::string && type != od::json_type::number &&
      type != od::json_type::null) {
    return TypeFail("a quantity string", type);
  }
  const std::string_view token = v.raw_json_token();
  if (type == od::json_type::number) {
    // Bare numbers are handed to ParseQuantity as text; check the grammar.
    double ignored;
    if (auto e = v.get_double().get(ignored)) return JsonFail(e);
  } else if (type == od::json_type::string) {
    std::string_view ignored;  // validates escapes and UTF-8
    if (auto e = v.get_string().get(ignored)) return JsonFail(e);
  }
  absl::StatusOr<Quantity> q =
      Quantity::ParseJsonToken(absl::string_view(token.data(), token.size()));
  if (!q.ok()) return Fail(q.status().message());
  *out = q->ToString();
  return absl::OkStatus();
}

// A []string. `keep_empty` keeps `[]` apart from null (fields without
// omitempty); otherwise an empty list is stored as absent.
absl::Status ClaimReader::ReadStringList(od::value& v, StrListOff* out, bool keep_empty) {
  return ReadOffsetList<flatbuffers::String>(v, out, keep_empty, [&](od::value& e, StrOff* item) {
    absl::string_view s;
    bool present = false;
    CS_RETURN_IF_ERROR(ReadStringView(e, &s, &present));
    *item = fbb_.CreateString(s.data(), s.size());  // null → ""
    return absl::OkStatus();
  });
}

absl::Status ClaimReader::ReadToleration(od::value& v, Offset<fb::DeviceToleration>* out) {
  static constexpr FieldNames<5> kNames = {"key", "operator", "value", "effect",
                                           "tolerationSeconds"};
  StrOff key, op, value, effect;
  std::optional<int64_t> seconds;
  CS_RETURN_IF_ERROR(
      ReadObject(v, kNames, Unknown::kError, [&](size_t i, od::value& f) -> absl::Status {
        switch (i) {
          case 0:
            return ReadString(f, &key);
          case 1:
            return ReadString(f, &op);
          case 2:
            return ReadString(f, &value);
          case 3:
            return ReadString(f, &effect);
          default:
            return ReadOptionalInt64(f, &seconds);
        }
      }));
  *out = fb::CreateDeviceToleration(fbb_, key, op, value, effect, ToFb(seconds));
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadQuantityMap(od::value& v, TableListOff<fb::QuantityEntry>* out) {
  CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
  if (type == od::json_type::null) return absl::OkStatus();
  if (type != od::json_type::object) return TypeFail("an object", type);
  od::object object;
  if (auto e = v.get_object().get(object)) return JsonFail(e);
  std::vector<std::pair<std::string, std::string>> entries;
  for (auto member : object) {
    od::field field;
    if (auto e = std::move(member).get(field)) return JsonFail(e);
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return JsonFail(e);
    entries.emplace_back(std::string(key), std::string());
    path().PushKey(entries.back().first);
    CS_RETURN_IF_ERROR(ReadQuantity(field.value(), &entries.back().second));
    path().Pop();
  }
  // Go writes map keys sorted; a repeated key is refused (strict decoding).
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].first == entries[i - 1].first) {
      return Fail(absl::StrCat("duplicate key \"", entries[i].first, "\""));
    }
  }
  if (entries.empty()) return absl::OkStatus();
  std::vector<Offset<fb::QuantityEntry>> offsets;
  offsets.reserve(entries.size());
  for (const auto& [key, value] : entries) {
    offsets.push_back(
        fb::CreateQuantityEntry(fbb_, fbb_.CreateString(key), fbb_.CreateString(value)));
  }
  *out = fbb_.CreateVector(offsets);
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadResult(od::value& v, Offset<fb::DeviceRequestAllocationResult>* out) {
  static constexpr FieldNames<11> kNames = {"request",
                                            "driver",
                                            "pool",
                                            "device",
                                            "adminAccess",
                                            "tolerations",
                                            "bindingConditions",
                                            "bindingFailureConditions",
                                            "shareID",
                                            "consumedCapacity",
                                            "skipNodeOperations"};
  StrOff request, driver, pool, device, share_id;
  std::optional<bool> admin_access;
  TableListOff<fb::DeviceToleration> tolerations;
  StrListOff binding, binding_failure, skip_node_operations;
  TableListOff<fb::QuantityEntry> consumed;
  CS_RETURN_IF_ERROR(
      ReadObject(v, kNames, Unknown::kError, [&](size_t i, od::value& f) -> absl::Status {
        switch (i) {
          case 0:
            return ReadString(f, &request);
          case 1:
            return ReadString(f, &driver);
          case 2:
            return ReadString(f, &pool);
          case 3:
            return ReadString(f, &device);
          case 4:
            return ReadOptionalBool(f, &admin_access);
          case 5:
            return ReadTableList<fb::DeviceToleration>(
                f, &tolerations, false, [&](od::value& e, Offset<fb::DeviceToleration>* o) {
                  return ReadToleration(e, o);
                });
          case 6:
            return ReadStringList(f, &binding);
          case 7:
            return ReadStringList(f, &binding_failure);
          case 8:
            return ReadString(f, &share_id);
          case 9:
            return ReadQuantityMap(f, &consumed);
          default:
            return ReadStringList(f, &skip_node_operations);
        }
      }));
  *out = fb::CreateDeviceRequestAllocationResult(
      fbb_, request, driver, pool, device, ToFb(admin_access), tolerations, binding,
      binding_failure, share_id, consumed, skip_node_operations);
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadConfig(od::value& v, Offset<fb::DeviceAllocationConfiguration>* out) {
  static constexpr FieldNames<3> kNames = {"source", "requests", "opaque"};
  static constexpr FieldNames<2> kOpaqueNames = {"driver", "parameters"};
  StrOff source, opaque_driver, opaque_parameters;
  StrListOff requests;
  bool opaque_present = false;
  CS_RETURN_IF_ERROR(
      ReadObject(v, kNames, Unknown::kError, [&](size_t i, od::value& f) -> absl::Status {
        switch (i) {
          case 0:
            return ReadString(f, &source);
          case 1:
            return ReadStringList(f, &requests);
          default:
            return ReadObject(
                f, kOpaqueNames, Unknown::kError,
                [&](size_t j, od::value& g) -> absl::Status {
                  return j == 0 ? ReadString(g, &opaque_driver) : ReadRaw(g, &opaque_parameters);
                },
                &opaque_present);
        }
      }));
  *out = fb::CreateDeviceAllocationConfiguration(fbb_, source, requests, opaque_present,
                                                 opaque_driver, opaque_parameters);
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadSelectorRequirement(od::value& v,
                                                  Offset<fb::NodeSelectorRequirement>* out) {
  static constexpr FieldNames<3> kNames = {"key", "operator", "values"};
  StrOff key, op;
  StrListOff values;
  CS_RETURN_IF_ERROR(
      ReadObject(v, kNames, Unknown::kError, [&](size_t i, od::value& f) -> absl::Status {
        switch (i) {
          case 0:
            return ReadString(f, &key);
          case 1:
            return ReadString(f, &op);
          default:
            return ReadStringList(f, &values);
        }
      }));
  *out = fb::CreateNodeSelectorRequirement(fbb_, key, op, values);
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadSelectorTerm(od::value& v, Offset<fb::NodeSelectorTerm>* out) {
  static constexpr FieldNames<2> kNames = {"matchExpressions", "matchFields"};
  TableListOff<fb::NodeSelectorRequirement> lists[2];
  CS_RETURN_IF_ERROR(
      ReadObject(v, kNames, Unknown::kError, [&](size_t i, od::value& f) -> absl::Status {
        return ReadTableList<fb::NodeSelectorRequirement>(
            f, &lists[i], false, [&](od::value& e, Offset<fb::NodeSelectorRequirement>* o) {
              return ReadSelectorRequirement(e, o);
            });
      }));
  *out = fb::CreateNodeSelectorTerm(fbb_, lists[0], lists[1]);
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadNodeSelector(od::value& v, Offset<fb::NodeSelector>* out) {
  static constexpr FieldNames<1> kNames = {"nodeSelectorTerms"};
  TableListOff<fb::NodeSelectorTerm> terms;
  bool present = false;
  CS_RETURN_IF_ERROR(ReadObject(
      v, kNames, Unknown::kError,
      [&](size_t, od::value& f) -> absl::Status {
        return ReadTableList<fb::NodeSelectorTerm>(
            f, &terms, /*keep_empty=*/true,
            [&](od::value& e, Offset<fb::NodeSelectorTerm>* o) { return ReadSelectorTerm(e, o); });
      },
      &present));
  if (present) *out = fb::CreateNodeSelector(fbb_, terms);
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadAllocation(od::value& v, Offset<fb::AllocationResult>* out) {
  static constexpr FieldNames<3> kNames = {"devices", "nodeSelector", "allocationTimestamp"};
  static constexpr FieldNames<2> kDeviceNames = {"results", "config"};
  TableListOff<fb::DeviceRequestAllocationResult> results;
  TableListOff<fb::DeviceAllocationConfiguration> config;
  Offset<fb::NodeSelector> node_selector;
  std::optional<int64_t> timestamp;
  bool present = false;
  CS_RETURN_IF_ERROR(ReadObject(
      v, kNames, Unknown::kError,
      [&](size_t i, od::value& f) -> absl::Status {
        switch (i) {
          case 0:
            return ReadObject(
                f, kDeviceNames, Unknown::kError, [&](size_t j, od::value& g) -> absl::Status {
                  if (j == 0) {
                    return ReadTableList<fb::DeviceRequestAllocationResult>(
                        g, &results, false,
                        [&](od::value& e, Offset<fb::DeviceRequestAllocationResult>* o) {
                          return ReadResult(e, o);
                        });
                  }
                  return ReadTableList<fb::DeviceAllocationConfiguration>(
                      g, &config, false,
                      [&](od::value& e, Offset<fb::DeviceAllocationConfiguration>* o) {
                        return ReadConfig(e, o);
                      });
                });
          case 1:
            return ReadNodeSelector(f, &node_selector);
          default:
            return ReadTime(f, &timestamp);
        }
      },
      &present));
  if (present) {
    *out = fb::CreateAllocationResult(fbb_, results, config, node_selector, ToFb(timestamp));
  }
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadConsumer(od::value& v,
                                       Offset<fb::ResourceClaimConsumerReference>* out) {
  static constexpr FieldNames<4> kNames = {"apiGroup", "resource", "name", "uid"};
  StrOff fields[4];
  CS_RETURN_IF_ERROR(ReadObject(v, kNames, Unknown::kError,
                                [&](size_t i, od::value& f) { return ReadString(f, &fields[i]); }));
  *out = fb::CreateResourceClaimConsumerReference(fbb_, fields[0], fields[1], fields[2], fields[3]);
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadCondition(od::value& v, Offset<fb::Condition>* out) {
  static constexpr FieldNames<6> kNames = {
      "type", "status", "observedGeneration", "lastTransitionTime", "reason", "message"};
  StrOff type, status, reason, message;
  int64_t observed_generation = 0;
  std::optional<int64_t> last_transition;
  CS_RETURN_IF_ERROR(
      ReadObject(v, kNames, Unknown::kError, [&](size_t i, od::value& f) -> absl::Status {
        switch (i) {
          case 0:
            return ReadString(f, &type);
          case 1:
            return ReadString(f, &status);
          case 2:
            return ReadInt64(f, &observed_generation);
          case 3:
            return ReadTime(f, &last_transition);
          case 4:
            return ReadString(f, &reason);
          default:
            return ReadString(f, &message);
        }
      }));
  *out = fb::CreateCondition(fbb_, type, status, observed_generation, ToFb(last_transition), reason,
                             message);
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadNetworkData(od::value& v, Offset<fb::NetworkDeviceData>* out) {
  static constexpr FieldNames<3> kNames = {"interfaceName", "ips", "hardwareAddress"};
  StrOff interface_name, hardware_address;
  StrListOff ips;
  bool present = false;
  CS_RETURN_IF_ERROR(ReadObject(
      v, kNames, Unknown::kError,
      [&](size_t i, od::value& f) -> absl::Status {
        switch (i) {
          case 0:
            return ReadString(f, &interface_name);
          case 1:
            return ReadStringList(f, &ips);
          default:
            return ReadString(f, &hardware_address);
        }
      },
      &present));
  if (present) {
    *out = fb::CreateNetworkDeviceData(fbb_, interface_name, ips, hardware_address);
  }
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadDeviceStatus(od::value& v, Offset<fb::AllocatedDeviceStatus>* out) {
  static constexpr FieldNames<7> kNames = {"driver",     "pool", "device",     "shareID",
                                           "conditions", "data", "networkData"};
  StrOff driver, pool, device, share_id, data;
  TableListOff<fb::Condition> conditions;
  Offset<fb::NetworkDeviceData> network_data;
  CS_RETURN_IF_ERROR(
      ReadObject(v, kNames, Unknown::kError, [&](size_t i, od::value& f) -> absl::Status {
        switch (i) {
          case 0:
            return ReadString(f, &driver);
          case 1:
            return ReadString(f, &pool);
          case 2:
            return ReadString(f, &device);
          case 3:
            return ReadString(f, &share_id);
          case 4:
            return ReadTableList<fb::Condition>(
                f, &conditions, /*keep_empty=*/true,
                [&](od::value& e, Offset<fb::Condition>* o) { return ReadCondition(e, o); });
          case 5:
            return ReadRaw(f, &data);
          default:
            return ReadNetworkData(f, &network_data);
        }
      }));
  *out = fb::CreateAllocatedDeviceStatus(fbb_, driver, pool, device, share_id, conditions, data,
                                         network_data);
  return absl::OkStatus();
}

absl::Status ClaimReader::ReadStatus(od::value& v, Offset<fb::ResourceClaimStatus>* out) {
  static constexpr FieldNames<3> kNames = {"allocation", "reservedFor", "devices"};
  Offset<fb::AllocationResult> allocation;
  TableListOff<fb::ResourceClaimConsumerReference> reserved_for;
  TableListOff<fb::AllocatedDeviceStatus> devices;
  CS_RETURN_IF_ERROR(
      ReadObject(v, kNames, Unknown::kError, [&](size_t i, od::value& f) -> absl::Status {
        switch (i) {
          case 0:
            return ReadAllocation(f, &allocation);
          case 1:
            return ReadTableList<fb::ResourceClaimConsumerReference>(
                f, &reserved_for, false,
                [&](od::value& e, Offset<fb::ResourceClaimConsumerReference>* o) {
                  return ReadConsumer(e, o);
                });
          default:
            return ReadTableList<fb::AllocatedDeviceStatus>(
                f, &devices, false, [&](od::value& e, Offset<fb::AllocatedDeviceStatus>* o) {
                  return ReadDeviceStatus(e, o);
                });
        }
      }));
  *out = fb::CreateResourceClaimStatus(fbb_, allocation, reserved_for, devices);
  return absl::OkStatus();
}

// Metadata and spec (lenient: only what is kept is decoded) -------------

absl::Status ClaimReader::ReadMetadata(od::value& v, ClaimParts* parts) {
  static constexpr FieldNames<7> kNames = {"name",
                                           "namespace",
                                           "uid",
                                           "resourceVersion",
                                           "generation",
                                           "creationTimestamp",
                                           "deletionTimestamp"};
  return ReadObject(v, kNames, Unknown::kSkip, [&](size_t i, od::value& f) -> absl::Status {
    switch (i) {
      case 0:
        return ReadString(f, &parts->name);
      case 1:
        return ReadString(f, &parts->claim_namespace);
      case 2:
        return ReadString(f, &parts->uid);
      case 3:
        return ReadString(f, &parts->resource_version);
      case 4:
        return ReadInt64(f, &parts->generation);
      case 5:
        return ReadTime(f, &parts->creation_timestamp);
      default:
        return ReadTime(f, &parts->deletion_timestamp);
    }
  });
}

// spec.devices.requests[].name and .firstAvailable[].name.
absl::Status ClaimReader::ReadSpec(od::value& v, ClaimParts* parts) {
  static constexpr FieldNames<1> kSpecNames = {"devices"};
  static constexpr FieldNames<1> kDevicesNames = {"requests"};
  static constexpr FieldNames<2> kRequestNames = {"name", "firstAvailable"};
  static constexpr FieldNames<1> kSubrequestNames = {"name"};
  const auto read_request = [&](od::value& e, Offset<fb::SpecRequest>* o) {
    StrOff name;
    StrListOff subrequests;
    std::vector<StrOff> subrequest_names;
    CS_RETURN_IF_ERROR(
        ReadObject(e, kRequestNames, Unknown::kSkip, [&](size_t i, od::value& f) -> absl::Status {
          if (i == 0) return ReadString(f, &name);
          bool present = false;
          return ReadArray(f, &present, [&](od::value& sub) {
            StrOff sub_name;
            CS_RETURN_IF_ERROR(
                ReadObject(sub, kSubrequestNames, Unknown::kSkip,
                           [&](size_t, od::value& g) { return ReadString(g, &sub_name); }));
            if (sub_name.IsNull()) sub_name = fbb_.CreateString("");
            subrequest_names.push_back(sub_name);
            return absl::OkStatus();
          });
        }));
    if (!subrequest_names.empty()) {
      subrequests = fbb_.CreateVector(subrequest_names);
    }
    *o = fb::CreateSpecRequest(fbb_, name, subrequests);
    return absl::OkStatus();
  };
  return ReadObject(v, kSpecNames, Unknown::kSkip, [&](size_t, od::value& f) {
    return ReadObject(f, kDevicesNames, Unknown::kSkip, [&](size_t, od::value& g) {
      return ReadTableList<fb::SpecRequest>(g, &parts->spec_requests, false, read_request);
    });
  });
}

absl::Status ClaimReader::ReadTypeMetaField(od::value& v, std::optional<std::string>* out) {
  absl::string_view s;
  bool present = false;
  CS_RETURN_IF_ERROR(ReadStringView(v, &s, &present));
  if (present) *out = std::string(s);
  return absl::OkStatus();
}

// Checks kind/apiVersion of a claim (both optional, as in list items).
absl::Status ClaimReader::CheckClaimTypeMeta(const ClaimParts& parts) {
  if (parts.kind.has_value() && *parts.kind != "ResourceClaim") {
    return Fail(
        absl::StrCat("kind \"", *parts.kind, "\" is not supported: expected ResourceClaim"));
  }
  if (parts.api_version.has_value() && !IsSupportedApiVersion(*parts.api_version)) {
    return Fail(absl::StrCat("apiVersion \"", *parts.api_version,
                             "\" is not supported: expected resource.k8s.io/v1, v1beta2 or "
                             "v1beta1"));
  }
  return absl::OkStatus();
}

// Finishes the record from `parts` and returns its verified bytes.
absl::StatusOr<ClaimRecord> ClaimReader::FinishClaim(ClaimParts* parts) {
  CS_RETURN_IF_ERROR(CheckClaimTypeMeta(*parts));
  if (parts->status.IsNull()) {
    parts->status = fb::CreateResourceClaimStatus(fbb_);
  }
  const fb::Revisions no_revisions(0, 0, 0);  // the store stamps them
  auto root = fb::CreateClaimRecord(
      fbb_, parts->claim_namespace, parts->name, parts->uid, parts->resource_version,
      parts->generation, ToFb(parts->creation_timestamp), ToFb(parts->deletion_timestamp),
      parts->spec_requests, parts->status, &no_revisions);
  fb::FinishClaimRecordBuffer(fbb_, root);
  std::string bytes(reinterpret_cast<const char*>(fbb_.GetBufferPointer()), fbb_.GetSize());
  fbb_.Clear();
  return RecordFactory::FromBuilt(std::move(bytes));
}

// A whole claim object (a list item, or a watch event's object).
absl::StatusOr<ClaimRecord> ClaimReader::ReadClaim(od::value& v) {
  fbb_.Clear();
  ClaimParts parts;
  static constexpr FieldNames<5> kNames = {"kind", "apiVersion", "metadata", "spec", "status"};
  bool present = false;
  CS_RETURN_IF_ERROR(ReadObject(
      v, kNames, Unknown::kError,
      [&](size_t i, od::value& f) { return ReadClaimField(i, f, &parts); }, &present));
  if (!present) return Fail("expected a ResourceClaim object, got null");
  return FinishClaim(&parts);
}

// Members of a claim object, by their index in ReadClaim's kNames.
absl::Status ClaimReader::ReadClaimField(size_t i, od::value& f, ClaimParts* parts) {
  switch (i) {
    case 0:
      return ReadTypeMetaField(f, &parts->kind);
    case 1:
      return ReadTypeMetaField(f, &parts->api_version);
    case 2:
      return ReadMetadata(f, parts);
    case 3:
      return ReadSpec(f, parts);
    default:
      return ReadStatus(f, &parts->status);
  }
}

}  // namespace claimstore::internal
