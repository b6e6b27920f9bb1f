#include "jsonpath.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "simdjson.h"

namespace claimstore::cli {
namespace {

using simdjson::dom::element;

// One step of a path: a key, an index, or every element.
struct Step {
  enum Kind { kKey, kIndex, kAll } kind = kKey;
  std::string key;
  int64_t index = 0;
};

// A parsed template: text, an expression, or a range over a path with its
// body.
struct Node {
  enum Kind { kText, kPath, kRange } kind = kText;
  std::string text;
  std::vector<Step> path;
  std::vector<Node> body;
};

absl::Status Unsupported(absl::string_view expr, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("jsonpath {", expr, "}: ", what, " is not supported (fields, [N], [*], range)"));
}

absl::StatusOr<std::vector<Step>> ParsePath(absl::string_view expr) {
  absl::string_view p = absl::StripAsciiWhitespace(expr);
  if (!p.empty() && (p[0] == '$' || p[0] == '@')) p.remove_prefix(1);
  std::vector<Step> steps;
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == '.') {
      ++i;
      if (i < p.size() && p[i] == '.') return Unsupported(expr, "recursive descent (..)");
      const size_t from = i;
      while (i < p.size() && p[i] != '.' && p[i] != '[') ++i;
      if (i == from) {
        if (i == p.size() && steps.empty()) break;  // {.}: the value itself
        return absl::InvalidArgumentError(
            absl::StrCat("jsonpath {", expr, "}: an empty field name"));
      }
      if (p.substr(from, i - from) == "*") return Unsupported(expr, ".*");
      steps.push_back({Step::kKey, std::string(p.substr(from, i - from)), 0});
    } else if (p[i] == '[') {
      const size_t close = p.find(']', i);
      if (close == absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("jsonpath {", expr, "}: an unclosed ["));
      }
      const absl::string_view inner = absl::StripAsciiWhitespace(p.substr(i + 1, close - i - 1));
      i = close + 1;
      int64_t index = 0;
      if (inner == "*") {
        steps.push_back({Step::kAll, "", 0});
      } else if (inner.size() >= 2 && (inner[0] == '\'' || inner[0] == '"') &&
                 inner.back() == inner[0]) {
        steps.push_back({Step::kKey, std::string(inner.substr(1, inner.size() - 2)), 0});
      } else if (absl::SimpleAtoi(inner, &index)) {
        steps.push_back({Step::kIndex, "", index});
      } else {
        return Unsupported(expr, absl::StrCat("[", inner, "]"));
      }
    } else {
      // kubectl reads a path without its leading dot the same way.
      if (!steps.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("jsonpath {", expr, "}: unexpected ", p.substr(i, 1)));
      }
      const size_t from = i;
      while (i < p.size() && p[i] != '.' && p[i] != '[') ++i;
      steps.push_back({Step::kKey, std::string(p.substr(from, i - from)), 0});
    }
  }
  return steps;
}

std::string Unescape(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char c = s[++i];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Parses templ[*pos...] up to the end or an {end}; *ended says which.
absl::StatusOr<std::vector<Node>> ParseNodes(absl::string_view templ, size_t* pos, bool* ended) {
  std::vector<Node> nodes;
  *ended = false;
  while (*pos < templ.size()) {
    const size_t open = templ.find('{', *pos);
    if (open != *pos) {
      const size_t end = open == absl::string_view::npos ? templ.size() : open;
      nodes.push_back({Node::kText, std::string(templ.substr(*pos, end - *pos)), {}, {}});
      *pos = end;
      continue;
    }
    const size_t close = templ.find('}', open);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("jsonpath: an unclosed { at offset ", open));
    }
    const absl::string_view expr =
        absl::StripAsciiWhitespace(templ.substr(open + 1, close - open - 1));
    *pos = close + 1;
    if (expr == "end") {
      *ended = true;
      return nodes;
    }
    if (expr.size() >= 2 && expr[0] == '"' && expr.back() == '"') {
      nodes.push_back({Node::kText, Unescape(expr.substr(1, expr.size() - 2)), {}, {}});
      continue;
    }
    if (expr.find("?(") != absl::string_view::npos) return Unsupported(expr, "a filter");
    if (expr.find(':') != absl::string_view::npos) return Unsupported(expr, "a slice");
    if (expr.find(',') != absl::string_view::npos) return Unsupported(expr, "a union");
    if (absl::StartsWith(expr, "range ")) {
      Node range{Node::kRange, "", {}, {}};
      absl::StatusOr<std::vector<Step>> path = ParsePath(expr.substr(6));
      if (!path.ok()) return path.status();
      range.path = *std::move(path);
      bool closed = false;
      absl::StatusOr<std::vector<Node>> body = ParseNodes(templ, pos, &closed);
      if (!body.ok()) return body.status();
      if (!closed) return absl::InvalidArgumentError("jsonpath: a {range} without its {end}");
      range.body = *std::move(body);
      nodes.push_back(std::move(range));
      continue;
    }
    absl::StatusOr<std::vector<Step>> path = ParsePath(expr);
    if (!path.ok()) return path.status();
    nodes.push_back({Node::kPath, "", *std::move(path), {}});
  }
  return nodes;
}

// The values `path` reaches from `root`: none where a key is missing (as
// kubectl's default --allow-missing-template-keys); an index past the end
// is an error, as kubectl's.
absl::StatusOr<std::vector<element>> Evaluate(element root, const std::vector<Step>& path) {
  std::vector<element> current = {root};
  for (const Step& step : path) {
    std::vector<element> next;
    for (element e : current) {
      if (step.kind == Step::kKey) {
        element child;
        if (e.is_object() && e.at_key(std::string_view(step.key)).get(child) == simdjson::SUCCESS) {
          next.push_back(child);
        }
      } else if (simdjson::dom::array array; e.get_array().get(array) == simdjson::SUCCESS) {
        if (step.kind == Step::kAll) {
          for (element item : array) next.push_back(item);
        } else {
          const int64_t size = static_cast<int64_t>(array.size());
          const int64_t at = step.index < 0 ? size + step.index : step.index;
          element item;
          if (at < 0 || at >= size ||
              array.at(static_cast<size_t>(at)).get(item) != simdjson::SUCCESS) {
            return absl::InvalidArgumentError(absl::StrCat(
                "jsonpath: array index out of bounds: index ", step.index, ", length ", size));
          }
          next.push_back(item);
        }
      }
    }
    current = std::move(next);
  }
  return current;
}

// A string as Go's encoding/json writes it: <, > and & escaped for HTML,
// U+2028 and U+2029 too, control characters as \uXXXX.
void AppendGoJsonString(std::string_view s, std::string* out) {
  *out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '<':
      case '>':
      case '&':
        absl::StrAppend(out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        break;
      default:
        if (c < 0x20) {
          absl::StrAppend(out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
                   (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
                    static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
          absl::StrAppend(out,
                          static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029");
          i += 2;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

// A value as kubectl prints a non-string result: Go's json.Marshal of the
// decoded object, so map keys sorted (byte order) and Go's escaping.
void AppendGoJson(element e, std::string* out) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      std::vector<std::pair<std::string_view, element>> members;
      for (simdjson::dom::key_value_pair m : simdjson::dom::object(e))
        members.emplace_back(m.key, m.value);
      std::sort(members.begin(), members.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      *out += '{';
      for (size_t i = 0; i < members.size(); ++i) {
        if (i > 0) *out += ',';
        AppendGoJsonString(members[i].first, out);
        *out += ':';
        AppendGoJson(members[i].second, out);
      }
      *out += '}';
      return;
    }
    case simdjson::dom::element_type::ARRAY: {
      *out += '[';
      bool first = true;
      for (element item : simdjson::dom::array(e)) {
        if (!first) *out += ',';
        first = false;
        AppendGoJson(item, out);
      }
      *out += ']';
      return;
    }
    case simdjson::dom::element_type::STRING:
      AppendGoJsonString(std::string_view(e), out);
      return;
    default:
      *out += simdjson::minify(e);  // numbers, booleans and null as written
  }
}

void Print(element e, std::string* out) {
  std::string_view s;  // simdjson's
  if (e.get_string().get(s) == simdjson::SUCCESS) {
    out->append(s.data(), s.size());
  } else {
    AppendGoJson(e, out);
  }
}

absl::Status Run(const std::vector<Node>& nodes, element root, std::string* out) {
  for (const Node& n : nodes) {
    if (n.kind == Node::kText) {
      *out += n.text;
      continue;
    }
    absl::StatusOr<std::vector<element>> values = Evaluate(root, n.path);
    if (!values.ok()) return values.status();
    if (n.kind == Node::kPath) {
      for (size_t i = 0; i < values->size(); ++i) {
        if (i > 0) *out += ' ';
        Print((*values)[i], out);
      }
      continue;
    }
    // A range runs its body once per value: per element with [*]; over an
    // array named without it, once, on the array (as kubectl does).
    for (element item : *values) {
      if (absl::Status s = Run(n.body, item, out); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ApplyJsonPath(const std::string& templ, const std::string& json) {
  size_t pos = 0;
  bool ended = false;
  absl::StatusOr<std::vector<Node>> nodes = ParseNodes(templ, &pos, &ended);
  if (!nodes.ok()) return nodes.status();
  if (ended) return absl::InvalidArgumentError("jsonpath: an {end} without its {range}");
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(json).get(root) != simdjson::SUCCESS) {
    return absl::InternalError("jsonpath: the object is not JSON");
  }
  std::string out;
  if (absl::Status s = Run(*nodes, root, &out); !s.ok()) return s;
  return out;
}

}  // namespace claimstore::cli
