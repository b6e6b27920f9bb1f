// Helpers of the bulk load's parallel phases: running tasks at once, and
// sorting millions of keys that point all over arenas.
#ifndef CLAIMSTORE_SRC_UTIL_PARALLEL_H_
#define CLAIMSTORE_SRC_UTIL_PARALLEL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace claimstore::internal {

// Runs `tasks` at the same time: each but the last on a thread of its own,
// the last on this one. A task whose thread cannot be started
// (std::system_error) runs on this thread after the last: no exception
// leaves the store, and the work gets done either way.
void RunConcurrently(std::vector<std::function<void()>> tasks);

// Sorted keys of a bulk load point all over its arenas: every first touch
// is a cache miss. Asking for the one some steps ahead hides most of them.
inline constexpr size_t kPrefetchAhead = 8;
inline void Prefetch(const std::vector<absl::string_view>& keys, size_t i) {
  if (i < keys.size()) __builtin_prefetch(keys[i].data());
}

// The first 8 bytes of `key`, zero-padded, as a number that orders like
// them.
inline uint64_t KeyPrefix(absl::string_view key) {
  uint64_t prefix = 0;
  for (size_t i = 0; i < 8; ++i) {
    prefix = (prefix << 8) | (i < key.size() ? static_cast<unsigned char>(key[i]) : 0u);
  }
  return prefix;
}

// Sorts `items` by key_of(item) with each key's first 8 bytes kept beside
// it: comparisons that end there (random uids, most names) do not touch
// the key itself, whose first touch is a cache miss.
template <typename T, typename KeyOf>
void SortByKey(std::vector<T>* items, KeyOf key_of) {
  std::vector<std::pair<uint64_t, T>> tagged;
  tagged.reserve(items->size());
  for (const T& item : *items) tagged.emplace_back(KeyPrefix(key_of(item)), item);
  std::sort(tagged.begin(), tagged.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return key_of(a.second) < key_of(b.second);
  });
  for (size_t i = 0; i < tagged.size(); ++i) (*items)[i] = tagged[i].second;
}

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_UTIL_PARALLEL_H_
