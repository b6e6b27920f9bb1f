// -o yaml, byte for byte as kubectl prints it (tools/cli/kubectl_yaml.h): the rules
// of go-yaml v2 as sigs.k8s.io/yaml drives it, each case written from
// go-yaml's encode.go, resolve.go and sorter.go and libyaml's emitter.
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kubectl_yaml.h"

namespace claimstore::cli {
namespace {

std::string Yaml(const std::string& json) {
  std::string out;
  EXPECT_TRUE(AppendYaml(json, &out)) << json;
  return out;
}

// The reference case checked against Debian's go-yaml v2 and ghodss/yaml:
// a long plain string folds where a space comes after column 80, its
// continuation lines indented under the key; a string that reads as a bool
// or a number is double-quoted; ": " forbids plain, so single quotes;
// <, > and & are plain characters.
TEST(YamlTest, KubectlsReferenceCase) {
  std::string words;
  for (int i = 0; i < 40; ++i) absl::StrAppend(&words, i ? " " : "", "word");
  std::string line1 = "a:", line2 = " ", line3 = " ";
  for (int i = 0; i < 16; ++i) line1 += " word";
  for (int i = 0; i < 16; ++i) line2 += " word";
  for (int i = 0; i < 8; ++i) line3 += " word";
  EXPECT_EQ(Yaml(absl::StrCat(R"({"e":"MPS <ready> & 3","d":"x: y","c":"123","b":"yes","a":")",
                              words, R"("})")),
            absl::StrCat(line1, "\n", line2, "\n", line3, "\n",
                         "b: \"yes\"\nc: \"123\"\nd: 'x: y'\ne: MPS <ready> & 3\n"));
  EXPECT_EQ(line1.size(), 82u);  // breaks come after the width is passed
}

TEST(YamlTest, KeysInGoYamlsOrder) {
  // Non-letters before letters, letters by code point, digit runs by value.
  EXPECT_EQ(Yaml(R"({"b":1,"a10":1,"a2":1,"A":1,"_x":1,"1":1})"),
            "_x: 1\n\"1\": 1\nA: 1\na2: 1\na10: 1\nb: 1\n");
  EXPECT_EQ(Yaml(R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{}})"),
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {}\n");
}

TEST(YamlTest, StringsThatWouldReadAsAnotherTypeAreDoubleQuoted) {
  EXPECT_EQ(Yaml(R"({"a":"2026-11-02T09:14:05Z","b":"0755","c":"08","d":"0x1F","e":"1:20",)"
                 R"("f":"-1","g":"True","h":"","i":"~","j":"1e3","k":".5","l":"null","m":"on"})"),
            "a: \"2026-11-02T09:14:05Z\"\nb: \"0755\"\nc: \"08\"\nd: \"0x1F\"\ne: \"1:20\"\n"
            "f: \"-1\"\ng: \"True\"\nh: \"\"\ni: \"~\"\nj: \"1e3\"\nk: \".5\"\nl: \"null\"\n"
            "m: \"on\"\n");
  // These read back as strings: plain.
  EXPECT_EQ(Yaml(R"({"a":"5f1c7e2a","b":"v1.2","c":"40Gi","d":"2026-13-02","e":"1.2.3",)"
                 R"("f":"nic.example.com/node-c/eth1","g":"Truee"})"),
            "a: 5f1c7e2a\nb: v1.2\nc: 40Gi\nd: 2026-13-02\ne: 1.2.3\n"
            "f: nic.example.com/node-c/eth1\ng: Truee\n");
}

TEST(YamlTest, TheEmitterQuotesWhatPlainCannotHold) {
  EXPECT_EQ(Yaml(R"({"a":"*star","b":"- dash","c":"-dash","d":"#hash","e":"a #b","f":"a#b",)"
                 R"("g":" lead","h":"trail ","i":"it's","j":"[x]","k":"a, b","l":"x:y"})"),
            "a: '*star'\nb: '- dash'\nc: -dash\nd: '#hash'\ne: 'a #b'\nf: a#b\ng: ' lead'\n"
            "h: 'trail '\ni: it's\nj: '[x]'\nk: a, b\nl: x:y\n");
  EXPECT_EQ(Yaml(R"({"a":"'quoted'"})"), "a: '''quoted'''\n");
}

TEST(YamlTest, LineBreaksAreLiteralBlocks) {
  EXPECT_EQ(Yaml(R"({"m":"line one\nline two\n"})"), "m: |\n  line one\n  line two\n");
  EXPECT_EQ(Yaml(R"({"m":"a\nb"})"), "m: |-\n  a\n  b\n");
  EXPECT_EQ(Yaml(R"({"x":{"m":"a\nb"}})"), "x:\n  m: |-\n    a\n    b\n");
}

TEST(YamlTest, NumbersBooleansNullAndEmptyCollections) {
  EXPECT_EQ(Yaml(R"({"f":0.5,"g":1e6,"h":1.0,"i":81723,"j":-3,"k":100000.0,"n":null,)"
                 R"("t":true,"u":false,"e":{},"l":[]})"),
            // The key "n" reads as a bool (YAML 1.1): quoted, as go-yaml quotes it.
            "e: {}\nf: 0.5\ng: 1e+06\nh: 1\ni: 81723\nj: -3\nk: 100000\nl: []\n\"n\": null\n"
            "t: true\nu: false\n");
}

TEST(YamlTest, SequencesSitUnderTheirKey) {
  EXPECT_EQ(Yaml(R"({"l":[[1,2],[3]],"m":[{"b":1,"a":[{"c":2}]}]})"),
            "l:\n- - 1\n  - 2\n- - 3\nm:\n- a:\n  - c: 2\n  b: 1\n");
  EXPECT_EQ(Yaml(R"([1,"x"])"), "- 1\n- x\n");
}

TEST(YamlTest, NonAsciiIsWrittenAsIs) {
  EXPECT_EQ(Yaml(R"({"a":"Grüße, 世界"})"), "a: Grüße, 世界\n");
}

TEST(YamlTest, MalformedJsonIsRefused) {
  std::string out = "kept";
  EXPECT_FALSE(AppendYaml("{\"a\":", &out));
  EXPECT_EQ(out, "kept");
}

}  // namespace
}  // namespace claimstore::cli
