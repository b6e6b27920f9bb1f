// HashTrie (store/src/hash_trie.h): lookups and changes against a std::map,
// versions kept unchanged by later changes, changes in place within an
// epoch, a shape that depends on the keys alone, and keys whose hashes
// agree for 60 bits.
#include "hash_trie.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace claimstore::internal {
namespace {

struct Item {
  std::string key;
  int value = 0;
};

// kWeak: the round-0 hash has 5 bits (32 values), so that keys share
// slots down all 12 levels and go on with the round-1 hash.
template <bool kWeak>
struct ItemTraits {
  using Key = absl::string_view;
  using Entry = Item;
  static uint64_t Hash(Key key, uint32_t round) {
    const uint64_t h = absl::HashOf(key, round);
    return kWeak && round == 0 ? h & 31 : h;
  }
  static Key KeyOf(const Item& item) { return item.key; }
  static bool Matches(const Item& item, Key key) { return item.key == key; }
};

template <typename Traits>
class Model {
 public:
  using Trie = HashTrie<Traits>;
  using Node = typename Trie::Node;
  using Root = typename Trie::NodePtr;

  static const Item* Find(const Root& root, absl::string_view key) {
    return Trie::Find(root.get(), key, Traits::Hash(key, 0));
  }
  static void Set(Root* root, absl::string_view key, std::shared_ptr<const Item> item,
                  uint64_t epoch, typename Trie::Released* released = nullptr) {
    Trie::Set(root, key, Traits::Hash(key, 0), std::move(item), epoch, released);
  }

  // Every entry of `root` is found, `want` holds exactly them, and each
  // node keeps the rules of the header: counts and bits right, no emptied
  // node, no child with one entry and nothing else, a node of `epoch` (not
  // 0) under a parent of that epoch.
  static void Check(const Root& root, const std::map<std::string, int>& want, uint64_t epoch) {
    std::map<std::string, int> got;
    Trie::ForEach(root.get(), [&](const Item& item) { got[item.key] = item.value; });
    EXPECT_EQ(got, want);
    for (const auto& [key, value] : want) {
      const Item* item = Find(root, key);
      ASSERT_NE(item, nullptr) << key;
      EXPECT_EQ(item->value, value) << key;
    }
    if (root != nullptr) CheckNode(*root, /*is_root=*/true, /*parent_epoch=*/epoch, epoch);
  }

 private:
  static void CheckNode(const Node& n, bool is_root, uint64_t parent_epoch, uint64_t epoch) {
    if (epoch != 0 && n.epoch == epoch) {
      EXPECT_EQ(parent_epoch, epoch) << "a node of the epoch under a parent of another";
    }
    uint32_t used = 0, entries = 0;
    for (uint32_t i = 0; i < Trie::kFanout; ++i) {
      if (n.slots[i].ptr == nullptr) {
        EXPECT_FALSE(n.is_child(i));
        continue;
      }
      ++used;
      if (n.is_child(i)) {
        CheckNode(*n.child(i), false, n.epoch, epoch);
      } else {
        ++entries;
        EXPECT_EQ(n.slots[i].hash, Traits::Hash(n.entry(i)->key, 0));
      }
    }
    EXPECT_EQ(n.used, used);
    if (!is_root) {
      EXPECT_GT(used, 0u) << "an emptied node stayed";
      EXPECT_FALSE(used == 1 && entries == 1) << "a child kept its only entry";
    }
  }
};

template <typename Traits>
void RandomChanges(bool in_place, int keys, int steps, uint32_t seed) {
  using M = Model<Traits>;
  std::mt19937 rng(seed);
  typename M::Root root;
  std::map<std::string, int> model;
  struct Kept {
    typename M::Root root;
    std::map<std::string, int> model;
  };
  std::vector<Kept> kept;
  uint64_t epoch = in_place ? 1 : 0;
  for (int step = 0; step < steps; ++step) {
    const std::string key = absl::StrCat("pool-", rng() % keys);
    if (rng() % 3 == 0) {
      M::Set(&root, key, nullptr, epoch);
      model.erase(key);
    } else {
      M::Set(&root, key, std::make_shared<Item>(Item{key, step}), epoch);
      model[key] = step;
    }
    ASSERT_EQ(M::Find(root, key) == nullptr, !model.contains(key)) << step;
    if (step % 97 == 0) {
      M::Check(root, model, epoch);
      // The version is kept: later changes are made in a new epoch.
      kept.push_back({root, model});
      if (in_place) ++epoch;
    }
  }
  M::Check(root, model, epoch);
  for (const Kept& k : kept) M::Check(k.root, k.model, 0);
}

TEST(HashTrieTest, MatchesAMapThroughRandomChangesCopyingPaths) {
  RandomChanges<ItemTraits<false>>(/*in_place=*/false, 3000, 20000, 1);
}

TEST(HashTrieTest, MatchesAMapThroughRandomChangesInPlace) {
  RandomChanges<ItemTraits<false>>(/*in_place=*/true, 3000, 20000, 2);
}

TEST(HashTrieTest, KeysWhoseHashesAgreeFor60BitsGoOnWithTheNextRound) {
  RandomChanges<ItemTraits<true>>(/*in_place=*/false, 300, 5000, 3);
  RandomChanges<ItemTraits<true>>(/*in_place=*/true, 300, 5000, 4);
  // The paths of such keys are 13 levels long: removing all but one brings
  // its entry back up to the root.
  using M = Model<ItemTraits<true>>;
  typename M::Root root;
  std::vector<std::string> same;  // keys with the same round-0 hash
  for (int i = 0; same.size() < 3; ++i) {
    const std::string key = absl::StrCat("k", i);
    if (ItemTraits<true>::Hash(key, 0) == 7) same.push_back(key);
  }
  for (const std::string& key : same) M::Set(&root, key, std::make_shared<Item>(Item{key, 1}), 0);
  M::Check(root, {{same[0], 1}, {same[1], 1}, {same[2], 1}}, 0);
  M::Set(&root, same[1], nullptr, 0);
  M::Set(&root, same[2], nullptr, 0);
  M::Check(root, {{same[0], 1}}, 0);
  EXPECT_EQ(root->children, 0u);
  EXPECT_EQ(root->used, 1u);
}

// The same keys, added in two orders and some removed, make the same
// nodes: the shape depends on the keys alone.
template <typename Node>
std::string Shape(const Node& n) {
  std::string out = "(";
  for (uint32_t i = 0; i < n.slots.size(); ++i) {
    if (n.is_child(i)) {
      absl::StrAppend(&out, i, Shape(*n.child(i)));
    } else if (n.slots[i].ptr != nullptr) {
      absl::StrAppend(&out, i, "=", n.entry(i)->key, " ");
    }
  }
  return out + ")";
}

TEST(HashTrieTest, TheShapeDependsOnTheKeysAlone) {
  using M = Model<ItemTraits<false>>;
  std::vector<std::string> keys;
  for (int i = 0; i < 2000; ++i) keys.push_back(absl::StrCat("node-", i));
  typename M::Root a, b;
  for (const std::string& k : keys) M::Set(&a, k, std::make_shared<Item>(Item{k, 0}), 0);
  for (const std::string& k : keys) {
    if (k.back() != '3') M::Set(&a, k, nullptr, 0);
  }
  std::shuffle(keys.begin(), keys.end(), std::mt19937(5));
  for (const std::string& k : keys) {
    if (k.back() == '3') M::Set(&b, k, std::make_shared<Item>(Item{k, 0}), /*epoch=*/9);
  }
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(Shape(*a), Shape(*b));
}

TEST(HashTrieTest, ChangesInPlaceHandBackWhatTheyReplaced) {
  using M = Model<ItemTraits<false>>;
  typename M::Root root;
  auto first = std::make_shared<Item>(Item{"x", 1});
  const std::weak_ptr<const Item> watch = first;
  M::Set(&root, "x", std::move(first), /*epoch=*/3);
  const M::Node* node = root.get();
  M::Trie::Released released;
  M::Set(&root, "x", std::make_shared<Item>(Item{"x", 2}), 3, &released);
  EXPECT_EQ(root.get(), node) << "a node of the epoch is changed in place";
  EXPECT_FALSE(watch.expired()) << "the old entry is the caller's to free";
  released.clear();
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(M::Find(root, "x")->value, 2);
  // Another epoch copies the node and leaves the one it had alone.
  typename M::Root before = root;
  M::Set(&root, "x", std::make_shared<Item>(Item{"x", 3}), 4, &released);
  EXPECT_NE(root.get(), node);
  EXPECT_EQ(M::Find(before, "x")->value, 2);
  EXPECT_EQ(M::Find(root, "x")->value, 3);
  // Removing the last entry empties the trie.
  M::Set(&root, "x", nullptr, 4, &released);
  EXPECT_EQ(root, nullptr);
}

}  // namespace
}  // namespace claimstore::internal
