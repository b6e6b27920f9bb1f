#include "claimstore/generate.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "k8s/rfc3339.h"

namespace claimstore {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t Hash(uint64_t seed, uint64_t a, uint64_t b = 0) {
  return Mix(Mix(Mix(seed) ^ a) ^ (b * 0x632be59bd9b4e019ull));
}

std::string Time(int64_t unix_seconds) {
  std::string out = "\"";
  internal::AppendRfc3339(unix_seconds, &out);
  out.push_back('"');
  return out;
}

}  // namespace

std::string GeneratedUuid(uint64_t seed, uint64_t a, uint64_t b) {
  const uint64_t hi = Hash(seed, a, b);
  const uint64_t lo = Hash(seed ^ 0x5bd1e995, a, b);
  char buf[37];
  std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xfff),
                static_cast<unsigned>(0x8000 | ((lo >> 48) & 0x3fff)),
                static_cast<unsigned long long>(lo & 0xffffffffffffull));
  return buf;
}

std::string GenerateClaimJson(uint64_t index, uint64_t seed) {
  const uint64_t h = Hash(seed, index);
  const int kind = static_cast<int>(h % 100);
  const std::string node = absl::StrCat("node-", index / 8);
  const uint64_t slot = index % 8;
  const int64_t created = 1793000000 + static_cast<int64_t>(index);  // 2026-10
  const bool nic = kind >= 70 && kind < 80;
  const bool pending = kind >= 85;
  const std::string request = nic ? "nic" : "gpu";
  const std::string driver = nic ? "nic.example.com" : "gpu.example.com";
  const std::string device = nic ? absl::StrCat("eth", slot) : absl::StrCat("gpu-", slot);

  std::string json = absl::StrCat(
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"claim-)",
      index, R"(","namespace":"team-)", index % 50, R"(","uid":")", GeneratedUuid(seed, index, 0),
      R"(","resourceVersion":")", 1000 + index, R"(","generation":1,"creationTimestamp":)",
      Time(created), R"(,"finalizers":["resource.kubernetes.io/delete-protection"]},)",
      R"("spec":{"devices":{"requests":[{"name":")", request, R"(","exactly":{"deviceClassName":")",
      driver, R"(","allocationMode":"ExactCount","count":1}}]}},)");
  if (pending) return absl::StrCat(json, R"("status":{}})");

  std::string result = absl::StrCat(R"({"request":")", request, R"(","driver":")", driver,
                                    R"(","pool":")", node, R"(","device":")", device, R"(")");
  if (kind >= 60 && kind < 70) {
    absl::StrAppend(&result, R"(,"shareID":")", GeneratedUuid(seed, index, 99),
                    R"(","consumedCapacity":{"cores":")", 1 + h % 4, R"(","memory":")",
                    10 * (1 + h % 8), R"(Gi"})");
  } else if (kind >= 80) {
    absl::StrAppend(&result, R"(,"adminAccess":true)");
  }
  result.push_back('}');
  std::string allocation = absl::StrCat(R"({"devices":{"results":[)", result, "]");
  if (h % 3 == 0) {
    absl::StrAppend(&allocation, R"(,"config":[{"source":"FromClaim","requests":[")", request,
                    R"("],"opaque":{"driver":")", driver, R"(","parameters":{"apiVersion":")",
                    driver, R"(/v1","kind":"Config","sharing":{"strategy":"TimeSlicing"}}}}])");
  }
  absl::StrAppend(&allocation, R"(},"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[)",
                  R"({"key":"metadata.name","operator":"In","values":[")", node,
                  R"("]}]}]},"allocationTimestamp":)", Time(created + 2), "}");

  std::string reserved = "[";
  const int pods = 1 + static_cast<int>((h >> 8) % 3);
  for (int k = 0; k < pods; ++k) {
    absl::StrAppend(&reserved, k > 0 ? "," : "", R"({"resource":"pods","name":"pod-)", index, "-",
                    k, R"(","uid":")", GeneratedUuid(seed, index, k + 1), R"("})");
  }
  reserved.push_back(']');

  std::string devices;
  if (nic || (h >> 16) % 2 == 0) {
    absl::StrAppend(&devices, R"(,"devices":[{"driver":")", driver, R"(","pool":")", node,
                    R"(","device":")", device, R"(")");
    if (kind >= 60 && kind < 70) {
      absl::StrAppend(&devices, R"(,"shareID":")", GeneratedUuid(seed, index, 99), R"(")");
    }
    absl::StrAppend(&devices, R"(,"conditions":[{"type":"Ready","status":"True",)",
                    R"("lastTransitionTime":)", Time(created + 5),
                    R"(,"reason":"Prepared","message":"device prepared"}])");
    if (nic) {
      absl::StrAppend(&devices, R"(,"networkData":{"interfaceName":"net)", slot, R"(","ips":["10.)",
                      (index >> 16) & 255, ".", (index >> 8) & 255, ".", index & 255,
                      R"(/16"],"hardwareAddress":"02:00:00:)",
                      absl::Hex(index & 0xffffff, absl::kZeroPad6), R"("})");
    } else {
      absl::StrAppend(&devices, R"(,"data":{"uuid":"GPU-)", GeneratedUuid(seed, index, 7),
                      R"(","memory":"80Gi"})");
    }
    devices += "}]";
  }
  return absl::StrCat(json, R"("status":{"allocation":)", allocation, R"(,"reservedFor":)",
                      reserved, devices, "}}");
}

}  // namespace claimstore
