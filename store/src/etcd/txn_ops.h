// Building etcd Txns: compares, puts, deletes and the reads of a failure
// branch, and the token that marks a write as its own.
// Thread-safety: free functions; NewToken is safe from any thread.
#ifndef CLAIMSTORE_SRC_ETCD_TXN_OPS_H_
#define CLAIMSTORE_SRC_ETCD_TXN_OPS_H_

#include <string>

#include "etcd/etcdserver/etcdserverpb/rpc.pb.h"

namespace claimstore::internal {

// A random 128-bit token, in hex: a write puts it beside the claim, so that
// the write can tell its own Txn in etcd's history.
std::string NewToken();
// A compare of `key`'s `target`, for equality; the caller sets the value.
etcdserverpb::Compare* AddCompare(etcdserverpb::TxnRequest* txn, const std::string& key,
                                  etcdserverpb::Compare::CompareTarget target);
// A compare that `key` does not exist.
void AddAbsent(etcdserverpb::TxnRequest* txn, const std::string& key);
// A put or a delete of `key` in the success branch.
void AddPut(etcdserverpb::TxnRequest* txn, const std::string& key, std::string value);
void AddDelete(etcdserverpb::TxnRequest* txn, const std::string& key);
// A read of `key` in the failure branch.
void AddFailureRange(etcdserverpb::TxnRequest* txn, const std::string& key);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_ETCD_TXN_OPS_H_
