// Realistic, deterministic ResourceClaims for demos, tests and benchmarks.
//
// A generated cluster has 8 GPUs (gpu.example.com) and 8 NICs
// (nic.example.com) per node (pool = node name, node-<i/8>); claim i uses
// slot i%8 of node i/8, so no two claims of one cluster hold a device in
// conflicting ways. About 60% of claims hold a GPU exclusively, 10% a share
// of one (shareID, consumedCapacity), 10% a NIC (with network data), 5% admin
// access, 15% are pending; allocated claims are reserved for 1-3 pods, and
// half report device status with conditions. Everything is a function of
// (seed, index).
//
// Thread-safety: pure functions.
#ifndef CLAIMSTORE_GENERATE_H_
#define CLAIMSTORE_GENERATE_H_

#include <cstdint>
#include <string>

namespace claimstore {

// The JSON (compact, API form with kind and apiVersion) of claim `index`.
std::string GenerateClaimJson(uint64_t index, uint64_t seed = 1);

// A lower-case RFC 4122 version-4 UUID derived from (seed, a, b).
std::string GeneratedUuid(uint64_t seed, uint64_t a, uint64_t b);

}  // namespace claimstore

#endif  // CLAIMSTORE_GENERATE_H_
