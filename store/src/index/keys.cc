#include "index/keys.h"

#include <cstring>

namespace claimstore::internal {

bool ConsumeComponent(absl::string_view* key, std::string* out) {
  out->clear();
  const char* p = key->data();
  const char* const end = p + key->size();
  while (true) {
    // Runs of plain bytes are copied whole; only 0x00 needs a look.
    const auto* zero = static_cast<const char*>(memchr(p, '\0', static_cast<size_t>(end - p)));
    if (zero == nullptr || zero + 1 >= end) return false;
    out->append(p, static_cast<size_t>(zero - p));
    if (zero[1] == '\x01') {
      key->remove_prefix(static_cast<size_t>(zero + 2 - key->data()));
      return true;
    }
    if (zero[1] != '\xff') return false;
    out->push_back('\0');
    p = zero + 2;
  }
}

size_t ComponentsLength(absl::string_view key, int n) {
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    while (true) {
      const auto* zero = static_cast<const char*>(memchr(key.data() + at, '\0', key.size() - at));
      if (zero == nullptr) return absl::string_view::npos;
      at = static_cast<size_t>(zero - key.data()) + 2;
      if (at > key.size()) return absl::string_view::npos;
      if (zero[1] == '\x01') break;
      if (zero[1] != '\xff') return absl::string_view::npos;
    }
  }
  return at;
}

std::string RecordKey(absl::string_view claim_namespace, absl::string_view name) {
  std::string key;
  key.reserve(claim_namespace.size() + name.size() + 4);
  AppendRecordKeyTo(claim_namespace, name, &key);
  return key;
}

std::string ConsumerKey(absl::string_view uid, absl::string_view claim_namespace,
                        absl::string_view name) {
  std::string key;
  // Each component and its 2-byte terminator (escapes, rare, may grow it).
  key.reserve(uid.size() + claim_namespace.size() + name.size() + 6);
  AppendComponent(uid, &key);
  AppendComponent(claim_namespace, &key);
  AppendComponent(name, &key);
  return key;
}

std::string DeviceKey(absl::string_view driver, absl::string_view pool, absl::string_view device,
                      HoldingKind kind, absl::string_view share_id,
                      absl::string_view claim_namespace, absl::string_view name) {
  std::string key;
  key.reserve(driver.size() + pool.size() + device.size() + share_id.size() +
              claim_namespace.size() + name.size() + 13);
  AppendComponent(driver, &key);
  AppendComponent(pool, &key);
  AppendComponent(device, &key);
  key.push_back(static_cast<char>(kind));
  AppendComponent(share_id, &key);
  AppendComponent(claim_namespace, &key);
  AppendComponent(name, &key);
  return key;
}

bool ParseDeviceKey(absl::string_view key, DeviceKeyParts* out) {
  if (!ConsumeComponent(&key, &out->driver) || !ConsumeComponent(&key, &out->pool) ||
      !ConsumeComponent(&key, &out->device) || key.empty()) {
    return false;
  }
  const char kind = key[0];
  if (kind != 'A' && kind != 'E' && kind != 'S') return false;
  out->kind = static_cast<HoldingKind>(kind);
  key.remove_prefix(1);
  return ConsumeComponent(&key, &out->share_id) && ConsumeComponent(&key, &out->claim_namespace) &&
         ConsumeComponent(&key, &out->name) && key.empty();
}

bool ParseRecordKey(absl::string_view key, std::string* claim_namespace, std::string* name) {
  return ConsumeComponent(&key, claim_namespace) && ConsumeComponent(&key, name) && key.empty();
}

bool ParseConsumerKey(absl::string_view key, std::string* uid, std::string* claim_namespace,
                      std::string* name) {
  return ConsumeComponent(&key, uid) && ConsumeComponent(&key, claim_namespace) &&
         ConsumeComponent(&key, name) && key.empty();
}

void AppendUint64(uint64_t v, std::string* out) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((v >> shift) & 0xFF));
  }
}

bool ParseUint64(absl::string_view bytes, uint64_t* v) {
  if (bytes.size() != 8) return false;
  *v = 0;
  for (char c : bytes) *v = (*v << 8) | static_cast<uint8_t>(c);
  return true;
}

}  // namespace claimstore::internal
