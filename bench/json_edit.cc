// JSON reads and edits for the sqlite and rocksdb_json backends: what a store
// that keeps claim status as JSON text has to do on each call.
#include <simdjson.h>

#include "absl/strings/str_cat.h"
#include "backends.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace claimstore::bench::json {
namespace {

thread_local simdjson::ondemand::parser parser;

absl::StatusOr<rapidjson::Document> Parse(absl::string_view text) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError() || !doc.IsObject())
    return absl::DataLossError("stored JSON is malformed");
  return doc;
}

std::string Write(const rapidjson::Document& doc) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  doc.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

rapidjson::Value& Status(rapidjson::Document& doc) {
  if (!doc.HasMember("status")) {
    doc.AddMember("status", rapidjson::Value(rapidjson::kObjectType), doc.GetAllocator());
  }
  return doc["status"];
}

rapidjson::Value Str(absl::string_view s, rapidjson::Document& doc) {
  return rapidjson::Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), doc.GetAllocator());
}

}  // namespace

absl::Status ReadFields(absl::string_view text, ClaimFields* out) {
  simdjson::padded_string padded(text.data(), text.size());
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc)) return absl::DataLossError("stored JSON is malformed");
  *out = ClaimFields{};
  simdjson::ondemand::object status;
  if (doc["status"].get_object().get(status)) return absl::OkStatus();
  for (auto field : status) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return absl::DataLossError("bad key");
    if (key == "reservedFor") {
      simdjson::ondemand::array a;
      if (field.value().get_array().get(a)) return absl::DataLossError("bad reservedFor");
      for (auto item : a) {
        (void)item;
        ++out->consumers;
      }
    } else if (key == "allocation") {
      simdjson::ondemand::array results;
      if (field.value()["devices"]["results"].get_array().get(results)) continue;
      for (auto r : results) {
        std::string_view device;
        if (!r["device"].get_string().get(device)) out->first_device = std::string(device);
        break;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> AddConsumer(absl::string_view text, const ConsumerRef& consumer,
                                        bool* changed) {
  absl::StatusOr<rapidjson::Document> parsed = Parse(text);
  if (!parsed.ok()) return parsed.status();
  rapidjson::Document& doc = *parsed;
  rapidjson::Value& status = Status(doc);
  if (!status.HasMember("allocation")) {
    return absl::FailedPreconditionError("claim is not allocated");
  }
  if (!status.HasMember("reservedFor")) {
    status.AddMember("reservedFor", rapidjson::Value(rapidjson::kArrayType), doc.GetAllocator());
  }
  rapidjson::Value& reserved = status["reservedFor"];
  for (const rapidjson::Value& r : reserved.GetArray()) {
    if (r.HasMember("uid") && absl::string_view(r["uid"].GetString()) == consumer.uid) {
      *changed = false;
      return std::string(text);
    }
  }
  if (reserved.Size() >= 256) return absl::ResourceExhaustedError("reservedFor is full");
  rapidjson::Value ref(rapidjson::kObjectType);
  if (!consumer.api_group.empty())
    ref.AddMember("apiGroup", Str(consumer.api_group, doc), doc.GetAllocator());
  ref.AddMember("resource", Str(consumer.resource, doc), doc.GetAllocator());
  ref.AddMember("name", Str(consumer.name, doc), doc.GetAllocator());
  ref.AddMember("uid", Str(consumer.uid, doc), doc.GetAllocator());
  reserved.PushBack(ref, doc.GetAllocator());
  *changed = true;
  return Write(doc);
}

absl::StatusOr<std::string> RemoveConsumer(absl::string_view text, absl::string_view uid,
                                           bool* changed) {
  absl::StatusOr<rapidjson::Document> parsed = Parse(text);
  if (!parsed.ok()) return parsed.status();
  rapidjson::Document& doc = *parsed;
  rapidjson::Value& status = Status(doc);
  *changed = false;
  if (!status.HasMember("reservedFor")) return std::string(text);
  rapidjson::Value& reserved = status["reservedFor"];
  for (auto it = reserved.Begin(); it != reserved.End(); ++it) {
    if (it->HasMember("uid") && absl::string_view((*it)["uid"].GetString()) == uid) {
      reserved.Erase(it);
      *changed = true;
      break;
    }
  }
  if (!*changed) return std::string(text);
  if (reserved.Empty()) status.RemoveMember("reservedFor");
  return Write(doc);
}

absl::StatusOr<std::string> SetAllocation(absl::string_view text, absl::string_view driver,
                                          absl::string_view pool, absl::string_view device) {
  absl::StatusOr<rapidjson::Document> parsed = Parse(text);
  if (!parsed.ok()) return parsed.status();
  rapidjson::Document& doc = *parsed;
  rapidjson::Value& status = Status(doc);
  if (status.HasMember("allocation")) {
    return absl::FailedPreconditionError("claim is allocated already");
  }
  auto& a = doc.GetAllocator();
  rapidjson::Value result(rapidjson::kObjectType);
  result.AddMember("request", "gpu", a);
  result.AddMember("driver", Str(driver, doc), a);
  result.AddMember("pool", Str(pool, doc), a);
  result.AddMember("device", Str(device, doc), a);
  rapidjson::Value results(rapidjson::kArrayType);
  results.PushBack(result, a);
  rapidjson::Value devices(rapidjson::kObjectType);
  devices.AddMember("results", results, a);
  rapidjson::Value allocation(rapidjson::kObjectType);
  allocation.AddMember("devices", devices, a);
  status.AddMember("allocation", allocation, a);
  return Write(doc);
}

absl::StatusOr<std::string> ClearAllocation(absl::string_view text, bool* changed) {
  absl::StatusOr<rapidjson::Document> parsed = Parse(text);
  if (!parsed.ok()) return parsed.status();
  rapidjson::Document& doc = *parsed;
  rapidjson::Value& status = Status(doc);
  *changed = false;
  if (!status.HasMember("allocation")) return std::string(text);
  if (status.HasMember("reservedFor") && !status["reservedFor"].Empty()) {
    return absl::FailedPreconditionError("claim is still reserved");
  }
  status.RemoveMember("allocation");
  status.RemoveMember("devices");
  *changed = true;
  return Write(doc);
}

}  // namespace claimstore::bench::json
