// claimstore: the command-line tool. For now it decodes claims in any input
// form the codec reads and prints them back in the API form; the tool issue
// adds the store commands (restore, dump, get, find, reserve, ...).
//
// Exit codes: 0 success; 1 invalid input or usage.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "claimstore/codec.h"

namespace {

constexpr char kUsage[] =
    "Usage: claimstore decode [-o json|jsonl] [FILE...|-]\n"
    "\n"
    "Decodes ResourceClaims (a claim, a ResourceClaimList, kubectl's List,\n"
    "JSON lines or watch events) and prints them back in the API form:\n"
    "  -o json    a ResourceClaimList, indented (default)\n"
    "  -o jsonl   one compact claim per line\n";

int Fail(const absl::Status& status) {
  std::cerr << "Error: " << status.message() << "\n";
  return 1;
}

absl::Status ReadInput(const std::string& path, std::string* out) {
  if (path == "-") {
    out->assign(std::istreambuf_iterator<char>(std::cin), {});
    return absl::OkStatus();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return absl::OkStatus();
}

int Decode(const std::vector<std::string>& args) {
  std::string format = "json";
  std::vector<std::string> files;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" && i + 1 < args.size()) {
      format = args[++i];
    } else if (args[i] == "-h" || args[i] == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (args[i].size() > 1 && args[i][0] == '-') {
      return Fail(absl::InvalidArgumentError(absl::StrCat("unknown flag ", args[i])));
    } else {
      files.push_back(args[i]);
    }
  }
  if (format != "json" && format != "jsonl") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("-o ", format, ": expected json or jsonl")));
  }
  if (files.empty()) files.push_back("-");
  std::vector<claimstore::ClaimRecord> records;
  for (const std::string& file : files) {
    std::string input;
    if (absl::Status s = ReadInput(file, &input); !s.ok()) return Fail(s);
    absl::Status s = claimstore::DecodeClaims(input, [&](claimstore::DecodedClaim c) {
      records.push_back(std::move(c.record));
      return absl::OkStatus();
    });
    if (!s.ok()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(file, ": ", s.message())));
    }
  }
  if (format == "jsonl") {
    std::string line;
    for (const claimstore::ClaimRecord& r : records) {
      line.clear();
      claimstore::AppendClaimJson(r, /*with_type_meta=*/true, &line);
      std::cout << line << "\n";
    }
  } else {
    std::cout << claimstore::EncodeClaimList(records, "", {.indent = "    "}) << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::cout << kUsage;
    return args.empty() ? 1 : 0;
  }
  if (args[0] == "decode") return Decode({args.begin() + 1, args.end()});
  std::cerr << "Error: unknown command \"" << args[0] << "\"\n" << kUsage;
  return 1;
}
