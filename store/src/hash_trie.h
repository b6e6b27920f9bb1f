// A persistent hash array mapped trie (Bagwell's HAMT, without the bitmap
// compression): a map from keys to immutable entries whose versions share
// every node a change did not touch. The first step of the allocated state's
// pool index (issue 16: a lookup in about a hash lookup, whatever the size);
// measured against the B+-tree and a flat_hash_map in bench/hash_trie_bench.cc.
//
// A node has 32 slots, each empty, an entry (with its key's hash) or a
// child node; a key's slot at depth d is bits [5d, 5d + 5) of its hash. A
// lookup reads one slot a level and, at the end, the entry itself only when
// the hashes are equal: about log32(entries) dependent loads, the upper ones
// in cache. Two keys whose 60 bits of hash agree go on with a second hash
// (Traits::Hash(key, 1)), and so on: there is no collision list.
//
// Versions and epochs, as in the allocated state's tree (allocated_state.h):
// each node records the epoch of the change that made it. A change in epoch
// E (not 0) changes nodes of epoch E in place and copies any other node on
// its path (the copy of epoch E), so a node of epoch E has parents of epoch
// E: only the version being changed in E holds it, as long as that version
// is changed only while nobody else has seen it. Epoch 0 copies every node
// on the path. A child left with one entry and no children gives the entry
// to its parent, and an emptied node goes, so the trie's shape depends on
// its keys alone.
//
// Thread-safety: a trie (its root) that nobody changes in place may be read
// from any number of threads. Changes are the caller's to serialize.
//
// Traits:
//   using Key = ...;    what a lookup names (cheap to copy, e.g. views)
//   using Entry = ...;  what the trie holds
//   static uint64_t Hash(const Key& key, uint32_t round);
//   static Key KeyOf(const Entry& entry);
//   static bool Matches(const Entry& entry, const Key& key);
// Two different keys must have different hashes in some round (round r > 0
// is needed only when all rounds before agree: a seeded hash does).
#ifndef CLAIMSTORE_SRC_HASH_TRIE_H_
#define CLAIMSTORE_SRC_HASH_TRIE_H_

#include <array>
#include <bit>
#include <cassert>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"

namespace claimstore::internal {

template <typename Traits>
class HashTrie {
 public:
  using Key = typename Traits::Key;
  using Entry = typename Traits::Entry;
  using EntryPtr = std::shared_ptr<const Entry>;
  static constexpr uint32_t kBits = 5;
  static constexpr uint32_t kFanout = 1u << kBits;
  // Levels a hash serves before the next round's hash takes over.
  static constexpr uint32_t kLevelsPerRound = 64 / kBits;

  struct Slot {
    std::shared_ptr<const void> ptr;  // an Entry, a Node (children's bit), or null
    uint64_t hash = 0;                // an entry's round-0 hash
  };
  struct Node {
    uint64_t epoch = 0;
    uint32_t children = 0;  // bit i: slot i holds a child node
    uint32_t used = 0;      // slots not empty
    std::array<Slot, kFanout> slots;
    bool is_child(uint32_t i) const { return (children >> i) & 1; }
    const Node* child(uint32_t i) const { return static_cast<const Node*>(slots[i].ptr.get()); }
    const Entry* entry(uint32_t i) const { return static_cast<const Entry*>(slots[i].ptr.get()); }
  };
  using NodePtr = std::shared_ptr<const Node>;
  // What changes in place replaced, for the caller to free outside its locks.
  using Released = std::vector<std::shared_ptr<const void>>;

  // The entry of `key`, whose Traits::Hash(key, 0) is `hash`; nullptr when
  // it has none.
  static const Entry* Find(const Node* node, const Key& key, uint64_t hash) {
    Path path(hash);
    while (node != nullptr) {
      const uint32_t i = path.Next(key);
      if (node->is_child(i)) {
        node = node->child(i);
        continue;
      }
      const Slot& s = node->slots[i];
      if (s.ptr == nullptr || s.hash != hash) return nullptr;
      return Traits::Matches(*node->entry(i), key) ? node->entry(i) : nullptr;
    }
    return nullptr;
  }

  // Sets the entry of `key` (round-0 hash `hash`) in the trie at `*root`
  // (null: empty) to `entry` (null: removes it), in `epoch` (above). What
  // in-place changes replace goes to `released` when set (else it is freed
  // at once).
  static void Set(NodePtr* root, const Key& key, uint64_t hash, EntryPtr entry, uint64_t epoch,
                  Released* released) {
    Released local;
    Released* out = released != nullptr ? released : &local;
    if (*root == nullptr) {
      if (entry == nullptr) return;
      auto node = std::make_shared<Node>();
      node->epoch = epoch;
      Put(node.get(), Path(hash).Next(key), std::move(entry), hash);
      *root = std::move(node);
      return;
    }
    NodePtr next = SetIn(*root, Path(hash), key, hash, std::move(entry), epoch, out);
    if (next != *root) out->push_back(std::exchange(*root, std::move(next)));
  }

  // Calls visit(entry) for every entry, in no particular order.
  static void ForEach(const Node* node, absl::FunctionRef<void(const Entry&)> visit) {
    if (node == nullptr) return;
    for (uint32_t i = 0; i < kFanout; ++i) {
      if (node->is_child(i)) {
        ForEach(node->child(i), visit);
      } else if (node->slots[i].ptr != nullptr) {
        visit(*node->entry(i));
      }
    }
  }

 private:
  // Where a key's slots are: 5 bits a level, of one round's hash after
  // another.
  class Path {
   public:
    explicit Path(uint64_t hash) : bits_(hash) {}
    // The slot at the next level (the first call: the root's).
    uint32_t Next(const Key& key) {
      if (level_ == kLevelsPerRound) {
        bits_ = Traits::Hash(key, ++round_);
        level_ = 0;
      }
      ++level_;
      const uint32_t i = static_cast<uint32_t>(bits_) & (kFanout - 1);
      bits_ >>= kBits;
      return i;
    }
    // The path of another key (round-0 hash `hash`) at the same depth.
    Path Other(const Key& key, uint64_t hash) const {
      Path p(round_ == 0 ? hash : Traits::Hash(key, round_));
      p.round_ = round_;
      p.level_ = level_;
      p.bits_ >>= kBits * level_;
      return p;
    }

   private:
    uint64_t bits_;
    uint32_t level_ = 0;
    uint32_t round_ = 0;
  };

  static void Put(Node* n, uint32_t i, std::shared_ptr<const void> ptr, uint64_t hash) {
    n->used += n->slots[i].ptr == nullptr ? 1 : 0;
    n->slots[i] = Slot{std::move(ptr), hash};
  }

  // A node of `epoch` holding two entries whose keys' slots agree up to
  // here: `a` at `pa`, `b` at `pb` (their paths at this depth), with nodes
  // below while their slots agree.
  static NodePtr Pair(Path pa, Slot a, const Key& ka, Path pb, Slot b, const Key& kb,
                      uint64_t epoch) {
    auto n = std::make_shared<Node>();
    n->epoch = epoch;
    const uint32_t ia = pa.Next(ka), ib = pb.Next(kb);
    if (ia == ib) {
      n->children = 1u << ia;
      Put(n.get(), ia, Pair(pa, std::move(a), ka, pb, std::move(b), kb, epoch), 0);
    } else {
      Put(n.get(), ia, std::move(a.ptr), a.hash);
      Put(n.get(), ib, std::move(b.ptr), b.hash);
    }
    return n;
  }

  // The node replacing `node` once the entry of `key` is `entry`: `node`
  // itself (unchanged, or changed in place), a copy, or null (emptied).
  static NodePtr SetIn(const NodePtr& node, Path path, const Key& key, uint64_t hash,
                       EntryPtr entry, uint64_t epoch, Released* released) {
    const uint32_t i = path.Next(key);
    const Node& n = *node;
    std::shared_ptr<Node> copy;
    // The node to change: `node` when it is the version's own, else a copy.
    const auto writable = [&]() -> Node* {
      if (epoch != 0 && n.epoch == epoch) return const_cast<Node*>(&n);
      copy = std::make_shared<Node>(n);
      copy->epoch = epoch;
      return copy.get();
    };
    Node* m;
    if (n.is_child(i)) {
      const NodePtr child = std::static_pointer_cast<const Node>(n.slots[i].ptr);
      NodePtr next = SetIn(child, path, key, hash, std::move(entry), epoch, released);
      const bool gives_up = next != nullptr && next->used == 1 && next->children == 0;
      if (next == child && !gives_up) return node;  // unchanged, or changed in place
      m = writable();
      released->push_back(std::move(m->slots[i].ptr));
      m->children &= ~(1u << i);
      if (next == nullptr) {
        m->slots[i] = Slot{};
        --m->used;
      } else if (gives_up) {  // a child with one entry gives it to its parent
        m->slots[i] = next->slots[std::countr_zero(SlotsUsed(*next))];
        released->push_back(std::move(next));
      } else {
        m->children |= 1u << i;
        m->slots[i].ptr = std::move(next);
      }
    } else if (n.slots[i].ptr == nullptr) {
      if (entry == nullptr) return node;
      m = writable();
      Put(m, i, std::move(entry), hash);
    } else if (n.slots[i].hash == hash && Traits::Matches(*n.entry(i), key)) {
      m = writable();
      released->push_back(std::move(m->slots[i].ptr));
      if (entry == nullptr) {
        m->slots[i] = Slot{};
        --m->used;
      } else {
        m->slots[i].ptr = std::move(entry);
      }
    } else {  // another key's entry: both go down a level
      if (entry == nullptr) return node;
      m = writable();
      const Slot other = m->slots[i];
      const Key other_key = Traits::KeyOf(*n.entry(i));
      m->slots[i].ptr =
          Pair(path.Other(other_key, other.hash), other, other_key, path, Slot{std::move(entry), hash},
               key, epoch);
      m->slots[i].hash = 0;
      m->children |= 1u << i;
    }
    if (m->used == 0) return nullptr;
    return copy != nullptr ? NodePtr(std::move(copy)) : node;
  }

  static uint32_t SlotsUsed(const Node& n) {
    uint32_t bits = 0;
    for (uint32_t i = 0; i < kFanout; ++i) bits |= (n.slots[i].ptr != nullptr ? 1u : 0u) << i;
    return bits;
  }
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_HASH_TRIE_H_
