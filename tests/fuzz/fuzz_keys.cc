// Fuzz target: the key decoder. A key that parses must encode back to the
// same bytes (no two tuples share an encoding).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "index/keys.h"

using namespace claimstore::internal;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view key(reinterpret_cast<const char*>(data), size);
  DeviceKeyParts d;
  if (ParseDeviceKey(key, &d) &&
      DeviceKey(d.driver, d.pool, d.device, d.kind, d.share_id, d.claim_namespace, d.name) != key) {
    std::abort();
  }
  std::string a, b, c;
  if (ParseRecordKey(key, &a, &b) && RecordKey(a, b) != key) std::abort();
  if (ParseConsumerKey(key, &a, &b, &c) && ConsumerKey(a, b, c) != key) std::abort();
  return 0;
}
