#include "codec/document_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "codec/claim_reader.h"
#include "util/json_text.h"
#include "util/status_macros.h"

namespace claimstore::internal {
namespace {

// What a top-level document turned out to be, from the members it has.
enum class Shape { kUnknown, kClaim, kList, kEvent };

// A reusable input buffer with the padding simdjson reads past the end.
class PaddedBuffer {
 public:
  simdjson::padded_string_view Fill(const char* data, size_t size) {
    const size_t needed = size + simdjson::SIMDJSON_PADDING;
    if (capacity_ < needed) {
      capacity_ = std::max(needed, 2 * capacity_);
      buffer_.reset(new char[capacity_]);
    }
    std::memcpy(buffer_.get(), data, size);
    std::memset(buffer_.get() + size, 0, simdjson::SIMDJSON_PADDING);
    return simdjson::padded_string_view(buffer_.get(), size, capacity_);
  }
  // Gives back the memory of a very large input.
  void Trim() {
    if (capacity_ > (size_t{16} << 20)) {
      buffer_.reset();
      capacity_ = 0;
    }
  }

 private:
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
};

// Parser state of one decode (the input, or a watch event's object
// decoded after its event): kept per thread so that decoding reuses memory.
struct ParseState {
  od::parser parser;
  PaddedBuffer input;
  flatbuffers::FlatBufferBuilder fbb{4096};
  OffsetPool pool;
};

// The thread's ParseState for the decode at this depth of the stack: a watch
// event's object is decoded while its stream is, and a sink may decode again
// (as a caller may well do), so two live decodes must never share an input
// buffer or a parser. Each depth keeps its state, and so its memory, for the
// next decode at that depth.
class StateLease {
 public:
  StateLease() {
    if (depth_ == states_.size()) states_.push_back(std::make_unique<ParseState>());
    state_ = states_[depth_++].get();
  }
  ~StateLease() { --depth_; }
  StateLease(const StateLease&) = delete;
  StateLease& operator=(const StateLease&) = delete;

  ParseState& operator*() const { return *state_; }

 private:
  static thread_local std::vector<std::unique_ptr<ParseState>> states_;
  static thread_local size_t depth_;
  ParseState* state_;
};
thread_local std::vector<std::unique_ptr<ParseState>> StateLease::states_;
thread_local size_t StateLease::depth_ = 0;

// What a top-level value must be, and what it was instead.
constexpr absl::string_view kExpectedDocument =
    "expected a ResourceClaim object, a List or a watch event; found ";
const char* FoundName(od::json_type type) {
  switch (type) {
    case od::json_type::array:
      return "a JSON array";
    case od::json_type::string:
      return "a JSON string";
    case od::json_type::number:
      return "a JSON number";
    case od::json_type::boolean:
      return "a JSON boolean";
    case od::json_type::null:
      return "null";
    case od::json_type::object:
      break;
  }
  return "a JSON value";
}

// Decodes one top-level JSON value: a claim, a list or a watch event.
class DocumentDecoder {
 public:
  DocumentDecoder(ClaimReader* decoder, size_t document, bool nested,
                  absl::FunctionRef<absl::Status(DecodedClaim)> sink)
      : d_(*decoder), document_(document), nested_(nested), sink_(sink) {}

  absl::Status Decode(od::value& root) {
    static constexpr FieldNames<9> kNames = {"kind",  "apiVersion", "metadata", "spec",    "status",
                                             "items", "type",       "object",   "revision"};
    d_.fbb().Clear();
    bool present = false;
    CS_RETURN_IF_ERROR(d_.ReadObject(
        root, kNames, Unknown::kError, [&](size_t i, od::value& f) { return OnMember(i, f); },
        &present));
    if (!present) return d_.Fail("expected a JSON object, got null");
    return Finish();
  }

 private:
  absl::Status SetShape(Shape shape, absl::string_view member) {
    if (shape_ == Shape::kUnknown) {
      if (nested_ && shape != Shape::kClaim) {
        return d_.Fail(absl::StrCat("unknown field \"", member,
                                    "\": a watch event's object must be a "
                                    "ResourceClaim"));
      }
      shape_ = shape;
      return absl::OkStatus();
    }
    if (shape_ == shape) return absl::OkStatus();
    return d_.Fail(absl::StrCat("unknown field \"", member, "\" in ", ShapeName(shape_)));
  }

  static const char* ShapeName(Shape shape) {
    switch (shape) {
      case Shape::kClaim:
        return "a ResourceClaim";
      case Shape::kList:
        return "a list";
      case Shape::kEvent:
        return "a watch event";
      case Shape::kUnknown:
        break;
    }
    return "an object";
  }

  absl::Status OnMember(size_t i, od::value& f) {
    const absl::string_view name = kMemberNames[i];
    switch (i) {
      case 0:
        return d_.ReadTypeMetaField(f, &claim_.kind);
      case 1:
        return d_.ReadTypeMetaField(f, &claim_.api_version);
      case 2:
        // A claim's or a list's metadata: decoded as a claim's (lenient), and
        // dropped if the document turns out to be a list.
        if (shape_ == Shape::kEvent) return SetShape(Shape::kClaim, name);
        return d_.ReadMetadata(f, &claim_);
      case 3:
      case 4:
        CS_RETURN_IF_ERROR(SetShape(Shape::kClaim, name));
        return d_.ReadClaimField(i, f, &claim_);
      case 5:
        CS_RETURN_IF_ERROR(SetShape(Shape::kList, name));
        return ReadItems(f);
      case 6: {
        CS_RETURN_IF_ERROR(SetShape(Shape::kEvent, name));
        absl::string_view s;
        bool present = false;
        CS_RETURN_IF_ERROR(d_.ReadStringView(f, &s, &present));
        event_type_ = std::string(s);
        return absl::OkStatus();
      }
      case 8: {
        // The store revision `claimstore watch -o json` adds to an event:
        // accepted, and not needed (events apply in input order).
        CS_RETURN_IF_ERROR(SetShape(Shape::kEvent, name));
        CS_ASSIGN_OR_RETURN(od::json_type type, d_.Type(f));
        if (type != od::json_type::number) return d_.TypeFail("a number", type);
        return absl::OkStatus();
      }
      default: {
        CS_RETURN_IF_ERROR(SetShape(Shape::kEvent, name));
        CS_ASSIGN_OR_RETURN(od::json_type type, d_.Type(f));
        if (type != od::json_type::object) {
          return d_.TypeFail("an object", type);
        }
        CS_ASSIGN_OR_RETURN(absl::string_view raw, d_.RawText(f, type));
        event_object_ = std::string(raw);
        return absl::OkStatus();
      }
    }
  }

  absl::Status ReadItems(od::value& f) {
    bool present = false;
    int64_t index = 0;
    return d_.ReadArray(f, &present, [&](od::value& item) -> absl::Status {
      CS_ASSIGN_OR_RETURN(ClaimRecord record, d_.ReadClaim(item));
      return sink_(DecodedClaim{std::move(record), WatchEventType::kNone, document_, index++});
    });
  }

  absl::Status Finish() {
    switch (shape_) {
      case Shape::kUnknown:
        if (!claim_.kind.has_value()) {
          return d_.Fail(
              "not a ResourceClaim, list or watch event: no "
              "metadata, status, items or type");
        }
        [[fallthrough]];
      case Shape::kClaim: {
        CS_ASSIGN_OR_RETURN(ClaimRecord record, d_.FinishClaim(&claim_));
        return sink_(DecodedClaim{std::move(record), WatchEventType::kNone, document_, -1});
      }
      case Shape::kList:
        return CheckListTypeMeta();
      case Shape::kEvent:
        return FinishEvent();
    }
    return absl::OkStatus();
  }

  absl::Status CheckListTypeMeta() {
    const std::string kind = claim_.kind.value_or("");
    const std::string api_version = claim_.api_version.value_or("");
    if (kind == "List" && (api_version == "v1" || api_version.empty())) {
      return absl::OkStatus();
    }
    if (kind == "ResourceClaimList" &&
        (api_version.empty() || IsSupportedApiVersion(api_version))) {
      return absl::OkStatus();
    }
    if (kind.empty() && api_version.empty()) return absl::OkStatus();
    return d_.Fail(absl::StrCat("list kind \"", kind, "\" (apiVersion \"", api_version,
                                "\") is not supported: expected ResourceClaimList "
                                "(resource.k8s.io/v1, v1beta2, v1beta1) or List (v1)"));
  }

  absl::Status FinishEvent() {
    WatchEventType type;
    if (event_type_ == "ADDED") {
      type = WatchEventType::kAdded;
    } else if (event_type_ == "MODIFIED") {
      type = WatchEventType::kModified;
    } else if (event_type_ == "DELETED") {
      type = WatchEventType::kDeleted;
    } else if (event_type_ == "BOOKMARK") {
      return CompactJson(event_object_, nullptr);  // well-formed
    } else if (event_type_ == "ERROR") {
      std::string compact;
      CS_RETURN_IF_ERROR(CompactJson(event_object_, &compact));
      if (compact.size() > 512) compact = absl::StrCat(compact.substr(0, 512), "...");
      return d_.Fail(absl::StrCat("the watch stream carries an ERROR event: ", compact));
    } else {
      return d_.Fail(absl::StrCat("type: unsupported watch event type \"", event_type_,
                                  "\": expected ADDED, MODIFIED, DELETED, BOOKMARK or ERROR"));
    }
    if (event_object_.empty()) return d_.Fail("object: required in a watch event");
    const size_t document = document_;
    d_.path().PushField("object");
    const DecodeStatus s = DecodeDocuments(event_object_.data(), event_object_.size(),
                                           /*nested=*/true, [&](DecodedClaim claim) {
                                             claim.event = type;
                                             claim.document = document;
                                             return sink_(std::move(claim));
                                           });
    d_.path().Pop();
    if (s.ok() || !s.located()) return s.error();
    // A syntax error inside the event's object, located in its text.
    return absl::Status(s.error().code(), absl::StrCat("object: ", s.ToStatus().message()));
  }

  static constexpr FieldNames<9> kMemberNames = {
      "kind", "apiVersion", "metadata", "spec", "status", "items", "type", "object", "revision"};

  ClaimReader& d_;
  size_t document_;
  bool nested_;
  absl::FunctionRef<absl::Status(DecodedClaim)> sink_;
  Shape shape_ = Shape::kUnknown;
  ClaimParts claim_;
  std::string event_type_;
  std::string event_object_;
};

// A parser of the thread's ParseState with room for `size` bytes.
absl::Status Reserve(od::parser& parser, size_t size) {
  if (parser.capacity() < size || parser.max_depth() != kMaxJsonDepth) {
    if (auto e = parser.allocate(std::max<size_t>(size, 4096), kMaxJsonDepth)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate the JSON parser: ", JsonErrorWords(e)));
    }
  }
  return absl::OkStatus();
}

// Invalid UTF-8 in `text`, at the byte that is not valid (simdjson says
// only that the text has some).
DecodeStatus InvalidUtf8(absl::string_view text) {
  const size_t at = FirstInvalidUtf8(text);
  if (at == absl::string_view::npos) {
    return DecodeStatus::Unplaced(absl::InvalidArgumentError("malformed JSON: invalid UTF-8"));
  }
  return DecodeStatus::Unplaced(
      absl::InvalidArgumentError(
          absl::StrCat("malformed JSON: invalid UTF-8 (byte 0x",
                       absl::Hex(static_cast<unsigned char>(text[at]), absl::kZeroPad2),
                       " begins no character)")),
      at);
}

// Decodes one top-level value, an error located at the document.
DecodeStatus DecodeRoot(ClaimReader* decoder, od::document_reference doc, size_t document,
                        size_t offset, bool nested,
                        absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  absl::Status s;
  od::json_type type;
  od::value root;
  if (doc.type().get(type) != simdjson::SUCCESS) {
    s = absl::InvalidArgumentError(absl::StrCat(kExpectedDocument, "text that is not JSON"));
  } else if (type != od::json_type::object || doc.get_value().get(root) != simdjson::SUCCESS) {
    // A top-level value that is no object: what it is instead.
    s = absl::InvalidArgumentError(absl::StrCat(kExpectedDocument, FoundName(type)));
  } else {
    s = DocumentDecoder(decoder, document, nested, sink).Decode(root);
  }
  if (s.ok() || nested) return DecodeStatus::Unlocated(std::move(s));
  return DecodeStatus::At(std::move(s), document, offset);
}

}  // namespace

DecodeStatus DecodeDocuments(const char* data, size_t size, bool nested,
                             absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  if (absl::StripAsciiWhitespace(absl::string_view(data, size)).empty()) {
    return DecodeStatus::Unlocated(absl::InvalidArgumentError("no JSON value in the input"));
  }
  if (size > kMaxJsonDocumentBytes) {
    return DecodeStatus::Unlocated(absl::InvalidArgumentError(
        absl::StrCat("input of ", size, " bytes is larger than the ", kMaxJsonDocumentBytes,
                     "-byte limit of one JSON document; split it, e.g. into JSON lines")));
  }
  StateLease lease;
  ParseState& state = *lease;
  const simdjson::padded_string_view input = state.input.Fill(data, size);
  od::parser& parser = state.parser;
  if (absl::Status s = Reserve(parser, size); !s.ok()) return DecodeStatus::Unlocated(s);
  ClaimReader decoder(&state.fbb, &state.pool);
  if (nested) decoder.path().PushField("object");
  const auto malformed = [](simdjson::error_code e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", JsonErrorWords(e)));
  };
  // A batch simdjson refused: where, when the byte can be told.
  const auto unplaced = [&](simdjson::error_code e) {
    return e == simdjson::UTF8_ERROR ? InvalidUtf8(absl::string_view(data, size))
                                     : DecodeStatus::Unplaced(malformed(e));
  };

  // Most inputs are one JSON value: parse it as a single document.
  {
    od::document doc;
    if (auto e = parser.iterate(input).get(doc)) return unplaced(e);
    DecodeStatus s = DecodeRoot(&decoder, doc, 0, 0, nested, sink);
    if (!s.ok()) return s;
    const char* trailing = nullptr;
    if (doc.current_location().get(trailing) == simdjson::OUT_OF_BOUNDS) {
      state.input.Trim();  // at the end: there was one value
      return DecodeStatus();
    }
  }
  if (nested) {
    return DecodeStatus::Unlocated(
        absl::InvalidArgumentError("object: a watch event's object must be one JSON object"));
  }

  // JSON lines: several values. The first one has been decoded already.
  od::document_stream stream;
  const size_t batch = std::max<size_t>(size, simdjson::dom::MINIMAL_BATCH_SIZE);
  if (auto e = parser.iterate_many(input.data(), size, batch).get(stream)) return unplaced(e);
  size_t document = 0;
  for (auto it = stream.begin(); it != stream.end(); ++it, ++document) {
    if (document == 0) continue;
    const size_t offset = it.current_index();
    od::document_reference doc;
    if (auto e = (*it).get(doc)) return DecodeStatus::At(malformed(e), document, offset);
    DecodeStatus s = DecodeRoot(&decoder, doc, document, offset, nested, sink);
    if (!s.ok()) return s;
  }
  if (stream.truncated_bytes() > 0) {
    return DecodeStatus::At(
        absl::InvalidArgumentError(
            "malformed JSON: an incomplete JSON value at the end (truncated input?)"),
        document, size - stream.truncated_bytes());
  }
  state.input.Trim();
  return DecodeStatus();
}

DecodeStatus DecodeListItem(absl::string_view item, size_t document, size_t offset,
                            size_t item_offset, int64_t index,
                            absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  StateLease lease;
  ParseState& state = *lease;
  const simdjson::padded_string_view input = state.input.Fill(item.data(), item.size());
  od::parser& parser = state.parser;
  if (absl::Status s = Reserve(parser, item.size()); !s.ok()) return DecodeStatus::Unlocated(s);
  ClaimReader decoder(&state.fbb, &state.pool);
  decoder.path().PushField("items");
  decoder.path().PushIndex(static_cast<size_t>(index));
  const auto at_item = [&](absl::Status s) {
    return DecodeStatus::At(std::move(s), document, offset);
  };
  od::document doc;
  od::value root;
  if (auto e = parser.iterate(input).get(doc)) {
    if (e == simdjson::UTF8_ERROR) {
      const DecodeStatus bad = InvalidUtf8(item);
      return DecodeStatus::At(
          absl::Status(bad.error().code(),
                       absl::StrCat(decoder.path().ToString(), ": ", bad.error().message())),
          document, item_offset + bad.offset());
    }
    return at_item(decoder.JsonFail(e));
  }
  if (doc.get_value().get(root) != simdjson::SUCCESS) {
    // A scalar item: say what it is, as the whole-document path does.
    od::json_type type;
    if (auto e = doc.type().get(type)) return at_item(decoder.JsonFail(e));
    return at_item(type == od::json_type::null
                       ? decoder.Fail("expected a ResourceClaim object, got null")
                       : decoder.TypeFail("an object", type));
  }
  absl::StatusOr<ClaimRecord> record = decoder.ReadClaim(root);
  if (!record.ok()) return at_item(record.status());
  return DecodeStatus::Unlocated(
      sink(DecodedClaim{*std::move(record), WatchEventType::kNone, document, index}));
}

absl::Status DecodeStatus::ToStatus() const {
  if (ok() || !located_) return error_;
  return absl::Status(error_.code(), absl::StrCat("document ", document_, " (byte ", offset_,
                                                  "): ", error_.message()));
}

absl::Status DecodeStatus::ToStatus(absl::string_view input, size_t skipped) const {
  if (ok() || !located_ || offset_ > input.size()) return ToStatus();
  const absl::string_view before = input.substr(0, offset_);
  const size_t line_start = before.rfind('\n') + 1;  // npos + 1 == 0
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  size_t column = 1;
  for (char c : before.substr(line_start)) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++column;  // not a continuation byte
  }
  return absl::Status(error_.code(),
                      absl::StrCat("line ", line, ", column ", column, " (document ", document_,
                                   ", byte ", offset_ + skipped, "): ", error_.message()));
}

}  // namespace claimstore::internal
