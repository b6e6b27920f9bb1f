// The document shapes of the decoder's input: a top-level JSON value is a
// ResourceClaim, a list (ResourceClaimList or kubectl's List, whose items
// are claims), or a watch event (whose object is a claim); an input is one
// value or several (JSON lines). Each claim is read by ClaimReader and
// handed to the sink with where it stood (document, item, event type).
//
// Parser state (simdjson's parser, the padded input, the FlatBufferBuilder)
// is kept per thread and per depth of nested decodes, so that decoding
// reuses memory and a sink may itself decode.
//
// Thread-safety: any number of threads at once.
#ifndef CLAIMSTORE_SRC_CODEC_DOCUMENT_READER_H_
#define CLAIMSTORE_SRC_CODEC_DOCUMENT_READER_H_

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "claimstore/codec.h"
#include "codec/decode_status.h"

namespace claimstore::internal {

using ClaimSink = absl::FunctionRef<absl::Status(DecodedClaim)>;

// Decodes every claim of the input data[0, size) whole (simdjson indexes it
// at once): one JSON value, or several. `nested`: the input is a watch
// event's object (errors are then not located; the caller's event is).
// A sink's error is returned located at its document.
DecodeStatus DecodeDocuments(const char* data, size_t size, bool nested, ClaimSink sink);

// Decodes `item`, items[index] of the list that is `document` of the
// input, which starts at byte `offset` (the item at `item_offset`). Errors
// of the item are located at the document (invalid UTF-8 at its byte); the
// sink's are returned as they are.
DecodeStatus DecodeListItem(absl::string_view item, size_t document, size_t offset,
                            size_t item_offset, int64_t index, ClaimSink sink);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_CODEC_DOCUMENT_READER_H_
