// Package claimstore is the Go binding of claimstore, an embedded store of
// Kubernetes DRA ResourceClaim status (resource.k8s.io/v1): claims as
// records in RocksDB, indexes by reserved consumer uid and by allocated
// device, compare-and-set writes, a change feed, and a snapshot of what is
// allocated taken in constant time.
//
// The module is claimstore.dev/claimstore (store/go in the claimstore
// repository); its code imports the standard library only and calls the C ABI
// (claimstore/c.h) through cgo, found with pkg-config (claimstore.pc; set
// PKG_CONFIG_PATH for a prefix other than /usr). From a module of your own:
//
//	require claimstore.dev/claimstore v0.0.0
//	replace claimstore.dev/claimstore => /path/to/claimstore/store/go
//
// Concurrency: a *Store is safe for concurrent use by any number of
// goroutines; a *Claim and an *AllocatedState are immutable and may be read
// from any goroutine; a *ClaimView (GetView) is its caller's until Release;
// a *Watcher's Next is called by one goroutine at a time. Each call into
// the library costs a cgo call (about 0.03–0.1 µs); AllocatedState lookups
// are one call each, Get and GetView are one call.
//
// Errors: every error matches one of the sentinels (ErrNotFound,
// ErrConflict, ErrRefused, ErrExhausted, ErrInvalid, ErrCorrupt,
// ErrUnavailable, ErrCompacted, ErrClosed) with errors.Is, and carries its
// details in an *Error, *ConflictError or *CompactedError (errors.As).
package claimstore
