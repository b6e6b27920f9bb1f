// Store::Open: the one public entry that knows both kinds of store, the
// local one (store/) and the shared mode's (etcd/).
#include "claimstore/store.h"
#ifdef CLAIMSTORE_HAVE_ETCD
#include "etcd/shared_store.h"
#endif
#include "store/store_testing.h"

namespace claimstore {

absl::StatusOr<std::unique_ptr<Store>> Store::Open(absl::string_view path, const Options& options) {
  if (!options.etcd_endpoints.empty()) {
#ifdef CLAIMSTORE_HAVE_ETCD
    return internal::SharedStore::Open(path, options);
#else
    return absl::UnimplementedError(
        "Options.etcd_endpoints: this claimstore was built without the shared mode "
        "(CLAIMSTORE_ETCD=OFF)");
#endif
  }
  return internal::OpenStoreWithEnv(path, options, nullptr);
}

}  // namespace claimstore
