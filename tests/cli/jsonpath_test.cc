// -o jsonpath (tools/cli/jsonpath.h): kubectl's JSONPath for reading fields.
#include "jsonpath.h"

#include <string>

#include "gtest/gtest.h"

namespace claimstore::cli {
namespace {

constexpr char kList[] =
    R"({"kind":"ResourceClaimList","items":[)"
    R"({"metadata":{"name":"a","labels":{"app.kubernetes.io/name":"x"}},"status":{"reservedFor":[{"uid":"u1"},{"uid":"u2"}]}},)"
    R"({"metadata":{"name":"b"},"status":{"allocation":{"devices":{"results":[{"device":"gpu-0"}]}}}}]})";

std::string Path(const std::string& templ) {
  absl::StatusOr<std::string> out = ApplyJsonPath(templ, kList);
  EXPECT_TRUE(out.ok()) << templ << ": " << out.status();
  return out.ok() ? *out : "";
}

TEST(JsonPathTest, FieldsIndexesAndEveryElement) {
  EXPECT_EQ(Path("{.kind}"), "ResourceClaimList");
  EXPECT_EQ(Path("{.items[*].metadata.name}"), "a b");  // a space between results
  EXPECT_EQ(Path("{.items[1].metadata.name}"), "b");
  EXPECT_EQ(Path("{.items[-1].metadata.name}"), "b");  // from the end
  EXPECT_EQ(Path("{.items[0].status.reservedFor[*].uid}"), "u1 u2");
  EXPECT_EQ(Path("{.items[0].metadata.labels['app.kubernetes.io/name']}"), "x");
  EXPECT_EQ(Path("name: {.items[0].metadata.name}!"), "name: a!");  // text around it
  EXPECT_EQ(Path("{$.kind}"), "ResourceClaimList");
}

TEST(JsonPathTest, ObjectsAsGoJsonAndMissingKeysAsNothing) {
  EXPECT_EQ(Path("{.items[1].status.allocation.devices.results}"), R"([{"device":"gpu-0"}])");
  EXPECT_EQ(Path("{.items[0].status.allocation}"), "");  // kubectl's allow-missing-template-keys
  // json.Marshal of a map: keys sorted, <>& escaped.
  absl::StatusOr<std::string> go =
      ApplyJsonPath("{.a}", R"({"a":{"z":1,"b":"x<y>&","m":[true,null]}})");
  ASSERT_TRUE(go.ok()) << go.status();
  EXPECT_EQ(*go, R"({"b":"x\u003cy\u003e\u0026","m":[true,null],"z":1})");
  // An index past the end is an error, as kubectl's.
  absl::StatusOr<std::string> past = ApplyJsonPath("{.items[7].metadata.name}", kList);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("array index out of bounds: index 7, length 2"),
            std::string::npos);
}

TEST(JsonPathTest, RangeWithLiterals) {
  EXPECT_EQ(
      Path(R"({range .items[*]}{.metadata.name}{"\t"}{.status.reservedFor[*].uid}{"\n"}{end})"),
      "a\tu1 u2\nb\t\n");
  // Over an array named without [*]: once, on the array itself.
  EXPECT_EQ(Path(R"({range .items}{.metadata.name}x{end})"), "x");
}

TEST(JsonPathTest, WhatIsNotSupportedIsRefusedByName) {
  for (const char* templ : {"{.items[?(@.metadata.name==\"a\")]}", "{.items[0:1]}", "{..name}",
                            "{.items[0,1]}", "{.items[*].*}"}) {
    absl::StatusOr<std::string> out = ApplyJsonPath(templ, kList);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << templ;
    EXPECT_NE(out.status().message().find("not supported"), std::string::npos) << out.status();
  }
  EXPECT_FALSE(ApplyJsonPath("{.kind", kList).ok());
  EXPECT_FALSE(ApplyJsonPath("{range .items[*]}{.kind}", kList).ok());
  EXPECT_FALSE(ApplyJsonPath("{end}", kList).ok());
}

}  // namespace
}  // namespace claimstore::cli
