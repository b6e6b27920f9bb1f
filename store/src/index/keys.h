// Every key of the database, in one place: the column families' names, the
// meta keys, the format version, and the functions that encode and parse
// record, consumer and device keys (Str components, which sort as tuples)
// and big-endian integers.
//
// Thread-safety: constants and pure functions.
//
// Layout: docs/format.md, sections Keys, Indexes and Meta.
#ifndef CLAIMSTORE_SRC_INDEX_KEYS_H_
#define CLAIMSTORE_SRC_INDEX_KEYS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace claimstore::internal {

inline constexpr char kRecordsFamily[] = "records";
inline constexpr char kConsumersFamily[] = "consumers";
inline constexpr char kDevicesFamily[] = "devices";
inline constexpr char kMetaFamily[] = "meta";
inline constexpr char kFeedFamily[] = "feed";

inline constexpr char kFormatVersionKey[] = "format_version";
inline constexpr char kRevisionKey[] = "revision";
inline constexpr char kFeedCompactKey[] = "feed_compact";
inline constexpr char kFollowKey[] = "follow_resource_version";
inline constexpr char kFeedOffKey[] = "feed_off";

// The database format this code writes and reads. An older binary refuses a
// database whose format_version is larger. Version 2 added the feed family:
// a writable open of a version-1 database adds it (the feed then starts at
// the store's revision) and moves the database to version 2.
inline constexpr uint32_t kFormatVersion = 2;

enum class HoldingKind : char {
  kAdmin = 'A',
  kExclusive = 'E',
  kShare = 'S',
};

// Appends Str(s) to `key`, a std::string or any container of char with
// push_back and insert at end (an inlined buffer).
template <typename Key>
void AppendComponentTo(absl::string_view s, Key* key) {
  // NUL bytes found with memchr (string_view::find): names rarely have any.
  for (size_t nul; (nul = s.find('\0')) != absl::string_view::npos; s.remove_prefix(nul + 1)) {
    key->insert(key->end(), s.data(), s.data() + nul);
    key->push_back('\0');
    key->push_back('\xff');
  }
  key->insert(key->end(), s.data(), s.data() + s.size());
  key->push_back('\0');
  key->push_back('\x01');
}
inline void AppendComponent(absl::string_view s, std::string* key) { AppendComponentTo(s, key); }

// Reads one Str() component from the front of *key into *out and removes it.
// Returns false when *key does not start with a well-formed component.
bool ConsumeComponent(absl::string_view* key, std::string* out);
// The length of the first `n` components of `key` (npos when it does not
// start with n well-formed ones), without decoding them.
size_t ComponentsLength(absl::string_view key, int n);

// Appends RecordKey's bytes to `key` (a std::string or an inlined buffer,
// as AppendComponentTo takes).
template <typename Key>
void AppendRecordKeyTo(absl::string_view claim_namespace, absl::string_view name, Key* key) {
  AppendComponentTo(claim_namespace, key);
  AppendComponentTo(name, key);
}
std::string RecordKey(absl::string_view claim_namespace, absl::string_view name);
std::string ConsumerKey(absl::string_view uid, absl::string_view claim_namespace,
                        absl::string_view name);
std::string DeviceKey(absl::string_view driver, absl::string_view pool, absl::string_view device,
                      HoldingKind kind, absl::string_view share_id,
                      absl::string_view claim_namespace, absl::string_view name);

// A device-index key taken apart.
struct DeviceKeyParts {
  std::string driver, pool, device;
  HoldingKind kind = HoldingKind::kExclusive;
  std::string share_id;
  std::string claim_namespace, name;
};
bool ParseDeviceKey(absl::string_view key, DeviceKeyParts* out);
bool ParseRecordKey(absl::string_view key, std::string* claim_namespace, std::string* name);
bool ParseConsumerKey(absl::string_view key, std::string* uid, std::string* claim_namespace,
                      std::string* name);

void AppendUint64(uint64_t v, std::string* out);
bool ParseUint64(absl::string_view bytes, uint64_t* v);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_INDEX_KEYS_H_
