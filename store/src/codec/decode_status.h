// DecodeStatus: the outcome of decoding (a part of) an input: OK, or an
// error and where in the input it is (the document, i.e. the top-level
// JSON value, and a byte offset). The location travels as data, from the
// reader that knows it up to DecodeClaims, which writes it into the
// message once ("document 2 (byte 4096): status.devices[0]: ..."); nothing
// parses it back out of a message.
#ifndef CLAIMSTORE_SRC_CODEC_DECODE_STATUS_H_
#define CLAIMSTORE_SRC_CODEC_DECODE_STATUS_H_

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace claimstore::internal {

class DecodeStatus {
 public:
  // OK.
  DecodeStatus() = default;
  // An error without a place in the input: of the input as a whole ("no
  // JSON value"), or of a sink.
  static DecodeStatus Unlocated(absl::Status error) { return DecodeStatus(std::move(error)); }
  // An error in `document`, at byte `offset` of the input (the start of the
  // document, or of the bad item or byte when known).
  static DecodeStatus At(absl::Status error, size_t document, size_t offset) {
    DecodeStatus s(std::move(error));
    s.located_ = true;
    s.document_ = document;
    s.offset_ = offset;
    return s;
  }
  // A syntax error that simdjson found while indexing a batch of documents,
  // before any of them was parsed: somewhere in the batch, its document
  // unknown (and its byte, unless given: `offset` from the batch's start).
  // DecodeClaims locates it with the piecewise reader.
  static DecodeStatus Unplaced(absl::Status error, size_t offset = 0) {
    DecodeStatus s = At(std::move(error), 0, offset);
    s.unplaced_ = true;
    return s;
  }

  bool ok() const { return error_.ok(); }
  // The error, its message without the location.
  const absl::Status& error() const { return error_; }
  bool located() const { return located_; }
  bool unplaced() const { return unplaced_; }
  size_t document() const { return document_; }
  size_t offset() const { return offset_; }

  // The error with its location written into the message: "document D
  // (byte B): <message>"; given the input the offsets are of, "line L,
  // column C (document D, byte B): <message>", the column counted in
  // characters, the byte `skipped` later (a byte-order mark before the
  // input).
  absl::Status ToStatus() const;
  absl::Status ToStatus(absl::string_view input, size_t skipped = 0) const;

 private:
  explicit DecodeStatus(absl::Status error) : error_(std::move(error)) {}

  absl::Status error_;
  bool located_ = false;
  bool unplaced_ = false;
  size_t document_ = 0, offset_ = 0;
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_CODEC_DECODE_STATUS_H_
