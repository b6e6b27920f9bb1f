#include "util/json_text.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace claimstore::internal {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendUnicodeEscape(uint32_t code, std::string* out) {
  char buf[6] = {'\\',
                 'u',
                 kHex[(code >> 12) & 0xF],
                 kHex[(code >> 8) & 0xF],
                 kHex[(code >> 4) & 0xF],
                 kHex[code & 0xF]};
  out->append(buf, 6);
}

// Length of the valid UTF-8 sequence starting at s[i] (2 to 4), or 0 when the
// bytes there are not one (Go then consumes a single byte as U+FFFD).
size_t ValidUtf8SequenceLength(absl::string_view s, size_t i) {
  const auto byte = [&](size_t k) -> uint8_t {
    return k < s.size() ? static_cast<uint8_t>(s[k]) : 0;
  };
  const uint8_t b0 = byte(i);
  const auto cont = [&](size_t k) { return (byte(k) & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const uint8_t b1 = byte(i + 1);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b0 == 0xED && b1 > 0x9F) return 0;  // surrogate
    return cont(i + 1) && cont(i + 2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const uint8_t b1 = byte(i + 1);
    if (b0 == 0xF0 && b1 < 0x90) return 0;  // overlong
    if (b0 == 0xF4 && b1 > 0x8F) return 0;  // above U+10FFFF
    return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

size_t FirstInvalidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t length = ValidUtf8SequenceLength(s, i);
    if (length == 0) return i;
    i += length;
  }
  return absl::string_view::npos;
}

namespace {

bool IsLineOrParagraphSeparator(absl::string_view s, size_t i) {
  // U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
  return i + 2 < s.size() && static_cast<uint8_t>(s[i]) == 0xE2 &&
         static_cast<uint8_t>(s[i + 1]) == 0x80 && (static_cast<uint8_t>(s[i + 2]) & 0xFE) == 0xA8;
}

// Bytes that need a look inside a JSON string: the quote, the backslash,
// control characters, the HTML characters Go escapes, and the lead bytes of
// multi-byte UTF-8 (for validation and U+2028/U+2029). Every other byte is
// copied as is, so strings are scanned a table lookup per byte.
struct SpecialBytes {
  bool table[256] = {};
  constexpr SpecialBytes() {
    for (int c = 0; c < 0x20; ++c) table[c] = true;
    for (int c = 0x80; c < 0x100; ++c) table[c] = true;
    table[static_cast<int>('"')] = table[static_cast<int>('\\')] = true;
    table[static_cast<int>('<')] = table[static_cast<int>('>')] = true;
    table[static_cast<int>('&')] = true;
  }
};
constexpr SpecialBytes kSpecial;

bool IsSpecial(char c) { return kSpecial.table[static_cast<uint8_t>(c)]; }

}  // namespace

void AppendGoJsonString(absl::string_view s, std::string* out) {
  out->push_back('"');
  size_t run_start = 0;
  size_t i = 0;
  const auto flush = [&](size_t end) { out->append(s.data() + run_start, end - run_start); };
  while (i < s.size()) {
    while (i < s.size() && !IsSpecial(s[i])) ++i;
    if (i == s.size()) break;
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      flush(i);
      switch (c) {
        case '"':
          out->append("\\\"");
          break;
        case '\\':
          out->append("\\\\");
          break;
        case '\b':
          out->append("\\b");
          break;
        case '\f':
          out->append("\\f");
          break;
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        default:
          AppendUnicodeEscape(c, out);
          break;
      }
      run_start = ++i;
      continue;
    }
    const size_t len = ValidUtf8SequenceLength(s, i);
    if (len == 0) {
      flush(i);
      out->append("\\ufffd");
      run_start = ++i;
      continue;
    }
    if (len == 3 && IsLineOrParagraphSeparator(s, i)) {
      flush(i);
      AppendUnicodeEscape(static_cast<uint8_t>(s[i + 2]) == 0xA8 ? 0x2028 : 0x2029, out);
      run_start = i += 3;
      continue;
    }
    i += len;
  }
  flush(s.size());
  out->push_back('"');
}

namespace {

// An iterative RFC 8259 checker that optionally writes the compacted value.
class Compactor {
 public:
  Compactor(absl::string_view in, std::string* out, int max_depth, bool utf8_validated)
      : in_(in), out_(out), max_depth_(max_depth), utf8_validated_(utf8_validated) {}

  absl::Status Run() {
    SkipSpace();
    if (!ParseValue()) return Error();
    SkipSpace();
    if (pos_ != in_.size()) {
      error_ = "unexpected content after the JSON value";
      return Error();
    }
    return absl::OkStatus();
  }

 private:
  enum class Container : uint8_t { kObject, kArray };

  absl::Status Error() const {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON at byte ", pos_, ": ", error_));
  }

  bool Fail(const char* message) {
    error_ = message;
    return false;
  }

  void Emit(char c) {
    if (out_ != nullptr) out_->push_back(c);
  }
  void Emit(absl::string_view s) {
    if (out_ != nullptr) out_->append(s.data(), s.size());
  }

  void SkipSpace() {
    while (pos_ < in_.size()) {
      const char c = in_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  bool AtEnd() const { return pos_ >= in_.size(); }
  char Peek() const { return in_[pos_]; }

  // Parses one value, iteratively for containers.
  bool ParseValue() {
    std::vector<Container> stack;
    for (;;) {
      // Expect a value here.
      SkipSpace();
      if (AtEnd()) return Fail("unexpected end of input, expected a value");
      const char c = Peek();
      if (c == '{' || c == '[') {
        if (static_cast<int>(stack.size()) + 1 > max_depth_) {
          return Fail("nesting deeper than 10000 levels");
        }
        Emit(c);
        ++pos_;
        SkipSpace();
        if (AtEnd()) return Fail("unexpected end of input");
        const char close = c == '{' ? '}' : ']';
        if (Peek() == close) {
          Emit(close);
          ++pos_;
        } else {
          stack.push_back(c == '{' ? Container::kObject : Container::kArray);
          if (c == '{' && !ParseKey()) return false;
          continue;
        }
      } else if (!ParseScalar()) {
        return false;
      }
      // After a value: close containers or move to the next member.
      for (;;) {
        if (stack.empty()) return true;
        SkipSpace();
        if (AtEnd()) return Fail("unexpected end of input");
        const char d = Peek();
        const bool in_object = stack.back() == Container::kObject;
        if (d == ',') {
          Emit(',');
          ++pos_;
          if (in_object && !ParseKey()) return false;
          break;  // next value
        }
        if (d == (in_object ? '}' : ']')) {
          Emit(d);
          ++pos_;
          stack.pop_back();
          continue;
        }
        return Fail(in_object ? "expected ',' or '}'" : "expected ',' or ']'");
      }
    }
  }

  // Parses `"key" :` inside an object.
  bool ParseKey() {
    SkipSpace();
    if (AtEnd() || Peek() != '"') return Fail("expected a string key");
    if (!ParseString()) return false;
    SkipSpace();
    if (AtEnd() || Peek() != ':') return Fail("expected ':'");
    Emit(':');
    ++pos_;
    return true;
  }

  bool ParseScalar() {
    const char c = Peek();
    if (c == '"') return ParseString();
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber();
    for (absl::string_view literal : {"true", "false", "null"}) {
      if (in_.substr(pos_, literal.size()) == literal) {
        Emit(literal);
        pos_ += literal.size();
        return true;
      }
    }
    return Fail("invalid character, expected a value");
  }

  bool ParseNumber() {
    const size_t start = pos_;
    const auto digits = [&]() {
      const size_t from = pos_;
      while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_;
      return pos_ - from;
    };
    if (Peek() == '-') ++pos_;
    if (AtEnd()) return Fail("invalid number");
    if (Peek() == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Fail("invalid number");
    }
    if (!AtEnd() && Peek() == '.') {
      ++pos_;
      if (digits() == 0) return Fail("invalid number: no digits after '.'");
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (digits() == 0) return Fail("invalid number: no digits in exponent");
    }
    Emit(in_.substr(start, pos_ - start));
    return true;
  }

  static bool IsHexDigit(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }

  bool ParseString() {
    ++pos_;  // opening quote
    Emit('"');
    size_t run_start = pos_;
    const auto flush = [&]() { Emit(in_.substr(run_start, pos_ - run_start)); };
    for (;;) {
      while (pos_ < in_.size() && !IsSpecial(in_[pos_])) ++pos_;
      if (AtEnd()) return Fail("unterminated string");
      const uint8_t c = static_cast<uint8_t>(Peek());
      if (c == '"') {
        flush();
        Emit('"');
        ++pos_;
        return true;
      }
      if (c < 0x20) return Fail("control character in string");
      if (c == '\\') {
        if (pos_ + 1 >= in_.size()) return Fail("unterminated string");
        const char e = in_[pos_ + 1];
        if (e == 'u') {
          if (pos_ + 6 > in_.size()) return Fail("invalid \\u escape");
          for (size_t k = pos_ + 2; k < pos_ + 6; ++k) {
            if (!IsHexDigit(in_[k])) return Fail("invalid \\u escape");
          }
          pos_ += 6;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                   e == 'r' || e == 't') {
          pos_ += 2;
        } else {
          return Fail("invalid escape in string");
        }
        continue;
      }
      if (c == '<' || c == '>' || c == '&') {
        flush();
        if (out_ != nullptr) AppendUnicodeEscape(c, out_);
        run_start = ++pos_;
        continue;
      }
      if (IsLineOrParagraphSeparator(in_, pos_)) {
        flush();
        if (out_ != nullptr) {
          AppendUnicodeEscape(static_cast<uint8_t>(in_[pos_ + 2]) == 0xA8 ? 0x2028 : 0x2029, out_);
        }
        run_start = pos_ += 3;
        continue;
      }
      if (utf8_validated_) {
        ++pos_;
        continue;
      }
      const size_t len = ValidUtf8SequenceLength(in_, pos_);
      if (len == 0) return Fail("invalid UTF-8 in string");
      pos_ += len;
    }
  }

  absl::string_view in_;
  std::string* out_;
  int max_depth_;
  bool utf8_validated_;
  size_t pos_ = 0;
  const char* error_ = "";
};

void AppendNewlineAndIndent(absl::string_view indent, int depth, std::string* out) {
  out->push_back('\n');
  for (int i = 0; i < depth; ++i) out->append(indent.data(), indent.size());
}

}  // namespace

absl::Status CompactJson(absl::string_view in, std::string* out, int max_depth,
                         bool utf8_validated) {
  return Compactor(in, out, max_depth, utf8_validated).Run();
}

void IndentJson(absl::string_view json, absl::string_view indent, std::string* out) {
  out->reserve(out->size() + json.size() * 2);
  int depth = 0;
  bool need_indent = false;  // an opened container has not had a member yet
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      out->push_back(c);
      if (c == '\\') {
        out->push_back(json[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (need_indent && c != '}' && c != ']') {
      need_indent = false;
      AppendNewlineAndIndent(indent, depth, out);
    }
    switch (c) {
      case '{':
      case '[':
        out->push_back(c);
        need_indent = true;
        ++depth;
        break;
      case ',':
        out->push_back(c);
        AppendNewlineAndIndent(indent, depth, out);
        break;
      case ':':
        out->append(": ");
        break;
      case '}':
      case ']':
        --depth;
        if (need_indent) {
          need_indent = false;  // empty container stays on one line
        } else {
          AppendNewlineAndIndent(indent, depth, out);
        }
        out->push_back(c);
        break;
      case '"':
        in_string = true;
        out->push_back(c);
        break;
      default:
        out->push_back(c);
        break;
    }
  }
}

}  // namespace claimstore::internal
