#include "yaml.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace claimstore::cli {
namespace {

void AppendYamlValue(absl::string_view json, size_t* pos, int indent, bool in_list_item,
                     std::string* out);

void SkipString(absl::string_view json, size_t* pos) {
  ++*pos;
  while (json[*pos] != '"') *pos += json[*pos] == '\\' ? 2 : 1;
  ++*pos;
}

void AppendYamlValue(absl::string_view json, size_t* pos, int indent, bool in_list_item,
                     std::string* out) {
  const std::string pad(indent, ' ');
  const char c = json[*pos];
  if (c == '{' || c == '[') {
    const bool object = c == '{';
    ++*pos;
    if (json[*pos] == (object ? '}' : ']')) {
      ++*pos;
      *out += object ? " {}\n" : " []\n";
      return;
    }
    if (!in_list_item) *out += "\n";
    bool first = true;
    while (true) {
      if (object) {
        const size_t start = *pos;
        SkipString(json, pos);
        const absl::string_view key = json.substr(start, *pos - start);
        ++*pos;  // ':'
        *out += (first && in_list_item) ? "" : pad;
        absl::StrAppend(out, key.substr(1, key.size() - 2), ":");
        AppendYamlValue(json, pos, indent + 2, false, out);
      } else {
        absl::StrAppend(out, pad, "-");
        const char next = json[*pos];
        if (next == '{' || next == '[') {
          *out += " ";
          AppendYamlValue(json, pos, indent + 2, true, out);
        } else {
          AppendYamlValue(json, pos, indent + 2, false, out);
        }
      }
      first = false;
      if (json[*pos] == ',') {
        ++*pos;
        continue;
      }
      ++*pos;  // closing bracket
      return;
    }
  }
  const size_t start = *pos;
  if (c == '"') {
    SkipString(json, pos);
  } else {
    while (*pos < json.size() && json[*pos] != ',' && json[*pos] != '}' && json[*pos] != ']') ++*pos;
  }
  absl::StrAppend(out, " ", json.substr(start, *pos - start), "\n");
}

}  // namespace

void AppendYaml(const std::string& json, std::string* out) {
  size_t pos = 0;
  std::string body;
  AppendYamlValue(json, &pos, 0, true, &body);
  *out += body;
}

}  // namespace claimstore::cli
