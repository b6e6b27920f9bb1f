// Package bench measures the Go package as a scheduler plugin uses it,
// against what a plugin author writes by hand, in one binary and run
// (bench/RESULTS.md has the numbers and the command).
package bench

/*
#cgo pkg-config: claimstore
#include <stdio.h>
#include <stdlib.h>
#include "claimstore/c.h"

// n Reserve+Unreserve pairs of one consumer on ns/claim, in C: the store's
// own write time through the C ABI, without Go's share of each call.
static int reserve_pairs(claimstore_t* db, int n) {
  claimstore_key_t key = {claimstore_str("ns"), claimstore_str("claim")};
  claimstore_consumer_t pod = {claimstore_str(""), claimstore_str("pods"), claimstore_str("pod-c"),
                               claimstore_str("uid-c")};
  claimstore_preconditions_t none = {0};
  for (int i = 0; i < n; ++i) {
    int code = claimstore_reserve(db, key, pod, none, NULL, NULL);
    if (code != 0) return code;
    code = claimstore_unreserve(db, key, claimstore_str("uid-c"), none, NULL, NULL);
    if (code != 0) return code;
  }
  return 0;
}

static claimstore_t* open_store(const char* path, uint64_t record_cache_bytes) {
  claimstore_t* db = NULL;
  claimstore_options_t* o = claimstore_options_create();
  if (record_cache_bytes > 0) claimstore_options_set_record_cache_bytes(o, record_cache_bytes);
  int code = claimstore_open(o, claimstore_str(path), &db, NULL);
  claimstore_options_destroy(o);
  return code == 0 ? db : NULL;
}

// n Gets of claims ns/claim-K, K = (i * stride) % claims, into one buffer:
// the store's own read time through the C ABI.
static int get_loop(claimstore_t* db, int n, int claims, int stride) {
  char name[32], buffer[4096];
  for (int i = 0; i < n; ++i) {
    snprintf(name, sizeof name, "claim-%d", (int)(((long long)i * stride) % claims));
    claimstore_key_t key = {claimstore_str("ns"), claimstore_str(name)};
    size_t size = 0;
    int code = claimstore_get_into(db, key, buffer, sizeof buffer, &size, NULL, NULL);
    if (code != 0) return code;
    if (size > sizeof buffer) return -1;  // not read: the loop would measure nothing
  }
  return 0;
}

static int put_json(claimstore_t* db, const char* json) {
  claimstore_preconditions_t none = {0};
  return claimstore_put_json(db, claimstore_str(json), none, NULL, NULL);
}

// The cost of one call into C that does nothing but return a field.
static uint64_t noop(const claimstore_allocated_t* a) { return claimstore_allocated_revision(a); }
static claimstore_allocated_t* snapshot(claimstore_t* db) {
  claimstore_allocated_t* a = NULL;
  claimstore_allocated_devices(db, &a, NULL);
  return a;
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// cStore is a store opened through the C ABI directly, for the C loops.
type cStore struct{ db *C.claimstore_t }

func openCStore(path string, recordCacheBytes uint64) (*cStore, error) {
	p := C.CString(path)
	defer C.free(unsafe.Pointer(p))
	db := C.open_store(p, C.uint64_t(recordCacheBytes))
	if db == nil {
		return nil, errors.New("open failed")
	}
	return &cStore{db}, nil
}

func (s *cStore) putJSON(json string) error {
	p := C.CString(json)
	defer C.free(unsafe.Pointer(p))
	if C.put_json(s.db, p) != 0 {
		return errors.New("put failed")
	}
	return nil
}

func (s *cStore) reservePairs(n int) error {
	if C.reserve_pairs(s.db, C.int(n)) != 0 {
		return errors.New("reserve failed")
	}
	return nil
}

func (s *cStore) getLoop(n, claims, stride int) error {
	if C.get_loop(s.db, C.int(n), C.int(claims), C.int(stride)) != 0 {
		return errors.New("get failed")
	}
	return nil
}

func (s *cStore) close() { C.claimstore_close(s.db) }

// noopCalls makes n calls into C that return a field of a snapshot.
func (s *cStore) noopCalls(n int) uint64 {
	a := C.snapshot(s.db)
	defer C.claimstore_allocated_destroy(a)
	var sum uint64
	for i := 0; i < n; i++ {
		sum += uint64(C.noop(a))
	}
	return sum
}
