// claimstore allocated: what is allocated, per device, at one revision
// (Store::AllocatedDevices): who holds each device and how, and the
// capacity its shares consume. Opens the store read-only, so it works
// beside a running writer.

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli_core.h"
#include "commands.h"

namespace claimstore::cli {
namespace {

constexpr char kAllocatedUsage[] =
    "Usage: claimstore allocated [--device DRIVER[/POOL[/DEVICE]]] [-o wide|json] [--db DIR]\n"
    "Per allocated device, at one revision: the claim holding it exclusively, its shares,\n"
    "the claims with admin access, and the capacity its shares consume (exact sums).\n"
    "-o wide names every share (SHAREID=NAMESPACE/NAME) and admin-access claim; -o json\n"
    "prints {\"revision\":N,\"devices\":[...]} in driver/pool/device order.\n";

struct AllocatedFlags {
  std::string device, format;
};

// A JSON string literal (RFC 8259 escapes).
std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out += "\"";
  return out;
}

std::string DeviceJson(const AllocatedDevice& d) {
  std::string out = absl::StrCat("{\"driver\":", Quote(d.driver), ",\"pool\":", Quote(d.pool),
                                 ",\"device\":", Quote(d.device));
  if (d.exclusive.has_value())
    absl::StrAppend(&out, ",\"exclusive\":", Quote(d.exclusive->ToString()));
  std::vector<std::string> parts;
  for (const DeviceShare& s : d.shares) {
    parts.push_back(absl::StrCat("{\"shareID\":", Quote(s.share_id),
                                 ",\"claim\":", Quote(s.claim.ToString()), "}"));
  }
  absl::StrAppend(&out, ",\"shares\":[", absl::StrJoin(parts, ","), "]");
  parts.clear();
  for (const ClaimKey& k : d.admin_access) parts.push_back(Quote(k.ToString()));
  absl::StrAppend(&out, ",\"adminAccess\":[", absl::StrJoin(parts, ","), "]");
  parts.clear();
  for (const CapacityValue& c : d.consumed_capacity) {
    parts.push_back(absl::StrCat(Quote(c.name), ":", Quote(c.quantity)));
  }
  absl::StrAppend(&out, ",\"consumedCapacity\":{", absl::StrJoin(parts, ","), "}}");
  return out;
}

std::string OrNone(std::string s) { return s.empty() ? "<none>" : s; }

std::vector<std::string> DeviceRow(const AllocatedDevice& d, bool wide) {
  std::vector<std::string> row = {absl::StrCat(d.driver, "/", d.pool, "/", d.device),
                                  d.exclusive.has_value() ? d.exclusive->ToString() : "<none>"};
  std::vector<std::string> consumed;
  for (const CapacityValue& c : d.consumed_capacity) consumed.push_back(c.name + "=" + c.quantity);
  if (wide) {
    std::vector<std::string> shares, admin;
    for (const DeviceShare& s : d.shares) shares.push_back(s.share_id + "=" + s.claim.ToString());
    for (const ClaimKey& k : d.admin_access) admin.push_back(k.ToString());
    row.push_back(OrNone(absl::StrJoin(shares, ",")));
    row.push_back(OrNone(absl::StrJoin(admin, ",")));
  } else {
    row.push_back(absl::StrCat(d.shares.size()));
    row.push_back(absl::StrCat(d.admin_access.size()));
  }
  row.push_back(OrNone(absl::StrJoin(consumed, ",")));
  return row;
}

int Allocated(const Context& context, const AllocatedFlags& flags) {
  if (!flags.format.empty() && flags.format != "wide" && flags.format != "json") {
    return Usage("-o must be wide or json", kAllocatedUsage);
  }
  std::vector<std::string> parts;
  if (!flags.device.empty()) parts = absl::StrSplit(flags.device, '/');
  static constexpr const char* kParts[] = {"DRIVER", "POOL", "DEVICE"};
  if (parts.size() > 3) {
    return Usage(absl::StrCat("--device ", flags.device, ": more than DRIVER/POOL/DEVICE"),
                 kAllocatedUsage);
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) {
      return Usage(absl::StrCat("--device ", flags.device, ": ", kParts[i],
                                " is empty (DRIVER[/POOL[/DEVICE]])"),
                   kAllocatedUsage);
    }
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<AllocatedState> state = (*store)->AllocatedDevices();
  if (!state.ok()) return Fail(state.status());
  std::vector<const AllocatedDevice*> devices;
  if (parts.size() == 3) {
    if (const AllocatedDevice* d = state->Find(parts[0], parts[1], parts[2]); d != nullptr) {
      devices.push_back(d);
    }
  } else {
    std::optional<absl::string_view> pool;
    if (parts.size() == 2) pool = parts[1];
    state->ForEach(parts.empty() ? "" : parts[0], pool, [&](const AllocatedDevice& d) {
      devices.push_back(&d);
      return true;
    });
  }
  if (flags.format == "json") {
    std::cout << "{\"revision\":" << state->revision() << ",\"devices\":[";
    for (size_t i = 0; i < devices.size(); ++i) {
      std::cout << (i == 0 ? "\n" : ",\n") << DeviceJson(*devices[i]);
    }
    std::cout << (devices.empty() ? "" : "\n") << "]}\n";
    return 0;
  }
  if (devices.empty()) {
    PrintNoResources("");
    return 0;
  }
  const bool wide = flags.format == "wide";
  std::vector<std::vector<std::string>> rows = {
      {"DEVICE", "EXCLUSIVE", "SHARES", "ADMIN-ACCESS", "CONSUMED"}};
  for (const AllocatedDevice* d : devices) rows.push_back(DeviceRow(*d, wide));
  PrintTable(rows);
  return 0;
}

}  // namespace

void AddAllocatedCommand(CLI::App& app, Context& context) {
  const auto flags = std::make_shared<AllocatedFlags>();
  CLI::App* allocated =
      AddCommand(app, "allocated", kAllocatedUsage, "What is allocated, per device");
  allocated->add_option("--device", flags->device, "DRIVER[/POOL[/DEVICE]]");
  allocated->add_option("-o,--output", flags->format, "wide or json");
  allocated->callback([&context, flags] { context.exit_code = Allocated(context, *flags); });
}

}  // namespace claimstore::cli
