// The piecewise reader: inputs over kStreamingThreshold decoded a piece at
// a time. simdjson indexes a whole document at once, so a 2 GB list would
// need several GB of parser memory. Large inputs are instead cut, with a
// light scanner that only follows strings and brackets, into their
// top-level values and, for lists, the elements of `items`; each piece is
// then decoded (and checked) on its own, so memory is bounded by the
// largest claim. The whole-input reader uses it too, to locate a syntax
// error that simdjson found somewhere in a batch.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "codec/codec_internal.h"
#include "codec/decode_status.h"
#include "codec/document_reader.h"
#include "util/mutex.h"
#include "util/parallel.h"

namespace claimstore::internal {
namespace {

size_t SkipSpace(absl::string_view text, size_t pos) {
  while (pos < text.size() &&
         (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\r' || text[pos] == '\t')) {
    ++pos;
  }
  return pos;
}

// The end of the string starting at text[pos] ('"'), or npos. memchr finds
// each candidate quote (most bytes of a claim are inside strings); a quote
// preceded by an odd number of backslashes is escaped.
size_t StringEnd(absl::string_view text, size_t pos) {
  size_t from = pos + 1;
  while (from < text.size()) {
    const void* found = std::memchr(text.data() + from, '"', text.size() - from);
    if (found == nullptr) return absl::string_view::npos;
    const size_t quote = static_cast<size_t>(static_cast<const char*>(found) - text.data());
    size_t backslashes = 0;
    while (quote - backslashes > pos + 1 && text[quote - backslashes - 1] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return quote + 1;
    from = quote + 1;
  }
  return absl::string_view::npos;
}

// Scanning an object or array for its end: the strings, brackets and
// escapes between text[begin] and text[end], a byte at a time, from the
// state the bytes before left.
struct ScanState {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;  // the byte after a backslash, inside a string
};

size_t ScanBytes(const char* p, size_t begin, size_t end, ScanState* st) {
  for (size_t j = begin; j < end; ++j) {
    const char c = p[j];
    if (st->in_string) {
      if (st->escaped) {
        st->escaped = false;
      } else if (c == '\\') {
        st->escaped = true;
      } else if (c == '"') {
        st->in_string = false;
      }
    } else if (c == '"') {
      st->in_string = true;
    } else if (c == '{' || c == '[') {
      ++st->depth;
    } else if ((c == '}' || c == ']') && --st->depth == 0) {
      return j + 1;
    }
  }
  return absl::string_view::npos;
}

#if defined(__SSE2__)
// The bytes equal to `c` in the 64 at p, as bits (SSE2: part of every
// x86-64).
uint64_t Mask64(const __m128i (&v)[4], char c) {
  const __m128i want = _mm_set1_epi8(c);
  uint64_t m = 0;
  for (int k = 0; k < 4; ++k) {
    m |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v[k], want))))
         << (16 * k);
  }
  return m;
}

// Bit i set when an odd number of bits up to i are: for quote bits, the
// bytes from an opening quote to before its closing one.
uint64_t PrefixXor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

// The bits set in x, inline (without -mpopcnt, __builtin_popcountll is a
// call into libgcc: 1.3% of a restore's CPU).
size_t PopCount(uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555u;
  x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Fu;
  return static_cast<size_t>((x * 0x0101010101010101u) >> 56);
}
#endif

// The end of the JSON value starting at text[pos], or npos when it is cut
// off. Only brackets and strings are followed: the grammar inside is checked
// later, when the piece is decoded. Objects and arrays are scanned 64 bytes
// at a time with bit masks where the bytes hold no backslash (at a million
// claims the cutter runs beside two decoders and was a tenth of a restore's
// CPU a byte at a time): the strings' extent by a prefix XOR of the quotes,
// then the brackets outside them; a block with a backslash (rare in claims)
// goes a byte at a time.
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
  const char* const p = text.data();
  const size_t n = text.size();
  ScanState st;
  size_t i = pos;
#if defined(__SSE2__)
  for (; i + 64 <= n; i += 64) {
    __m128i v[4];
    for (int k = 0; k < 4; ++k)
      v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 16 * k));
    if (st.escaped || Mask64(v, '\\') != 0) {
      if (const size_t end = ScanBytes(p, i, i + 64, &st); end != absl::string_view::npos) {
        return end;
      }
      continue;
    }
    const uint64_t inside = PrefixXor(Mask64(v, '"')) ^ (st.in_string ? ~uint64_t{0} : 0);
    st.in_string = (inside >> 63) != 0;
    const uint64_t open = (Mask64(v, '{') | Mask64(v, '[')) & ~inside;
    const uint64_t close = (Mask64(v, '}') | Mask64(v, ']')) & ~inside;
    const size_t closes = PopCount(close);
    if (closes < st.depth) {  // the value cannot end in this block
      st.depth += PopCount(open) - closes;
      continue;
    }
    for (uint64_t m = open | close; m != 0; m &= m - 1) {
      const int b = __builtin_ctzll(m);
      if ((open >> b) & 1) {
        ++st.depth;
      } else if (--st.depth == 0) {
        return i + static_cast<size_t>(b) + 1;
      }
    }
  }
#endif
  return ScanBytes(p, i, n, &st);
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

// One piece of a large input: a whole top-level document, or one element
// of a list document's items.
struct Piece {
  size_t document = 0;
  int64_t item = -1;      // the index in items; -1 for a whole document
  size_t doc_offset = 0;  // where the document starts
  size_t offset = 0;      // where the piece starts
  absl::string_view text;
};

// Decodes one piece; its claims are numbered `ordinal`.
DecodeStatus DecodePiece(const Piece& p, uint64_t ordinal, ClaimSink sink) {
  const auto numbered = [&](DecodedClaim c) {
    c.document = p.document;
    c.ordinal = ordinal;
    c.offset = p.offset;
    return sink(std::move(c));
  };
  if (p.item >= 0) {
    return DecodeListItem(p.text, p.document, p.doc_offset, p.offset, p.item, numbered);
  }
  const DecodeStatus one =
      DecodeDocuments(p.text.data(), p.text.size(), /*nested=*/false, numbered);
  if (one.ok()) return one;
  // Located in this input: the piece's document, at its start (or the
  // invalid byte the piece's reader found).
  return DecodeStatus::At(one.error(), p.document, p.offset + (one.unplaced() ? one.offset() : 0));
}

using PieceFn = absl::FunctionRef<DecodeStatus(const Piece&)>;

// A list document: its envelope (kind, apiVersion, metadata) checked
// without the items, then each item cut out as a piece. `text` is the
// document, at `pos`.
DecodeStatus CutList(absl::string_view text, size_t document, size_t pos, size_t items_begin,
                     size_t items_end, PieceFn piece) {
  const std::string envelope =
      absl::StrCat(text.substr(0, items_begin), "[]", text.substr(items_end));
  const DecodeStatus checked = DecodeDocuments(envelope.data(), envelope.size(), /*nested=*/false,
                                               [](DecodedClaim) { return absl::OkStatus(); });
  // Reported with this document's number and offset (an invalid byte's
  // own, but for the items that were cut out).
  if (!checked.ok()) {
    const size_t at = checked.offset() < items_begin
                          ? checked.offset()
                          : checked.offset() - 2 + (items_end - items_begin);
    return DecodeStatus::At(checked.error(), document, pos + (checked.unplaced() ? at : 0));
  }
  const absl::string_view items = text.substr(items_begin, items_end - items_begin);
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
    DecodeStatus s =
        piece(Piece{document, index, pos, pos + items_begin + i, items.substr(i, item_end - i)});
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

// Cuts `text` into pieces, in input order, checking the structure between
// them: calls `piece` for each; returns the first error, of the structure
// or of `piece`.
DecodeStatus CutPieces(absl::string_view text, PieceFn piece) {
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
          absl::InvalidArgumentError(
              absl::StrCat("malformed JSON: unexpected character 0x",
                           absl::Hex(static_cast<unsigned char>(text[pos]), absl::kZeroPad2))),
          document, pos);
    }
    const absl::string_view value = text.substr(pos, end - pos);
    size_t items_begin = 0, items_end = 0;
    DecodeStatus s;
    if (value.front() == '{' && FindItems(value, &items_begin, &items_end)) {
      s = CutList(value, document, pos, items_begin, items_end, piece);
    } else {
      s = piece(Piece{document, -1, pos, pos, value});
    }
    if (!s.ok()) return s;
    pos = SkipSpace(text, end);
  }
  return DecodeStatus();
}

// The first error of the concurrent decode, in input order: the piece it
// came from (kNoPiece for none) and the error.
class FirstError {
 public:
  static constexpr size_t kNoPiece = ~size_t{0};

  // Keeps `error` of piece `index` if it comes before the one kept.
  void Offer(size_t index, DecodeStatus error) {
    MutexLock lock(&mu_);
    if (index < index_) {
      index_ = index;
      error_ = std::move(error);
    }
    first_.store(index_, std::memory_order_relaxed);
  }
  // Whether piece `index` is past an error already (no need to decode it).
  bool Past(size_t index) const { return index > first_.load(std::memory_order_relaxed); }
  DecodeStatus Take() {
    MutexLock lock(&mu_);
    return std::move(error_);
  }

 private:
  Mutex mu_;
  size_t index_ ABSL_GUARDED_BY(mu_) = kNoPiece;
  DecodeStatus error_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> first_{kNoPiece};
};

}  // namespace

DecodeStatus DecodePiecewise(absl::string_view text, ClaimSink sink) {
  uint64_t ordinal = 0;
  return CutPieces(text, [&](const Piece& p) { return DecodePiece(p, ordinal++, sink); });
}

DecodeStatus DecodeConcurrently(absl::string_view text, int threads, ClaimSink sink) {
  // One thread cuts (a light scan) while the others decode what it has cut,
  // a chunk of pieces at a time; a structural error stands after the pieces
  // cut before it.
  constexpr size_t kChunk = 256;
  Mutex mu;
  CondVar cut_more;
  std::deque<Piece> pieces;  // guarded by mu (a deque: appending moves nothing)
  bool cut_done = false;     // guarded by mu
  size_t next = 0;           // the next piece to hand out; guarded by mu
  FirstError first;
  // The next chunk of cut pieces, copied into *chunk, the first numbered
  // *begin; false when none will come.
  const auto take = [&](size_t* begin, std::vector<Piece>* chunk) {
    MutexLock lock(&mu);
    while (!cut_done && pieces.size() < next + kChunk) cut_more.Wait(&mu);
    if (next >= pieces.size()) return false;
    *begin = next;
    const size_t end = std::min(next + kChunk, pieces.size());
    chunk->assign(pieces.begin() + next, pieces.begin() + end);
    next = end;
    return true;
  };
  const auto decode = [&] {
    size_t begin = 0;
    std::vector<Piece> chunk;
    while (take(&begin, &chunk)) {
      for (size_t k = 0; k < chunk.size(); ++k) {
        if (first.Past(begin + k)) return;
        DecodeStatus s = DecodePiece(chunk[k], begin + k, sink);
        if (!s.ok()) {
          first.Offer(begin + k, std::move(s));
          return;
        }
      }
    }
  };
  const auto cut = [&] {
    size_t cut_count = 0;
    const DecodeStatus s = CutPieces(text, [&](const Piece& p) {
      if (first.Past(cut_count)) return DecodeStatus::Unlocated(absl::CancelledError("stopped"));
      MutexLock lock(&mu);
      pieces.push_back(p);
      if (++cut_count % kChunk == 0) cut_more.NotifyAll();
      return DecodeStatus();
    });
    if (!s.ok() && !absl::IsCancelled(s.error())) first.Offer(cut_count, s);
    MutexLock lock(&mu);
    cut_done = true;
    cut_more.NotifyAll();
  };
  // The cutter last: it runs on this thread, so it always runs; a decoder
  // whose thread could not start runs after it, on what it cut.
  std::vector<std::function<void()>> tasks(std::max(threads, 1), decode);
  tasks.push_back(cut);
  RunConcurrently(std::move(tasks));
  return first.Take();
}

absl::Status DecodeClaimsStreaming(absl::string_view text, ClaimSink sink) {
  return DecodePiecewise(text, sink).ToStatus(text);
}

}  // namespace claimstore::internal
