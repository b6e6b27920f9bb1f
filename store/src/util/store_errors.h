// The store's errors that name a claim, made in one place so that every
// path words them alike.
#ifndef CLAIMSTORE_SRC_UTIL_STORE_ERRORS_H_
#define CLAIMSTORE_SRC_UTIL_STORE_ERRORS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "claimstore/store.h"

namespace claimstore::internal {

// InvalidArgument, naming the field, for a key with an empty namespace or
// name (`what` is how the caller names the key, e.g. "ClaimKey" or
// "keys[3]"): such a key can name no claim.
absl::Status RequireKey(const ClaimKey& key, absl::string_view what = "ClaimKey");
// RequireKey of each (a single key named "ClaimKey", several "keys[i]").
absl::Status RequireKeys(absl::Span<const ClaimKey> keys);

// NotFound: "claim NS/NAME not found".
absl::Status ClaimNotFound(const ClaimKey& key);

// DataLoss: "stored claim NS/NAME: <why>".
absl::Status CorruptClaim(const ClaimKey& key, const absl::Status& why);

// Aborted: "claim NS/NAME has changed: <what>; current revision N", with N
// as the payload that CurrentRevision() reads.
absl::Status RevisionMismatch(const ClaimKey& key, absl::string_view what, uint64_t current);

// `s` with the claims it names as its payload (ClaimsOf in store.h reads
// them): the holder of a device, the two claims of a clash.
absl::Status WithClaims(absl::Status s, const std::vector<ClaimKey>& claims);

// ResourceExhausted "<context>: no space left on device", marked so that
// IsNoSpace (store.h) tells it from the rules' ResourceExhausted.
// `context` names the database (or the file) being written.
absl::Status NoSpaceError(absl::string_view context);

// FailedPrecondition for writes to a read-only store.
absl::Status ReadOnlyError();
// OutOfRange for a watch of `revision` when the feed was compacted up to
// `compact`, with the payload CompactRevision() reads.
absl::Status FeedCompacted(uint64_t revision, uint64_t compact);
// The shared mode's watch error when a restore through etcd replaced the
// claims at `revision`: OutOfRange as FeedCompacted (with `revision` as the
// compact revision): list the claims, then watch from the list's
// revision + 1.
absl::Status GenerationSwitched(uint64_t revision);

// A copy of `s` that shares nothing with it. Writers of a group take their
// errors to their own threads; copies of one absl::Status would share a
// reference count that Debian's Abseil (built without TSAN annotations)
// updates out of ThreadSanitizer's sight.
absl::Status Unshared(const absl::Status& s);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_UTIL_STORE_ERRORS_H_
