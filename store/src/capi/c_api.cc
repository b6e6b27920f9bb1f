// The C ABI (claimstore/c.h) over the C++ API: conversions in, results held
// in handles, and no exception out.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "claimstore/allocated.h"
#include "claimstore/allocation.h"
#include "claimstore/c.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "claimstore/validation.h"

using claimstore::AllocatedDevice;
using claimstore::AllocatedState;
using claimstore::ClaimKey;
using claimstore::ClaimRecord;
using claimstore::Store;

struct claimstore_error_t {
  int code = 0;
  std::string message;
  std::optional<uint64_t> current_revision;
  std::optional<uint64_t> compact_revision;
  bool no_space = false;
  std::vector<ClaimKey> claims;
  std::vector<claimstore_key_t> claim_views;
  std::vector<claimstore::FieldError> fields;
  std::vector<claimstore_field_error_t> field_views;
};

struct claimstore_options_t {
  claimstore::Options options;
  int compression = CLAIMSTORE_COMPRESSION_LZ4;
  bool out_of_memory = false;  // a setter could not copy its string
};

struct claimstore_t {
  std::unique_ptr<Store> store;
};

struct claimstore_records_t {
  std::vector<std::optional<ClaimRecord>> records;
  std::vector<claimstore_slice_t> views;
  std::vector<int> events;
  std::string continue_token;
  uint64_t revision = 0;
};

struct claimstore_keys_t {
  std::vector<ClaimKey> keys;
  std::vector<claimstore_key_t> views;
  uint64_t revision = 0;
};

struct claimstore_holdings_t {
  claimstore::DeviceHoldings holdings;
  std::vector<claimstore_holding_t> views;
};

struct claimstore_allocated_t {
  AllocatedState state;
};

struct claimstore_devices_t {
  std::vector<claimstore_device_t> views;
};

struct claimstore_watcher_t {
  std::unique_ptr<claimstore::Watcher> watcher;
  claimstore::WatchEvent event;  // the last one handed out: its slices point here
};

struct claimstore_verify_report_t {
  claimstore::VerifyReport report;
  std::vector<claimstore_slice_t> problems;
};

namespace {

absl::string_view View(claimstore_slice_t s) {
  return s.data == nullptr ? absl::string_view() : absl::string_view(s.data, s.size);
}
std::string String(claimstore_slice_t s) { return std::string(View(s)); }
claimstore_slice_t Slice(absl::string_view s) { return {s.data(), s.size()}; }
ClaimKey Key(claimstore_key_t k) { return {String(k.claim_namespace), String(k.name)}; }
claimstore_key_t KeyView(const ClaimKey& k) { return {Slice(k.claim_namespace), Slice(k.name)}; }

claimstore::Preconditions Pre(const claimstore_preconditions_t& p) {
  claimstore::Preconditions pre;
  if (p.has_mod_revision) pre.mod_revision = p.mod_revision;
  if (p.has_uid) pre.uid = String(p.uid);
  return pre;
}

int Fail(const absl::Status& status, claimstore_error_t** err) {
  const int code = static_cast<int>(status.code());
  if (err == nullptr) return code;
  auto* e = new (std::nothrow) claimstore_error_t;
  if (e == nullptr) return code;
  try {
    e->code = code;
    e->message = std::string(status.message());
    e->current_revision = claimstore::CurrentRevision(status);
    e->compact_revision = claimstore::CompactRevision(status);
    e->no_space = claimstore::IsNoSpace(status);
    e->claims = claimstore::ClaimsOf(status);
    for (const ClaimKey& k : e->claims) e->claim_views.push_back(KeyView(k));
    e->fields = claimstore::FieldErrorsOf(status);
    for (const claimstore::FieldError& f : e->fields) {
      e->field_views.push_back({Slice(claimstore::FieldError::TypeName(f.type)), Slice(f.field),
                                Slice(f.value), Slice(f.detail), Slice(f.rule)});
    }
  } catch (...) {
    e->claims.clear();
    e->claim_views.clear();
    e->fields.clear();
    e->field_views.clear();
  }
  *err = e;
  return code;
}

// Runs `body` (returning absl::Status) with every exception turned into a
// status: nothing may unwind into C.
// Reporting an exception may itself run out of memory: then the code comes
// back without an error handle.
template <typename Body>
int Guard(claimstore_error_t** err, Body&& body) {
  try {
    absl::Status s = body();
    return s.ok() ? CLAIMSTORE_OK : Fail(s, err);
  } catch (const std::bad_alloc&) {
    try {
      return Fail(absl::ResourceExhaustedError("out of memory"), err);
    } catch (...) {
      return CLAIMSTORE_RESOURCE_EXHAUSTED;
    }
  } catch (const std::exception& e) {
    try {
      return Fail(absl::InternalError(std::string("unexpected exception: ") + e.what()), err);
    } catch (...) {
      return CLAIMSTORE_INTERNAL;
    }
  } catch (...) {
    try {
      return Fail(absl::InternalError("unexpected exception"), err);
    } catch (...) {
      return CLAIMSTORE_INTERNAL;
    }
  }
}

absl::Status Required(const void* p, const char* what) {
  if (p == nullptr) return absl::InvalidArgumentError(std::string(what) + " is NULL");
  return absl::OkStatus();
}

void SetResult(const claimstore::WriteResult& r, claimstore_write_result_t* out) {
  if (out != nullptr) *out = {r.revision, r.changed ? 1 : 0};
}

int Write(claimstore_t* store, claimstore_write_result_t* result, claimstore_error_t** err,
          absl::FunctionRef<absl::StatusOr<claimstore::WriteResult>(Store&)> call) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    absl::StatusOr<claimstore::WriteResult> r = call(*store->store);
    if (!r.ok()) return r.status();
    SetResult(*r, result);
    return absl::OkStatus();
  });
}

std::vector<claimstore::CapacityValue> Capacities(const claimstore_capacity_t* values,
                                                  size_t count) {
  std::vector<claimstore::CapacityValue> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i)
    out.push_back({String(values[i].name), String(values[i].quantity)});
  return out;
}

absl::StatusOr<std::vector<claimstore::DeviceCapacity>> Limits(
    const claimstore_device_capacity_t* capacity, size_t count) {
  if (count > 0 && capacity == nullptr) return absl::InvalidArgumentError("capacity is NULL");
  std::vector<claimstore::DeviceCapacity> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const claimstore_device_capacity_t& c = capacity[i];
    if (c.capacity_count > 0 && c.capacity == nullptr) {
      return absl::InvalidArgumentError("capacity[" + std::to_string(i) + "].capacity is NULL");
    }
    out.push_back({String(c.driver), String(c.pool), String(c.device),
                   Capacities(c.capacity, c.capacity_count)});
  }
  return out;
}

claimstore_records_t* Records(std::vector<std::optional<ClaimRecord>> records, uint64_t revision) {
  auto out = std::make_unique<claimstore_records_t>();
  out->records = std::move(records);
  out->revision = revision;
  out->views.reserve(out->records.size());
  for (const std::optional<ClaimRecord>& r : out->records) {
    out->views.push_back(r.has_value() ? Slice(r->bytes()) : claimstore_slice_t{nullptr, 0});
  }
  out->events.assign(out->records.size(), CLAIMSTORE_EVENT_NONE);
  return out.release();
}

claimstore_keys_t* Keys(claimstore::ClaimKeys keys) {
  auto out = std::make_unique<claimstore_keys_t>();
  out->keys = std::move(keys.claims);
  out->revision = keys.revision;
  for (const ClaimKey& k : out->keys) out->views.push_back(KeyView(k));
  return out.release();
}

claimstore_device_t DeviceView(const AllocatedDevice& d) {
  claimstore_device_t v{};
  v.driver = Slice(d.driver);
  v.pool = Slice(d.pool);
  v.device = Slice(d.device);
  v.has_exclusive = d.exclusive.has_value() ? 1 : 0;
  if (d.exclusive.has_value()) v.exclusive = KeyView(*d.exclusive);
  v.share_count = d.shares.size();
  v.admin_access_count = d.admin_access.size();
  v.consumed_capacity_count = d.consumed_capacity.size();
  v.impl = &d;
  return v;
}

const AllocatedDevice& Impl(const claimstore_device_t* d) {
  return *static_cast<const AllocatedDevice*>(d->impl);
}

claimstore_capacity_t CapacityView(const claimstore::CapacityValue& c) {
  return {Slice(c.name), Slice(c.quantity)};
}

}  // namespace

extern "C" {

claimstore_slice_t claimstore_str(const char* s) {
  return s == nullptr ? claimstore_slice_t{nullptr, 0} : claimstore_slice_t{s, std::strlen(s)};
}

void claimstore_free(void* p) { std::free(p); }

// --- Errors ---

int claimstore_error_code(const claimstore_error_t* err) { return err->code; }
const char* claimstore_error_message(const claimstore_error_t* err, size_t* size) {
  if (size != nullptr) *size = err->message.size();
  return err->message.c_str();
}
int claimstore_error_current_revision(const claimstore_error_t* err, uint64_t* revision) {
  if (!err->current_revision.has_value()) return 0;
  if (revision != nullptr) *revision = *err->current_revision;
  return 1;
}
int claimstore_error_compact_revision(const claimstore_error_t* err, uint64_t* revision) {
  if (!err->compact_revision.has_value()) return 0;
  if (revision != nullptr) *revision = *err->compact_revision;
  return 1;
}
int claimstore_error_no_space(const claimstore_error_t* err) { return err->no_space ? 1 : 0; }
size_t claimstore_error_claims(const claimstore_error_t* err, const claimstore_key_t** claims) {
  if (claims != nullptr) *claims = err->claim_views.data();
  return err->claim_views.size();
}
size_t claimstore_error_fields(const claimstore_error_t* err,
                               const claimstore_field_error_t** fields) {
  if (fields != nullptr) *fields = err->field_views.data();
  return err->field_views.size();
}
void claimstore_error_destroy(claimstore_error_t* err) { delete err; }

// --- Options ---

claimstore_options_t* claimstore_options_create(void) {
  return new (std::nothrow) claimstore_options_t;
}
void claimstore_options_destroy(claimstore_options_t* o) { delete o; }
void claimstore_options_set_create_if_missing(claimstore_options_t* o, int v) {
  o->options.create_if_missing = v != 0;
}
void claimstore_options_set_read_only(claimstore_options_t* o, int v) {
  o->options.read_only = v != 0;
}
void claimstore_options_set_sync_writes(claimstore_options_t* o, int v) {
  o->options.sync_writes = v != 0;
}
void claimstore_options_set_block_cache_bytes(claimstore_options_t* o, uint64_t v) {
  o->options.block_cache_bytes = v;
}
void claimstore_options_set_write_buffer_bytes(claimstore_options_t* o, uint64_t v) {
  o->options.write_buffer_bytes = v;
}
void claimstore_options_set_record_cache_bytes(claimstore_options_t* o, uint64_t v) {
  o->options.record_cache_bytes = v;
}
void claimstore_options_set_compression(claimstore_options_t* o, int v) { o->compression = v; }
void claimstore_options_set_defer_index_load(claimstore_options_t* o, int v) {
  o->options.defer_index_load = v != 0;
}
void claimstore_options_set_feed_history_revisions(claimstore_options_t* o, uint64_t v) {
  o->options.feed_history_revisions = v;
}
void claimstore_options_set_feed_history_bytes(claimstore_options_t* o, uint64_t v) {
  o->options.feed_history_bytes = v;
}
void claimstore_options_set_feed_records_before(claimstore_options_t* o, int v) {
  o->options.feed_records_before = v != 0;
}
// The string setters cannot report: an allocation that fails is reported
// by claimstore_open.
void claimstore_options_add_etcd_endpoint(claimstore_options_t* o, claimstore_slice_t url) {
  try {
    o->options.etcd_endpoints.push_back(String(url));
  } catch (...) {
    o->out_of_memory = true;
  }
}
void claimstore_options_set_etcd_prefix(claimstore_options_t* o, claimstore_slice_t prefix) {
  try {
    o->options.etcd_prefix = String(prefix);
  } catch (...) {
    o->out_of_memory = true;
  }
}
void claimstore_options_set_etcd_tls_files(claimstore_options_t* o, claimstore_slice_t ca_file,
                                           claimstore_slice_t cert_file,
                                           claimstore_slice_t key_file) {
  try {
    o->options.etcd_ca_file = String(ca_file);
    o->options.etcd_cert_file = String(cert_file);
    o->options.etcd_key_file = String(key_file);
  } catch (...) {
    o->out_of_memory = true;
  }
}
void claimstore_options_set_etcd_timeout_ms(claimstore_options_t* o, uint64_t ms) {
  o->options.etcd_timeout =
      absl::Milliseconds(static_cast<int64_t>(std::min<uint64_t>(ms, INT64_MAX)));
}

// --- The store ---

int claimstore_open(const claimstore_options_t* options, claimstore_slice_t path,
                    claimstore_t** out, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(out, "out"); !s.ok()) return s;
    claimstore::Options o;
    if (options != nullptr) {
      if (options->out_of_memory) {
        return absl::ResourceExhaustedError("options: out of memory while an option was set");
      }
      o = options->options;
      switch (options->compression) {
        case CLAIMSTORE_COMPRESSION_NONE:
          o.compression = claimstore::Compression::kNone;
          break;
        case CLAIMSTORE_COMPRESSION_LZ4:
          o.compression = claimstore::Compression::kLZ4;
          break;
        case CLAIMSTORE_COMPRESSION_ZSTD:
          o.compression = claimstore::Compression::kZstd;
          break;
        default:
          return absl::InvalidArgumentError("options: compression " +
                                            std::to_string(options->compression) +
                                            " is not a CLAIMSTORE_COMPRESSION_* value");
      }
    }
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(View(path), o);
    if (!store.ok()) return store.status();
    *out = new claimstore_t{*std::move(store)};
    return absl::OkStatus();
  });
}

void claimstore_close(claimstore_t* store) { delete store; }

// --- Records ---

size_t claimstore_records_count(const claimstore_records_t* r) { return r->views.size(); }
claimstore_slice_t claimstore_records_at(const claimstore_records_t* r, size_t i) {
  return r->views[i];
}
const claimstore_slice_t* claimstore_records_items(const claimstore_records_t* r) {
  return r->views.data();
}
uint64_t claimstore_records_revision(const claimstore_records_t* r) { return r->revision; }
claimstore_slice_t claimstore_records_continue(const claimstore_records_t* r) {
  return Slice(r->continue_token);
}
int claimstore_records_event(const claimstore_records_t* r, size_t i) { return r->events[i]; }
void claimstore_records_destroy(claimstore_records_t* r) { delete r; }

// --- Reads ---

int claimstore_get(claimstore_t* store, claimstore_key_t key, char** record, size_t* record_size,
                   uint64_t* revision, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (absl::Status s = Required(record, "record"); !s.ok()) return s;
    if (absl::Status s = Required(record_size, "record_size"); !s.ok()) return s;
    absl::StatusOr<claimstore::ClaimRead> read = store->store->Get(Key(key));
    if (!read.ok()) return read.status();
    const absl::string_view bytes = read->record.bytes();
    char* copy = static_cast<char*>(std::malloc(bytes.empty() ? 1 : bytes.size()));
    if (copy == nullptr) throw std::bad_alloc();
    std::memcpy(copy, bytes.data(), bytes.size());
    *record = copy;
    *record_size = bytes.size();
    if (revision != nullptr) *revision = read->revision;
    return absl::OkStatus();
  });
}

int claimstore_get_into(claimstore_t* store, claimstore_key_t key, char* buffer, size_t capacity,
                        size_t* record_size, uint64_t* revision, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (absl::Status s = Required(record_size, "record_size"); !s.ok()) return s;
    if (capacity > 0 && buffer == nullptr) return absl::InvalidArgumentError("buffer is NULL");
    // In place: the record is copied once, into the caller's buffer.
    return store->store->GetInPlace(View(key.claim_namespace), View(key.name),
                                    [&](const claimstore::ClaimRecord& record, uint64_t at) {
                                      const absl::string_view bytes = record.bytes();
                                      if (bytes.size() <= capacity)
                                        std::memcpy(buffer, bytes.data(), bytes.size());
                                      *record_size = bytes.size();
                                      if (revision != nullptr) *revision = at;
                                    });
  });
}

int claimstore_get_many(claimstore_t* store, const claimstore_key_t* keys, size_t count,
                        claimstore_records_t** out, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (absl::Status s = Required(out, "out"); !s.ok()) return s;
    if (count > 0 && keys == nullptr) return absl::InvalidArgumentError("keys is NULL");
    std::vector<ClaimKey> ks;
    ks.reserve(count);
    for (size_t i = 0; i < count; ++i) ks.push_back(Key(keys[i]));
    absl::StatusOr<claimstore::ClaimReads> reads = store->store->GetMany(ks);
    if (!reads.ok()) return reads.status();
    *out = Records(std::move(reads->records), reads->revision);
    return absl::OkStatus();
  });
}

int claimstore_list(claimstore_t* store, claimstore_slice_t claim_namespace, size_t limit,
                    claimstore_slice_t continue_token, claimstore_records_t** out,
                    claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (absl::Status s = Required(out, "out"); !s.ok()) return s;
    absl::StatusOr<claimstore::ListPage> page =
        store->store->List({.claim_namespace = String(claim_namespace),
                            .limit = limit,
                            .continue_token = String(continue_token)});
    if (!page.ok()) return page.status();
    std::vector<std::optional<ClaimRecord>> records;
    records.reserve(page->records.size());
    for (ClaimRecord& r : page->records) records.emplace_back(std::move(r));
    std::unique_ptr<claimstore_records_t> result(Records(std::move(records), page->revision));
    result->continue_token = std::move(page->continue_token);
    *out = result.release();
    return absl::OkStatus();
  });
}

const claimstore_key_t* claimstore_keys_items(const claimstore_keys_t* k, size_t* count) {
  if (count != nullptr) *count = k->views.size();
  return k->views.data();
}
uint64_t claimstore_keys_revision(const claimstore_keys_t* k) { return k->revision; }
void claimstore_keys_destroy(claimstore_keys_t* k) { delete k; }

int claimstore_claims_reserved_for(claimstore_t* store, claimstore_slice_t consumer_uid,
                                   claimstore_keys_t** out, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (absl::Status s = Required(out, "out"); !s.ok()) return s;
    absl::StatusOr<claimstore::ClaimKeys> keys =
        store->store->ClaimsReservedFor(View(consumer_uid));
    if (!keys.ok()) return keys.status();
    *out = Keys(*std::move(keys));
    return absl::OkStatus();
  });
}

const claimstore_holding_t* claimstore_holdings_items(const claimstore_holdings_t* h,
                                                      size_t* count) {
  if (count != nullptr) *count = h->views.size();
  return h->views.data();
}
uint64_t claimstore_holdings_revision(const claimstore_holdings_t* h) {
  return h->holdings.revision;
}
void claimstore_holdings_destroy(claimstore_holdings_t* h) { delete h; }

int claimstore_claims_using_device(claimstore_t* store, claimstore_device_query_t query,
                                   claimstore_holdings_t** out, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (absl::Status s = Required(out, "out"); !s.ok()) return s;
    claimstore::DeviceQuery q;
    q.driver = String(query.driver);
    if (query.pool.data != nullptr) q.pool = String(query.pool);
    if (query.device.data != nullptr) q.device = String(query.device);
    if (query.share_id.data != nullptr) q.share_id = String(query.share_id);
    absl::StatusOr<claimstore::DeviceHoldings> holdings = store->store->ClaimsUsingDevice(q);
    if (!holdings.ok()) return holdings.status();
    auto result = std::make_unique<claimstore_holdings_t>();
    result->holdings = *std::move(holdings);
    for (const claimstore::DeviceHolding& h : result->holdings.holdings) {
      claimstore_holding_t v{};
      v.driver = Slice(h.driver);
      v.pool = Slice(h.pool);
      v.device = Slice(h.device);
      v.kind = h.kind == claimstore::HoldingKind::kExclusive ? CLAIMSTORE_HOLDING_EXCLUSIVE
               : h.kind == claimstore::HoldingKind::kShare   ? CLAIMSTORE_HOLDING_SHARE
                                                             : CLAIMSTORE_HOLDING_ADMIN_ACCESS;
      v.share_id = Slice(h.share_id);
      v.claim = KeyView(h.claim);
      result->views.push_back(v);
    }
    *out = result.release();
    return absl::OkStatus();
  });
}

// --- What is allocated ---

int claimstore_allocated_devices(claimstore_t* store, claimstore_allocated_t** out,
                                 claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (absl::Status s = Required(out, "out"); !s.ok()) return s;
    absl::StatusOr<AllocatedState> state = store->store->AllocatedDevices();
    if (!state.ok()) return state.status();
    *out = new claimstore_allocated_t{*std::move(state)};
    return absl::OkStatus();
  });
}
uint64_t claimstore_allocated_revision(const claimstore_allocated_t* a) {
  return a->state.revision();
}
size_t claimstore_allocated_size(const claimstore_allocated_t* a) { return a->state.size(); }
int claimstore_allocated_find(const claimstore_allocated_t* a, claimstore_slice_t driver,
                              claimstore_slice_t pool, claimstore_slice_t device,
                              claimstore_device_t* out) {
  const AllocatedDevice* d = a->state.Find(View(driver), View(pool), View(device));
  if (d == nullptr) return 0;
  if (out != nullptr) *out = DeviceView(*d);
  return 1;
}
int claimstore_allocated_taken(const claimstore_allocated_t* a, claimstore_slice_t driver,
                               claimstore_slice_t pool, claimstore_slice_t device) {
  const AllocatedDevice* d = a->state.Find(View(driver), View(pool), View(device));
  return d != nullptr && d->Taken() ? 1 : 0;
}
void claimstore_allocated_taken_many(const claimstore_allocated_t* a, claimstore_slice_t driver,
                                     claimstore_slice_t pool, const char* names,
                                     const uint32_t* lengths, size_t n, uint8_t* taken) {
  if (n == 0) return;
  absl::InlinedVector<absl::string_view, 64> devices(n);
  for (size_t i = 0; i < n; ++i) {
    devices[i] = absl::string_view(names, lengths[i]);
    names += lengths[i];
  }
  absl::InlinedVector<bool, 64> out(n);
  a->state.TakenMany(View(driver), View(pool), devices, out.data());
  for (size_t i = 0; i < n; ++i) taken[i] = out[i] ? 1 : 0;
}
claimstore_devices_t* claimstore_allocated_list(const claimstore_allocated_t* a,
                                                claimstore_slice_t driver,
                                                claimstore_slice_t pool) {
  try {
    auto out = std::make_unique<claimstore_devices_t>();
    std::optional<absl::string_view> p;
    if (pool.data != nullptr) p = View(pool);
    a->state.ForEach(View(driver), p, [&](const AllocatedDevice& d) {
      out->views.push_back(DeviceView(d));
      return true;
    });
    return out.release();
  } catch (...) {
    return nullptr;
  }
}
const claimstore_device_t* claimstore_devices_items(const claimstore_devices_t* d, size_t* count) {
  if (count != nullptr) *count = d->views.size();
  return d->views.data();
}
void claimstore_devices_destroy(claimstore_devices_t* d) { delete d; }
void claimstore_allocated_destroy(claimstore_allocated_t* a) { delete a; }

claimstore_share_t claimstore_device_share(const claimstore_device_t* device, size_t i) {
  const claimstore::DeviceShare& s = Impl(device).shares[i];
  return {Slice(s.share_id), KeyView(s.claim), s.consumed_capacity.size()};
}
claimstore_key_t claimstore_device_admin_access(const claimstore_device_t* device, size_t i) {
  return KeyView(Impl(device).admin_access[i]);
}
claimstore_capacity_t claimstore_device_consumed_capacity(const claimstore_device_t* device,
                                                          size_t i) {
  return CapacityView(Impl(device).consumed_capacity[i]);
}
claimstore_capacity_t claimstore_device_share_consumed_capacity(const claimstore_device_t* device,
                                                                size_t share, size_t i) {
  return CapacityView(Impl(device).shares[share].consumed_capacity[i]);
}

// --- Writes ---

claimstore_slice_t claimstore_record_object(claimstore_slice_t record) {
  absl::StatusOr<ClaimRecord> r = ClaimRecord::FromBytes(String(record));
  if (!r.ok()) return {};
  const absl::string_view o = r->object();
  if (o.empty()) return {};
  // A view into the caller's bytes at the same offset.
  return {record.data + (o.data() - r->bytes().data()), o.size()};
}

int claimstore_put(claimstore_t* store, claimstore_slice_t record, claimstore_preconditions_t pre,
                   claimstore_write_result_t* result, claimstore_error_t** err) {
  return Write(store, result, err, [&](Store& s) -> absl::StatusOr<claimstore::WriteResult> {
    absl::StatusOr<ClaimRecord> r = ClaimRecord::FromBytes(String(record));
    if (!r.ok()) return r.status();
    return s.Put(*r, Pre(pre));
  });
}

int claimstore_put_json(claimstore_t* store, claimstore_slice_t json,
                        claimstore_preconditions_t pre, claimstore_write_result_t* result,
                        claimstore_error_t** err) {
  return Write(store, result, err, [&](Store& s) -> absl::StatusOr<claimstore::WriteResult> {
    absl::StatusOr<ClaimRecord> r = claimstore::DecodeClaim(View(json));
    if (!r.ok()) return r.status();
    return s.Put(*r, Pre(pre));
  });
}

int claimstore_apply_cluster_events_json(claimstore_t* store, claimstore_slice_t json,
                                         const claimstore_slice_t* objects, size_t objects_count,
                                         uint64_t resource_version,
                                         claimstore_write_result_t** results, size_t* results_count,
                                         claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (results != nullptr) {
      if (absl::Status s = Required(results_count, "results_count"); !s.ok()) return s;
    }
    std::vector<claimstore::ClusterEvent> events;
    if (json.size > 0) {  // empty: no claims, the position alone (a bookmark)
      absl::Status s = claimstore::DecodeClaims(View(json), [&](claimstore::DecodedClaim c) {
        events.push_back({std::move(c.record), c.event == claimstore::WatchEventType::kDeleted});
        return absl::OkStatus();
      });
      if (!s.ok()) return s;
    }
    if (objects_count > 0) {
      if (objects == nullptr) return absl::InvalidArgumentError("objects is NULL");
      if (objects_count != events.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("objects: ", objects_count, " for ", events.size(), " claims"));
      }
      for (size_t i = 0; i < events.size(); ++i) {
        absl::StatusOr<ClaimRecord> kept =
            claimstore::WithObject(events[i].record, View(objects[i]));
        if (!kept.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("item ", i, " (", events[i].record.claim_namespace(), "/",
                           events[i].record.name(), "): ", kept.status().message()));
        }
        events[i].record = *std::move(kept);
      }
    }
    absl::StatusOr<std::vector<claimstore::WriteResult>> r =
        store->store->ApplyClusterEvents(events, resource_version);
    if (!r.ok()) return r.status();
    if (results != nullptr) {
      auto* out = static_cast<claimstore_write_result_t*>(
          std::malloc(std::max<size_t>(1, r->size()) * sizeof(claimstore_write_result_t)));
      if (out == nullptr) throw std::bad_alloc();
      for (size_t i = 0; i < r->size(); ++i) SetResult((*r)[i], &out[i]);
      *results = out;
      *results_count = r->size();
    }
    return absl::OkStatus();
  });
}

int claimstore_delete(claimstore_t* store, claimstore_key_t key, claimstore_preconditions_t pre,
                      claimstore_write_result_t* result, claimstore_error_t** err) {
  return Write(store, result, err, [&](Store& s) { return s.Delete(Key(key), Pre(pre)); });
}

int claimstore_reserve(claimstore_t* store, claimstore_key_t key, claimstore_consumer_t consumer,
                       claimstore_preconditions_t pre, claimstore_write_result_t* result,
                       claimstore_error_t** err) {
  return Write(store, result, err, [&](Store& s) {
    return s.Reserve(Key(key),
                     {String(consumer.api_group), String(consumer.resource), String(consumer.name),
                      String(consumer.uid)},
                     Pre(pre));
  });
}

int claimstore_unreserve(claimstore_t* store, claimstore_key_t key, claimstore_slice_t consumer_uid,
                         claimstore_preconditions_t pre, claimstore_write_result_t* result,
                         claimstore_error_t** err) {
  return Write(store, result, err,
               [&](Store& s) { return s.Unreserve(Key(key), View(consumer_uid), Pre(pre)); });
}

int claimstore_allocate(claimstore_t* store, claimstore_key_t key,
                        const claimstore_allocation_t* allocation,
                        const claimstore_device_capacity_t* capacity, size_t capacity_count,
                        claimstore_preconditions_t pre, claimstore_write_result_t* result,
                        claimstore_error_t** err) {
  return Write(store, result, err, [&](Store& s) -> absl::StatusOr<claimstore::WriteResult> {
    if (allocation == nullptr) return absl::InvalidArgumentError("allocation is NULL");
    if (allocation->result_count > 0 && allocation->results == nullptr) {
      return absl::InvalidArgumentError("allocation->results is NULL");
    }
    claimstore::AllocationBuilder builder;
    for (size_t i = 0; i < allocation->result_count; ++i) {
      const claimstore_device_result_t& r = allocation->results[i];
      if (r.consumed_capacity_count > 0 && r.consumed_capacity == nullptr) {
        return absl::InvalidArgumentError("allocation->results[" + std::to_string(i) +
                                          "].consumed_capacity is NULL");
      }
      claimstore::DeviceResult d;
      d.request = String(r.request);
      d.driver = String(r.driver);
      d.pool = String(r.pool);
      d.device = String(r.device);
      if (r.has_share_id) d.share_id = String(r.share_id);
      if (r.admin_access >= 0) d.admin_access = r.admin_access != 0;
      d.consumed_capacity = Capacities(r.consumed_capacity, r.consumed_capacity_count);
      builder.AddResult(std::move(d));
    }
    if (allocation->node_name.size > 0) builder.SetNodeName(String(allocation->node_name));
    if (allocation->has_allocation_timestamp) {
      builder.SetAllocationTimestamp(allocation->allocation_timestamp);
    }
    absl::StatusOr<std::vector<claimstore::DeviceCapacity>> limits =
        Limits(capacity, capacity_count);
    if (!limits.ok()) return limits.status();
    return s.Allocate(Key(key), builder.Build(), Pre(pre), *limits);
  });
}

int claimstore_allocate_json(claimstore_t* store, claimstore_key_t key, claimstore_slice_t json,
                             const claimstore_device_capacity_t* capacity, size_t capacity_count,
                             claimstore_preconditions_t pre, claimstore_write_result_t* result,
                             claimstore_error_t** err) {
  return Write(store, result, err, [&](Store& s) -> absl::StatusOr<claimstore::WriteResult> {
    absl::StatusOr<claimstore::Allocation> allocation =
        claimstore::Allocation::FromJson(View(json));
    if (!allocation.ok()) return allocation.status();
    absl::StatusOr<std::vector<claimstore::DeviceCapacity>> limits =
        Limits(capacity, capacity_count);
    if (!limits.ok()) return limits.status();
    return s.Allocate(Key(key), *allocation, Pre(pre), *limits);
  });
}

int claimstore_deallocate(claimstore_t* store, claimstore_key_t key, claimstore_preconditions_t pre,
                          claimstore_write_result_t* result, claimstore_error_t** err) {
  return Write(store, result, err, [&](Store& s) { return s.Deallocate(Key(key), Pre(pre)); });
}

int claimstore_set_device_status_json(claimstore_t* store, claimstore_key_t key,
                                      claimstore_slice_t json_array, claimstore_preconditions_t pre,
                                      claimstore_write_result_t* result, claimstore_error_t** err) {
  return Write(store, result, err, [&](Store& s) -> absl::StatusOr<claimstore::WriteResult> {
    absl::StatusOr<claimstore::DeviceStatuses> statuses =
        claimstore::DeviceStatuses::FromJson(View(json_array));
    if (!statuses.ok()) return statuses.status();
    return s.SetDeviceStatus(Key(key), *statuses, Pre(pre));
  });
}

// --- The change feed ---

int claimstore_watch(claimstore_t* store, uint64_t from_revision,
                     claimstore_slice_t claim_namespace, claimstore_slice_t key_prefix,
                     claimstore_watcher_t** out, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (absl::Status s = Required(out, "out"); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<claimstore::Watcher>> watcher = store->store->Watch(
        from_revision,
        {.claim_namespace = String(claim_namespace), .key_prefix = String(key_prefix)});
    if (!watcher.ok()) return watcher.status();
    auto w = std::make_unique<claimstore_watcher_t>();
    w->watcher = *std::move(watcher);
    *out = w.release();
    return absl::OkStatus();
  });
}

int claimstore_watcher_next(claimstore_watcher_t* watcher, int64_t timeout_ms,
                            claimstore_event_t* event, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(watcher, "watcher"); !s.ok()) return s;
    if (absl::Status s = Required(event, "event"); !s.ok()) return s;
    absl::StatusOr<claimstore::WatchEvent> next =
        watcher->watcher->Next(absl::Milliseconds(timeout_ms < 0 ? 0 : timeout_ms));
    if (!next.ok()) return next.status();
    watcher->event = *std::move(next);
    const claimstore::WatchEvent& e = watcher->event;
    *event = {};
    event->type = static_cast<int>(e.type);
    event->revision = e.revision;
    event->key = KeyView(e.key);
    if (e.record.has_value()) event->record = Slice(e.record->bytes());
    if (e.before.has_value()) event->before = Slice(e.before->bytes());
    return absl::OkStatus();
  });
}

uint64_t claimstore_watcher_next_revision(const claimstore_watcher_t* watcher) {
  return watcher->watcher->next_revision();
}
void claimstore_watcher_cancel(claimstore_watcher_t* watcher) { watcher->watcher->Cancel(); }
void claimstore_watcher_destroy(claimstore_watcher_t* watcher) { delete watcher; }

// --- The codec ---

int claimstore_decode(claimstore_slice_t input, claimstore_records_t** out,
                      claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(out, "out"); !s.ok()) return s;
    std::vector<std::optional<ClaimRecord>> records;
    std::vector<int> events;
    absl::Status s = claimstore::DecodeClaims(View(input), [&](claimstore::DecodedClaim c) {
      records.emplace_back(std::move(c.record));
      events.push_back(static_cast<int>(c.event));
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    std::unique_ptr<claimstore_records_t> result(Records(std::move(records), 0));
    result->events = std::move(events);
    *out = result.release();
    return absl::OkStatus();
  });
}

int claimstore_encode_json(claimstore_slice_t record, claimstore_slice_t indent, char** json,
                           size_t* json_size, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(json, "json"); !s.ok()) return s;
    absl::StatusOr<ClaimRecord> r = ClaimRecord::FromBytes(String(record));
    if (!r.ok()) return r.status();
    const std::string text = claimstore::EncodeClaim(*r, {.indent = String(indent)});
    char* copy = static_cast<char*>(std::malloc(text.size() + 1));
    if (copy == nullptr) throw std::bad_alloc();
    std::memcpy(copy, text.c_str(), text.size() + 1);
    *json = copy;
    if (json_size != nullptr) *json_size = text.size();
    return absl::OkStatus();
  });
}

// --- Maintenance ---

int claimstore_verify(claimstore_t* store, int repair, claimstore_verify_report_t** out,
                      claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (absl::Status s = Required(out, "out"); !s.ok()) return s;
    absl::StatusOr<claimstore::VerifyReport> report = store->store->Verify(repair != 0);
    if (!report.ok()) return report.status();
    auto r = std::make_unique<claimstore_verify_report_t>();
    r->report = *std::move(report);
    for (const std::string& p : r->report.problems) r->problems.push_back(Slice(p));
    *out = r.release();
    return absl::OkStatus();
  });
}
uint64_t claimstore_verify_report_records(const claimstore_verify_report_t* r) {
  return r->report.records;
}
uint64_t claimstore_verify_report_index_entries(const claimstore_verify_report_t* r) {
  return r->report.index_entries;
}
int claimstore_verify_report_repaired(const claimstore_verify_report_t* r) {
  return r->report.repaired ? 1 : 0;
}
const claimstore_slice_t* claimstore_verify_report_problems(const claimstore_verify_report_t* r,
                                                            size_t* count) {
  if (count != nullptr) *count = r->problems.size();
  return r->problems.data();
}
void claimstore_verify_report_destroy(claimstore_verify_report_t* r) { delete r; }

int claimstore_stats(claimstore_t* store, claimstore_stats_t* out, size_t out_size,
                     claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    if (absl::Status s = Required(out, "out"); !s.ok()) return s;
    absl::StatusOr<claimstore::StoreStats> stats = store->store->Stats();
    if (!stats.ok()) return stats.status();
    claimstore_stats_t full{};
    full.claims = stats->claims;
    full.allocated = stats->allocated;
    full.reserved = stats->reserved;
    full.unvalidated = stats->unvalidated;
    full.consumer_entries = stats->consumer_entries;
    full.device_entries = stats->device_entries;
    full.revision = stats->revision;
    full.size_on_disk_bytes = stats->size_on_disk_bytes;
    full.feed_compact_revision = stats->feed_compact_revision;
    full.follow_resource_version = stats->follow_resource_version;
    full.etcd_following = stats->etcd_following ? 1 : 0;
    full.etcd_unreachable_since_unix_ns = stats->etcd_unreachable_since == absl::InfinitePast()
                                              ? 0
                                              : absl::ToUnixNanos(stats->etcd_unreachable_since);
    std::memcpy(out, &full, out_size < sizeof(full) ? out_size : sizeof(full));
    return absl::OkStatus();
  });
}

int claimstore_backup(claimstore_t* store, claimstore_slice_t dir, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    return store->store->Backup(View(dir));
  });
}

int claimstore_refresh(claimstore_t* store, claimstore_error_t** err) {
  return Guard(err, [&]() -> absl::Status {
    if (absl::Status s = Required(store, "store"); !s.ok()) return s;
    return store->store->Refresh();
  });
}

}  // extern "C"
