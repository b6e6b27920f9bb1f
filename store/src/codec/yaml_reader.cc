#include "codec/yaml_reader.h"

#include <yaml.h>

#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "codec/decode_status.h"
#include "codec/document_reader.h"
#include "util/json_text.h"
#include "util/status_macros.h"
#include "util/yaml_scalar.h"

namespace claimstore::internal {
namespace {

constexpr int kMaxDepth = 1000;  // recursion on the stack: 10,000 levels would overflow it
constexpr absl::string_view kExpectedDocument =
    "expected a ResourceClaim object, a List or a watch event; found ";

absl::string_view Text(const yaml_event_t& e) {
  return absl::string_view(reinterpret_cast<const char*>(e.data.scalar.value),
                           e.data.scalar.length);
}

absl::string_view Chars(const char* s) {
  return s == nullptr ? absl::string_view() : absl::string_view(s);
}
absl::string_view Chars(const yaml_char_t* s) { return Chars(reinterpret_cast<const char*>(s)); }

// Whether a plain scalar that starts with `c` may read as a number.
bool MayBeNumber(char c) {
  return absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.';
}

// The decimal form of an integer as Go's strconv.ParseInt(s, 0, 64), else
// ParseUint, reads `plain` (underscores dropped): false when neither does.
bool AppendInteger(absl::string_view plain, std::string* out) {
  const std::optional<GoInt> n = ParseGoInt(plain);
  if (!n.has_value()) return false;
  if (n->negative) {
    if (n->magnitude > uint64_t{1} << 63) return false;
    if (n->magnitude != 0) out->push_back('-');
  }
  absl::StrAppend(out, n->magnitude);
  return true;
}

// A float as Go's encoding/json writes a float64: the shortest form that
// reads back, fixed between 1e-6 and 1e21, else with an exponent.
void AppendFloat(double d, std::string* out) {
  char buf[64];
  const double a = std::fabs(d);
  const auto format = (a == 0 || (a >= 1e-6 && a < 1e21)) ? std::chars_format::fixed
                                                          : std::chars_format::scientific;
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d, format);
  out->append(buf, end);
}

// The byte of `input` at `mark` (line and column from 0, in characters).
size_t ByteAt(absl::string_view input, const yaml_mark_t& mark) {
  size_t at = 0;
  for (size_t line = 0; line < mark.line && at < input.size(); ++line) {
    const size_t nl = input.find('\n', at);
    if (nl == absl::string_view::npos) return input.size();
    at = nl + 1;
  }
  for (size_t col = 0; col < mark.column && at < input.size(); ++col) {
    ++at;
    while (at < input.size() && (static_cast<unsigned char>(input[at]) & 0xC0) == 0x80) ++at;
  }
  return at;
}

// `error` at `mark` of `document` of `input` (`skipped` bytes before it).
absl::Status Located(absl::string_view input, size_t skipped, size_t document,
                     const yaml_mark_t& mark, const absl::Status& error) {
  return absl::Status(
      error.code(),
      absl::StrCat("line ", mark.line + 1, ", column ", mark.column + 1, " (document ", document,
                   ", byte ", ByteAt(input, mark) + skipped, "): ", error.message()));
}

// A document (item -1, its items left out) or a list item, converted.
struct Converted {
  std::string json;
  size_t document = 0;
  int64_t item = -1;
  yaml_mark_t mark{};
};
using ConvertedSink = absl::FunctionRef<absl::Status(Converted)>;

// Decodes what YamlStream converted, in its order, into the caller's sink.
class ConvertedDecoder {
 public:
  ConvertedDecoder(absl::string_view input, size_t skipped,
                   absl::FunctionRef<absl::Status(DecodedClaim)> sink)
      : input_(input), skipped_(skipped), sink_(sink) {}

  absl::Status Decode(const Converted& c) {
    const auto sink = [&](DecodedClaim claim) {
      claim.document = c.document;
      claim.ordinal = ordinal_++;
      return sink_(std::move(claim));
    };
    const DecodeStatus s =
        c.item < 0
            ? DecodeDocuments(c.json.data(), c.json.size(), /*nested=*/false, sink)
            : DecodeListItem(c.json, c.document, /*offset=*/0, /*item_offset=*/0, c.item, sink);
    if (s.ok()) return absl::OkStatus();
    return Located(input_, skipped_, c.document, c.mark, s.error());
  }

 private:
  const absl::string_view input_;
  const size_t skipped_;
  absl::FunctionRef<absl::Status(DecodedClaim)> sink_;
  uint64_t ordinal_ = 0;
};

class YamlStream {
 public:
  YamlStream(absl::string_view input, size_t skipped, ConvertedSink emit)
      : input_(input), skipped_(skipped), emit_(emit) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(input.data()),
                                 input.size());
    yaml_parser_set_encoding(&parser_, YAML_UTF8_ENCODING);
  }
  ~YamlStream() { yaml_parser_delete(&parser_); }
  YamlStream(const YamlStream&) = delete;
  YamlStream& operator=(const YamlStream&) = delete;

  absl::Status Decode();
  // The stream's one document as JSON.
  absl::Status ToJson(std::string* out);

 private:
  // One parser event, freed with it.
  struct Event {
    yaml_event_t e{};
    bool parsed = false;
    ~Event() {
      if (parsed) yaml_event_delete(&e);
    }
  };

  absl::Status Parse(Event* event);
  absl::Status DecodeDocument(const yaml_event_t& root);
  // The root mapping, its `items` (a sequence) decoded one at a time.
  absl::Status DecodeMapping(const yaml_event_t& root);
  absl::Status DecodeItems();
  // A node (the rest of it, from its first event) as JSON.
  absl::Status Node(const yaml_event_t& first, std::string* out, int depth);
  absl::Status Sequence(std::string* out, int depth);
  // A mapping; `items_apart` (a document's root): an `items` sequence goes
  // to emit_ item by item (DecodeItems), `[]` in its place.
  absl::Status Mapping(std::string* out, int depth, bool items_apart = false);
  absl::Status Scalar(const yaml_event_t& e, std::string* out);
  absl::Status Key(const yaml_event_t& e, std::string* out);
  // An error at `mark` of this document.
  absl::Status At(const yaml_mark_t& mark, absl::string_view message) const {
    return Located(input_, skipped_, document_, mark, absl::InvalidArgumentError(message));
  }

  yaml_parser_t parser_;
  const absl::string_view input_;
  const size_t skipped_;
  ConvertedSink emit_;
  std::map<std::string, std::string, std::less<>> anchors_;
  size_t document_ = 0;
};

absl::Status YamlStream::Parse(Event* event) {
  if (yaml_parser_parse(&parser_, &event->e)) {
    event->parsed = true;
    return absl::OkStatus();
  }
  std::string problem = absl::StrCat("malformed YAML: ", Chars(parser_.problem));
  if (parser_.context != nullptr) absl::StrAppend(&problem, " ", Chars(parser_.context));
  return At(parser_.problem_mark, problem);
}

absl::Status YamlStream::Decode() {
  Event start;
  CS_RETURN_IF_ERROR(Parse(&start));  // the stream's start
  bool any = false;
  for (;;) {
    Event doc;
    CS_RETURN_IF_ERROR(Parse(&doc));
    if (doc.e.type == YAML_STREAM_END_EVENT) break;
    Event root;
    CS_RETURN_IF_ERROR(Parse(&root));
    // An empty document (a `---` with nothing after it) is skipped, as
    // Kubernetes' YAML reader does.
    const bool empty = root.e.type == YAML_SCALAR_EVENT && root.e.data.scalar.length == 0 &&
                       root.e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                       root.e.data.scalar.tag == nullptr;
    if (!empty) {
      any = true;
      CS_RETURN_IF_ERROR(DecodeDocument(root.e));
    }
    Event end;
    CS_RETURN_IF_ERROR(Parse(&end));
    anchors_.clear();
    if (!empty) ++document_;
  }
  if (!any) return absl::InvalidArgumentError("no YAML document in the input");
  return absl::OkStatus();
}

absl::Status YamlStream::ToJson(std::string* out) {
  Event start, doc;
  CS_RETURN_IF_ERROR(Parse(&start));
  CS_RETURN_IF_ERROR(Parse(&doc));
  if (doc.e.type == YAML_STREAM_END_EVENT) {
    return absl::InvalidArgumentError("no YAML document in the input");
  }
  Event root, end, next;
  CS_RETURN_IF_ERROR(Parse(&root));
  CS_RETURN_IF_ERROR(Node(root.e, out, 0));
  CS_RETURN_IF_ERROR(Parse(&end));
  CS_RETURN_IF_ERROR(Parse(&next));
  if (next.e.type != YAML_STREAM_END_EVENT) {
    return At(next.e.start_mark, "more than one YAML document");
  }
  return absl::OkStatus();
}

absl::Status YamlStream::DecodeDocument(const yaml_event_t& root) {
  switch (root.type) {
    case YAML_MAPPING_START_EVENT:
      return DecodeMapping(root);
    case YAML_SEQUENCE_START_EVENT:
      return At(root.start_mark, absl::StrCat(kExpectedDocument, "a YAML sequence"));
    case YAML_SCALAR_EVENT:
      return At(root.start_mark, absl::StrCat(kExpectedDocument, "a YAML scalar (\"",
                                              absl::CEscape(Text(root).substr(0, 40)), "\")"));
    default:
      return At(root.start_mark, absl::StrCat(kExpectedDocument, "an alias"));
  }
}

absl::Status YamlStream::DecodeMapping(const yaml_event_t& root) {
  Converted document{std::string(), document_, -1, root.start_mark};
  CS_RETURN_IF_ERROR(Mapping(&document.json, 0, /*items_apart=*/true));
  return emit_(std::move(document));
}

absl::Status YamlStream::DecodeItems() {
  for (int64_t index = 0;; ++index) {
    Event first;
    CS_RETURN_IF_ERROR(Parse(&first));
    if (first.e.type == YAML_SEQUENCE_END_EVENT) return absl::OkStatus();
    Converted item{std::string(), document_, index, first.e.start_mark};
    CS_RETURN_IF_ERROR(Node(first.e, &item.json, 2));
    CS_RETURN_IF_ERROR(emit_(std::move(item)));
  }
}

absl::Status YamlStream::Node(const yaml_event_t& first, std::string* out, int depth) {
  if (depth > kMaxDepth) return At(first.start_mark, "values nested too deeply");
  const size_t start = out->size();
  const yaml_char_t* anchor = nullptr;
  switch (first.type) {
    case YAML_SCALAR_EVENT:
      anchor = first.data.scalar.anchor;
      CS_RETURN_IF_ERROR(Scalar(first, out));
      break;
    case YAML_SEQUENCE_START_EVENT:
      anchor = first.data.sequence_start.anchor;
      CS_RETURN_IF_ERROR(Sequence(out, depth));
      break;
    case YAML_MAPPING_START_EVENT:
      anchor = first.data.mapping_start.anchor;
      CS_RETURN_IF_ERROR(Mapping(out, depth));
      break;
    case YAML_ALIAS_EVENT: {
      auto it = anchors_.find(Chars(first.data.alias.anchor));
      if (it == anchors_.end()) {
        return At(first.start_mark, absl::StrCat("an alias to an unknown anchor \"",
                                                 Chars(first.data.alias.anchor), "\""));
      }
      out->append(it->second);
      return absl::OkStatus();
    }
    default:
      return At(first.start_mark, "malformed YAML: an unexpected event");
  }
  if (anchor != nullptr) anchors_[std::string(Chars(anchor))] = out->substr(start);
  return absl::OkStatus();
}

absl::Status YamlStream::Sequence(std::string* out, int depth) {
  out->push_back('[');
  for (bool first = true;; first = false) {
    Event e;
    CS_RETURN_IF_ERROR(Parse(&e));
    if (e.e.type == YAML_SEQUENCE_END_EVENT) break;
    if (!first) out->push_back(',');
    CS_RETURN_IF_ERROR(Node(e.e, out, depth + 1));
  }
  out->push_back(']');
  return absl::OkStatus();
}

absl::Status YamlStream::Mapping(std::string* out, int depth, bool items_apart) {
  out->push_back('{');
  for (bool first = true;; first = false) {
    Event key;
    CS_RETURN_IF_ERROR(Parse(&key));
    if (key.e.type == YAML_MAPPING_END_EVENT) break;
    if (!first) out->push_back(',');
    const size_t key_start = out->size();
    CS_RETURN_IF_ERROR(Key(key.e, out));
    const bool items = items_apart && absl::string_view(*out).substr(key_start) == "\"items\"";
    out->push_back(':');
    Event value;
    CS_RETURN_IF_ERROR(Parse(&value));
    if (items && value.e.type == YAML_SEQUENCE_START_EVENT &&
        value.e.data.sequence_start.anchor == nullptr) {
      out->append("[]");  // the items go one at a time
      CS_RETURN_IF_ERROR(DecodeItems());
    } else {
      CS_RETURN_IF_ERROR(Node(value.e, out, depth + 1));
    }
  }
  out->push_back('}');
  return absl::OkStatus();
}

absl::Status YamlStream::Key(const yaml_event_t& e, std::string* out) {
  if (e.type == YAML_ALIAS_EVENT) {
    return At(e.start_mark, "an alias as a mapping key is not supported");
  }
  if (e.type != YAML_SCALAR_EVENT) {
    return At(e.start_mark, "a mapping key must be a scalar (JSON keys are strings)");
  }
  const absl::string_view v = Text(e);
  if (e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && v == "<<") {
    return At(e.start_mark, "merge keys (<<) are not supported");
  }
  // A key is a string: a plain one that reads as a null, a boolean or a
  // number in the form that value is written. (Most keys are words.)
  const bool plain = e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && e.data.scalar.tag == nullptr;
  if (plain && (IsYamlNull(v) || YamlBool(v).has_value() || MayBeNumber(v[0]))) {
    std::string resolved;
    if (Scalar(e, &resolved).ok() && !resolved.empty() && resolved[0] != '"') {
      AppendGoJsonString(resolved, out);
      return absl::OkStatus();
    }
  }
  AppendGoJsonString(v, out);
  return absl::OkStatus();
}

absl::Status YamlStream::Scalar(const yaml_event_t& e, std::string* out) {
  const absl::string_view v = Text(e);
  const absl::string_view tag = Chars(e.data.scalar.tag);
  const bool plain = e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
  if (!tag.empty() && tag != "!") {
    if (tag == "tag:yaml.org,2002:str") {
      AppendGoJsonString(v, out);
      return absl::OkStatus();
    }
    if (tag != "tag:yaml.org,2002:int" && tag != "tag:yaml.org,2002:float" &&
        tag != "tag:yaml.org,2002:bool" && tag != "tag:yaml.org,2002:null") {
      std::string shown(tag);
      absl::StrReplaceAll({{"tag:yaml.org,2002:", "!!"}}, &shown);
      return At(e.start_mark, absl::StrCat("the YAML tag ", shown, " is not supported"));
    }
  } else if (!plain || tag == "!") {
    AppendGoJsonString(v, out);
    return absl::OkStatus();
  }
  if (IsYamlNull(v)) {
    out->append("null");
    return absl::OkStatus();
  }
  if (std::optional<bool> b = YamlBool(v); b.has_value()) {
    out->append(*b ? "true" : "false");
    return absl::OkStatus();
  }
  if (MayBeNumber(v[0])) {
    const std::string plain_number = absl::StrReplaceAll(v, {{"_", ""}});
    if (AppendInteger(plain_number, out)) return absl::OkStatus();
    double d = 0;
    if (IsYamlStyleFloat(plain_number) && absl::SimpleAtod(plain_number, &d) && std::isfinite(d)) {
      AppendFloat(d, out);
      return absl::OkStatus();
    }
    absl::string_view special = v;
    if (!absl::ConsumePrefix(&special, "-")) absl::ConsumePrefix(&special, "+");
    for (absl::string_view s : {".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"}) {
      if (special == s) {
        return At(e.start_mark, absl::StrCat("the number ", v, " has no JSON form"));
      }
    }
  }
  if (!tag.empty()) {
    return At(e.start_mark, absl::StrCat("\"", absl::CEscape(v), "\" is not a ", tag.substr(18)));
  }
  AppendGoJsonString(v, out);
  return absl::OkStatus();
}

}  // namespace

bool LooksLikeYaml(absl::string_view input) {
  const absl::string_view s = absl::StripLeadingAsciiWhitespace(input);
  if (s.empty()) return false;
  const char c = s[0];
  if (c == '{' || c == '[' || c == '"' || absl::ascii_isdigit(static_cast<unsigned char>(c))) {
    return false;
  }
  if (c == '-' && s.size() > 1 && absl::ascii_isdigit(static_cast<unsigned char>(s[1]))) {
    return false;
  }
  const absl::string_view word = absl::StripTrailingAsciiWhitespace(s);
  return !(word == "true" || word == "false" || word == "null");
}

absl::StatusOr<std::string> YamlDocumentToJson(absl::string_view yaml) {
  std::string json;
  CS_RETURN_IF_ERROR(YamlStream(yaml, 0, [](Converted) { return absl::OkStatus(); }).ToJson(&json));
  return json;
}

absl::Status DecodeYaml(absl::string_view input, size_t skipped,
                        absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  ConvertedDecoder decoder(input, skipped, sink);
  return YamlStream(input, skipped, [&](Converted c) { return decoder.Decode(c); }).Decode();
}

absl::Status DecodeYamlPipelined(absl::string_view input, size_t skipped,
                                 absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  // Converted documents and items go over in batches (a wake-up per item
  // cost more than the work saved), at most kQueued batches waiting.
  constexpr size_t kBatch = 128, kQueued = 8;
  using Batch = std::vector<Converted>;
  std::mutex mu;
  std::condition_variable changed;
  std::deque<Batch> queue;
  bool done = false, cancelled = false;
  absl::Status converted;  // the converter's end, once done
  std::thread converter([&] {
    Batch batch;
    const auto hand_over = [&]() -> absl::Status {
      std::unique_lock<std::mutex> lock(mu);
      changed.wait(lock, [&] { return queue.size() < kQueued || cancelled; });
      if (cancelled) return absl::CancelledError();
      queue.push_back(std::move(batch));
      batch.clear();
      changed.notify_all();
      return absl::OkStatus();
    };
    absl::Status s = YamlStream(input, skipped, [&](Converted c) -> absl::Status {
                       batch.push_back(std::move(c));
                       return batch.size() < kBatch ? absl::OkStatus() : hand_over();
                     }).Decode();
    if (!batch.empty() && !absl::IsCancelled(s)) {
      const absl::Status handed = hand_over();
      if (s.ok()) s = handed;
    }
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    converted = s;
    changed.notify_all();
  });
  ConvertedDecoder decoder(input, skipped, sink);
  absl::Status result;
  for (bool stop = false; !stop;) {
    Batch batch;
    {
      std::unique_lock<std::mutex> lock(mu);
      changed.wait(lock, [&] { return !queue.empty() || done; });
      if (queue.empty()) {
        result = converted;
        break;
      }
      batch = std::move(queue.front());
      queue.pop_front();
      changed.notify_all();
    }
    for (const Converted& c : batch) {
      result = decoder.Decode(c);
      if (result.ok()) continue;
      std::lock_guard<std::mutex> lock(mu);
      cancelled = true;
      changed.notify_all();
      stop = true;
      break;
    }
  }
  converter.join();
  return result;
}

}  // namespace claimstore::internal
