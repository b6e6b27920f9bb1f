#include "state/device_index.h"

#include <bit>
#include <cassert>
#include <cstring>
#include <limits>
#include <new>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace claimstore::internal {

namespace {

constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();  // a pair not set
constexpr std::align_val_t kEntryAlign{64};                       // a cache line

// Reads of 8, 4 and fewer bytes, as numbers (unaligned).
uint64_t Load8(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint64_t Load4(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// 0 to 16 bytes as two words: overlapping reads, no loop.
std::pair<uint64_t, uint64_t> Words(const char* p, size_t n) {
  if (n >= 8) return {Load8(p), Load8(p + n - 8)};
  if (n >= 4) return {Load4(p), Load4(p + n - 4)};
  if (n == 0) return {0, 0};
  const auto byte = [&](size_t i) {
    return static_cast<uint64_t>(static_cast<unsigned char>(p[i]));
  };
  return {byte(0) << 16 | byte(n >> 1) << 8 | byte(n - 1), 0};
}

// The high and low halves of a 128-bit product, folded: a multiply mixes
// every bit of both words into every bit of the result (wyhash's mixer).
uint64_t Mix(uint64_t a, uint64_t b) {
  const unsigned __int128 m = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
}
constexpr uint64_t kK0 = 0xa0761d6478bd642f, kK1 = 0xe7037ed1a0b428db, kK2 = 0x8ebc6af09c88c6e3;

// Folds `part` (its bytes and its length: "ab","c" differs from "a","bc")
// into `h`: a multiply per 16 bytes. Names are a scheduler's, not an
// adversary's; the table stays at most two thirds full whatever they are.
uint64_t HashPart(uint64_t h, absl::string_view part) {
  const char* p = part.data();
  size_t n = part.size();
  for (; n > 16; p += 16, n -= 16) h = Mix(Load8(p) ^ kK1 ^ h, Load8(p + 8) ^ kK2);
  const auto [a, b] = Words(p, n);
  return Mix(a ^ kK1 ^ h, b ^ kK2 ^ (part.size() * kK0));
}

// Waits a moment for the writer to finish an entry's change (a few stores):
// a pause at first, the processor to others if the writer was preempted.
void Backoff(int* spins) {
  if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

}  // namespace

namespace device_index_detail {

uint64_t HashOf(const DeviceId& id) {
  return HashPart(HashPart(HashPart(kK0, id.driver), id.pool), id.device);
}

// Names are short, most under 16 bytes: two overlapping words each.
bool SameBytes(const char* a, const char* b, size_t n) {
  if (n > 16) return std::memcmp(a, b, n) == 0;
  const auto [a0, a1] = Words(a, n);
  const auto [b0, b1] = Words(b, n);
  return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

}  // namespace device_index_detail

using device_index_detail::HashOf;
using device_index_detail::SameBytes;

// An entry: the head (what a lookup reads first), the device's name, then
// the tail (the older pairs, the floor and the count of tables holding it),
// in one allocation aligned to a cache line.
struct DeviceTable::Entry {
  std::atomic<uint32_t> seq{0};    // odd while the writer changes the pairs
  uint32_t sizes[3];               // of the driver, pool and device names
  std::atomic<uint64_t> revision;  // the newest pair
  std::atomic<const AllocatedDevice*> device;
  // Followed by the name's bytes (driver, pool, device) and the Tail.

  struct Tail {
    // Pairs older than the head, newest first (revision kNone: not set).
    std::atomic<uint64_t> revisions[kVersions - 1];
    std::atomic<const AllocatedDevice*> devices[kVersions - 1];
    // Below this revision the entry cannot tell (pairs dropped); at or
    // after it and before every pair: nobody held the device.
    std::atomic<uint64_t> floor;
    std::atomic<uint32_t> refs;  // tables holding the entry
  };

  static size_t TailOffset(size_t name_size) {
    return (sizeof(Entry) + name_size + alignof(Tail) - 1) / alignof(Tail) * alignof(Tail);
  }
  const char* name() const { return reinterpret_cast<const char*>(this + 1); }
  Tail& tail() const {
    const size_t offset = TailOffset(sizes[0] + sizes[1] + sizes[2]);
    return *std::launder(
        reinterpret_cast<Tail*>(reinterpret_cast<char*>(const_cast<Entry*>(this)) + offset));
  }
  DeviceId id() const {
    const char* n = name();
    return {{n, sizes[0]}, {n + sizes[0], sizes[1]}, {n + sizes[0] + sizes[1], sizes[2]}};
  }

  // A new entry, not yet in a table: `device` from `revision` on, nobody
  // from `floor` to then.
  static Entry* New(const DeviceId& id, uint64_t revision, const AllocatedDevice* device,
                    uint64_t floor) {
    const size_t name_size = id.driver.size() + id.pool.size() + id.device.size();
    const size_t offset = TailOffset(name_size);
    void* memory = ::operator new(offset + sizeof(Tail), kEntryAlign);
    Entry* e = new (memory) Entry;
    e->sizes[0] = static_cast<uint32_t>(id.driver.size());
    e->sizes[1] = static_cast<uint32_t>(id.pool.size());
    e->sizes[2] = static_cast<uint32_t>(id.device.size());
    char* name = reinterpret_cast<char*>(e + 1);
    for (absl::string_view part : {id.driver, id.pool, id.device}) {
      if (!part.empty()) std::memcpy(name, part.data(), part.size());
      name += part.size();
    }
    e->revision.store(revision, std::memory_order_relaxed);
    e->device.store(device, std::memory_order_relaxed);
    Tail* t = new (static_cast<char*>(memory) + offset) Tail;
    for (size_t i = 0; i < kVersions - 1; ++i) {
      t->revisions[i].store(kNone, std::memory_order_relaxed);
      t->devices[i].store(nullptr, std::memory_order_relaxed);
    }
    t->floor.store(floor, std::memory_order_relaxed);
    t->refs.store(0, std::memory_order_relaxed);
    return e;
  }
  void Ref() { tail().refs.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (tail().refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    tail().~Tail();
    this->~Entry();
    ::operator delete(static_cast<void*>(this), kEntryAlign);
  }

  bool Is(const DeviceId& id) const {
    if (sizes[0] != id.driver.size() || sizes[1] != id.pool.size() ||
        sizes[2] != id.device.size()) {
      return false;
    }
    const char* n = name();
    return SameBytes(n, id.driver.data(), sizes[0]) &&
           SameBytes(n + sizes[0], id.pool.data(), sizes[1]) &&
           SameBytes(n + sizes[0] + sizes[1], id.device.data(), sizes[2]);
  }

  // What held the device at `at`, read under the sequence count. Without
  // fences (which tsan does not model): the pairs are read with acquire, so
  // the second read of the count comes after them, and written with
  // release, so that a reader who saw a pair changed sees the count odd or
  // moved on (a seqlock as Boehm's "Can seqlocks get along with programming
  // language memory models?" writes it with acquire and release alone).
  Answer At(uint64_t at) const {
    for (int spins = 0;; Backoff(&spins)) {
      const uint32_t s = seq.load(std::memory_order_acquire);
      if ((s & 1) != 0) continue;
      const Answer a = revision.load(std::memory_order_acquire) <= at
                           ? Answer{true, device.load(std::memory_order_acquire)}
                           : Older(at);
      if (seq.load(std::memory_order_relaxed) == s) return a;
    }
  }
  Answer Older(uint64_t at) const {
    const Tail& t = tail();
    for (size_t i = 0; i < kVersions - 1; ++i) {
      if (t.revisions[i].load(std::memory_order_acquire) <= at) {
        return {true, t.devices[i].load(std::memory_order_acquire)};
      }
    }
    return {at >= t.floor.load(std::memory_order_acquire), nullptr};
  }

  // Writer only: `d` from `at` on (at least the newest pair's revision;
  // equal: replaces it).
  void Set(uint64_t at, const AllocatedDevice* d) {
    constexpr auto kMine = std::memory_order_relaxed;  // the writer's own values
    constexpr auto kPublish = std::memory_order_release;
    const uint64_t newest = revision.load(kMine);
    assert(at >= newest);
    const uint32_t s = seq.load(kMine);
    seq.store(s + 1, kMine);  // ordered before the stores below by their release
    if (newest != at) {
      Tail& t = tail();
      constexpr size_t kOldest = kVersions - 2;  // in the tail
      // The oldest pair goes: the revisions it answered for are unknown.
      if (t.revisions[kOldest].load(kMine) != kNone) {
        t.floor.store(kOldest > 0 ? t.revisions[kOldest - 1].load(kMine) : newest, kPublish);
      }
      for (size_t i = kOldest; i > 0; --i) {
        t.revisions[i].store(t.revisions[i - 1].load(kMine), kPublish);
        t.devices[i].store(t.devices[i - 1].load(kMine), kPublish);
      }
      t.revisions[0].store(newest, kPublish);
      t.devices[0].store(device.load(kMine), kPublish);
      revision.store(at, kPublish);
    }
    device.store(d, kPublish);
    seq.store(s + 2, kPublish);
  }
  // Writer only: whether somebody holds the device at the newest pair.
  bool Live() const { return device.load(std::memory_order_relaxed) != nullptr; }
};

static_assert(sizeof(DeviceTable::Entry) == 32, "the head and 32 bytes of name share a line");

// DeviceTable ----------------------------------------------------------------------

DeviceTable::DeviceTable(size_t capacity) : mask_(capacity - 1), slots_(new Slot[capacity]) {
  assert(std::has_single_bit(capacity));
}

DeviceTable::~DeviceTable() {
  for (size_t i = 0; i <= mask_; ++i) {
    if (Entry* e = slots_[i].entry.load(std::memory_order_relaxed)) e->Unref();
  }
}

DeviceTable::Entry* DeviceTable::Lookup(uint64_t hash, const DeviceId& id) const {
  // At most two thirds full: the probe meets an empty slot.
  for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
    Entry* e = slots_[i].entry.load(std::memory_order_acquire);
    if (e == nullptr) return nullptr;
    if (slots_[i].hash.load(std::memory_order_relaxed) == hash && e->Is(id)) return e;
  }
}

DeviceTable::Answer DeviceTable::Find(uint64_t revision, const DeviceId& id) const {
  const Entry* e = Lookup(HashOf(id), id);
  // Not in the table: nobody held it at any revision the table serves.
  if (e == nullptr) return {true, nullptr};
  return e->At(revision);
}

void DeviceTable::ForEachAt(uint64_t revision,
                            absl::FunctionRef<void(const DeviceId&, const Answer&)> visit) const {
  for (size_t i = 0; i <= mask_; ++i) {
    if (const Entry* e = slots_[i].entry.load(std::memory_order_acquire)) {
      visit(e->id(), e->At(revision));
    }
  }
}

void DeviceTable::Insert(uint64_t hash, Entry* e) {
  assert(!Full(1));
  size_t i = hash & mask_;
  while (slots_[i].entry.load(std::memory_order_relaxed) != nullptr) i = (i + 1) & mask_;
  e->Ref();
  slots_[i].hash.store(hash, std::memory_order_relaxed);
  slots_[i].entry.store(e, std::memory_order_release);  // filled before seen
  ++used_;
}

// DeviceIndex ----------------------------------------------------------------------

std::shared_ptr<DeviceTable> DeviceIndex::NewTable(size_t live) {
  constexpr size_t kMinCapacity = 64;
  // Not std::make_shared: the constructor is private.
  return std::shared_ptr<DeviceTable>(
      new DeviceTable(std::max(kMinCapacity, std::bit_ceil(3 * (live + 1)))));
}

DeviceIndex::DeviceIndex(const AllocatedVersion& version) : table_(NewTable(version.devices)) {
  ForEachDevice(version, [&](const AllocatedDevice& d) {
    const DeviceId id = IdOf(d);
    table_->Insert(HashOf(id), DeviceTable::Entry::New(id, version.revision, &d, version.revision));
    ++live_;
  });
}

void DeviceIndex::Grow() {
  std::shared_ptr<DeviceTable> grown = NewTable(live_);
  for (size_t i = 0; i <= table_->mask_; ++i) {
    const DeviceTable::Slot& slot = table_->slots_[i];
    DeviceTable::Entry* e = slot.entry.load(std::memory_order_relaxed);
    if (e != nullptr && e->Live()) grown->Insert(slot.hash.load(std::memory_order_relaxed), e);
  }
  table_ = std::move(grown);
}

void DeviceIndex::Apply(uint64_t revision, absl::Span<const Change> changes) {
  for (const Change& c : changes) {
    const uint64_t hash = HashOf(c.id);
    if (DeviceTable::Entry* e = table_->Lookup(hash, c.id)) {
      live_ -= e->Live();
      e->Set(revision, c.device);
      live_ += e->Live();
      continue;
    }
    if (c.device == nullptr) continue;  // nobody held it, nobody holds it
    if (table_->Full(1)) Grow();
    // Nobody held it before: known from revision 0 on.
    table_->Insert(hash, DeviceTable::Entry::New(c.id, revision, c.device, /*floor=*/0));
    ++live_;
  }
}

std::shared_ptr<const AllocatedVersion> WithIndex(const AllocatedVersion& version) {
  auto indexed = std::make_shared<AllocatedVersion>(version);
  indexed->index = DeviceIndex(version).table();
  return indexed;
}

std::vector<std::string> CheckIndex(const AllocatedVersion& version) {
  std::vector<std::string> problems;
  if (version.index == nullptr) return problems;
  // Every device the tree holds, as the index has it (or does not know)...
  ForEachDevice(version, [&](const AllocatedDevice& d) {
    const DeviceTable::Answer a = version.index->Find(version.revision, IdOf(d));
    if (a.known && a.device != &d) {
      problems.push_back(absl::StrCat("device index: ", NameOf(IdOf(d)),
                                      a.device == nullptr ? " is missing" : " is another device's",
                                      " at revision ", version.revision));
    }
  });
  // ... and nothing the tree does not.
  version.index->ForEachAt(version.revision, [&](const DeviceId& id, const DeviceTable::Answer& a) {
    if (a.known && a.device != nullptr && FindDevice(version, id) == nullptr) {
      problems.push_back(absl::StrCat("device index: ", NameOf(id), " is held at revision ",
                                      version.revision, " but not in the allocated state"));
    }
  });
  return problems;
}

}  // namespace claimstore::internal
