#include "etcd/txn_ops.h"

#include <cstdint>
#include <random>
#include <utility>

#include "absl/strings/escaping.h"

namespace claimstore::internal {

std::string NewToken() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t a = rng(), b = rng();
  std::string raw(16, '\0');
  for (int i = 0; i < 8; ++i) {
    raw[i] = static_cast<char>(a >> (8 * i));
    raw[8 + i] = static_cast<char>(b >> (8 * i));
  }
  return absl::BytesToHexString(raw);
}

etcdserverpb::Compare* AddCompare(etcdserverpb::TxnRequest* txn, const std::string& key,
                                  etcdserverpb::Compare::CompareTarget target) {
  etcdserverpb::Compare* c = txn->add_compare();
  c->set_key(key);
  c->set_target(target);
  c->set_result(etcdserverpb::Compare::EQUAL);
  return c;
}

void AddAbsent(etcdserverpb::TxnRequest* txn, const std::string& key) {
  AddCompare(txn, key, etcdserverpb::Compare::CREATE)->set_create_revision(0);
}

void AddPut(etcdserverpb::TxnRequest* txn, const std::string& key, std::string value) {
  auto* put = txn->add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(std::move(value));
}

void AddDelete(etcdserverpb::TxnRequest* txn, const std::string& key) {
  txn->add_success()->mutable_request_delete_range()->set_key(key);
}

void AddFailureRange(etcdserverpb::TxnRequest* txn, const std::string& key) {
  txn->add_failure()->mutable_request_range()->set_key(key);
}

}  // namespace claimstore::internal
