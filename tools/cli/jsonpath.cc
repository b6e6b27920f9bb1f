#include "jsonpath.h"

#include <cstdint>
#include <memory>
#include <string_view>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
        return absl::InvalidArgumentError(absl::StrCat("jsonpath {", expr, "}: an empty field name"));
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
        return absl::InvalidArgumentError(absl::StrCat("jsonpath {", expr, "}: unexpected ", p.substr(i, 1)));
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
    const absl::string_view expr = absl::StripAsciiWhitespace(templ.substr(open + 1, close - open - 1));
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

// The values `path` reaches from `root` (none where a key is missing).
std::vector<element> Evaluate(element root, const std::vector<Step>& path) {
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
          if (at >= 0 && at < size && array.at(static_cast<size_t>(at)).get(item) == simdjson::SUCCESS) {
            next.push_back(item);
          }
        }
      }
    }
    current = std::move(next);
  }
  return current;
}

void Print(element e, std::string* out) {
  std::string_view s;  // simdjson's
  if (e.get_string().get(s) == simdjson::SUCCESS) {
    out->append(s.data(), s.size());
  } else {
    *out += simdjson::minify(e);
  }
}

void Run(const std::vector<Node>& nodes, element root, std::string* out) {
  for (const Node& n : nodes) {
    if (n.kind == Node::kText) {
      *out += n.text;
    } else if (n.kind == Node::kPath) {
      const std::vector<element> values = Evaluate(root, n.path);
      for (size_t i = 0; i < values.size(); ++i) {
        if (i > 0) *out += ' ';
        Print(values[i], out);
      }
    } else {
      for (element item : Evaluate(root, n.path)) {
        // A range over an array's value itself runs over its elements.
        simdjson::dom::array array;
        if (!n.path.empty() && n.path.back().kind != Step::kAll &&
            item.get_array().get(array) == simdjson::SUCCESS) {
          for (element inner : array) Run(n.body, inner, out);
        } else {
          Run(n.body, item, out);
        }
      }
    }
  }
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
  Run(*nodes, root, &out);
  return out;
}

}  // namespace claimstore::cli
