#include "state/allocated_tree.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstring>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"

namespace claimstore {

namespace {

using internal::AllocatedNode;
using internal::DeviceId;

using Slice = internal::KeySlice;
constexpr size_t kSliceBytes = AllocatedNode::kSliceBytes;

// The 8 bytes at `p`, big-endian.
uint64_t BigEndian64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  return v;
}

// Bytes [at, at + kSliceBytes) of `key`, big-endian, zero-padded.
Slice SliceOf(absl::string_view key, size_t at) {
  char bytes[kSliceBytes] = {};
  const char* p = bytes;
  if (at + kSliceBytes <= key.size()) {
    p = key.data() + at;
  } else if (at < key.size()) {
    std::memcpy(bytes, key.data() + at, key.size() - at);
  }
  return {BigEndian64(p), BigEndian64(p + 8)};
}

// Bytes [at, at + kSliceBytes) of `key`, read through its padding (`at`
// is at most its size).
Slice SliceOf(const internal::DeviceOrderKey& key, size_t at) {
  assert(at <= key.size());
  const char* p = key.data() + at;
  return {BigEndian64(p), BigEndian64(p + 8)};
}

// <0, 0, >0 as `key` is below, at or above the bytes [0, lcp) of `prefix`
// (of a node: kPrefixMax bytes), compared 8 at a time, given that the key
// starts with the first `known` of them.
int ComparePrefix(const internal::DeviceOrderKey& key, const char* prefix, size_t lcp,
                  size_t known) {
  const size_t n = std::min(lcp, key.size());
  // From the word holding the first byte not known (none: no word).
  for (size_t i = known < n ? known & ~size_t{7} : n; i < n; i += 8) {
    uint64_t a = BigEndian64(key.data() + i), b = BigEndian64(prefix + i);
    if (n - i < 8) {  // only the bytes up to n
      const uint64_t mask = ~uint64_t{0} << (8 * (8 - (n - i)));
      a &= mask;
      b &= mask;
    }
    if (a != b) return a < b ? -1 : 1;
  }
  return key.size() < lcp ? -1 : 0;
}

// `id` (whose DeviceOrderKey is `key`, which starts with node's prefix)
// against entry j of `node`, whose slice equals the key's. A child's
// prefix and first slice are more bytes of its first key: they decide most
// ties without reading the device (the child is where the search goes
// next). Equal slices (a leaf's, or a child's first) are equal keys when
// the key ends within them: the entry then has the key's bytes up to the
// key's end, and a key parses one way only (Str escapes NUL bytes and ends
// each of the three names with 0x00 0x01), so the entry's third name ends
// where the key's does.
int CompareTied(const AllocatedNode& node, size_t j, const DeviceId& id,
                const internal::DeviceOrderKey& key) {
  if (!node.leaf) {
    const AllocatedNode& c = *node.child(j);
    // The key starts with node's prefix and the slice after it, and so
    // does c's first key.
    if (int r = ComparePrefix(key, c.prefix, c.lcp, node.lcp + kSliceBytes); r != 0) return r;
    const Slice slice = SliceOf(key, c.lcp);
    if (slice != c.slices[0]) return slice < c.slices[0] ? -1 : 1;
    if (key.size() <= c.lcp + kSliceBytes) return 0;
  } else if (key.size() <= node.lcp + kSliceBytes) {
    return 0;
  }
  return Compare(id, internal::IdOf(*node.firsts[j]));
}

// How many of the sorted `slices[0, n)` are below `slice`: a binary search
// without branches (a conditional move a step), since which way it goes is
// a coin toss.
size_t CountBelow(const Slice* slices, size_t n, const Slice& slice) {
  if (n == 0) return 0;
  const Slice* base = slices;
  for (; n > 1; n -= n / 2) {
    base += (size_t{0} - static_cast<size_t>(base[n / 2 - 1] < slice)) & (n / 2);
  }
  return static_cast<size_t>(base - slices) + static_cast<size_t>(*base < slice);
}

// How many leading bytes two slices share.
size_t CommonBytes(const Slice& a, const Slice& b) {
  const uint64_t hi = a.hi ^ b.hi, lo = a.lo ^ b.lo;
  if (hi != 0) return static_cast<size_t>(std::countl_zero(hi)) / 8;
  return 8 + static_cast<size_t>(std::countl_zero(lo)) / 8;  // 16 when equal
}

// The index of the last entry of `node` whose first device is <= `id`
// (-1: none); `key` is id's DeviceOrderKey, known to start with the
// first `known` bytes of node's prefix. `*equal`: whether that entry's
// first device is `id`; `*child_known`: how many bytes of that entry's
// child's prefix the key is thereby known to start with (a child's prefix
// is the start of its first key, which is its entry here: the key shares
// node's prefix with every entry, and with that one as many bytes of its
// slice as the two slices share). Of any other child's prefix, the key
// starts with min(*child_known, node.lcp) bytes.
ptrdiff_t Floor(const AllocatedNode& node, const DeviceId& id, const internal::DeviceOrderKey& key,
                size_t known, bool* equal, size_t* child_known) {
  *equal = false;
  *child_known = 0;
  // The slices' cache lines all at once (the search below reads them one
  // after another), whatever the node's size: a fixed count unrolls into
  // as many instructions, where a loop to the node's last slice cost 30 a
  // node. The node need not start a line, hence one more.
  const char* const slices = reinterpret_cast<const char*>(node.slices.data());
  constexpr size_t kSliceLines = sizeof(node.slices) / 64 + 1;
  for (size_t line = 0; line < kSliceLines; ++line) __builtin_prefetch(slices + 64 * line);
  const int c = ComparePrefix(key, node.prefix, node.lcp, known);
  if (c < 0) return -1;  // below every entry
  if (c > 0) return static_cast<ptrdiff_t>(node.size) - 1;
  // Entries whose slice is below the key's are below it, those above are
  // above it; ties are compared further.
  const Slice slice = SliceOf(key, node.lcp);
  // Entry f as the floor, with what the key shares with its child's prefix.
  const auto floor_at = [&](ptrdiff_t f) {
    if (f >= 0) *child_known = node.lcp + CommonBytes(node.slices[f], slice);
    return f;
  };
  const size_t below = CountBelow(node.slices.data(), node.size, slice);
  if (below == node.size || node.slices[below] != slice) {  // no tie: most levels
    return floor_at(static_cast<ptrdiff_t>(below) - 1);
  }
  if (node.leaf && key.size() <= node.lcp + kSliceBytes) {  // see CompareTied
    *equal = true;
    return static_cast<ptrdiff_t>(below);
  }
  // The last tie not above the key, by bisection of the entries from the
  // first tie on (an entry whose slice is not the key's is above it): a
  // root over several drivers ties on the drivers' names, 16 bytes or more.
  ptrdiff_t floor = static_cast<ptrdiff_t>(below) - 1;
  for (size_t lo = below, hi = node.size; lo < hi;) {
    const size_t mid = lo + (hi - lo) / 2;
    const int r = node.slices[mid] == slice ? CompareTied(node, mid, id, key) : -1;
    if (r == 0) {
      *equal = true;
      return floor_at(static_cast<ptrdiff_t>(mid));
    }
    if (r > 0) {
      floor = static_cast<ptrdiff_t>(mid);
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return floor_at(floor);
}

// Visits devices >= `from` while `in` holds; false when `visit` stopped.
bool Visit(const AllocatedNode& node, const DeviceId& from,
           const internal::DeviceOrderKey& from_key,
           absl::FunctionRef<bool(const AllocatedDevice&)> in,
           absl::FunctionRef<bool(const AllocatedDevice&)> visit, size_t known = 0) {
  bool equal;
  size_t child_known;
  const size_t start = static_cast<size_t>(
      std::max<ptrdiff_t>(0, Floor(node, from, from_key, known, &equal, &child_known)));
  // In a leaf, once a device is at or after `from`, so are the ones after
  // it: they are not compared (three string compares each).
  bool reached = false;
  for (size_t i = start; i < node.size; ++i) {
    if (node.leaf) {
      const AllocatedDevice& d = *node.firsts[i];
      if (!reached) {
        if (internal::IdOf(d) < from) continue;
        reached = true;
      }
      if (!in(d) || !visit(d)) return false;
    } else {
      // A later child starts at or after `from`: out of the range, so is
      // everything after it.
      if (i > start && !in(*node.firsts[i])) return false;
      const size_t known_here = i == start ? child_known : std::min<size_t>(child_known, node.lcp);
      if (!Visit(*node.child(i), from, from_key, in, visit, known_here)) return false;
    }
  }
  return true;
}

}  // namespace

namespace internal {

std::string NameOf(const DeviceId& id) {
  return absl::StrCat(id.driver, "/", id.pool, "/", id.device);
}

void ForEachDevice(const AllocatedVersion& version,
                   absl::FunctionRef<void(const AllocatedDevice& device)> visit) {
  if (version.root == nullptr) return;
  const DeviceId from{};
  Visit(
      *version.root, from, DeviceOrderKey(from), [](const AllocatedDevice&) { return true; },
      [&](const AllocatedDevice& d) {
        visit(d);
        return true;
      });
}

void VisitDevicesFrom(const AllocatedVersion& version, const DeviceId& from,
                      absl::FunctionRef<bool(const AllocatedDevice&)> in,
                      absl::FunctionRef<bool(const AllocatedDevice&)> visit) {
  if (version.root == nullptr) return;
  Visit(*version.root, from, DeviceOrderKey(from), in, visit);
}

namespace {

// Whether a byte of `word` is zero (exact for the word as a whole).
template <typename Word>
bool HasZeroByte(Word word) {
  constexpr Word kOnes = static_cast<Word>(~Word{0}) / 0xFF;  // 0x0101…01
  return ((word - kOnes) & ~word & (kOnes << 7)) != 0;
}

// Copies n bytes from `from` with loads and stores of `Word` (the last
// one overlapping; n >= sizeof(Word)); whether a byte copied is zero.
template <typename Word>
bool CopyWords(const char* from, size_t n, char* to) {
  bool zero = false;
  const auto copy = [&](size_t at) {
    Word w;
    std::memcpy(&w, from + at, sizeof w);
    std::memcpy(to + at, &w, sizeof w);
    zero |= HasZeroByte(w);
  };
  for (size_t at = 0; at + sizeof(Word) <= n; at += sizeof(Word)) copy(at);
  if (n % sizeof(Word) != 0) copy(n - sizeof(Word));
  return zero;
}

// Copies `part` to `to` without a call (a key is built for each lookup,
// of names mostly under 16 bytes); false when it has a NUL byte (to be
// escaped). Reads no byte outside `part`.
bool CopyPlain(absl::string_view part, char* to) {
  const char* from = part.data();
  const size_t n = part.size();
  if (n >= 8) return !CopyWords<uint64_t>(from, n, to);
  if (n >= 4) return !CopyWords<uint32_t>(from, n, to);
  bool plain = true;
  for (size_t i = 0; i < n; ++i) {
    to[i] = from[i];
    plain &= from[i] != '\0';
  }
  return plain;
}

}  // namespace

DeviceOrderKey::DeviceOrderKey(const DeviceId& id) {
  const absl::string_view parts[] = {id.driver, id.pool, id.device};
  // The common case, no NUL byte to escape, written straight into the
  // buffer: each name and its terminator 0x00 0x01.
  char* out = Reserve(id.driver.size() + id.pool.size() + id.device.size() + 6);
  bool plain = true;
  for (absl::string_view part : parts) {
    plain &= CopyPlain(part, out);
    out += part.size();
    *out++ = '\0';
    *out++ = '\x01';
  }
  if (plain) return;
  std::string escaped;
  for (absl::string_view part : parts) AppendComponentTo(part, &escaped);
  std::memcpy(Reserve(escaped.size()), escaped.data(), escaped.size());
}

char* DeviceOrderKey::Reserve(size_t size) {
  char* out = inline_;
  if (size + kPadding > kInline) {
    heap_ = std::make_unique_for_overwrite<char[]>(size + kPadding);
    out = heap_.get();
  } else {
    heap_.reset();  // data() is inline_ again
  }
  size_ = size;  // once the room is there
  std::memset(out + size, 0, kPadding);
  return out;
}

void DeviceOrderKey::Assign(const DeviceOrderKey& other) {
  std::memcpy(Reserve(other.size_), other.data(), other.size_);
}

// Holdings of records ------------------------------------------------------------

// The tree ----------------------------------------------------------------------

namespace {

// FindDevice, given id's DeviceOrderKey.
const AllocatedDevice* FindByKey(const AllocatedVersion& version, const DeviceId& id,
                                 const DeviceOrderKey& key) {
  const AllocatedNode* node = version.root.get();
  size_t known = 0;
  while (node != nullptr) {
    bool equal;
    const ptrdiff_t i = Floor(*node, id, key, known, &equal, &known);
    if (i < 0) return nullptr;
    if (node->leaf) return equal ? node->firsts[static_cast<size_t>(i)] : nullptr;
    node = node->child(static_cast<size_t>(i));
  }
  return nullptr;
}

}  // namespace

const AllocatedDevice* FindDevice(const AllocatedVersion& version, const DeviceId& id) {
  if (version.root == nullptr) return nullptr;
  return FindByKey(version, id, DeviceOrderKey(id));
}

namespace {

using NodePtr = std::shared_ptr<const AllocatedNode>;

// A slice taken after `prefix` as a slice at `lcp`, which is at most
// prefix's length: the bytes between come from `prefix`.
Slice ResliceAt(absl::string_view prefix, Slice slice, size_t lcp) {
  assert(prefix.size() >= lcp);
  if (prefix.size() == lcp) return slice;
  const size_t shift = prefix.size() - lcp;
  const Slice head = SliceOf(prefix, lcp);
  if (shift >= kSliceBytes) return head;
  const absl::uint128 tail = absl::MakeUint128(slice.hi, slice.lo) >> static_cast<int>(8 * shift);
  return {head.hi | absl::Uint128High64(tail), head.lo | absl::Uint128Low64(tail)};
}

// How many bytes of n's prefix `key` starts with.
size_t CommonPrefix(const AllocatedNode& n, absl::string_view key) {
  size_t common = 0;
  while (common < n.lcp && common < key.size() && key[common] == n.prefix[common]) ++common;
  return common;
}

// Makes n's prefix its first `lcp` bytes (at most its length), re-slicing
// its entries.
void ShortenPrefix(AllocatedNode* n, size_t lcp) {
  if (lcp == n->lcp) return;
  char before[AllocatedNode::kPrefixMax];
  const size_t before_lcp = n->lcp;
  std::memcpy(before, n->prefix, before_lcp);
  n->lcp = static_cast<uint8_t>(lcp);
  for (size_t i = 0; i < n->size; ++i) {
    n->slices[i] = ResliceAt(absl::string_view(before, before_lcp), n->slices[i], lcp);
  }
}

// A node under construction: entries appended in order, with their key
// slices (AllocatedNode::slices) under a prefix common to them all.
class NodeBuilder {
 public:
  // `like`: the node this one replaces; its entries are copied with their
  // slices, under its prefix (shortened when an entry added does not share
  // it). `epoch`: the new node's. When `like` is of that epoch (not 0), its
  // entries are moved, not copied: it is the version's own (see the
  // header), and goes once replaced.
  explicit NodeBuilder(bool leaf, const AllocatedNode* like = nullptr, uint64_t epoch = 0)
      : node_(std::make_shared<AllocatedNode>()),
        steal_(like != nullptr && epoch != 0 && like->epoch == epoch ? like : nullptr) {
    node_->leaf = leaf;
    node_->epoch = epoch;
    if (like != nullptr) {
      node_->lcp = like->lcp;
      std::memcpy(node_->prefix, like->prefix, like->lcp);
      has_prefix_ = true;
    }
  }
  // An entry whose first device's key is `key`.
  void Add(const AllocatedDevice* first, std::shared_ptr<const void> owned, absl::string_view key) {
    AllocatedNode& n = *node_;
    if (!has_prefix_) {
      n.lcp = static_cast<uint8_t>(std::min(key.size(), AllocatedNode::kPrefixMax));
      std::memcpy(n.prefix, key.data(), n.lcp);
      has_prefix_ = true;
    }
    ShortenPrefix(&n, CommonPrefix(n, key));
    Append(first, std::move(owned), SliceOf(key, n.lcp));
  }
  // The same, the key read from the device.
  void Add(const AllocatedDevice* first, std::shared_ptr<const void> owned) {
    Add(first, std::move(owned), DeviceOrderKey(IdOf(*first)).bytes());
  }
  // Entry i of `from`, whose prefix extends this node's (the node it
  // replaces, or one built from it); `owned`, when set, replaces what it
  // owns (a child copied on the path, with the same first device).
  void AddFrom(const AllocatedNode& from, size_t i, std::shared_ptr<const void> owned = nullptr) {
    // Moving a node's own entry touches no reference count (the count is
    // the child's or the device's cache line: a miss per entry). (Not a
    // conditional expression: its const operand would make both a copy.)
    if (owned != nullptr) {
    } else if (&from == steal_) {
      owned = std::move(const_cast<AllocatedNode&>(from).owned[i]);
    } else {
      owned = from.owned[i];
    }
    Append(from.firsts[i], std::move(owned), Reslice(from, from.slices[i]));
  }
  // Entries [begin, end) of `from` (as AddFrom).
  void AddRange(const AllocatedNode& from, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) AddFrom(from, i);
  }
  size_t size() const { return node_->size; }
  // The node, split in two when it overflowed; none when empty.
  template <typename List>
  void Emit(List* out) {
    AllocatedNode& n = *node_;
    if (n.size == 0) return;
    if (n.size > AllocatedNode::kMaxEntries) {
      const size_t half = n.size / 2;
      auto right = std::make_shared<AllocatedNode>();
      right->epoch = n.epoch;
      right->leaf = n.leaf;
      right->lcp = n.lcp;
      std::memcpy(right->prefix, n.prefix, n.lcp);
      for (size_t i = half; i < n.size; ++i) {
        right->slices[right->size] = n.slices[i];
        right->firsts[right->size] = n.firsts[i];
        right->owned[right->size] = std::move(n.owned[i]);
        ++right->size;
      }
      n.size = static_cast<uint32_t>(half);
      out->push_back(std::move(node_));
      out->push_back(std::move(right));
      return;
    }
    out->push_back(std::move(node_));
  }

 private:
  void Append(const AllocatedDevice* first, std::shared_ptr<const void> owned, Slice slice) {
    AllocatedNode& n = *node_;
    n.slices[n.size] = slice;
    n.firsts[n.size] = first;
    n.owned[n.size] = std::move(owned);
    ++n.size;
  }
  // A slice of `from` (at from.lcp) as a slice at this node's lcp, which
  // is at most from's: the bytes between come from from's prefix.
  Slice Reslice(const AllocatedNode& from, Slice slice) const {
    return Reslice(absl::string_view(from.prefix, from.lcp), slice);
  }
  // A slice taken after `prefix` as a slice at this node's lcp, which is at
  // most prefix's length: the bytes between come from `prefix`.
  Slice Reslice(absl::string_view prefix, Slice slice) const {
    return ResliceAt(prefix, slice, node_->lcp);
  }

  std::shared_ptr<AllocatedNode> node_;
  const AllocatedNode* const steal_;  // the node whose entries are moved
  bool has_prefix_ = false;
};

using DeviceFn = absl::FunctionRef<DevicePtr(const AllocatedDevice* old)>;
using Released = std::vector<std::shared_ptr<const void>>;

// Sets entry `at` of a leaf that only the version changed holds
// (`found`: whether entry `at` is the device's already) to `device` (null:
// removes it) in place, shortening the leaf's prefix when the key does not
// share it; the caller mends the separators above when the leaf's first
// device changed. False when it needs a new leaf (one full, or emptied).
// What it replaces goes to `released` (when set).
bool SetInLeaf(AllocatedNode* n, size_t at, bool found, DevicePtr device, absl::string_view key,
               Released* released, ptrdiff_t* delta) {
  const auto release = [&](std::shared_ptr<const void> p) {
    if (released != nullptr) released->push_back(std::move(p));
  };
  if (found && device != nullptr) {  // the same key: the same slice
    n->firsts[at] = device.get();
    release(std::exchange(n->owned[at], std::move(device)));
    return true;
  }
  if (found) {
    if (n->size == 1) return false;
    release(std::move(n->owned[at]));
    for (size_t j = at; j + 1 < n->size; ++j) {
      n->slices[j] = n->slices[j + 1];
      n->firsts[j] = n->firsts[j + 1];
      n->owned[j] = std::move(n->owned[j + 1]);
    }
    --n->size;
    *delta = -1;
    return true;
  }
  if (n->size >= AllocatedNode::kMaxEntries) return false;
  ShortenPrefix(n, CommonPrefix(*n, key));
  for (size_t j = n->size; j > at; --j) {
    n->slices[j] = n->slices[j - 1];
    n->firsts[j] = n->firsts[j - 1];
    n->owned[j] = std::move(n->owned[j - 1]);
  }
  n->slices[at] = SliceOf(key, n->lcp);
  n->firsts[at] = device.get();
  n->owned[at] = std::move(device);
  ++n->size;
  *delta = 1;
  return true;
}

// The nodes replacing `node` once the device of `id` (whose DeviceOrderKey
// is `key`) is device_of(what `node` holds of it) (null: removed): none
// (emptied), one, or two (split). `delta` gets the change in the number of
// devices. New nodes are of `epoch`; nodes of that epoch (not 0) are
// changed in place where they can be, else give their entries to the nodes
// replacing them. `node` itself in `out`: unchanged, or changed in place.
using NodeList = absl::InlinedVector<NodePtr, 2>;
void Update(const NodePtr& node, const DeviceId& id, const DeviceOrderKey& key, DeviceFn device_of,
            uint64_t epoch, Released* released, NodeList* out, ptrdiff_t* delta, size_t known = 0) {
  const AllocatedNode& n = *node;
  const bool own = epoch != 0 && n.epoch == epoch;  // only the version changed holds it
  bool found;
  size_t child_known;
  const ptrdiff_t floor = Floor(n, id, key, known, &found, &child_known);
  if (n.leaf) {
    const size_t at = static_cast<size_t>(floor + (found ? 0 : 1));
    DevicePtr device = device_of(found ? n.firsts[at] : nullptr);
    if (!found && device == nullptr) {
      out->push_back(node);  // nothing to remove
      return;
    }
    if (own && SetInLeaf(const_cast<AllocatedNode*>(&n), at, found, device, key.bytes(), released,
                         delta)) {
      out->push_back(node);
      return;
    }
    NodeBuilder copy(/*leaf=*/true, &n, epoch);
    copy.AddRange(n, 0, at);
    if (device != nullptr) copy.Add(device.get(), device, key.bytes());
    copy.AddRange(n, found ? at + 1 : at, n.size);
    *delta = found ? (device != nullptr ? 0 : -1) : 1;
    copy.Emit(out);
    return;
  }
  const size_t i = static_cast<size_t>(std::max<ptrdiff_t>(0, floor));
  NodeList replaced;
  Update(std::static_pointer_cast<const AllocatedNode>(n.owned[i]), id, key, device_of, epoch,
         released, &replaced, delta, child_known);
  const bool same_child = replaced.size() == 1 && replaced[0].get() == n.child(i);
  if (same_child && replaced[0]->firsts[0] == n.firsts[i]) {
    out->push_back(node);  // the child unchanged, or changed in place with its first device
    return;
  }
  // A child of the version's epoch has a parent of that epoch (the header).
  assert(own || !same_child);
  if (own && replaced.size() == 1) {
    // The child changed in place, or replaced by one node (copied, or
    // rebuilt): set here in place. A new first device (of the same key, or
    // the child's new first key) is its separator here.
    assert(same_child || replaced[0]->epoch == epoch);
    AllocatedNode& m = const_cast<AllocatedNode&>(n);
    const AllocatedDevice* first = replaced[0]->firsts[0];
    if (!same_child) {
      std::shared_ptr<const void> old = std::exchange(m.owned[i], std::move(replaced[0]));
      if (released != nullptr) released->push_back(std::move(old));
    }
    if (first != m.firsts[i]) {
      const DeviceOrderKey first_key(IdOf(*first));
      ShortenPrefix(&m, CommonPrefix(m, first_key.bytes()));
      m.firsts[i] = first;
      m.slices[i] = SliceOf(first_key.bytes(), m.lcp);
    }
    out->push_back(node);
    return;
  }
  NodeBuilder copy(/*leaf=*/false, &n, epoch);
  copy.AddRange(n, 0, i);
  for (NodePtr& r : replaced) {
    const AllocatedDevice* first = r->firsts[0];
    if (first == n.firsts[i]) {
      copy.AddFrom(n, i, std::move(r));  // the same first device: the same slice
    } else {
      copy.Add(first, std::move(r));
    }
  }
  copy.AddRange(n, i + 1, n.size);
  copy.Emit(out);
}

// UpdateDevice in `epoch` (0: copying every node on the path), given id's
// DeviceOrderKey; the root replaced goes to `released` when set.
void UpdateIn(AllocatedVersion* version, const DeviceId& id, const DeviceOrderKey& key,
              DeviceFn device_of, uint64_t epoch, Released* released) {
  if (version->root == nullptr) {
    const DevicePtr device = device_of(nullptr);
    if (device == nullptr) return;
    NodeBuilder leaf(/*leaf=*/true, nullptr, epoch);
    leaf.Add(device.get(), device, key.bytes());
    std::vector<NodePtr> out;
    leaf.Emit(&out);
    version->root = std::move(out[0]);
    version->devices = 1;
    return;
  }
  NodeList replaced;
  ptrdiff_t delta = 0;
  Update(version->root, id, key, device_of, epoch, released, &replaced, &delta);
  version->devices = static_cast<size_t>(static_cast<ptrdiff_t>(version->devices) + delta);
  if (replaced.size() == 1 && replaced[0] == version->root) return;  // changed in place
  // The old path (of the version's epoch: emptied but for what the change
  // replaced) goes with the old root.
  if (released != nullptr) released->push_back(std::move(version->root));
  if (replaced.empty()) {
    version->root = nullptr;
  } else if (replaced.size() == 1) {
    version->root = std::move(replaced[0]);
  } else {
    NodeBuilder root(/*leaf=*/false, nullptr, epoch);
    for (NodePtr& r : replaced) {
      const AllocatedDevice* first = r->firsts[0];
      root.Add(first, std::move(r));
    }
    std::vector<NodePtr> out;
    root.Emit(&out);
    version->root = std::move(out[0]);
  }
  // A root with one child gives way to it.
  while (version->root != nullptr && !version->root->leaf && version->root->size == 1) {
    version->root = std::static_pointer_cast<const AllocatedNode>(version->root->owned[0]);
  }
}

}  // namespace

uint64_t NewEpoch() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::shared_ptr<AllocatedVersion> NextVersion(const AllocatedVersion& base, uint64_t revision) {
  auto next = std::make_shared<AllocatedVersion>(base);
  next->revision = revision;
  next->epoch = NewEpoch();
  next->index = nullptr;  // set by the tracker, with the index at `revision`
  return next;
}

void SetDevice(AllocatedVersion* version, const DeviceId& id, DevicePtr device) {
  UpdateDevice(version, id, [&](const AllocatedDevice*) { return device; });
}

void UpdateDevice(AllocatedVersion* version, const DeviceId& id,
                  absl::FunctionRef<DevicePtr(const AllocatedDevice* old)> device_of) {
  UpdateIn(version, id, DeviceOrderKey(id), device_of, /*epoch=*/0, nullptr);
}

void ApplyDeviceChanges(AllocatedVersion* version, absl::Span<const DeviceChange> changes,
                        std::vector<std::shared_ptr<const void>>* released) {
  assert(version->epoch != 0);
  for (const DeviceChange& c : changes) {
    UpdateIn(
        version, c.id, c.key, [&](const AllocatedDevice*) { return c.device; }, version->epoch,
        released);
  }
}

std::shared_ptr<const AllocatedVersion> BuildVersion(uint64_t revision,
                                                     std::vector<DevicePtr> devices) {
  auto version = std::make_shared<AllocatedVersion>();
  version->revision = revision;
  version->devices = devices.size();
  if (devices.empty()) return version;
  // Nodes three-quarters full, so that the first inserts do not split.
  constexpr size_t kFill = AllocatedNode::kMaxEntries * 3 / 4;
  std::vector<NodePtr> level;
  for (size_t i = 0; i < devices.size(); i += kFill) {
    NodeBuilder leaf(/*leaf=*/true);
    for (size_t j = i; j < std::min(devices.size(), i + kFill); ++j) {
      const AllocatedDevice* d = devices[j].get();
      leaf.Add(d, std::move(devices[j]));
    }
    leaf.Emit(&level);
  }
  while (level.size() > 1) {
    std::vector<NodePtr> up;
    for (size_t i = 0; i < level.size(); i += kFill) {
      NodeBuilder node(/*leaf=*/false);
      for (size_t j = i; j < std::min(level.size(), i + kFill); ++j) {
        const AllocatedDevice* first = level[j]->firsts[0];
        node.Add(first, std::move(level[j]));
      }
      node.Emit(&up);
    }
    level = std::move(up);
  }
  version->root = std::move(level[0]);
  return version;
}

const AllocatedDevice* FindDevice(const AllocatedVersion& version, const DeviceId& id,
                                  const DeviceOrderKey& key) {
  if (version.root == nullptr) return nullptr;
  return FindByKey(version, id, key);
}

void UpdateDeviceInEpoch(AllocatedVersion* version, const DeviceId& id,
                         absl::FunctionRef<DevicePtr(const AllocatedDevice* old)> device_of,
                         uint64_t epoch, std::vector<std::shared_ptr<const void>>* released) {
  UpdateIn(version, id, DeviceOrderKey(id), device_of, epoch, released);
}

}  // namespace internal
}  // namespace claimstore
