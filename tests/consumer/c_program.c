/* A C program against the installed claimstore, linked with pkg-config
 * (shared and static): a claim written, allocated and reserved through the
 * C ABI, read back, looked up in the allocated state and watched. Built
 * with -std=c99 -pedantic -Werror, so the header is plain C. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claimstore/c.h"

static int check(int code, claimstore_error_t* err, const char* what) {
  if (code == CLAIMSTORE_OK) return 0;
  fprintf(stderr, "%s: code %d: %s\n", what, code, err ? claimstore_error_message(err, NULL) : "");
  claimstore_error_destroy(err);
  exit(1);
}

int main(int argc, char** argv) {
  claimstore_t* db = NULL;
  claimstore_error_t* err = NULL;
  claimstore_key_t key;
  claimstore_device_result_t result;
  claimstore_allocation_t allocation;
  claimstore_consumer_t pod;
  claimstore_preconditions_t pre;
  claimstore_write_result_t written;
  claimstore_allocated_t* state = NULL;
  claimstore_device_t device;
  claimstore_watcher_t* watcher = NULL;
  claimstore_event_t event;
  char* record = NULL;
  size_t record_size = 0;
  uint64_t revision = 0;
  int events = 0;
  const char* claim =
      "{\"kind\":\"ResourceClaim\",\"apiVersion\":\"resource.k8s.io/v1\",\"metadata\":"
      "{\"name\":\"trainer\",\"namespace\":\"team-a\",\"uid\":\"uid-1\"},\"status\":{}}";

  if (argc != 2) {
    fprintf(stderr, "usage: %s DB\n", argv[0]);
    return 2;
  }
  check(claimstore_open(NULL, claimstore_str(argv[1]), &db, &err), err, "open");
  check(claimstore_watch(db, 1, claimstore_str(""), claimstore_str(""), &watcher, &err), err,
        "watch");
  memset(&pre, 0, sizeof pre); /* no preconditions */
  check(claimstore_put_json(db, claimstore_str(claim), pre, &written, &err), err, "put");

  key.claim_namespace = claimstore_str("team-a");
  key.name = claimstore_str("trainer");
  memset(&result, 0, sizeof result);
  result.request = claimstore_str("gpu");
  result.driver = claimstore_str("gpu.example.com");
  result.pool = claimstore_str("node-1");
  result.device = claimstore_str("gpu-3");
  result.admin_access = -1;
  memset(&allocation, 0, sizeof allocation);
  allocation.results = &result;
  allocation.result_count = 1;
  allocation.node_name = claimstore_str("node-1");
  memset(&pre, 0, sizeof pre);
  pre.has_mod_revision = 1;
  pre.mod_revision = written.revision;
  check(claimstore_allocate(db, key, &allocation, NULL, 0, pre, &written, &err), err, "allocate");

  pod.api_group = claimstore_str("");
  pod.resource = claimstore_str("pods");
  pod.name = claimstore_str("pod-a");
  pod.uid = claimstore_str("pod-uid-a");
  pre.mod_revision = written.revision;
  check(claimstore_reserve(db, key, pod, pre, &written, &err), err, "reserve");
  /* The same seen revision again: a conflict, with the current revision. */
  if (claimstore_reserve(db, key, pod, pre, NULL, &err) != CLAIMSTORE_ABORTED ||
      !claimstore_error_current_revision(err, &revision)) {
    fprintf(stderr, "a stale revision was not refused\n");
    return 1;
  }
  claimstore_error_destroy(err);
  err = NULL;

  check(claimstore_get(db, key, &record, &record_size, &revision, &err), err, "get");
  claimstore_free(record);

  check(claimstore_allocated_devices(db, &state, &err), err, "allocated");
  if (!claimstore_allocated_find(state, claimstore_str("gpu.example.com"), claimstore_str("node-1"),
                                 claimstore_str("gpu-3"), &device) ||
      !device.has_exclusive) {
    fprintf(stderr, "gpu-3 is not held\n");
    return 1;
  }
  while (events < 3) {
    check(claimstore_watcher_next(watcher, 5000, &event, &err), err, "next");
    ++events;
  }
  printf("c: revision %llu, gpu-3 held by %.*s/%.*s, %d events, %zu record bytes\n",
         (unsigned long long)revision, (int)device.exclusive.claim_namespace.size,
         device.exclusive.claim_namespace.data, (int)device.exclusive.name.size,
         device.exclusive.name.data, events, record_size);
  claimstore_watcher_destroy(watcher);
  claimstore_close(db);
  /* The snapshot outlives the store. */
  printf("c: %zu device(s) held at revision %llu\n", claimstore_allocated_size(state),
         (unsigned long long)claimstore_allocated_revision(state));
  claimstore_allocated_destroy(state);
  return 0;
}
