/* The hot calls of the Go package, with the store and snapshot handles
 * passed as integers and the outcome returned in one struct without
 * pointers.
 *
 * Why: cgo checks, at run time, every argument of a pointer type it cannot
 * see into, and an opaque handle (claimstore_t*, an incomplete struct) is
 * one. To check it, cgo boxes the pointer in an interface, which for a
 * pointer to an incomplete C type is a heap allocation (Go 1.19): every
 * call paid an allocation and two checks (the handle; the error
 * out-parameter, a pointer to a pointer), and each out-parameter whose
 * address went to C was an allocation of its own. An integer and a struct
 * without pointers are neither checked nor boxed.
 *
 * Each wrapper calls the C ABI function of the same name (cs_allocated_devices
 * adds the snapshot's revision and size); the error (NULL
 * on success) comes back as an integer, turned back into a pointer by
 * cs_error on the error path only. */
#ifndef CLAIMSTORE_GO_CALLS_H_
#define CLAIMSTORE_GO_CALLS_H_

#include <stdint.h>

#include "claimstore/c.h"

typedef struct cs_write_t {
  claimstore_write_result_t result;
  uintptr_t error;
} cs_write_t;

typedef struct cs_get_t {
  size_t size;
  uintptr_t error;
} cs_get_t;

/* The snapshot is a C pointer in Go memory: not a Go pointer, so cgo's
 * check of the struct finds nothing to refuse. */
typedef struct cs_snapshot_t {
  claimstore_allocated_t* snapshot;
  uint64_t revision;
  size_t size;
  uintptr_t error;
} cs_snapshot_t;

static inline claimstore_error_t* cs_error(uintptr_t e) { return (claimstore_error_t*)e; }

#define CS_STORE(db) ((claimstore_t*)(db))
/* Returns `call`'s code, with the error it sets through `&e` in out->error. */
#define CS_CALL(out, call)        \
  do {                            \
    claimstore_error_t* e = NULL; \
    int code = (call);            \
    (out)->error = (uintptr_t)e;  \
    return code;                  \
  } while (0)

static inline int cs_get_into(uintptr_t db, claimstore_key_t key, char* buffer, size_t capacity,
                              cs_get_t* out) {
  CS_CALL(out, claimstore_get_into(CS_STORE(db), key, buffer, capacity, &out->size, NULL, &e));
}

static inline int cs_put(uintptr_t db, claimstore_slice_t record, claimstore_preconditions_t pre,
                         cs_write_t* w) {
  CS_CALL(w, claimstore_put(CS_STORE(db), record, pre, &w->result, &e));
}
static inline int cs_put_json(uintptr_t db, claimstore_slice_t json, claimstore_preconditions_t pre,
                              cs_write_t* w) {
  CS_CALL(w, claimstore_put_json(CS_STORE(db), json, pre, &w->result, &e));
}
static inline int cs_delete(uintptr_t db, claimstore_key_t key, claimstore_preconditions_t pre,
                            cs_write_t* w) {
  CS_CALL(w, claimstore_delete(CS_STORE(db), key, pre, &w->result, &e));
}
static inline int cs_reserve(uintptr_t db, claimstore_key_t key, claimstore_consumer_t consumer,
                             claimstore_preconditions_t pre, cs_write_t* w) {
  CS_CALL(w, claimstore_reserve(CS_STORE(db), key, consumer, pre, &w->result, &e));
}
static inline int cs_unreserve(uintptr_t db, claimstore_key_t key, claimstore_slice_t uid,
                               claimstore_preconditions_t pre, cs_write_t* w) {
  CS_CALL(w, claimstore_unreserve(CS_STORE(db), key, uid, pre, &w->result, &e));
}
static inline int cs_allocate(uintptr_t db, claimstore_key_t key,
                              const claimstore_allocation_t* allocation,
                              const claimstore_device_capacity_t* capacity, size_t capacity_count,
                              claimstore_preconditions_t pre, cs_write_t* w) {
  CS_CALL(w, claimstore_allocate(CS_STORE(db), key, allocation, capacity, capacity_count, pre,
                                 &w->result, &e));
}
static inline int cs_allocate_json(uintptr_t db, claimstore_key_t key, claimstore_slice_t json,
                                   const claimstore_device_capacity_t* capacity,
                                   size_t capacity_count, claimstore_preconditions_t pre,
                                   cs_write_t* w) {
  CS_CALL(w, claimstore_allocate_json(CS_STORE(db), key, json, capacity, capacity_count, pre,
                                      &w->result, &e));
}
static inline int cs_deallocate(uintptr_t db, claimstore_key_t key, claimstore_preconditions_t pre,
                                cs_write_t* w) {
  CS_CALL(w, claimstore_deallocate(CS_STORE(db), key, pre, &w->result, &e));
}
static inline int cs_set_device_status_json(uintptr_t db, claimstore_key_t key,
                                            claimstore_slice_t json, claimstore_preconditions_t pre,
                                            cs_write_t* w) {
  CS_CALL(w, claimstore_set_device_status_json(CS_STORE(db), key, json, pre, &w->result, &e));
}

static inline int cs_allocated_taken(uintptr_t snapshot, claimstore_slice_t driver,
                                     claimstore_slice_t pool, claimstore_slice_t device) {
  return claimstore_allocated_taken((const claimstore_allocated_t*)snapshot, driver, pool, device);
}
/* claimstore_allocated_devices with the snapshot's revision and size: one
 * call instead of three. */
static inline int cs_allocated_devices(uintptr_t db, cs_snapshot_t* out) {
  claimstore_allocated_t* h = NULL;
  claimstore_error_t* e = NULL;
  int code = claimstore_allocated_devices(CS_STORE(db), &h, &e);
  out->error = (uintptr_t)e;
  if (code != 0) return code;
  out->snapshot = h;
  out->revision = claimstore_allocated_revision(h);
  out->size = claimstore_allocated_size(h);
  return 0;
}
static inline void cs_allocated_taken_many(uintptr_t snapshot, claimstore_slice_t driver,
                                           claimstore_slice_t pool, const char* names,
                                           const uint32_t* lengths, size_t n, uint8_t* taken) {
  claimstore_allocated_taken_many((const claimstore_allocated_t*)snapshot, driver, pool, names,
                                  lengths, n, taken);
}
static inline int cs_allocated_find(uintptr_t snapshot, claimstore_slice_t driver,
                                    claimstore_slice_t pool, claimstore_slice_t device,
                                    claimstore_device_t* out) {
  return claimstore_allocated_find((const claimstore_allocated_t*)snapshot, driver, pool, device,
                                   out);
}

#endif /* CLAIMSTORE_GO_CALLS_H_ */
