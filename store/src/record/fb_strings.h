// The one view of a FlatBuffers string as absl::string_view.
#ifndef CLAIMSTORE_SRC_RECORD_FB_STRINGS_H_
#define CLAIMSTORE_SRC_RECORD_FB_STRINGS_H_

#include "absl/strings/string_view.h"
#include "flatbuffers/flatbuffers.h"

namespace claimstore::internal {

// `s` as a view; an absent string (null) is the empty view. Callers that
// must tell absent from empty test the pointer first.
inline absl::string_view View(const flatbuffers::String* s) {
  return s == nullptr ? absl::string_view() : absl::string_view(s->data(), s->size());
}

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_RECORD_FB_STRINGS_H_
