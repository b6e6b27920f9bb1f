// The piecewise reader: inputs over kStreamingThreshold decoded a piece at
// a time. simdjson indexes a whole document at once, so a 2 GB list would
// need several GB of parser memory. Large inputs are instead cut, with a
// light scanner that only follows strings and brackets, into their
// top-level values and, for lists, the elements of `items`; each piece is
// then decoded (and checked) on its own, so memory is bounded by the
// largest claim. The whole-input reader uses it too, to locate a syntax
// error that simdjson found somewhere in a batch.

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "codec_internal.h"
#include "decode_status.h"
#include "document_reader.h"

namespace claimstore::internal {
namespace {

size_t SkipSpace(absl::string_view text, size_t pos) {
  while (pos < text.size() &&
         (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\r' || text[pos] == '\t')) {
    ++pos;
  }
  return pos;
}

// The end of the string starting at text[pos] ('"'), or npos.
size_t StringEnd(absl::string_view text, size_t pos) {
  for (size_t i = pos + 1; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      return i + 1;
    }
  }
  return absl::string_view::npos;
}

// The end of the JSON value starting at text[pos], or npos when it is cut
// off. Only brackets and strings are followed: the grammar inside is checked
// later, when the piece is decoded.
size_t ValueEnd(absl::string_view text, size_t pos) {
  if (pos >= text.size()) return absl::string_view::npos;
  const char c = text[pos];
  if (c == '"') return StringEnd(text, pos);
  if (c != '{' && c != '[') {
    size_t i = pos;
    while (i < text.size() && !absl::ascii_isspace(static_cast<unsigned char>(text[i])) &&
           text[i] != ',' && text[i] != ']' && text[i] != '}') {
      ++i;
    }
    return i;
  }
  size_t depth = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    switch (text[i]) {
      case '"':
        i = StringEnd(text, i);
        if (i == absl::string_view::npos) return i;
        --i;
        break;
      case '{':
      case '[':
        ++depth;
        break;
      case '}':
      case ']':
        if (--depth == 0) return i + 1;
        break;
      default:
        break;
    }
  }
  return absl::string_view::npos;
}

// Where the array value of a top-level "items" member of the object `text`
// starts and ends, if it has one.
bool FindItems(absl::string_view text, size_t* begin, size_t* end) {
  size_t i = SkipSpace(text, 1);
  while (i < text.size() && text[i] == '"') {
    const size_t key_end = StringEnd(text, i);
    if (key_end == absl::string_view::npos) return false;
    const absl::string_view key = text.substr(i, key_end - i);
    i = SkipSpace(text, key_end);
    if (i >= text.size() || text[i] != ':') return false;
    i = SkipSpace(text, i + 1);
    const size_t value_end = ValueEnd(text, i);
    if (value_end == absl::string_view::npos) return false;
    if (key == "\"items\"" && text[i] == '[') {
      *begin = i;
      *end = value_end;
      return true;
    }
    i = SkipSpace(text, value_end);
    if (i >= text.size() || text[i] != ',') return false;
    i = SkipSpace(text, i + 1);
  }
  return false;
}

// A list document: its envelope (kind, apiVersion, metadata) without the
// items, then each item on its own. `piece` is the document, at `pos`.
DecodeStatus DecodeList(absl::string_view piece, size_t document, size_t pos, size_t items_begin,
                        size_t items_end, ClaimSink sink) {
  const std::string envelope =
      absl::StrCat(piece.substr(0, items_begin), "[]", piece.substr(items_end));
  const DecodeStatus checked = DecodeDocuments(envelope.data(), envelope.size(), /*nested=*/false,
                                               [](DecodedClaim) { return absl::OkStatus(); });
  // Reported with this document's number and offset (an invalid byte's
  // own, but for the items that were cut out).
  if (!checked.ok()) {
    const size_t at = checked.offset() < items_begin ? checked.offset()
                                                     : checked.offset() - 2 + (items_end - items_begin);
    return DecodeStatus::At(checked.error(), document, pos + (checked.unplaced() ? at : 0));
  }
  const absl::string_view items = piece.substr(items_begin, items_end - items_begin);
  size_t i = SkipSpace(items, 1);
  // A syntax error at items[item], located at items[i].
  const auto malformed_item = [&](int64_t item, absl::string_view what) {
    return DecodeStatus::At(
        absl::InvalidArgumentError(absl::StrCat("malformed JSON: items[", item, "]: ", what)),
        document, pos + items_begin + i);
  };
  for (int64_t index = 0; i < items.size() && items[i] != ']'; ++index) {
    const size_t item_end = ValueEnd(items, i);
    // A stray ',' or control character: no item starts here.
    if (item_end == i) return malformed_item(index, "no value");
    DecodeStatus s = DecodeListItem(items.substr(i, item_end - i), document, pos,
                                    pos + items_begin + i, index, sink);
    if (!s.ok()) return s;
    // Between items: one ',' and then a value; after the last, the ']'.
    i = SkipSpace(items, item_end);
    if (i < items.size() && items[i] == ',') {
      i = SkipSpace(items, i + 1);
      if (i < items.size() && items[i] != ']') continue;
      return malformed_item(index + 1, "no value after ','");
    }
    if (i + 1 != items.size()) return malformed_item(index, "expected ',' or ']' after it");
  }
  return DecodeStatus();
}

}  // namespace

DecodeStatus DecodePiecewise(absl::string_view text, ClaimSink sink) {
  size_t pos = SkipSpace(text, 0);
  if (pos == text.size()) {
    return DecodeStatus::Unlocated(absl::InvalidArgumentError("no JSON value in the input"));
  }
  for (size_t document = 0; pos < text.size(); ++document) {
    const size_t end = ValueEnd(text, pos);
    if (end == absl::string_view::npos) {
      return DecodeStatus::At(
          absl::InvalidArgumentError(
              "malformed JSON: an incomplete JSON value at the end (truncated input?)"),
          document, pos);
    }
    if (end == pos) {  // a stray ',', ']', '}' or control character: no value starts here
      return DecodeStatus::At(
          absl::InvalidArgumentError(absl::StrCat(
              "malformed JSON: unexpected character 0x",
              absl::Hex(static_cast<unsigned char>(text[pos]), absl::kZeroPad2))),
          document, pos);
    }
    const absl::string_view piece = text.substr(pos, end - pos);
    size_t items_begin = 0, items_end = 0;
    DecodeStatus s;
    if (piece.front() == '{' && FindItems(piece, &items_begin, &items_end)) {
      s = DecodeList(piece, document, pos, items_begin, items_end, sink);
    } else {
      const DecodeStatus one =
          DecodeDocuments(piece.data(), piece.size(), /*nested=*/false, [&](DecodedClaim c) {
            c.document = document;
            return sink(std::move(c));
          });
      // Located in this input: the piece's document, at its start (or the
      // invalid byte the piece's reader found).
      if (!one.ok()) s = DecodeStatus::At(one.error(), document, pos + (one.unplaced() ? one.offset() : 0));
    }
    if (!s.ok()) return s;
    pos = SkipSpace(text, end);
  }
  return DecodeStatus();
}

absl::Status DecodeClaimsStreaming(absl::string_view text, ClaimSink sink) {
  return DecodePiecewise(text, sink).ToStatus();
}

}  // namespace claimstore::internal
