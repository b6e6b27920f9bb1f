/* claimstore's C ABI (C99, no C++): the store, its reads and writes, the
 * allocated-state snapshot, the change feed and the codec, for C programs
 * and bindings (the Go package in store/go uses nothing else). Link with
 * `pkg-config --cflags --libs claimstore` (add --static for libclaimstore.a).
 *
 * Ownership: each opaque handle is freed by one function (claimstore_close,
 * claimstore_*_destroy; NULL does nothing). Slices in are read during the
 * call only; slices out stay valid until their handle is destroyed (a
 * watcher's events: until its next claimstore_watcher_next); returned
 * buffers are freed with claimstore_free. A call that can fail returns
 * CLAIMSTORE_OK (0) or an absl::StatusCode value (then the error in *err).
 *
 * Thread-safety: a claimstore_t may be used from any number of threads at
 * once; result handles are immutable; a watcher is read by one thread at a
 * time (cancelled from any). Destroy a store's handles before
 * claimstore_close, except errors, buffers and allocated-state snapshots.
 *
 * Conventions, ABI, thread-safety in full: docs/c-and-go.md, Conventions.
 */
#ifndef CLAIMSTORE_C_H_
#define CLAIMSTORE_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- Status codes: absl::StatusCode's values. --- */
enum {
  CLAIMSTORE_OK = 0,
  CLAIMSTORE_CANCELLED = 1,
  CLAIMSTORE_UNKNOWN = 2,
  CLAIMSTORE_INVALID_ARGUMENT = 3,  /* bad input; nothing written */
  CLAIMSTORE_DEADLINE_EXCEEDED = 4, /* a watcher's timeout */
  CLAIMSTORE_NOT_FOUND = 5,
  CLAIMSTORE_ALREADY_EXISTS = 6,
  CLAIMSTORE_PERMISSION_DENIED = 7,
  CLAIMSTORE_RESOURCE_EXHAUSTED = 8,  /* 256 consumers; a full disk (claimstore_error_no_space) */
  CLAIMSTORE_FAILED_PRECONDITION = 9, /* a rule forbids the change */
  CLAIMSTORE_ABORTED = 10,            /* a revision/uid precondition, a device held */
  CLAIMSTORE_OUT_OF_RANGE = 11,       /* a watch of compacted revisions */
  CLAIMSTORE_UNIMPLEMENTED = 12,
  CLAIMSTORE_INTERNAL = 13,
  CLAIMSTORE_UNAVAILABLE = 14,
  CLAIMSTORE_DATA_LOSS = 15, /* a corrupt record or key */
  CLAIMSTORE_UNAUTHENTICATED = 16
};

/* Bytes: a pointer and a length. */
typedef struct claimstore_slice_t {
  const char* data;
  size_t size;
} claimstore_slice_t;

/* A slice of a NUL-terminated string (NULL: the empty slice). */
claimstore_slice_t claimstore_str(const char* s);

/* A claim's key: namespace and name. */
typedef struct claimstore_key_t {
  claimstore_slice_t claim_namespace;
  claimstore_slice_t name;
} claimstore_key_t;

/* Frees a buffer the library returned. */
void claimstore_free(void* p);

/* --- Errors --- */

typedef struct claimstore_error_t claimstore_error_t;

int claimstore_error_code(const claimstore_error_t* err);
/* NUL-terminated; *size (when size is not NULL) gets its length. */
const char* claimstore_error_message(const claimstore_error_t* err, size_t* size);
/* Of an ABORTED precondition failure: 1 and the claim's current revision
 * in *revision; 0 otherwise. */
int claimstore_error_current_revision(const claimstore_error_t* err, uint64_t* revision);
/* Of an OUT_OF_RANGE watch: 1 and the revision the feed is compacted up to. */
int claimstore_error_compact_revision(const claimstore_error_t* err, uint64_t* revision);
/* 1 for the RESOURCE_EXHAUSTED of a full disk ("...: no space left on
 * device"; IsNoSpace in store.h), 0 otherwise (256 consumers, a device's
 * capacity). The store takes writes again by itself once space is freed. */
int claimstore_error_no_space(const claimstore_error_t* err);
/* Of an ABORTED device conflict: the claims it names (the holder; for a bulk
 * clash both). Returns their number; *claims points at them. */
size_t claimstore_error_claims(const claimstore_error_t* err, const claimstore_key_t** claims);
/* One Kubernetes field error of a refused write (FieldError in
 * validation.h): "<field>: <type>[: <value>][: <detail>]". */
typedef struct claimstore_field_error_t {
  claimstore_slice_t type;  /* "Required value", "Invalid value", "Duplicate value", ... */
  claimstore_slice_t field; /* e.g. status.reservedFor[3].uid */
  claimstore_slice_t value; /* as Kubernetes prints it, or empty */
  claimstore_slice_t detail;
  claimstore_slice_t rule; /* claimstore's name for the rule */
} claimstore_field_error_t;
/* Of an INVALID_ARGUMENT (or FAILED_PRECONDITION) from validation: every
 * field error, in Kubernetes' order. Returns their number (0 for errors of
 * other kinds, e.g. malformed JSON, whose message names the path). */
size_t claimstore_error_fields(const claimstore_error_t* err,
                               const claimstore_field_error_t** fields);
void claimstore_error_destroy(claimstore_error_t* err);

/* --- Options (Options in store.h; each setter's default is the C++ one) --- */

typedef struct claimstore_options_t claimstore_options_t;
enum {
  CLAIMSTORE_COMPRESSION_NONE = 0,
  CLAIMSTORE_COMPRESSION_LZ4 = 1,
  CLAIMSTORE_COMPRESSION_ZSTD = 2
};

claimstore_options_t* claimstore_options_create(void);
void claimstore_options_destroy(claimstore_options_t* options);
void claimstore_options_set_create_if_missing(claimstore_options_t* options, int value);
void claimstore_options_set_read_only(claimstore_options_t* options, int value);
void claimstore_options_set_sync_writes(claimstore_options_t* options, int value);
void claimstore_options_set_block_cache_bytes(claimstore_options_t* options, uint64_t value);
void claimstore_options_set_write_buffer_bytes(claimstore_options_t* options, uint64_t value);
void claimstore_options_set_record_cache_bytes(claimstore_options_t* options, uint64_t value);
/* INVALID_ARGUMENT at claimstore_open for a value not in the enum. */
void claimstore_options_set_compression(claimstore_options_t* options, int value);
void claimstore_options_set_defer_index_load(claimstore_options_t* options, int value);
void claimstore_options_set_feed_history_revisions(claimstore_options_t* options, uint64_t value);
void claimstore_options_set_feed_history_bytes(claimstore_options_t* options, uint64_t value);
void claimstore_options_set_feed_records_before(claimstore_options_t* options, int value);
/* The shared mode (docs/shared-mode.md): etcd holds the claims, the
 * database at the path is this process's mirror. Each call adds one etcd
 * client URL ("http://10.0.0.1:2379"); any added turns the mode on. */
void claimstore_options_add_etcd_endpoint(claimstore_options_t* options, claimstore_slice_t url);
/* The prefix of the store's keys in etcd (default "/claimstore/"). */
void claimstore_options_set_etcd_prefix(claimstore_options_t* options, claimstore_slice_t prefix);
/* The deadline of one etcd request, and of a write's wait for the mirror
 * (default 5000 ms; claimstore_open refuses 0 and more than 24 h). */
void claimstore_options_set_etcd_timeout_ms(claimstore_options_t* options, uint64_t ms);
/* TLS to etcd (https:// endpoints): PEM files of the CA that signed the
 * members' certificates (empty: gRPC's default roots), of this client's
 * certificate and of its key (both or neither). Read at claimstore_open. */
void claimstore_options_set_etcd_tls_files(claimstore_options_t* options,
                                           claimstore_slice_t ca_file, claimstore_slice_t cert_file,
                                           claimstore_slice_t key_file);

/* --- The store --- */

typedef struct claimstore_t claimstore_t;

/* Opens (or creates) the database at `path` (Store::Open; options NULL:
 * the defaults). The options are read during the call only. */
int claimstore_open(const claimstore_options_t* options, claimstore_slice_t path,
                    claimstore_t** out, claimstore_error_t** err);
/* Closes the store: waits for nothing (no call may be in flight). */
void claimstore_close(claimstore_t* store);

/* Conditions a write must meet (Preconditions in store.h). Zero-initialize
 * for none. */
typedef struct claimstore_preconditions_t {
  int has_mod_revision;
  uint64_t mod_revision;
  int has_uid;
  claimstore_slice_t uid;
} claimstore_preconditions_t;

typedef struct claimstore_write_result_t {
  uint64_t revision; /* the claim's mod revision after the call */
  int changed;       /* 0 for an idempotent no-op */
} claimstore_write_result_t;

/* --- Records: ClaimRecord bytes (FlatBuffers, schema/claim.fbs, verified)
 * as the store keeps them. --- */

typedef struct claimstore_records_t claimstore_records_t;

/* How many; and the i-th record's bytes in *record (data NULL for a claim
 * claimstore_get_many did not find). i < count. */
size_t claimstore_records_count(const claimstore_records_t* records);
claimstore_slice_t claimstore_records_at(const claimstore_records_t* records, size_t i);
/* All of them at once: an array of count slices, in order. */
const claimstore_slice_t* claimstore_records_items(const claimstore_records_t* records);
/* The store revision the read saw (0 for decoded records). */
uint64_t claimstore_records_revision(const claimstore_records_t* records);
/* claimstore_list: the token of the next page (empty on the last). */
claimstore_slice_t claimstore_records_continue(const claimstore_records_t* records);
/* claimstore_decode: the i-th claim's watch event (CLAIMSTORE_EVENT_*). */
int claimstore_records_event(const claimstore_records_t* records, size_t i);
void claimstore_records_destroy(claimstore_records_t* records);

/* --- Reads: each at one consistent snapshot. --- */

/* The claim's record bytes (*record, *record_size, both required: malloc'd,
 * claimstore_free) and the store revision the read saw (revision may be
 * NULL). NOT_FOUND when absent. */
int claimstore_get(claimstore_t* store, claimstore_key_t key, char** record, size_t* record_size,
                   uint64_t* revision, claimstore_error_t** err);
/* claimstore_get into the caller's buffer, for bindings that own their
 * memory (one call, no buffer to free): copies the record when it fits
 * (*record_size <= capacity). When it does not, copies nothing, sets
 * *record_size to the size needed and returns CLAIMSTORE_OK: call again
 * with a buffer that large (the claim may have changed meanwhile). */
int claimstore_get_into(claimstore_t* store, claimstore_key_t key, char* buffer, size_t capacity,
                        size_t* record_size, uint64_t* revision, claimstore_error_t** err);
/* Many claims at one snapshot, in the order asked; absent ones have NULL
 * data. */
int claimstore_get_many(claimstore_t* store, const claimstore_key_t* keys, size_t count,
                        claimstore_records_t** out, claimstore_error_t** err);
/* A page of claims in key order: of one namespace (empty: every one), at
 * most `limit` (0: no limit), after `continue_token` (empty: the first). */
int claimstore_list(claimstore_t* store, claimstore_slice_t claim_namespace, size_t limit,
                    claimstore_slice_t continue_token, claimstore_records_t** out,
                    claimstore_error_t** err);

typedef struct claimstore_keys_t claimstore_keys_t;
/* The keys (count in *count) and the revision they were read at. */
const claimstore_key_t* claimstore_keys_items(const claimstore_keys_t* keys, size_t* count);
uint64_t claimstore_keys_revision(const claimstore_keys_t* keys);
void claimstore_keys_destroy(claimstore_keys_t* keys);

/* The claims whose status.reservedFor holds `consumer_uid`. */
int claimstore_claims_reserved_for(claimstore_t* store, claimstore_slice_t consumer_uid,
                                   claimstore_keys_t** out, claimstore_error_t** err);

enum {
  CLAIMSTORE_HOLDING_EXCLUSIVE = 0,
  CLAIMSTORE_HOLDING_SHARE = 1,
  CLAIMSTORE_HOLDING_ADMIN_ACCESS = 2
};

typedef struct claimstore_holding_t {
  claimstore_slice_t driver, pool, device;
  int kind;                    /* CLAIMSTORE_HOLDING_* */
  claimstore_slice_t share_id; /* empty unless the result had one */
  claimstore_key_t claim;
} claimstore_holding_t;

typedef struct claimstore_holdings_t claimstore_holdings_t;
const claimstore_holding_t* claimstore_holdings_items(const claimstore_holdings_t* holdings,
                                                      size_t* count);
uint64_t claimstore_holdings_revision(const claimstore_holdings_t* holdings);
void claimstore_holdings_destroy(claimstore_holdings_t* holdings);

/* Who holds a device, or every holding of a driver or pool (DeviceQuery):
 * a part with NULL data is not given; each needs the one before it. */
typedef struct claimstore_device_query_t {
  claimstore_slice_t driver, pool, device, share_id;
} claimstore_device_query_t;
int claimstore_claims_using_device(claimstore_t* store, claimstore_device_query_t query,
                                   claimstore_holdings_t** out, claimstore_error_t** err);

/* --- What is allocated (claimstore/allocated.h): a snapshot taken in
 * constant time, independent of the store once taken. --- */

typedef struct claimstore_allocated_t claimstore_allocated_t;

typedef struct claimstore_capacity_t {
  claimstore_slice_t name;
  claimstore_slice_t quantity;
} claimstore_capacity_t;

/* One held device, a view into its snapshot (valid while the snapshot
 * lives). Its shares, admin-access holders and consumed capacity are read
 * with the claimstore_device_* calls below. */
typedef struct claimstore_device_t {
  claimstore_slice_t driver, pool, device;
  int has_exclusive;
  claimstore_key_t exclusive;
  size_t share_count;
  size_t admin_access_count;
  size_t consumed_capacity_count;
  const void* impl; /* the library's */
} claimstore_device_t;

typedef struct claimstore_share_t {
  claimstore_slice_t share_id;
  claimstore_key_t claim;
  size_t consumed_capacity_count;
} claimstore_share_t;

int claimstore_allocated_devices(claimstore_t* store, claimstore_allocated_t** out,
                                 claimstore_error_t** err);
uint64_t claimstore_allocated_revision(const claimstore_allocated_t* snapshot);
size_t claimstore_allocated_size(const claimstore_allocated_t* snapshot);
/* 1 and *out when some claim holds the device, 0 when none. */
int claimstore_allocated_find(const claimstore_allocated_t* snapshot, claimstore_slice_t driver,
                              claimstore_slice_t pool, claimstore_slice_t device,
                              claimstore_device_t* out);
/* Whether a new exclusive holding would be refused (held exclusively or
 * shared; admin access does not count). */
int claimstore_allocated_taken(const claimstore_allocated_t* snapshot, claimstore_slice_t driver,
                               claimstore_slice_t pool, claimstore_slice_t device);
/* claimstore_allocated_taken for n devices of one pool in one call (a pod's
 * candidates): device i is the next lengths[i] bytes of `names` (the names
 * back to back); taken[i] gets 1 or 0. */
void claimstore_allocated_taken_many(const claimstore_allocated_t* snapshot,
                                     claimstore_slice_t driver, claimstore_slice_t pool,
                                     const char* names, const uint32_t* lengths, size_t n,
                                     uint8_t* taken);
/* Many devices at once, in key order: every held device (driver empty), a
 * driver's, or one pool's (pool data not NULL). The views in the list
 * point into the snapshot: destroy the list first. NULL only when memory
 * ran out. */
typedef struct claimstore_devices_t claimstore_devices_t;
claimstore_devices_t* claimstore_allocated_list(const claimstore_allocated_t* snapshot,
                                                claimstore_slice_t driver, claimstore_slice_t pool);
const claimstore_device_t* claimstore_devices_items(const claimstore_devices_t* devices,
                                                    size_t* count);
void claimstore_devices_destroy(claimstore_devices_t* devices);
void claimstore_allocated_destroy(claimstore_allocated_t* snapshot);

/* The i-th (in order) of a device's shares, admin-access holders and
 * consumed capacity sums (i below the device's count), and of a share's
 * consumedCapacity. */
claimstore_share_t claimstore_device_share(const claimstore_device_t* device, size_t i);
claimstore_key_t claimstore_device_admin_access(const claimstore_device_t* device, size_t i);
claimstore_capacity_t claimstore_device_consumed_capacity(const claimstore_device_t* device,
                                                          size_t i);
claimstore_capacity_t claimstore_device_share_consumed_capacity(const claimstore_device_t* device,
                                                                size_t share, size_t i);

/* --- Writes: each atomic, with optional preconditions; *result (when not
 * NULL) gets the revision. --- */

/* The rest of the Kubernetes object a record keeps (see
 * claimstore_apply_cluster_events_json), a view into `record`; empty when
 * it keeps none or `record` is not a record. */
claimstore_slice_t claimstore_record_object(claimstore_slice_t record);

/* A whole record from ClaimRecord bytes (DATA_LOSS when they are not one),
 * or from one ResourceClaim's JSON. */
int claimstore_put(claimstore_t* store, claimstore_slice_t record, claimstore_preconditions_t pre,
                   claimstore_write_result_t* result, claimstore_error_t** err);
int claimstore_put_json(claimstore_t* store, claimstore_slice_t json,
                        claimstore_preconditions_t pre, claimstore_write_result_t* result,
                        claimstore_error_t** err);
int claimstore_delete(claimstore_t* store, claimstore_key_t key, claimstore_preconditions_t pre,
                      claimstore_write_result_t* result, claimstore_error_t** err);

/* Follows a Kubernetes cluster (Store::ApplyClusterEvents): `json` holds
 * claims as the API server has them, in any form claimstore_decode reads
 * (one ResourceClaim, a List, JSON lines, watch events; a DELETED event
 * deletes its claim; empty: none, the position alone, as a watch's
 * bookmark moves it); they are applied in one atomic write, validated
 * whole with no rule about a change (the API server ratified it), skipped
 * where the stored claim's resourceVersion is as new, and
 * `resource_version` is stored as the stream's position
 * (claimstore_stats_t.follow_resource_version; it only moves forward).
 * With `objects` (objects_count: one per claim, or 0 and NULL for none),
 * claim i keeps objects[i] as the rest of its Kubernetes object (metadata
 * and spec, opaque; at most 1.5 MiB; empty: none), read back with
 * claimstore_record_object.
 * *results (when `results` is not NULL) gets a malloc'd array of one
 * result per claim, in input order (changed 0 for a skipped claim), to be
 * freed with claimstore_free, and *results_count its length. INVALID_ARGUMENT
 * naming the item and field path, ABORTED for a device another claim
 * holds: nothing is written then. Thread-safe. */
int claimstore_apply_cluster_events_json(claimstore_t* store, claimstore_slice_t json,
                                         const claimstore_slice_t* objects, size_t objects_count,
                                         uint64_t resource_version,
                                         claimstore_write_result_t** results, size_t* results_count,
                                         claimstore_error_t** err);

typedef struct claimstore_consumer_t {
  claimstore_slice_t api_group, resource, name, uid;
} claimstore_consumer_t;
int claimstore_reserve(claimstore_t* store, claimstore_key_t key, claimstore_consumer_t consumer,
                       claimstore_preconditions_t pre, claimstore_write_result_t* result,
                       claimstore_error_t** err);
int claimstore_unreserve(claimstore_t* store, claimstore_key_t key, claimstore_slice_t consumer_uid,
                         claimstore_preconditions_t pre, claimstore_write_result_t* result,
                         claimstore_error_t** err);

/* One allocated device (DeviceResult in allocation.h). */
typedef struct claimstore_device_result_t {
  claimstore_slice_t request, driver, pool, device;
  int has_share_id;
  claimstore_slice_t share_id;
  int admin_access; /* -1: unset, 0: false, 1: true */
  const claimstore_capacity_t* consumed_capacity;
  size_t consumed_capacity_count;
} claimstore_device_result_t;

/* An allocation result built from device results (AllocationBuilder). */
typedef struct claimstore_allocation_t {
  const claimstore_device_result_t* results;
  size_t result_count;
  claimstore_slice_t node_name; /* empty: no node selector */
  int has_allocation_timestamp;
  int64_t allocation_timestamp; /* Unix seconds */
} claimstore_allocation_t;

/* A device's capacity limits, for the capacity check of Allocate. */
typedef struct claimstore_device_capacity_t {
  claimstore_slice_t driver, pool, device;
  const claimstore_capacity_t* capacity;
  size_t capacity_count;
} claimstore_device_capacity_t;

/* Sets status.allocation (Store::Allocate): from device results, or from an
 * AllocationResult's JSON. `capacity` (count 0: none) limits the devices it
 * shares. ABORTED with the holder (claimstore_error_claims) for a device
 * another claim holds. */
int claimstore_allocate(claimstore_t* store, claimstore_key_t key,
                        const claimstore_allocation_t* allocation,
                        const claimstore_device_capacity_t* capacity, size_t capacity_count,
                        claimstore_preconditions_t pre, claimstore_write_result_t* result,
                        claimstore_error_t** err);
int claimstore_allocate_json(claimstore_t* store, claimstore_key_t key, claimstore_slice_t json,
                             const claimstore_device_capacity_t* capacity, size_t capacity_count,
                             claimstore_preconditions_t pre, claimstore_write_result_t* result,
                             claimstore_error_t** err);
int claimstore_deallocate(claimstore_t* store, claimstore_key_t key, claimstore_preconditions_t pre,
                          claimstore_write_result_t* result, claimstore_error_t** err);
/* Sets status.devices entries from a JSON array of AllocatedDeviceStatus. */
int claimstore_set_device_status_json(claimstore_t* store, claimstore_key_t key,
                                      claimstore_slice_t json_array, claimstore_preconditions_t pre,
                                      claimstore_write_result_t* result, claimstore_error_t** err);

/* --- The change feed (Store::Watch) --- */

enum {
  CLAIMSTORE_EVENT_NONE = 0,
  CLAIMSTORE_EVENT_ADDED = 1,
  CLAIMSTORE_EVENT_MODIFIED = 2,
  CLAIMSTORE_EVENT_DELETED = 3
};

typedef struct claimstore_watcher_t claimstore_watcher_t;

/* One event; its slices are valid until the watcher's next
 * claimstore_watcher_next or its destruction. */
typedef struct claimstore_event_t {
  int type; /* CLAIMSTORE_EVENT_* */
  uint64_t revision;
  claimstore_key_t key;
  claimstore_slice_t record; /* the claim as written; for DELETED as it was */
  claimstore_slice_t before; /* data NULL unless the store keeps it */
} claimstore_event_t;

/* From `from_revision` (0: the next one committed), only claims of
 * `claim_namespace` and whose "ns/name" starts with `key_prefix` (empty:
 * all). OUT_OF_RANGE with the compact revision when it was compacted. */
int claimstore_watch(claimstore_t* store, uint64_t from_revision,
                     claimstore_slice_t claim_namespace, claimstore_slice_t key_prefix,
                     claimstore_watcher_t** out, claimstore_error_t** err);
/* Waits up to timeout_ms for the next event: DEADLINE_EXCEEDED when none
 * came (call again), CANCELLED after claimstore_watcher_cancel,
 * OUT_OF_RANGE when the watcher fell behind the feed's history. */
int claimstore_watcher_next(claimstore_watcher_t* watcher, int64_t timeout_ms,
                            claimstore_event_t* event, claimstore_error_t** err);
uint64_t claimstore_watcher_next_revision(const claimstore_watcher_t* watcher);
/* From any thread: a waiting next, and every later one, returns CANCELLED. */
void claimstore_watcher_cancel(claimstore_watcher_t* watcher);
void claimstore_watcher_destroy(claimstore_watcher_t* watcher);

/* --- The codec (codec.h) --- */

/* Every claim of any input form (a claim, a list, kubectl's List, JSON
 * lines, watch events), as records; INVALID_ARGUMENT naming the field path
 * or byte offset. */
int claimstore_decode(claimstore_slice_t input, claimstore_records_t** out,
                      claimstore_error_t** err);
/* A record as a ResourceClaim's JSON (indent empty: compact). DATA_LOSS
 * when the bytes are not a record. */
int claimstore_encode_json(claimstore_slice_t record, claimstore_slice_t indent, char** json,
                           size_t* json_size, claimstore_error_t** err);

/* --- Maintenance --- */

typedef struct claimstore_verify_report_t claimstore_verify_report_t;
/* Verify (repair: rewrite the indexes from the records). */
int claimstore_verify(claimstore_t* store, int repair, claimstore_verify_report_t** out,
                      claimstore_error_t** err);
uint64_t claimstore_verify_report_records(const claimstore_verify_report_t* report);
uint64_t claimstore_verify_report_index_entries(const claimstore_verify_report_t* report);
int claimstore_verify_report_repaired(const claimstore_verify_report_t* report);
/* The problems found, one line each (count in *count). */
const claimstore_slice_t* claimstore_verify_report_problems(
    const claimstore_verify_report_t* report, size_t* count);
void claimstore_verify_report_destroy(claimstore_verify_report_t* report);

/* StoreStats in store.h. New members are only ever added at the end, and
 * the caller says how much it knows: pass sizeof(claimstore_stats_t). */
typedef struct claimstore_stats_t {
  uint64_t claims, allocated, reserved, unvalidated;
  uint64_t consumer_entries, device_entries;
  uint64_t revision;
  uint64_t size_on_disk_bytes;
  uint64_t feed_compact_revision;
  uint64_t follow_resource_version;
  /* The shared mode: 1 while the mirror follows etcd; else, since when it
   * cannot (Unix time in nanoseconds; 0 when it never could not). */
  uint64_t etcd_following;
  int64_t etcd_unreachable_since_unix_ns;
} claimstore_stats_t;
int claimstore_stats(claimstore_t* store, claimstore_stats_t* out, size_t out_size,
                     claimstore_error_t** err);

/* A consistent copy of the database at `dir` (which must not exist). */
int claimstore_backup(claimstore_t* store, claimstore_slice_t dir, claimstore_error_t** err);
/* Read-only stores: catch up with the writer (OK no-op otherwise). */
int claimstore_refresh(claimstore_t* store, claimstore_error_t** err);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CLAIMSTORE_C_H_ */
