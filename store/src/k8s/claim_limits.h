// The limits of a ResourceClaim status (Kubernetes' validation, as in
// validation.h), in one place: validation checks them on every write, and
// the write path's Reserve refuses the 257th consumer with
// ResourceExhausted before validation would.
#ifndef CLAIMSTORE_SRC_K8S_CLAIM_LIMITS_H_
#define CLAIMSTORE_SRC_K8S_CLAIM_LIMITS_H_

#include <cstddef>

namespace claimstore::internal {

inline constexpr size_t kMaxReservedFor = 256;  // status.reservedFor entries
inline constexpr size_t kMaxResults = 32;       // allocation.devices.results
inline constexpr size_t kMaxConfig = 64;        // allocation.devices.config
inline constexpr size_t kMaxConfigRequests = 32;
inline constexpr size_t kMaxBindingConditions = 4;
inline constexpr size_t kMaxConditions = 8;
inline constexpr size_t kMaxIps = 16;
inline constexpr size_t kMaxRawBytes = 10240;  // an opaque parameters or data value
inline constexpr size_t kMaxInterfaceName = 256;
inline constexpr size_t kMaxHardwareAddress = 128;
inline constexpr size_t kMaxReason = 1024;
inline constexpr size_t kMaxMessage = 32768;
inline constexpr size_t kMaxDriver = 63;
inline constexpr size_t kMaxPool = 253;

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_K8S_CLAIM_LIMITS_H_
