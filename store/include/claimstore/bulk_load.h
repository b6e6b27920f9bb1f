// A bulk load (Store::StartBulkLoad): a restore of any size in one atomic
// commit, written as sorted table files and ingested by RocksDB at once,
// with the same validation and device rule as single writes. What it
// writes, what it costs and its thread-safety: BulkLoad, below; the tool's
// `restore` runs on it (docs/cli.md).
#ifndef CLAIMSTORE_BULK_LOAD_H_
#define CLAIMSTORE_BULK_LOAD_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "claimstore/claim_key.h"
#include "claimstore/claim_record.h"

namespace claimstore {

// Where a bulk load's Commit (or DryRun) is: its phase, and in "writing"
// the claims written of all.
struct BulkLoadProgress {
  const char* phase = "";  // "sorting", "checking", "writing", "committing"
  uint64_t done = 0, total = 0;
};

// How a bulk load treats what the store holds.
struct BulkLoadOptions {
  // Afterwards the store holds exactly the load: every stored claim the load
  // does not add is deleted. Default: false (stored claims the load does not
  // name are kept).
  bool replace_all = false;

  // Validation off: a claim must still decode (the codec is strict) and
  // keep the identity rules (validation.h, FieldError::identity_rule: list-
  // map keys unique, consumer references whole, reservations only with an
  // allocation), and the device rule holds across claims as always; format
  // and limit rules are not enforced. A claim that breaks one is stored with
  // its unvalidated mark (ClaimRecord::unvalidated, StoreStats::unvalidated);
  // later writes ratchet, as the API server's do: what a write leaves
  // unchanged is not re-validated, and the mark goes once the claim passes
  // every rule. For dumps of clusters whose rules were looser (another
  // release). Default: true.
  bool validate = true;

  // Called as Commit or DryRun enters each phase, and while writing about
  // every 4,096 claims, from the load's threads (perhaps two at once), while
  // the commit holds the store's writes: keep it short and thread-safe, and
  // never call the store from it (that would wait for the commit, forever).
  // Other writers wait for the commit meanwhile. For progress lines.
  // Default: none.
  std::function<void(const BulkLoadProgress&)> progress;
};

// What a bulk load wrote (or, for DryRun, would write).
struct BulkLoadResult {
  uint64_t claims = 0;       // claims loaded (added or replacing a stored one)
  uint64_t replaced = 0;     // of them, claims the store held
  uint64_t deleted = 0;      // stored claims deleted and not loaded again
  uint64_t unvalidated = 0;  // loaded claims marked unvalidated (validate = false)
  uint64_t revision = 0;     // the store revision after it
};

// A restore in one atomic commit, whatever the store holds, several times
// faster than PutAll: the claims are collected (and validated as they are
// added), then Commit sorts them, checks them against each other and
// against the stored claims they do not replace, writes the records, both
// indexes and every deletion as sorted table files and hands those to
// RocksDB in one atomic ingestion: no write-ahead log, no memtables.
//
// The result is what these writes would leave, one after another: Delete
// of every stored claim the load deletes (its Deletes, and with
// replace_all every stored claim it does not add) or replaces, in key
// order; then PutAll of the loaded claims in key order. So a loaded claim
// is written anew, whatever the store held (create revision = mod
// revision, version 1), and the store revision R grows by one per deleted,
// per replaced and per loaded claim: loaded claim i of key order has
// revision R + deleted + replaced + i.
//
// A claim is validated as state, replaced or not (validation.h: no rule
// about a change applies to a claim loaded whole: a restore loads state, it
// does not update), and the device rule holds across the result: a loaded claim may not hold a
// device in a way that excludes the holding of another loaded claim, or of a stored claim that
// stays.
//
// Memory: the encoded claims are held until Commit (about 0.5 KB per
// claim of typical shape, plus their index keys).
//
// The change feed: a load of millions of claims does not write an event
// per claim. It compacts the feed to its revision instead, in the same
// ingestion: a watcher from before it is told OutOfRange (as after any
// compaction) and re-lists, which costs it one List instead of one event
// per claim loaded, deleted or replaced.
//
// Thread-safety: Add and Delete may be called from any number of threads at
// once (decode in parallel, add as you go); Commit or DryRun once, after
// every Add has returned. A BulkLoad must not outlive its Store. Reads of
// the store go on during Commit and see either the state before it or the
// state after it, never a part; writes wait for it (a write that came in
// since StartBulkLoad is part of the state the load is applied to).
class BulkLoad {
 public:
  virtual ~BulkLoad();
  // Adds one claim. `ordinal` orders what the load says of one claim: of its
  // Adds and Deletes, the one with the largest ordinal is what the store
  // holds afterwards (an input's item number, so that a later watch event
  // of a claim wins). InvalidArgument naming the field path when the claim
  // is invalid; nothing is written before Commit.
  virtual absl::Status Add(const ClaimRecord& record, uint64_t ordinal = 0) = 0;
  // Deletes the stored claim `key` (nothing when the store holds none),
  // unless an Add of it with a larger ordinal comes.
  virtual absl::Status Delete(const ClaimKey& key, uint64_t ordinal) = 0;
  // Writes the load, all or none (also across a crash). Nothing is written
  // when it fails:
  //   InvalidArgument     two Adds or Deletes of one claim with the same
  //                       ordinal (names it)
  //   Aborted             claims would hold a device in ways that exclude
  //                       each other (names the device and both claims)
  //   FailedPrecondition  Commit or DryRun was called before
  // and the mapped RocksDB error otherwise. A failure of the ingestion itself
  // stops writes, as a failed commit does (see Store).
  virtual absl::StatusOr<BulkLoadResult> Commit() = 0;
  // Checks what Commit checks, against the store as it is now, and says what
  // Commit would have written; writes nothing. The same errors.
  virtual absl::StatusOr<BulkLoadResult> DryRun() = 0;
};

}  // namespace claimstore

#endif  // CLAIMSTORE_BULK_LOAD_H_
