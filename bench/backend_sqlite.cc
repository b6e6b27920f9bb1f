// SQLite as a plugin author would use it: status as JSON text, WAL mode,
// synchronous=NORMAL (like claimstore without sync_writes: a commit survives
// a process crash, not power loss), index tables, compare-and-set as a
// transaction on a revision column. One connection behind a mutex (SQLite
// serialises writers anyway; the read benchmarks are single-threaded).
#include <sqlite3.h>

#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "backends.h"
#include "claimstore/claim_generated.h"

namespace claimstore::bench {
namespace {

struct DeviceRow {
  std::string driver, pool, device, kind, share;
};

// The index rows of a record.
void IndexRows(const ClaimRecord& record, std::vector<std::string>* uids,
               std::vector<DeviceRow>* devices) {
  const fb::ResourceClaimStatus* status = record.table().status();
  if (status == nullptr) return;
  if (status->reserved_for() != nullptr) {
    for (const auto* r : *status->reserved_for()) uids->push_back(r->uid()->str());
  }
  if (status->allocation() != nullptr && status->allocation()->results() != nullptr) {
    for (const auto* r : *status->allocation()->results()) {
      const bool admin = r->admin_access().has_value() && *r->admin_access();
      const bool share = r->share_id() != nullptr;
      devices->push_back({r->driver()->str(), r->pool()->str(), r->device()->str(),
                          admin   ? "A"
                          : share ? "S"
                                  : "E",
                          share ? r->share_id()->str() : ""});
    }
  }
}

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK) {
      fprintf(stderr, "sqlite: %s: %s\n", sql, sqlite3_errmsg(db));
      abort();
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement& Bind(int i, absl::string_view s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  int Step() { return sqlite3_step(stmt_); }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  absl::string_view Text(int column) {
    return absl::string_view(reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column)),
                             sqlite3_column_bytes(stmt_, column));
  }
  int64_t Int(int column) { return sqlite3_column_int64(stmt_, column); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteBackend final : public Backend {
 public:
  explicit SqliteBackend(const BackendOptions& options) : path_(options.dir + "/claims.sqlite") {
    std::filesystem::create_directories(options.dir);
    if (sqlite3_open(path_.c_str(), &db_) != SQLITE_OK) abort();
    Exec("PRAGMA journal_mode=WAL");
    Exec("PRAGMA synchronous=NORMAL");
    Exec("PRAGMA cache_size=-1048576");  // 1 GiB, as claimstore's block cache
    Exec(
        "CREATE TABLE IF NOT EXISTS claims(ns TEXT, name TEXT, revision INTEGER NOT NULL, "
        "status TEXT NOT NULL, PRIMARY KEY(ns, name)) WITHOUT ROWID");
    Exec(
        "CREATE TABLE IF NOT EXISTS consumers(uid TEXT, ns TEXT, name TEXT, "
        "PRIMARY KEY(uid, ns, name)) WITHOUT ROWID");
    Exec("CREATE INDEX IF NOT EXISTS consumers_by_claim ON consumers(ns, name)");
    Exec(
        "CREATE TABLE IF NOT EXISTS devices(driver TEXT, pool TEXT, device TEXT, kind TEXT, "
        "share TEXT, ns TEXT, name TEXT, "
        "PRIMARY KEY(driver, pool, device, kind, share, ns, name)) WITHOUT ROWID");
    Exec("CREATE INDEX IF NOT EXISTS devices_by_claim ON devices(ns, name)");
    get_ = std::make_unique<Statement>(
        db_, "SELECT revision, status FROM claims WHERE ns=?1 AND name=?2");
    by_consumer_ = std::make_unique<Statement>(db_, "SELECT ns, name FROM consumers WHERE uid=?1");
    by_pool_ = std::make_unique<Statement>(
        db_, "SELECT device, ns, name FROM devices WHERE driver=?1 AND pool=?2");
    by_device_ = std::make_unique<Statement>(
        db_, "SELECT kind, ns, name FROM devices WHERE driver=?1 AND pool=?2 AND device=?3");
    exclusive_holder_ = std::make_unique<Statement>(
        db_,
        "SELECT 1 FROM devices WHERE driver=?1 AND pool=?2 AND device=?3 AND "
        "NOT (ns=?4 AND name=?5) AND kind<>'A' LIMIT 1");
    insert_claim_ = std::make_unique<Statement>(
        db_, "INSERT INTO claims(ns, name, revision, status) VALUES(?1, ?2, 1, ?3)");
    update_claim_ = std::make_unique<Statement>(
        db_,
        "UPDATE claims SET status=?3, revision=revision+1 WHERE ns=?1 AND name=?2 AND "
        "revision=?4");
    insert_consumer_ = std::make_unique<Statement>(
        db_, "INSERT OR IGNORE INTO consumers(uid, ns, name) VALUES(?1, ?2, ?3)");
    delete_consumer_ = std::make_unique<Statement>(
        db_, "DELETE FROM consumers WHERE uid=?1 AND ns=?2 AND name=?3");
    delete_consumers_ =
        std::make_unique<Statement>(db_, "DELETE FROM consumers WHERE ns=?1 AND name=?2");
    insert_device_ = std::make_unique<Statement>(
        db_,
        "INSERT OR IGNORE INTO devices(driver, pool, device, kind, share, ns, name) "
        "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    delete_devices_ =
        std::make_unique<Statement>(db_, "DELETE FROM devices WHERE ns=?1 AND name=?2");
  }
  ~SqliteBackend() override {
    get_.reset();
    by_consumer_.reset();
    by_pool_.reset();
    by_device_.reset();
    exclusive_holder_.reset();
    insert_claim_.reset();
    update_claim_.reset();
    insert_consumer_.reset();
    delete_consumer_.reset();
    delete_consumers_.reset();
    insert_device_.reset();
    delete_devices_.reset();
    sqlite3_close(db_);
  }
  const char* name() const override { return "sqlite"; }

  absl::Status Load(absl::Span<const LoadItem> items, bool) override {
    std::lock_guard lock(mu_);
    Exec("BEGIN");
    for (const LoadItem& item : items) {
      const absl::string_view ns = item.record.claim_namespace(), name = item.record.name();
      insert_claim_->Bind(1, ns).Bind(2, name).Bind(3, item.json);
      const int rc = insert_claim_->Step();
      insert_claim_->Reset();
      if (rc != SQLITE_DONE) {
        Exec("ROLLBACK");
        return absl::InternalError(sqlite3_errmsg(db_));
      }
      InsertIndexRows(item.record, ns, name);
    }
    Exec("COMMIT");
    return absl::OkStatus();
  }
  absl::Status Settle() override {
    std::lock_guard lock(mu_);
    Exec("PRAGMA wal_checkpoint(TRUNCATE)");
    Exec("ANALYZE");
    return absl::OkStatus();
  }

  absl::Status Get(const ClaimKey& key, ClaimFields* out) override {
    std::lock_guard lock(mu_);
    return GetLocked(key, out);
  }
  absl::StatusOr<size_t> GetMany(absl::Span<const ClaimKey> keys) override {
    std::lock_guard lock(mu_);
    Exec("BEGIN");  // one snapshot
    size_t found = 0;
    for (const ClaimKey& key : keys) {
      get_->Bind(1, key.claim_namespace).Bind(2, key.name);
      if (get_->Step() == SQLITE_ROW) {
        ++found;
        std::string status(get_->Text(1));  // the caller gets the text
        (void)status;
      }
      get_->Reset();
    }
    Exec("COMMIT");
    return found;
  }
  absl::StatusOr<size_t> ByConsumer(absl::string_view uid) override {
    std::lock_guard lock(mu_);
    by_consumer_->Bind(1, uid);
    const size_t n = Keys(*by_consumer_, 0);
    by_consumer_->Reset();
    return n;
  }
  absl::StatusOr<size_t> ByDevice(absl::string_view driver, absl::string_view pool,
                                  absl::string_view device) override {
    std::lock_guard lock(mu_);
    Statement& q = device.empty() ? *by_pool_ : *by_device_;
    q.Bind(1, driver).Bind(2, pool);
    if (!device.empty()) q.Bind(3, device);
    const size_t n = Keys(q, 1);
    q.Reset();
    return n;
  }

  absl::Status Reserve(const ClaimKey& key, const ConsumerRef& consumer) override {
    return Modify(key, [&](absl::string_view json, bool* changed) {
      absl::StatusOr<std::string> next = json::AddConsumer(json, consumer, changed);
      if (next.ok() && *changed) {
        insert_consumer_->Bind(1, consumer.uid).Bind(2, key.claim_namespace).Bind(3, key.name);
        insert_consumer_->Step();
        insert_consumer_->Reset();
      }
      return next;
    });
  }
  absl::Status Unreserve(const ClaimKey& key, absl::string_view uid) override {
    return Modify(key, [&](absl::string_view json, bool* changed) {
      absl::StatusOr<std::string> next = json::RemoveConsumer(json, uid, changed);
      if (next.ok() && *changed) {
        delete_consumer_->Bind(1, uid).Bind(2, key.claim_namespace).Bind(3, key.name);
        delete_consumer_->Step();
        delete_consumer_->Reset();
      }
      return next;
    });
  }
  absl::Status Allocate(const ClaimKey& key, absl::string_view driver, absl::string_view pool,
                        absl::string_view device) override {
    return Modify(key, [&](absl::string_view json, bool* changed) -> absl::StatusOr<std::string> {
      exclusive_holder_->Bind(1, driver)
          .Bind(2, pool)
          .Bind(3, device)
          .Bind(4, key.claim_namespace)
          .Bind(5, key.name);
      const bool taken = exclusive_holder_->Step() == SQLITE_ROW;
      exclusive_holder_->Reset();
      if (taken) return absl::AbortedError("device is taken");
      absl::StatusOr<std::string> next = json::SetAllocation(json, driver, pool, device);
      if (!next.ok()) return next;
      *changed = true;
      insert_device_->Bind(1, driver)
          .Bind(2, pool)
          .Bind(3, device)
          .Bind(4, "E")
          .Bind(5, "")
          .Bind(6, key.claim_namespace)
          .Bind(7, key.name);
      insert_device_->Step();
      insert_device_->Reset();
      return next;
    });
  }
  absl::Status Deallocate(const ClaimKey& key) override {
    return Modify(key, [&](absl::string_view json, bool* changed) {
      absl::StatusOr<std::string> next = json::ClearAllocation(json, changed);
      if (next.ok() && *changed) {
        delete_devices_->Bind(1, key.claim_namespace).Bind(2, key.name);
        delete_devices_->Step();
        delete_devices_->Reset();
      }
      return next;
    });
  }
  absl::Status Put(const LoadItem& item) override {
    const ClaimKey key{std::string(item.record.claim_namespace()), std::string(item.record.name())};
    return Modify(key, [&](absl::string_view, bool* changed) -> absl::StatusOr<std::string> {
      for (Statement* s : {delete_consumers_.get(), delete_devices_.get()}) {
        s->Bind(1, key.claim_namespace).Bind(2, key.name);
        s->Step();
        s->Reset();
      }
      InsertIndexRows(item.record, key.claim_namespace, key.name);
      *changed = true;
      return item.json;
    });
  }

  uint64_t DiskBytes() override {
    uint64_t total = 0;
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"}) {
      const uint64_t size = std::filesystem::file_size(path_ + suffix, ec);
      if (!ec) total += size;
    }
    return total;
  }

 private:
  void Exec(const char* sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
      fprintf(stderr, "sqlite: %s: %s\n", sql, error);
      abort();
    }
  }

  // Materialises the (ns, name) keys of a query's rows, as claimstore does.
  static size_t Keys(Statement& q, int first_column) {
    std::vector<ClaimKey> keys;
    while (q.Step() == SQLITE_ROW) {
      keys.push_back({std::string(q.Text(first_column)), std::string(q.Text(first_column + 1))});
    }
    return keys.size();
  }

  absl::Status GetLocked(const ClaimKey& key, ClaimFields* out) {
    get_->Bind(1, key.claim_namespace).Bind(2, key.name);
    if (get_->Step() != SQLITE_ROW) {
      get_->Reset();
      return absl::NotFoundError("no such claim");
    }
    const int64_t revision = get_->Int(0);
    absl::Status s = json::ReadFields(get_->Text(1), out);
    out->revision = static_cast<uint64_t>(revision);
    get_->Reset();
    return s;
  }

  void InsertIndexRows(const ClaimRecord& record, absl::string_view ns, absl::string_view name) {
    std::vector<std::string> uids;
    std::vector<DeviceRow> devices;
    IndexRows(record, &uids, &devices);
    for (const std::string& uid : uids) {
      insert_consumer_->Bind(1, uid).Bind(2, ns).Bind(3, name);
      insert_consumer_->Step();
      insert_consumer_->Reset();
    }
    for (const DeviceRow& d : devices) {
      insert_device_->Bind(1, d.driver)
          .Bind(2, d.pool)
          .Bind(3, d.device)
          .Bind(4, d.kind)
          .Bind(5, d.share)
          .Bind(6, ns)
          .Bind(7, name);
      insert_device_->Step();
      insert_device_->Reset();
    }
  }

  // BEGIN IMMEDIATE; read status and revision; `edit` makes the new JSON
  // (and stages index rows); UPDATE ... WHERE revision = the one read;
  // COMMIT. Any error rolls back.
  absl::Status Modify(
      const ClaimKey& key,
      const std::function<absl::StatusOr<std::string>(absl::string_view, bool*)>& edit) {
    std::lock_guard lock(mu_);
    Exec("BEGIN IMMEDIATE");
    get_->Bind(1, key.claim_namespace).Bind(2, key.name);
    if (get_->Step() != SQLITE_ROW) {
      get_->Reset();
      Exec("ROLLBACK");
      return absl::NotFoundError("no such claim");
    }
    const int64_t revision = get_->Int(0);
    const std::string current(get_->Text(1));
    get_->Reset();
    bool changed = false;
    absl::StatusOr<std::string> next = edit(current, &changed);
    if (!next.ok() || !changed) {
      Exec("ROLLBACK");
      return next.status();
    }
    update_claim_->Bind(1, key.claim_namespace).Bind(2, key.name).Bind(3, *next).Bind(4, revision);
    const int rc = update_claim_->Step();
    update_claim_->Reset();
    if (rc != SQLITE_DONE || sqlite3_changes(db_) != 1) {
      Exec("ROLLBACK");
      return absl::AbortedError("revision changed");
    }
    Exec("COMMIT");
    return absl::OkStatus();
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  std::mutex mu_;
  std::unique_ptr<Statement> get_, by_consumer_, by_pool_, by_device_, exclusive_holder_,
      insert_claim_, update_claim_, insert_consumer_, delete_consumer_, delete_consumers_,
      insert_device_, delete_devices_;
};

}  // namespace

std::unique_ptr<Backend> NewSqliteBackend(const BackendOptions& options) {
  return std::make_unique<SqliteBackend>(options);
}

}  // namespace claimstore::bench
