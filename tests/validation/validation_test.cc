// Validation, rule by rule: for every rule a case that passes at its limit
// and one that fails just past it, asserting the exact Kubernetes error.
#include "claimstore/validation.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::IsOk;
using ::claimstore::testing::K8sPath;
using ::claimstore::testing::ReadFile;
using ::claimstore::testing::StatusIs;

constexpr char kTime[] = R"("2026-01-01T00:00:00Z")";
constexpr char kUuid[] = "2b0e6d1c-7a1f-4d3e-9c55-3f1a2b3c4d5e";

// Pieces of a valid status; the cases change one thing.
std::string Result(const std::string& extra = "", const std::string& device = "gpu-0") {
  return absl::StrCat(R"({"request":"gpu","driver":"gpu.example.com","pool":"node-1","device":")",
                      device, R"(")", extra, "}");
}
std::string Alloc(const std::string& results, const std::string& devices_extra = "",
                  const std::string& extra = "") {
  return absl::StrCat(R"({"devices":{"results":[)", results, "]", devices_extra, "}", extra, "}");
}
std::string Cond(const std::string& extra = "", const std::string& type = "Ready") {
  return absl::StrCat(R"({"type":")", type, R"(","status":"True","lastTransitionTime":)", kTime,
                      R"(,"reason":"Up","message":"")", extra, "}");
}
std::string Dev(const std::string& extra = "", const std::string& device = "gpu-0") {
  return absl::StrCat(R"({"driver":"gpu.example.com","pool":"node-1","device":")", device, R"(")",
                      extra, "}");
}
std::string Pod(int i) {
  return absl::StrCat(R"({"resource":"pods","name":"p)", i, R"(","uid":"u)", i, R"("})");
}
template <typename F>
std::string List(int n, F&& item) {
  std::vector<std::string> items;
  for (int i = 0; i < n; ++i) items.push_back(item(i));
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}
std::string Str(int n, char c = 'a') { return std::string(n, c); }
std::string Quoted(const std::string& s) { return absl::StrCat("\"", s, "\""); }
// A JSON object of exactly `bytes` bytes.
std::string ObjectOf(size_t bytes) {
  return absl::StrCat(R"({"k":")", std::string(bytes - 8, 'x'), R"("})");
}
std::string Allocated(const std::string& rest = "") {
  return absl::StrCat(R"({"allocation":)", Alloc(Result()), rest, "}");
}
std::string WithDevice(const std::string& device_json) {
  return Allocated(absl::StrCat(R"(,"devices":[)", device_json, "]"));
}
std::string WithResult(const std::string& extra) {
  return absl::StrCat(R"({"allocation":)", Alloc(Result(extra)), "}");
}
std::string WithConfig(const std::string& config_json) {
  return absl::StrCat(R"({"allocation":)",
                      Alloc(Result(), absl::StrCat(R"(,"config":[)", config_json, "]")), "}");
}
std::string Config(const std::string& source = "FromClaim",
                   const std::string& requests = R"(["gpu"])",
                   const std::string& parameters = R"({"a":1})") {
  return absl::StrCat(R"({"source":")", source, R"(","requests":)", requests,
                      R"(,"opaque":{"driver":"gpu.example.com","parameters":)", parameters, "}}");
}
std::string WithSelector(const std::string& selector) {
  return absl::StrCat(R"({"allocation":)",
                      Alloc(Result(), "", absl::StrCat(R"(,"nodeSelector":)", selector)), "}");
}
std::string Expr(const std::string& key, const std::string& op, const std::string& values) {
  return absl::StrCat(R"({"nodeSelectorTerms":[{"matchExpressions":[{"key":")", key,
                      R"(","operator":")", op, R"(","values":)", values, "}]}]}");
}
std::string FieldSel(const std::string& key, const std::string& op, const std::string& values) {
  return absl::StrCat(R"({"nodeSelectorTerms":[{"matchFields":[{"key":")", key, R"(","operator":")",
                      op, R"(","values":)", values, "}]}]}");
}

ClaimRecord Claim(const std::string& status, const std::string& extra_metadata = "",
                  bool with_spec = true) {
  std::string many;  // r0 .. r40
  for (int i = 0; i <= 40; ++i) absl::StrAppend(&many, R"(,{"name":"r)", i, R"("})");
  const std::string spec =
      with_spec
          ? absl::StrCat(
                R"("spec":{"devices":{"requests":[{"name":"gpu"},{"name":"any","firstAvailable":[{"name":"a"},{"name":"b"}]})",
                many, "]}},")
          : "";
  const std::string json = absl::StrCat(R"({"metadata":{"name":"c","namespace":"ns","uid":"u")",
                                        extra_metadata.empty() ? "" : ",", extra_metadata, "},",
                                        spec, R"("status":)", status, "}");
  absl::StatusOr<ClaimRecord> r = DecodeClaim(json);
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << json;
  return *std::move(r);
}

struct Case {
  const char* rule;
  bool valid;
  std::string status;
  std::string error;    // the first error, exactly (for invalid cases)
  std::string current;  // the stored status before the write, if any
  std::string metadata;
};

std::vector<Case> Cases() {
  const std::string deleting = R"("deletionTimestamp":"2026-01-01T00:00:00Z")";
  return {
      // reservedFor
      {"reservedFor.max", true, Allocated(absl::StrCat(R"(,"reservedFor":)", List(256, Pod))), ""},
      {"reservedFor.max", false, Allocated(absl::StrCat(R"(,"reservedFor":)", List(257, Pod))),
       "status.reservedFor: Too many: 257: must have at most 256 items"},
      {"reservedFor.required", true,
       Allocated(R"(,"reservedFor":[{"resource":"pods","name":"p","uid":"u"}])"), ""},
      {"reservedFor.required", false,
       Allocated(R"(,"reservedFor":[{"resource":"pods","name":"p"}])"),
       "status.reservedFor[0].uid: Required value"},
      {"reservedFor.unique", true, Allocated(absl::StrCat(R"(,"reservedFor":)", List(2, Pod))), ""},
      {"reservedFor.unique", false,
       Allocated(absl::StrCat(R"(,"reservedFor":[)", Pod(1), ",", Pod(1), "]")),
       R"(status.reservedFor[1]: Duplicate value: "u1")"},
      {"reservedFor.needs_allocation", true,
       Allocated(absl::StrCat(R"(,"reservedFor":[)", Pod(1), "]")), ""},
      {"reservedFor.needs_allocation", false, absl::StrCat(R"({"reservedFor":[)", Pod(1), "]}"),
       "status.reservedFor: Forbidden: may not be specified when `allocated` is not set"},
      {"reservedFor.no_add_while_deleting", true,
       Allocated(absl::StrCat(R"(,"reservedFor":[)", Pod(1), "]")), "",
       Allocated(absl::StrCat(R"(,"reservedFor":[)", Pod(1), ",", Pod(2), "]")), deleting},
      // A claim not held before is state: being deleted while reserved is an
      // ordinary state (a namespace being deleted), not consumers added.
      {"reservedFor.no_add_while_deleting", true,
       Allocated(absl::StrCat(R"(,"reservedFor":[)", Pod(1), ",", Pod(2), "]")), "", "", deleting},
      {"reservedFor.no_add_while_deleting", false,
       Allocated(absl::StrCat(R"(,"reservedFor":[)", Pod(1), ",", Pod(2), "]")),
       "status.reservedFor: Forbidden: new entries may not be added while `deallocationRequested` "
       "or `deletionTimestamp` are set",
       Allocated(absl::StrCat(R"(,"reservedFor":[)", Pod(1), "]")), deleting},
      // devices
      {"devices.allocated", true, WithDevice(Dev()), ""},
      {"devices.allocated", false, WithDevice(Dev("", "gpu-9")),
       R"(status.devices[0]: Invalid value: "gpu.example.com/node-1/gpu-9": must be an allocated device in the claim)"},
      {"devices.allocated", false, WithDevice(Dev(absl::StrCat(R"(,"shareID":")", kUuid, R"(")"))),
       absl::StrCat(R"(status.devices[0]: Invalid value: "gpu.example.com/node-1/gpu-0/)", kUuid,
                    R"(": must be an allocated device in the claim)")},
      {"devices.unique", true, Allocated(absl::StrCat(R"(,"devices":[)", Dev(), "]")), ""},
      {"devices.unique", false, Allocated(absl::StrCat(R"(,"devices":[)", Dev(), ",", Dev(), "]")),
       R"(status.devices[1]: Duplicate value: "gpu.example.com/node-1/gpu-0")"},
      {"devices.data", true, WithDevice(Dev(absl::StrCat(R"(,"data":)", ObjectOf(10240)))), ""},
      {"devices.data", false, WithDevice(Dev(absl::StrCat(R"(,"data":)", ObjectOf(10241)))),
       "status.devices[0].data: Too long: may not be more than 10240 bytes"},
      {"devices.data", false, WithDevice(Dev(R"(,"data":[1])")),
       R"(status.devices[0].data: Invalid value: "<value omitted>": parameters must be a valid JSON object)"},
      // conditions
      {"conditions.max", true,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":)",
                                   List(8, [](int i) { return Cond("", absl::StrCat("T", i)); })))),
       ""},
      {"conditions.max", false,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":)",
                                   List(9, [](int i) { return Cond("", absl::StrCat("T", i)); })))),
       "status.devices[0].conditions: Too many: 9: must have at most 8 items"},
      {"conditions.type", true,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":[)", Cond("", "example.com/Ready"), "]"))), ""},
      {"conditions.type", false,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":[)", Cond("", "not ready"), "]"))),
       R"(status.devices[0].conditions[0].type: Invalid value: "not ready": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'))"},
      {"conditions.type_unique", true,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":[)", Cond("", "A"), ",", Cond("", "B"), "]"))),
       ""},
      {"conditions.type_unique", false,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":[)", Cond(), ",", Cond(), "]"))),
       R"(status.devices[0].conditions[1].type: Duplicate value: "Ready")"},
      {"conditions.status", true,
       WithDevice(Dev(absl::StrCat(
           R"(,"conditions":[)", absl::StrReplaceAll(Cond(), {{"\"True\"", "\"Unknown\""}}), "]"))),
       ""},
      {"conditions.status", false,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":[)",
                                   absl::StrReplaceAll(Cond(), {{"\"True\"", "\"Maybe\""}}), "]"))),
       R"(status.devices[0].conditions[0].status: Unsupported value: "Maybe": supported values: "False", "True", "Unknown")"},
      {"conditions.observed_generation", true,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":[)", Cond(R"(,"observedGeneration":0)"), "]"))),
       ""},
      {"conditions.observed_generation", false,
       WithDevice(
           Dev(absl::StrCat(R"(,"conditions":[)", Cond(R"(,"observedGeneration":-1)"), "]"))),
       "status.devices[0].conditions[0].observedGeneration: Invalid value: -1: must be greater "
       "than or equal to zero"},
      {"conditions.last_transition_time", true,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":[)", Cond(), "]"))), ""},
      {"conditions.last_transition_time", false,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":[)",
                                   absl::StrReplaceAll(Cond(), {{kTime, "null"}}), "]"))),
       "status.devices[0].conditions[0].lastTransitionTime: Required value: must be set"},
      {"conditions.reason", true,
       WithDevice(Dev(
           absl::StrCat(R"(,"conditions":[)",
                        absl::StrReplaceAll(Cond(), {{"\"Up\"", Quoted("A" + Str(1023))}}), "]"))),
       ""},
      {"conditions.reason", false,
       WithDevice(Dev(
           absl::StrCat(R"(,"conditions":[)",
                        absl::StrReplaceAll(Cond(), {{"\"Up\"", Quoted("A" + Str(1024))}}), "]"))),
       "status.devices[0].conditions[0].reason: Too long: may not be more than 1024 bytes"},
      {"conditions.reason", false,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":[)",
                                   absl::StrReplaceAll(Cond(), {{"\"Up\"", "\"\""}}), "]"))),
       "status.devices[0].conditions[0].reason: Required value: must be set"},
      {"conditions.reason", false,
       WithDevice(Dev(absl::StrCat(R"(,"conditions":[)",
                                   absl::StrReplaceAll(Cond(), {{"\"Up\"", "\"1Up\""}}), "]"))),
       R"(status.devices[0].conditions[0].reason: Invalid value: "1Up": a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?'))"},
      {"conditions.message", true,
       WithDevice(Dev(absl::StrCat(
           R"(,"conditions":[)",
           absl::StrReplaceAll(
               Cond(), {{R"("message":"")", absl::StrCat(R"("message":)", Quoted(Str(32768)))}}),
           "]"))),
       ""},
      {"conditions.message", false,
       WithDevice(Dev(absl::StrCat(
           R"(,"conditions":[)",
           absl::StrReplaceAll(
               Cond(), {{R"("message":"")", absl::StrCat(R"("message":)", Quoted(Str(32769)))}}),
           "]"))),
       "status.devices[0].conditions[0].message: Too long: may not be more than 32768 bytes"},
      // networkData
      {"networkData.interfaceName", true,
       WithDevice(Dev(absl::StrCat(R"(,"networkData":{"interfaceName":)", Quoted(Str(256)), "}"))),
       ""},
      {"networkData.interfaceName", false,
       WithDevice(Dev(absl::StrCat(R"(,"networkData":{"interfaceName":)", Quoted(Str(257)), "}"))),
       "status.devices[0].networkData.interfaceName: Too long: may not be more than 256 bytes"},
      {"networkData.hardwareAddress", true,
       WithDevice(
           Dev(absl::StrCat(R"(,"networkData":{"hardwareAddress":)", Quoted(Str(128)), "}"))),
       ""},
      {"networkData.hardwareAddress", false,
       WithDevice(
           Dev(absl::StrCat(R"(,"networkData":{"hardwareAddress":)", Quoted(Str(129)), "}"))),
       "status.devices[0].networkData.hardwareAddress: Too long: may not be more than 128 bytes"},
      {"networkData.ips.max", true,
       WithDevice(Dev(absl::StrCat(
           R"(,"networkData":{"ips":)",
           List(16, [](int i) { return absl::StrCat(R"("10.0.0.)", i, R"(/24")"); }), "}"))),
       ""},
      {"networkData.ips.max", false,
       WithDevice(Dev(absl::StrCat(
           R"(,"networkData":{"ips":)",
           List(17, [](int i) { return absl::StrCat(R"("10.0.0.)", i, R"(/24")"); }), "}"))),
       "status.devices[0].networkData.ips: Too many: 17: must have at most 16 items"},
      {"networkData.ips.format", true,
       WithDevice(Dev(R"(,"networkData":{"ips":["10.9.8.7/24","2001:db8::5/64","::1/128"]})")), ""},
      {"networkData.ips.format", false, WithDevice(Dev(R"(,"networkData":{"ips":["10.0.0.5"]})")),
       R"(status.devices[0].networkData.ips[0]: Invalid value: "10.0.0.5": must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64))"},
      {"networkData.ips.format", false,
       WithDevice(Dev(R"(,"networkData":{"ips":["2001:DB8:0:0::5/64"]})")),
       R"(status.devices[0].networkData.ips[0]: Invalid value: "2001:DB8:0:0::5/64": must be in canonical form ("2001:db8::5/64"))"},
      {"networkData.ips.format", false,
       WithDevice(Dev(R"(,"networkData":{"ips":["010.1.1.1/8"]})")),
       R"(status.devices[0].networkData.ips[0]: Invalid value: "010.1.1.1/8": must be in canonical form ("10.1.1.1/8"))"},
      {"networkData.ips.unique", true,
       WithDevice(Dev(R"(,"networkData":{"ips":["10.0.0.1/24","10.0.0.2/24"]})")), ""},
      {"networkData.ips.unique", false,
       WithDevice(Dev(R"(,"networkData":{"ips":["10.0.0.1/24","10.0.0.1/24"]})")),
       R"(status.devices[0].networkData.ips[1]: Duplicate value: "10.0.0.1/24")"},
      // allocation: immutable once set (semantic comparison)
      // "+1Gi" is kept verbatim, so equality needs the numeric comparison.
      {"allocation.immutable", true,
       WithResult(R"(,"consumedCapacity":{"mem":"1Gi"},"shareID":")" + std::string(kUuid) + "\""),
       "",
       WithResult(R"(,"consumedCapacity":{"mem":"+1Gi"},"shareID":")" + std::string(kUuid) + "\"")},
      {"allocation.immutable", false,
       absl::StrCat(R"({"allocation":)", Alloc(Result("", "gpu-1")), "}"),
       "status.allocation: Invalid value: field is immutable", Allocated()},
      // results
      {"results.max", true,
       absl::StrCat(R"({"allocation":)",
                    Alloc(absl::StrJoin(std::vector<std::string>(32, Result()), ",")), "}"),
       ""},
      {"results.max", false,
       absl::StrCat(R"({"allocation":)",
                    Alloc(absl::StrJoin(std::vector<std::string>(33, Result()), ",")), "}"),
       "status.allocation.devices.results: Too many: 33: must have at most 32 items"},
      {"request.format", true,
       absl::StrCat(R"({"allocation":)",
                    Alloc(absl::StrReplaceAll(Result(), {{R"("gpu",)", R"("any/a",)"}})), "}"),
       ""},
      {"request.format", false,
       absl::StrCat(
           R"({"allocation":)",
           Alloc(absl::StrReplaceAll(Result(), {{R"("request":"gpu")", R"("request":"a/b/c")"}})),
           "}"),
       R"(status.allocation.devices.results[0].request: Invalid value: "a/b/c": must be the name of a request in the claim or the name of a request and a subrequest separated by '/')"},
      {"request.format", false,
       absl::StrCat(
           R"({"allocation":)",
           Alloc(absl::StrReplaceAll(Result(), {{R"("request":"gpu")", R"("request":"")"}})), "}"),
       "status.allocation.devices.results[0].request: Required value"},
      {"request.in_spec", true, Allocated(), ""},
      {"request.in_spec", false,
       absl::StrCat(
           R"({"allocation":)",
           Alloc(absl::StrReplaceAll(Result(), {{R"("request":"gpu")", R"("request":"tpu")"}})),
           "}"),
       R"(status.allocation.devices.results[0].request: Invalid value: "tpu": must be the name of a request in the claim or the name of a request and a subrequest separated by '/')"},
      {"driver.format", true,
       absl::StrCat(R"({"allocation":)",
                    Alloc(absl::StrReplaceAll(
                        Result(), {{"gpu.example.com", "DRA.Example.COM." + Str(46, 'x')}})),
                    "}"),
       ""},
      {"driver.format", false,
       absl::StrCat(R"({"allocation":)",
                    Alloc(absl::StrReplaceAll(
                        Result(), {{"gpu.example.com", "dra.example.com." + Str(48, 'x')}})),
                    "}"),
       "status.allocation.devices.results[0].driver: Too long: may not be more than 63 bytes"},
      {"driver.format", false,
       absl::StrCat(R"({"allocation":)",
                    Alloc(absl::StrReplaceAll(Result(), {{"gpu.example.com", "dra_example.com"}})),
                    "}"),
       R"(status.allocation.devices.results[0].driver: Invalid value: "dra_example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'))"},
      {"pool.format", true,
       absl::StrCat(R"({"allocation":)",
                    Alloc(absl::StrReplaceAll(Result(), {{"node-1", "a/" + Str(251, 'b')}})), "}"),
       ""},
      {"pool.format", false,
       absl::StrCat(R"({"allocation":)",
                    Alloc(absl::StrReplaceAll(Result(), {{"node-1", "a/" + Str(252, 'b')}})), "}"),
       "status.allocation.devices.results[0].pool: Too long: may not be more than 253 bytes"},
      {"pool.format", false,
       absl::StrCat(R"({"allocation":)", Alloc(absl::StrReplaceAll(Result(), {{"node-1", "a//b"}})),
                    "}"),
       R"(status.allocation.devices.results[0].pool: Invalid value: "": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'))"},
      {"device.format", true,
       absl::StrCat(R"({"allocation":)", Alloc(Result("", Str(63, 'd'))), "}"), ""},
      {"device.format", false,
       absl::StrCat(R"({"allocation":)", Alloc(Result("", Str(64, 'd'))), "}"),
       "status.allocation.devices.results[0].device: Invalid value: \"" + Str(64, 'd') +
           "\": must be no more than 63 characters"},
      {"shareID.format", true, WithResult(absl::StrCat(R"(,"shareID":")", kUuid, R"(")")), ""},
      {"shareID.format", false, WithResult(R"(,"shareID":"2B0E6D1C-7A1F-4D3E-9C55-3F1A2B3C4D5E")"),
       "status.allocation.devices.results[0].shareID: Invalid value: "
       "\"2B0E6D1C-7A1F-4D3E-9C55-3F1A2B3C4D5E\": uid must be in RFC 4122 normalized form, "
       "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters"},
      // tolerations
      {"tolerations.key", true,
       WithResult(R"(,"tolerations":[{"key":"example.com/maintenance","operator":"Exists"}])"), ""},
      {"tolerations.key", false, WithResult(R"(,"tolerations":[{"key":"-bad"}])"), R"(status.allocation.devices.results[0].tolerations[0].key: Invalid value: "-bad": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'))"},
      {"tolerations.operator", true,
       WithResult(R"(,"tolerations":[{"key":"k","operator":"Equal","value":"v"}])"), ""},
      {"tolerations.operator", false, WithResult(R"(,"tolerations":[{"key":"k","operator":"Is"}])"),
       R"(status.allocation.devices.results[0].tolerations[0].operator: Unsupported value: "Is": supported values: "Equal", "Exists")"},
      {"tolerations.effect", true,
       WithResult(R"(,"tolerations":[{"key":"k","effect":"NoExecute","tolerationSeconds":0}])"),
       ""},
      {"tolerations.effect", false,
       WithResult(R"(,"tolerations":[{"key":"k","effect":"Sometimes"}])"),
       R"(status.allocation.devices.results[0].tolerations[0].effect: Unsupported value: "Sometimes": supported values: "NoExecute", "NoSchedule", "None")"},
      // binding conditions
      {"bindingConditions.max", true,
       WithResult(
           R"(,"bindingConditions":["a","b","c","d"],"bindingFailureConditions":["e","f","g","h"])"),
       ""},
      {"bindingConditions.max", false,
       WithResult(R"(,"bindingConditions":["a","b","c","d","x"],"bindingFailureConditions":["e"])"),
       "status.allocation.devices.results[0].bindingConditions: Too many: 5: must have at most 4 "
       "items"},
      {"bindingConditions.format", true,
       WithResult(
           R"(,"bindingConditions":["example.com/Attached"],"bindingFailureConditions":["Failed"])"),
       ""},
      {"bindingConditions.format", false,
       WithResult(R"(,"bindingConditions":["a b"],"bindingFailureConditions":["Failed"])"),
       R"(status.allocation.devices.results[0].bindingConditions[0]: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'))"},
      {"bindingConditions.unique", true,
       WithResult(R"(,"bindingConditions":["a","b"],"bindingFailureConditions":["c"])"), ""},
      {"bindingConditions.unique", false,
       WithResult(R"(,"bindingConditions":["a","a"],"bindingFailureConditions":["c"])"),
       R"(status.allocation.devices.results[0].bindingConditions[1]: Duplicate value: "a")"},
      {"bindingConditions.no_overlap", true,
       WithResult(R"(,"bindingConditions":["a"],"bindingFailureConditions":["b"])"), ""},
      {"bindingConditions.no_overlap", false,
       WithResult(R"(,"bindingConditions":["a"],"bindingFailureConditions":["b","a"])"),
       R"(status.allocation.devices.results[0].bindingFailureConditions[1]: Invalid value: "a": bindingFailureConditions must not overlap with bindingConditions)"},
      {"bindingConditions.both_or_neither", true, Allocated(), ""},
      {"bindingConditions.both_or_neither", false, WithResult(R"(,"bindingConditions":["a"])"),
       "status.allocation.devices.results[0].bindingFailureConditions: Invalid value: "
       "[]string(nil): bindingFailureConditions are required to use bindingConditions"},
      {"bindingConditions.both_or_neither", false,
       WithResult(R"(,"bindingFailureConditions":["a"])"),
       "status.allocation.devices.results[0].bindingConditions: Invalid value: []string(nil): "
       "bindingConditions are required to use bindingFailureConditions"},
      // skipNodeOperations
      {"skipNodeOperations.values", true,
       WithResult(R"(,"skipNodeOperations":["NodePrepareResources","NodeUnprepareResources"])"),
       ""},
      {"skipNodeOperations.values", false, WithResult(R"(,"skipNodeOperations":["Sometimes"])"),
       R"(status.allocation.devices.results[0].skipNodeOperations[0]: Unsupported value: "Sometimes": supported values: "*", "NodePrepareResources", "NodeUnprepareResources")"},
      {"skipNodeOperations.unique", true, WithResult(R"(,"skipNodeOperations":["*"])"), ""},
      {"skipNodeOperations.unique", false, WithResult(R"(,"skipNodeOperations":["*","*"])"),
       R"(status.allocation.devices.results[0].skipNodeOperations[1]: Duplicate value: "*")"},
      // config
      {"config.max", true, WithConfig(absl::StrJoin(std::vector<std::string>(64, Config()), ",")),
       ""},
      {"config.max", false, WithConfig(absl::StrJoin(std::vector<std::string>(65, Config()), ",")),
       "status.allocation.devices.config: Too many: 65: must have at most 64 items"},
      {"config.source", true, WithConfig(Config("FromClass")), ""},
      {"config.source", false, WithConfig(Config("FromNowhere")),
       R"(status.allocation.devices.config[0].source: Unsupported value: "FromNowhere": supported values: "FromClaim", "FromClass")"},
      {"config.source", false, WithConfig(Config("")),
       "status.allocation.devices.config[0].source: Required value"},
      {"config.requests.max", true,
       WithConfig(
           Config("FromClaim", List(32, [](int i) { return absl::StrCat("\"r", i, "\""); }))),
       ""},
      {"config.requests.max", false,
       WithConfig(
           Config("FromClaim", List(33, [](int i) { return absl::StrCat("\"r", i, "\""); }))),
       "status.allocation.devices.config[0].requests: Too many: 33: must have at most 32 items"},
      {"config.requests.format", true, WithConfig(Config("FromClaim", R"(["gpu","any/b"])")), ""},
      {"config.requests.format", false, WithConfig(Config("FromClaim", R"(["GPU"])")),
       R"(status.allocation.devices.config[0].requests[0]: Invalid value: "GPU": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'))"},
      {"config.requests.unique", true, WithConfig(Config("FromClaim", R"(["gpu","any"])")), ""},
      {"config.requests.unique", false, WithConfig(Config("FromClaim", R"(["gpu","gpu"])")),
       R"(status.allocation.devices.config[0].requests[1]: Duplicate value: "gpu")"},
      {"config.opaque", true, WithConfig(Config()), ""},
      {"config.opaque", false, WithConfig(R"({"source":"FromClaim"})"),
       "status.allocation.devices.config[0].opaque: Required value"},
      {"config.parameters", true, WithConfig(Config("FromClaim", R"(["gpu"])", ObjectOf(10240))),
       ""},
      {"config.parameters", false, WithConfig(Config("FromClaim", R"(["gpu"])", ObjectOf(10241))),
       "status.allocation.devices.config[0].opaque.parameters: Too long: may not be more than "
       "10240 bytes"},
      {"config.parameters", false, WithConfig(Config("FromClaim", R"(["gpu"])", "null")),
       "status.allocation.devices.config[0].opaque.parameters: Required value"},
      {"config.parameters", false, WithConfig(Config("FromClaim", R"(["gpu"])", R"("text")")),
       R"(status.allocation.devices.config[0].opaque.parameters: Invalid value: "<value omitted>": parameters must be a valid JSON object)"},
      // nodeSelector
      {"nodeSelector.terms", true, WithSelector(FieldSel("metadata.name", "In", R"(["node-1"])")),
       ""},
      {"nodeSelector.terms", false, WithSelector(R"({"nodeSelectorTerms":[]})"),
       "status.allocation.nodeSelector.nodeSelectorTerms: Required value: must have at least one "
       "node selector term"},
      {"nodeSelector.operator", true, WithSelector(Expr("zone", "Gt", R"(["1"])")), ""},
      {"nodeSelector.operator", false, WithSelector(Expr("zone", "In", "[]")),
       "status.allocation.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values: Required "
       "value: must be specified when `operator` is 'In' or 'NotIn'"},
      {"nodeSelector.operator", false, WithSelector(Expr("zone", "Exists", R"(["a"])")),
       "status.allocation.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values: Forbidden: "
       "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"},
      {"nodeSelector.operator", false, WithSelector(Expr("zone", "Lt", R"(["1","2"])")),
       "status.allocation.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values: Required "
       "value: must be specified single value when `operator` is 'Lt' or 'Gt'"},
      {"nodeSelector.operator", false, WithSelector(Expr("zone", "Near", R"(["a"])")),
       R"(status.allocation.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator)"},
      {"nodeSelector.key", true,
       WithSelector(Expr("topology.kubernetes.io/zone", "In", R"(["a"])")), ""},
      {"nodeSelector.key", false, WithSelector(Expr("a/b/c", "In", R"(["a"])")), R"(status.allocation.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].key: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName'))"},
      {"nodeSelector.values", true,
       WithSelector(Expr("zone", "In", absl::StrCat("[", Quoted(Str(63)), "]"))), ""},
      {"nodeSelector.values", false,
       WithSelector(Expr("zone", "In", absl::StrCat("[", Quoted(Str(64)), "]"))),
       "status.allocation.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid "
       "value: \"" +
           Str(64) + "\": must be no more than 63 characters"},
      {"nodeSelector.field_values", true,
       WithSelector(FieldSel("metadata.name", "NotIn", R"(["node-1"])")), ""},
      {"nodeSelector.field_values", false,
       WithSelector(FieldSel("metadata.name", "In", R"(["a","b"])")),
       "status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].values: Required value: "
       "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"},
      {"nodeSelector.field_operator", true,
       WithSelector(FieldSel("metadata.name", "In", R"(["node-1"])")), ""},
      {"nodeSelector.field_operator", false,
       WithSelector(FieldSel("metadata.name", "Exists", R"(["node-1"])")),
       R"(status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].operator: Invalid value: "Exists": not a valid selector operator)"},
      {"nodeSelector.field_key", true,
       WithSelector(FieldSel("metadata.name", "In", R"(["node-1"])")), ""},
      {"nodeSelector.field_key", false,
       WithSelector(FieldSel("metadata.namespace", "In", R"(["x"])")),
       R"(status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].key: Invalid value: "metadata.namespace": not a valid field selector key)"},
      {"nodeSelector.node_name", true,
       WithSelector(FieldSel("metadata.name", "In", R"(["node-1.example.com"])")), ""},
      {"nodeSelector.node_name", false,
       WithSelector(FieldSel("metadata.name", "In", R"(["Node_1"])")),
       R"(status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0]: Invalid value: "Node_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'))"},
  };
}

TEST(ValidationTest, EveryRulePassesAtItsLimitAndFailsPastIt) {
  std::map<std::string, std::pair<int, int>> coverage;  // rule → (passing, failing)
  for (const Case& c : Cases()) {
    const ClaimRecord updated = Claim(c.status, c.metadata);
    std::optional<ClaimRecord> current;
    if (!c.current.empty()) current = Claim(c.current, c.metadata);
    const std::vector<FieldError> errors =
        ValidateClaimStatus(current ? &*current : nullptr, updated);
    if (c.valid) {
      EXPECT_TRUE(errors.empty()) << c.rule << ": " << errors[0].ToString();
      ++coverage[c.rule].first;
    } else {
      ASSERT_FALSE(errors.empty()) << c.rule << " accepted: " << c.status.substr(0, 300);
      EXPECT_EQ(errors[0].ToString(), c.error) << c.rule;
      EXPECT_EQ(errors[0].rule, c.rule);
      ++coverage[c.rule].second;
    }
  }
  // Every rule the validator knows has a passing and a failing case.
  int covered = 0;
  for (const std::string& rule : ValidationRules()) {
    const auto it = coverage.find(rule);
    EXPECT_TRUE(it != coverage.end() && it->second.first > 0 && it->second.second > 0)
        << "rule without a passing and a failing case: " << rule;
    if (it != coverage.end() && it->second.first > 0 && it->second.second > 0) ++covered;
  }
  EXPECT_EQ(covered, static_cast<int>(ValidationRules().size()));
  std::cout << "validation rules covered: " << covered << " of " << ValidationRules().size()
            << "\n";
}

// The rules as implemented are documented in the repository, each by name
// (docs/validation-rules.md): a rule added to the validator without its row fails.
TEST(ValidationTest, EveryRuleIsDocumented) {
  const std::string doc = ReadFile(CLAIMSTORE_VALIDATION_DOC);
  ASSERT_FALSE(doc.empty());
  for (const std::string& rule : ValidationRules()) {
    EXPECT_NE(doc.find(absl::StrCat("`", rule, "`")), std::string::npos)
        << "docs/validation-rules.md does not name the rule " << rule;
  }
}

TEST(ValidationTest, AListOverItsLimitIsNotWalked) {
  // 257 consumers, one without a uid: only the TooMany error.
  std::string pods = List(257, Pod);
  pods.replace(pods.find(R"(,"uid":"u3")"), 11, "");
  const auto errors =
      ValidateClaimStatus(nullptr, Claim(Allocated(absl::StrCat(R"(,"reservedFor":)", pods))));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].type, FieldError::Type::kTooMany);
}

TEST(ValidationTest, AllErrorsAreCollectedInOrder) {
  const auto errors =
      ValidateClaimStatus(nullptr, Claim(absl::StrCat(R"({"reservedFor":[)", Pod(1), ",", Pod(1),
                                                      R"(],"devices":[)", Dev(), "]}")));
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].ToString(), R"(status.reservedFor[1]: Duplicate value: "u1")");
  EXPECT_EQ(errors[1].field, "status.devices[0]");
  EXPECT_EQ(errors[2].ToString(),
            "status.reservedFor: Forbidden: may not be specified when `allocated` is not set");
  const absl::Status s = ValidationStatus(errors);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "3 errors: status.reservedFor[1]"));
  const std::vector<FieldError> carried = FieldErrorsOf(s);
  ASSERT_EQ(carried.size(), 3u);
  EXPECT_EQ(carried[1].ToString(), errors[1].ToString());
  EXPECT_EQ(carried[2].rule, "reservedFor.needs_allocation");
}

TEST(ValidationTest, UpdateRulesAreFailedPrecondition) {
  const ClaimRecord current = Claim(Allocated());
  const auto errors = ValidateClaimStatus(
      &current, Claim(absl::StrCat(R"({"allocation":)", Alloc(Result("", "gpu-7")), "}")));
  EXPECT_THAT(ValidationStatus(errors),
              StatusIs(absl::StatusCode::kFailedPrecondition, "field is immutable"));
}

TEST(ValidationTest, RequestNamesAreCheckedOnlyWhenTheRecordCarriesThem) {
  const ClaimRecord no_spec = Claim(
      absl::StrCat(
          R"({"allocation":)",
          Alloc(absl::StrReplaceAll(Result(), {{R"("request":"gpu")", R"("request":"tpu")"}})),
          "}"),
      "", /*with_spec=*/false);
  EXPECT_TRUE(ValidateClaimStatus(nullptr, no_spec).empty());
}

TEST(ValidationTest, TheRoundTripFixtureIsNotAValidObject) {
  absl::StatusOr<ClaimRecord> fixture =
      DecodeClaim(ReadFile(K8sPath("fixtures/ResourceClaim.roundtrip.json")));
  ASSERT_THAT(fixture, IsOk());
  const auto errors = ValidateClaimStatus(nullptr, *fixture);
  std::vector<std::string> lines;
  for (const FieldError& e : errors) lines.push_back(e.ToString());
  const std::string all = absl::StrJoin(lines, "\n");
  EXPECT_THAT(all, ::testing::HasSubstr(R"(results[0].shareID: Invalid value: "shareIDValue")"));
  EXPECT_THAT(
      all, ::testing::HasSubstr(R"(tolerations[0].operator: Unsupported value: "operatorValue")"));
}

TEST(ValidationTest, GeneratedClaimsAreValid) {
  for (int i = 0; i < 3000; ++i) {
    absl::StatusOr<ClaimRecord> r = DecodeClaim(GenerateClaimJson(i));
    ASSERT_THAT(r, IsOk());
    const auto errors = ValidateClaimStatus(nullptr, *r);
    ASSERT_TRUE(errors.empty()) << "claim " << i << ": " << errors[0].ToString();
  }
}

}  // namespace
}  // namespace claimstore
