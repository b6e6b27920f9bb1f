// The claimstore tool, end to end through the binary: exit codes, stdout,
// stderr, and the database unchanged after a refused command.
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "kubectl_yaml.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::ReadFile;
using ::claimstore::testing::ScopedTempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// A claim live/NAME whose resourceVersion says which write made it.
ClaimRecord ClaimRecordOf(const std::string& name, int write) {
  absl::StatusOr<ClaimRecord> r = DecodeClaim(absl::StrCat(
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"namespace":"live",)",
      R"("name":")", name, R"(","uid":"u-)", name, R"(","resourceVersion":")", write,
      R"("},"status":{}})"));
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

struct CliRun {
  int code;
  std::string out, err;
};

class CliTest : public ::testing::Test {
 protected:
  // Runs `claimstore --db <db> ARGS` with `stdin_text` on standard input.
  CliRun Cli(const std::string& args, const std::string& stdin_text = "") {
    const std::string in = dir_.path() + "/stdin", out = dir_.path() + "/stdout",
                      err = dir_.path() + "/stderr";
    std::ofstream(in) << stdin_text;
    const std::string command =
        absl::StrCat(CLAIMSTORE_CLI, " --db ", db(), " ", args, " <", in, " >", out, " 2>", err);
    const int status = std::system(command.c_str());
    return CliRun{WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(out), ReadFile(err)};
  }
  std::string db() const { return dir_.path() + "/db"; }
  std::string File(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  ScopedTempDir dir_;
};

TEST_F(CliTest, GenerateRestoreDumpRestoreDumpIsIdentical) {
  const CliRun gen = Cli("generate --claims 300 --seed 4");
  ASSERT_EQ(gen.code, 0) << gen.err;
  const std::string input = File("cluster.json", gen.out);
  const CliRun restore = Cli("restore " + input);
  ASSERT_EQ(restore.code, 0) << restore.err;
  // Into an empty store: one bulk load, claim i of key order at revision i.
  EXPECT_THAT(restore.out, HasSubstr("restored 300 claim(s) from 300 item(s); revision 300"));
  const CliRun dump1 = Cli("dump -o jsonl");
  ASSERT_EQ(dump1.code, 0) << dump1.err;
  // Into a second, empty database.
  const std::string copy = dir_.path() + "/copy";
  const std::string dump_file = File("dump.jsonl", dump1.out);
  ASSERT_EQ(std::system(
                absl::StrCat(CLAIMSTORE_CLI, " --db ", copy, " restore ", dump_file, " >/dev/null")
                    .c_str()),
            0);
  const std::string dump2_path = dir_.path() + "/dump2";
  ASSERT_EQ(
      std::system(
          absl::StrCat(CLAIMSTORE_CLI, " --db ", copy, " dump -o jsonl >", dump2_path).c_str()),
      0);
  EXPECT_EQ(ReadFile(dump2_path), dump1.out);
  EXPECT_EQ(Cli("verify").code, 0);
}

// Issue 41: the tool reads back what it writes as YAML: a whole dump, one
// claim's get -o yaml; a refusal names the file, line and column.
TEST_F(CliTest, RestoreReadsBackItsYamlDumpAndOneClaimsYaml) {
  ASSERT_EQ(
      Cli("restore " + File("cluster.json", Cli("generate --claims 10000 --seed 7").out)).code, 0);
  const CliRun yaml = Cli("dump -o yaml");
  ASSERT_EQ(yaml.code, 0) << yaml.err;
  const std::string dump = File("backup.yaml", yaml.out);
  const std::string copy = dir_.path() + "/copy";
  const auto in_copy = [&](const std::string& args) {
    const std::string out = dir_.path() + "/copy.out";
    const int status = std::system(
        absl::StrCat(CLAIMSTORE_CLI, " --db ", copy, " ", args, " >", out, " 2>&1").c_str());
    return CliRun{WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(out), ""};
  };
  const CliRun restored = in_copy("restore " + dump);
  ASSERT_EQ(restored.code, 0) << restored.out;
  EXPECT_THAT(restored.out, HasSubstr("restored 10000 claim(s) from 10000 item(s)"));
  // YAML writes maps sorted (as kubectl does), so the YAML dumps are equal
  // byte for byte; the JSON ones but for the key order inside data.
  EXPECT_EQ(in_copy("dump -o yaml").out, yaml.out);
  EXPECT_EQ(in_copy("verify").code, 0);
  // One claim's YAML restores alone.
  std::filesystem::remove_all(copy);
  const CliRun one = Cli("get claim-3 -n team-3 -o yaml");
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(in_copy("restore " + File("one.yaml", one.out)).code, 0);
  EXPECT_EQ(in_copy("get claim-3 -n team-3 -o yaml").out, one.out);
  // A claim that does not decode: the file, the line and column of its item.
  const std::string bad = File("bad.yaml",
                               "apiVersion: v1\nkind: List\nitems:\n- kind: ResourceClaim\n"
                               "  metadata: {name: a, namespace: b, generation: x}\n");
  const CliRun refused = Cli("restore " + bad);
  EXPECT_EQ(refused.code, 1) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr(absl::StrCat(
                               bad,
                               ": line 4, column 3 (document 0, byte 35): "
                               "items[0].metadata.generation: expected an integer, got a string")));
}

TEST_F(CliTest, ExitCodesFollowTheKindOfError) {
  ASSERT_EQ(Cli("restore " + File("c.json", Cli("generate --claims 20").out)).code, 0);
  EXPECT_EQ(Cli("get team-9/claim-999").code, 2);  // not found
  EXPECT_EQ(Cli("list --bogus").code, 1);          // usage
  EXPECT_EQ(Cli("reserve team-3/claim-3 --consumer pods/p/u1").code, 0);
  const CliRun conflict = Cli("reserve team-3/claim-3 --consumer pods/p/u2 --if-revision 1");
  EXPECT_EQ(conflict.code, 3);
  EXPECT_THAT(conflict.err,
              HasSubstr("Error: claim team-3/claim-3 has changed: expected revision 1"));
  EXPECT_EQ(Cli("deallocate team-3/claim-3").code, 4);  // still reserved
  const CliRun help = Cli("reserve --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_THAT(help.out, HasSubstr("Usage: claimstore reserve NAME"));
}

TEST_F(CliTest, ARefusedRestoreWritesNothing) {
  ASSERT_EQ(Cli("restore " + File("c.json", Cli("generate --claims 10").out)).code, 0);
  const std::string before = Cli("dump -o jsonl").out;
  // Two bad fields in the second claim of a list: both reported, nothing written.
  const CliRun bad =
      Cli("restore -", R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1","items":[
      {"metadata":{"namespace":"a","name":"ok"},"status":{}},
      {"metadata":{"namespace":"a","name":"bad"},"status":{"reservedFor":[
        {"resource":"pods","name":"p","uid":"u"},{"resource":"pods","name":"p","uid":"u"}]}}]})");
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(
      bad.err,
      HasSubstr(
          R"(Error: -: document 0, item 1 (a/bad): status.reservedFor[1]: Duplicate value: "u")"));
  EXPECT_THAT(bad.err, HasSubstr("status.reservedFor: Forbidden"));
  EXPECT_THAT(bad.err, HasSubstr("restore refused: nothing was written"));
  EXPECT_EQ(Cli("dump -o jsonl").out, before);
  // Two claims of the input holding one device exclusively.
  const std::string claim =
      R"({"metadata":{"namespace":"x","name":"NAME"},"status":{"allocation":{"devices":{"results":[{"request":"r","driver":"d.example.com","pool":"p","device":"gpu-0"}]}}}})";
  std::string a = claim, b = claim;
  a.replace(a.find("NAME"), 4, "a");
  b.replace(b.find("NAME"), 4, "b");
  const CliRun clash = Cli("restore -", a + "\n" + b + "\n");
  EXPECT_EQ(clash.code, 1);
  EXPECT_THAT(clash.err, HasSubstr("device d.example.com/p/gpu-0 is held by both x/a and x/b"));
  EXPECT_EQ(Cli("dump -o jsonl").out, before);
  // Malformed JSON: decoding stays strict even with --no-validate.
  EXPECT_EQ(Cli("restore --no-validate -", "{\"metadata\":").code, 1);
  EXPECT_EQ(Cli("dump -o jsonl").out, before);
}

TEST_F(CliTest, RestoreReplacesByNameAndReplaceEmptiesFirst) {
  ASSERT_EQ(Cli("restore " + File("c.json", Cli("generate --claims 10").out)).code, 0);
  const std::string one =
      R"({"metadata":{"namespace":"team-1","name":"claim-1","uid":"new"},"status":{}})";
  ASSERT_EQ(Cli("restore -", one).code, 0);
  EXPECT_THAT(Cli("list -n team-9 -o name").out, HasSubstr("claim-9"));  // others kept
  EXPECT_THAT(Cli("get team-1/claim-1 -o json").out, HasSubstr(R"("uid": "new")"));
  ASSERT_EQ(Cli("restore --replace -", one).code, 0);
  EXPECT_EQ(Cli("list -A -o name").out, "resourceclaim.resource.k8s.io/claim-1\n");
  const CliRun dry = Cli("restore --dry-run " + File("d.json", Cli("generate --claims 5").out));
  EXPECT_EQ(dry.code, 0);
  EXPECT_THAT(dry.out, HasSubstr("nothing written"));
  EXPECT_EQ(Cli("list -A -o name").out, "resourceclaim.resource.k8s.io/claim-1\n");
}

TEST_F(CliTest, ReadCommandsWorkWhileAWriterHoldsTheDatabase) {
  ASSERT_EQ(Cli("restore " + File("c.json", Cli("generate --claims 12").out)).code, 0);
  // This process opens the database for writing and keeps it open.
  absl::StatusOr<std::unique_ptr<Store>> writer = Store::Open(db(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Delete({"team-1", "claim-1"}).ok());
  EXPECT_EQ(Cli("list -o name").out.find("team-1/claim-1"), std::string::npos);
  EXPECT_EQ(Cli("get team-2/claim-2").code, 0);
  EXPECT_EQ(Cli("verify").code, 0);
  EXPECT_EQ(Cli("stats").code, 0);
  // A second writer is refused while this one holds the database: a
  // storage condition (5), not a rule (issue 13, finding 7).
  const CliRun refused = Cli("delete team-2/claim-2");
  EXPECT_EQ(refused.code, 5);
  EXPECT_THAT(refused.err, HasSubstr("another process"));
}

// Issue 13, finding 7: backup needed the write lock, so it could not copy
// the database a scheduler runs on. Now it copies it while this process
// writes on, at one revision, and the copy opens, verifies and restores.
TEST_F(CliTest, BackupOfALiveDatabaseIsConsistentAndRestores) {
  ASSERT_EQ(Cli("restore " + File("c.json", Cli("generate --claims 200").out)).code, 0);
  absl::StatusOr<std::unique_ptr<Store>> writer = Store::Open(db(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::atomic<bool> failed{false};
  std::thread writing([&] {
    for (int i = 0; !stop.load(); ++i) {
      // Claims of their own, created and then rewritten.
      if (!(*writer)->Put(ClaimRecordOf(absl::StrCat("c", i % 20), i)).ok()) {
        failed = true;
        return;
      }
      ++writes;
    }
  });
  const auto wait_for = [&](int n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (writes.load() < n && !failed.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  };
  wait_for(100);
  const std::string copy = dir_.path() + "/backup";
  const CliRun backup = Cli("backup " + copy);
  wait_for(writes.load() + 100);  // writes went on meanwhile and after
  stop = true;
  writing.join();
  ASSERT_FALSE(failed.load());
  ASSERT_EQ(backup.code, 0) << backup.err;
  const std::string at = absl::StrCat(CLAIMSTORE_CLI, " --db ", copy, " ");
  EXPECT_EQ(std::system((at + "verify >/dev/null").c_str()), 0);
  const std::string dump = dir_.path() + "/backup.jsonl";
  ASSERT_EQ(std::system((at + "dump -o jsonl >" + dump).c_str()), 0);
  const std::string dumped = ReadFile(dump);
  const auto claims = std::count(dumped.begin(), dumped.end(), '\n');
  EXPECT_GE(claims, 200);  // the generated claims, and the live ones of its revision
  EXPECT_LE(claims, 220);
  // The copy restores into a fresh database.
  const std::string fresh = absl::StrCat(CLAIMSTORE_CLI, " --db ", dir_.path(), "/fresh ");
  EXPECT_EQ(std::system((fresh + "restore " + dump + " >/dev/null").c_str()), 0);
  EXPECT_EQ(std::system((fresh + "verify >/dev/null").c_str()), 0);
  // A backup into a directory that exists is refused, and nothing changes.
  EXPECT_NE(Cli("backup " + copy).code, 0);
}

TEST_F(CliTest, TheMainJobRunsAndNeverEmptiesSomeoneElsesDatabase) {
  const CliRun demo = Cli("demo");
  ASSERT_EQ(demo.code, 0) << demo.err;
  EXPECT_THAT(demo.out, HasSubstr("exactly one winner: yes"));
  EXPECT_THAT(demo.out, HasSubstr("verify: 0 problem(s) in 10000 claims"));
  EXPECT_EQ(Cli("demo").code, 0);  // its own database: fine to run again
  const std::string other = dir_.path() + "/real";
  ASSERT_EQ(std::system(absl::StrCat(CLAIMSTORE_CLI, " --db ", other, " restore ",
                                     CLAIMSTORE_EXAMPLES, "/claims.json >/dev/null")
                            .c_str()),
            0);
  EXPECT_EQ(
      std::system(absl::StrCat(CLAIMSTORE_CLI, " --db ", other, " demo >/dev/null 2>&1").c_str()),
      4 << 8);
  EXPECT_EQ(
      std::system(
          absl::StrCat(CLAIMSTORE_CLI, " --db ", other, " stats | grep -q 'claims   *4'").c_str()),
      0);
}

TEST_F(CliTest, TheBundledExampleRestores) {
  const CliRun r = Cli(std::string("restore ") + CLAIMSTORE_EXAMPLES "/claims.json");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string table = Cli("list -A").out;
  for (const char* row : {"ml          pending", "ml          trainer-0-gpus",
                          "net         router-nic", "serving     inference-shared-gpu"}) {
    EXPECT_THAT(table, HasSubstr(row));
  }
  EXPECT_THAT(Cli("find --device gpu.example.com/node-b").out, HasSubstr("share 2b0e6d1c"));
  // kubectl's YAML: sorted keys, plain where go-yaml writes plain, quoted
  // timestamps and numeric strings, sequences under their key.
  const std::string yaml = Cli("get -n serving inference-shared-gpu -o yaml").out;
  const std::string head =
      "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n"
      "  creationTimestamp: \"2026-11-02T09:20:11Z\"\n  name: inference-shared-gpu\n"
      "  namespace: serving\n  resourceVersion: \"81901\"\n";
  EXPECT_EQ(yaml.substr(0, head.size()), head);
  EXPECT_THAT(yaml, HasSubstr("  reservedFor:\n  - name: inference-a\n    resource: pods\n"));
  EXPECT_EQ(Cli("list -A -o jsonpath='{.items[*].metadata.name}'").out,
            "pending trainer-0-gpus router-nic inference-shared-gpu");
  EXPECT_EQ(
      Cli("get -n ml trainer-0-gpus -o jsonpath='{.status.allocation.devices.results[*].device}'")
          .out,
      "gpu-0 gpu-1");
  EXPECT_EQ(Cli("get -n ml trainer-0-gpus -o 'jsonpath={..device}'").code, 1);  // unsupported
  EXPECT_THAT(
      Cli("dump -o yaml").out,
      HasSubstr("apiVersion: resource.k8s.io/v1\nitems:\n- metadata:\n    creationTimestamp:"));
}

// Issue 13, finding 1: a claim being deleted while still reserved (a
// finalizer, a PodGroup in reservedFor), as kubectl lists it while its
// namespace is deleted, restores; and the tool's own dump of it restores
// into an empty database to the same dump.
TEST_F(CliTest, AClaimBeingDeletedWhileReservedRestoresAndRoundTrips) {
  const std::string list =
      R"({"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":""},"items":[
    {"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1",
     "metadata":{"name":"gang","namespace":"ml","uid":"7d1c2b3a-0000-4000-8000-000000000001",
                 "deletionTimestamp":"2026-11-30T03:00:00Z","finalizers":["resource.kubernetes.io/delete-protection"]},
     "spec":{"devices":{"requests":[{"name":"gpus","exactly":{"deviceClassName":"gpu.example.com"}}]}},
     "status":{"allocation":{"devices":{"results":[{"request":"gpus","driver":"gpu.example.com","pool":"node-1","device":"gpu-0"}]}},
               "reservedFor":[{"apiGroup":"scheduling.k8s.io","resource":"podgroups","name":"gang","uid":"7d1c2b3a-0000-4000-8000-000000000002"}]}}]})";
  const CliRun restore = Cli("restore -", list);
  ASSERT_EQ(restore.code, 0) << restore.err;
  const CliRun dump = Cli("dump -o json");
  ASSERT_EQ(dump.code, 0) << dump.err;
  EXPECT_THAT(dump.out, HasSubstr(R"("deletionTimestamp": "2026-11-30T03:00:00Z")"));
  EXPECT_THAT(dump.out, HasSubstr(R"("resource": "podgroups")"));
  const std::string copy = dir_.path() + "/copy";
  const std::string dump_file = File("dump.json", dump.out);
  ASSERT_EQ(std::system(
                absl::StrCat(CLAIMSTORE_CLI, " --db ", copy, " restore ", dump_file, " >/dev/null")
                    .c_str()),
            0);
  const std::string dump2 = dir_.path() + "/dump2.json";
  ASSERT_EQ(
      std::system(absl::StrCat(CLAIMSTORE_CLI, " --db ", copy, " dump -o json >", dump2).c_str()),
      0);
  EXPECT_EQ(ReadFile(dump2), dump.out);
}

// Issue 13, finding 2: 12,001 claims whose last one conflicts with a stored
// claim that stays. Before: --dry-run said all was well, and the real
// restore wrote 10,000 claims and stopped, naming item 2000 of a batch.
// Now both refuse, nothing is written, and the error names the device,
// both claims and where the input's one stood.
TEST_F(CliTest, ARestoreConflictingWithAStoredClaimWritesNothing) {
  const std::string holder =
      R"({"metadata":{"namespace":"keep","name":"NAME"},"status":{"allocation":{"devices":{"results":)"
      R"([{"request":"r","driver":"gpu.example.com","pool":"node-9999","device":"gpu-0"}]}}}})";
  std::string stored_holder = holder, conflict = holder;
  stored_holder.replace(stored_holder.find("NAME"), 4, "holder");
  conflict.replace(conflict.find("keep"), 4, "x").replace(conflict.find("NAME"), 4, "conflict");
  ASSERT_EQ(Cli("restore " + File("c.jsonl", Cli("generate --claims 12000 -o jsonl").out)).code, 0);
  ASSERT_EQ(Cli("restore -", stored_holder).code, 0);
  const std::string before = Cli("dump -o jsonl").out;
  const std::string input =
      File("in.jsonl", Cli("generate --claims 12000 --seed 9 -o jsonl").out + conflict + "\n");
  for (const char* mode : {"--dry-run ", ""}) {
    SCOPED_TRACE(mode);
    const CliRun r = Cli(absl::StrCat("restore ", mode, input));
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err,
                HasSubstr("device gpu.example.com/node-9999/gpu-0 is held by both keep/holder "
                          "and x/conflict (one exclusively)"));
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("Error: x/conflict: in ", input,
                                              ": document 12000 (x/conflict)")));
    EXPECT_THAT(r.err, HasSubstr("Error: keep/holder: stored, not in the input"));
    EXPECT_THAT(r.err, HasSubstr("restore refused: nothing was written"));
    EXPECT_EQ(Cli("dump -o jsonl").out, before);
  }
}

// Issue 13, finding 4: --no-validate skipped nothing, so a dump from a
// cluster with looser rules could not be restored at all.
TEST_F(CliTest, NoValidateLoadsWhatBreaksFormatRulesAndMarksIt) {
  // A condition reason of 1,025 bytes (the limit is 1,024) in a kubectl List.
  const std::string loose = absl::StrCat(
      R"({"kind":"List","apiVersion":"v1","items":[)",
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"namespace":"old","name":"fine"},"status":{}},)",
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"namespace":"old","name":"loose"},"status":{)",
      R"("allocation":{"devices":{"results":[{"request":"r","driver":"gpu.example.com","pool":"p","device":"gpu-0"}]}},)",
      R"("devices":[{"driver":"gpu.example.com","pool":"p","device":"gpu-0","conditions":[{"type":"Ready","status":"True",)",
      R"("lastTransitionTime":"2026-01-01T00:00:00Z","reason":")", std::string(1025, 'R'),
      R"(","message":""}]}]}}]})");
  const std::string file = File("loose.json", loose);
  const CliRun strict = Cli("restore " + file);
  EXPECT_EQ(strict.code, 1);
  EXPECT_THAT(strict.err,
              HasSubstr(absl::StrCat("Error: ", file,
                                     ": document 0, item 1 (old/loose): "
                                     "status.devices[0].conditions[0].reason: Too long")));
  EXPECT_EQ(Cli("stats").code, 2);  // nothing written: no database was made
  // Nor into an empty directory that was there: it stays, empty.
  const std::string empty_dir = dir_.path() + "/empty";
  std::filesystem::create_directory(empty_dir);
  EXPECT_EQ(std::system(
                absl::StrCat(CLAIMSTORE_CLI, " --db ", empty_dir, " restore ", file, " 2>/dev/null")
                    .c_str()) >>
                8,
            1);
  EXPECT_TRUE(std::filesystem::is_directory(empty_dir));
  EXPECT_TRUE(std::filesystem::is_empty(empty_dir));

  const CliRun dry = Cli("restore --no-validate --dry-run " + file);
  EXPECT_EQ(dry.code, 0) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("2 claim(s); 1 unvalidated"));
  const CliRun loaded = Cli("restore --no-validate " + file);
  ASSERT_EQ(loaded.code, 0) << loaded.err;
  EXPECT_THAT(loaded.out,
              HasSubstr("restored 2 claim(s) from 2 item(s); revision 2; 1 unvalidated"));
  const CliRun wide = Cli("get old/loose -o wide");
  EXPECT_THAT(wide.out, HasSubstr("VALIDATED"));
  EXPECT_THAT(wide.out, HasSubstr("no (1 errors)"));
  EXPECT_THAT(Cli("get old/fine -o wide").out, HasSubstr("yes"));
  EXPECT_THAT(Cli("stats").out, HasSubstr("unvalidated              1"));
  // Ratcheting: a reservation leaves the legacy condition as it was.
  EXPECT_EQ(Cli("reserve old/loose --consumer pods/p/u1").code, 0);
  EXPECT_EQ(Cli("verify").code, 0);

  // Identity rules hold with --no-validate: a duplicate consumer uid is
  // refused, named by file, item and field, and nothing changes.
  const std::string before = Cli("dump -o jsonl").out;
  const CliRun dup = Cli("restore --no-validate -",
                         R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1","items":[
      {"metadata":{"namespace":"a","name":"dup"},"status":{"allocation":{"devices":{"results":[]}},"reservedFor":[
        {"resource":"pods","name":"p","uid":"u"},{"resource":"pods","name":"p","uid":"u"}]}}]})");
  EXPECT_EQ(dup.code, 1);
  EXPECT_THAT(
      dup.err,
      HasSubstr(
          R"(Error: -: document 0, item 0 (a/dup): status.reservedFor[1]: Duplicate value: "u")"));
  EXPECT_EQ(Cli("dump -o jsonl").out, before);
}

// On a terminal, a line per long phase with claims/s (and an ETA while
// the total is known); nothing of it when stderr is not a terminal.
TEST_F(CliTest, RestoreShowsProgressOnATerminal) {
  if (std::system("command -v script >/dev/null") != 0) GTEST_SKIP() << "no script(1)";
  const std::string input = File("c.jsonl", Cli("generate --claims 20000 -o jsonl").out);
  const std::string out = dir_.path() + "/tty";
  ASSERT_EQ(std::system(absl::StrCat("script -qec '", CLAIMSTORE_CLI, " --db ", db(), " restore ",
                                     input, "' /dev/null >", out)
                            .c_str()),
            0);
  const std::string tty = ReadFile(out);
  for (const char* line :
       {"reading: 20000 of 20000 claims (", "sorting: done in ", "checking: done in ",
        "writing: 20000 of 20000 claims (", "committing: done in ", "restored 20000 claim(s)"}) {
    EXPECT_THAT(tty, HasSubstr(line));
  }
  EXPECT_THAT(tty, HasSubstr(" claims/s), done in "));
  // Piped: the result line only.
  const CliRun piped = Cli("restore --replace " + input);
  EXPECT_EQ(piped.code, 0);
  EXPECT_EQ(piped.err, "");
}

TEST_F(CliTest, FindAndTables) {
  ASSERT_EQ(Cli("restore " + File("c.json", Cli("generate --claims 16").out)).code, 0);
  const CliRun pool = Cli("find --device gpu.example.com/node-0");
  EXPECT_EQ(pool.code, 0);
  EXPECT_THAT(pool.out, HasSubstr("DEVICE"));
  EXPECT_THAT(pool.out, HasSubstr("gpu.example.com/node-0/gpu-"));
  const CliRun wide = Cli("list -A -o wide");
  EXPECT_THAT(wide.out, HasSubstr("NAMESPACE   NAME"));
  EXPECT_THAT(wide.out, HasSubstr("DEVICES"));
  EXPECT_EQ(Cli("find").code, 1);
}

// Issue 14: the tool as a kubectl user reads it.
TEST_F(CliTest, GlobalFlagsGoAnywhere) {
  ASSERT_EQ(Cli("restore " + File("c.json", Cli("generate --claims 6").out)).code, 0);
  const std::string out = dir_.path() + "/out";
  // --db after the command, and after the command's own flags.
  ASSERT_EQ(
      std::system(absl::StrCat(CLAIMSTORE_CLI, " list -A --db ", db(), " -o name >", out).c_str()),
      0);
  EXPECT_EQ(ReadFile(out), Cli("list -A -o name").out);
  EXPECT_THAT(ReadFile(out), HasSubstr("resourceclaim.resource.k8s.io/claim-"));
  EXPECT_EQ(Cli("list --bogus").code, 1);  // unknown flags stay errors
}

TEST_F(CliTest, NamespacesAsKubectlReadsThem) {
  ASSERT_EQ(Cli("restore " + File("c.json", Cli("generate --claims 12").out)).code, 0);
  // NAME in the namespace of -n; NAMESPACE/NAME; resourceclaim/NAME.
  const CliRun by_flag = Cli("get -n team-3 claim-3 -o name");
  EXPECT_EQ(by_flag.code, 0) << by_flag.err;
  EXPECT_EQ(by_flag.out, "resourceclaim.resource.k8s.io/claim-3\n");
  EXPECT_EQ(Cli("get claim-3 -n team-3 -o name").out, by_flag.out);
  EXPECT_EQ(Cli("get team-3/claim-3 -o name").out, by_flag.out);
  EXPECT_EQ(Cli("get resourceclaim/claim-3 --namespace team-3 -o name").out, by_flag.out);
  const CliRun mismatch = Cli("get team-3/claim-3 -n team-4");
  EXPECT_EQ(mismatch.code, 1);
  EXPECT_THAT(mismatch.err, HasSubstr("names namespace team-3, -n names team-4"));
  // Without -n: the default namespace, which holds none of these.
  const CliRun none = Cli("get claim-3");
  EXPECT_EQ(none.code, 2);
  EXPECT_THAT(none.err, HasSubstr("claim default/claim-3 not found"));
  const CliRun empty = Cli("list");
  EXPECT_EQ(empty.code, 0);
  EXPECT_EQ(empty.out, "");
  EXPECT_EQ(empty.err, "No resources found in default namespace.\n");
  // One namespace: no NAMESPACE column; -A: with it, every namespace.
  const CliRun one = Cli("list -n team-3");
  EXPECT_EQ(one.out.substr(0, 5), "NAME ");
  EXPECT_THAT(one.out, HasSubstr("claim-3 "));
  EXPECT_THAT(one.out, ::testing::Not(HasSubstr("claim-4")));
  const CliRun all = Cli("list --all-namespaces");
  EXPECT_EQ(all.out.substr(0, 10), "NAMESPACE ");
  EXPECT_EQ(std::count(all.out.begin(), all.out.end(), '\n'), 13);
  EXPECT_EQ(Cli("list -A -n team-3").code, 1);
  // find looks everywhere unless -n narrows it.
  const CliRun pool = Cli("find --device gpu.example.com");
  ASSERT_EQ(pool.code, 0) << pool.err;
  const CliRun narrowed = Cli("find --device gpu.example.com -n team-3");
  EXPECT_THAT(narrowed.out, HasSubstr("team-3 "));
  EXPECT_LT(narrowed.out.size(), pool.out.size());
  EXPECT_EQ(Cli("find --device gpu.example.com -A -n team-3").code, 1);
}

TEST_F(CliTest, FindSaysWhenNothingMatchesAndRefusesEmptyParts) {
  ASSERT_EQ(Cli("restore " + File("c.json", Cli("generate --claims 4").out)).code, 0);
  for (const char* args : {"find --consumer-uid no-such-uid", "find --device no.such.driver"}) {
    const CliRun r = Cli(args);
    EXPECT_EQ(r.code, 0) << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(r.err, "No resources found\n") << args;
  }
  const CliRun slash = Cli("find --device gpu.example.com/");
  EXPECT_EQ(slash.code, 1);
  EXPECT_THAT(slash.err, HasSubstr("--device gpu.example.com/: POOL is empty"));
  ASSERT_EQ(Cli("reserve team-3/claim-3 --consumer pods/web-0/u-web").code, 0);
  const CliRun found = Cli("find --consumer-uid u-web");
  EXPECT_EQ(found.out.substr(0, 10), "NAMESPACE ");
  EXPECT_THAT(found.out, HasSubstr("team-3      claim-3"));
}

TEST_F(CliTest, WriteCommandsSayWhatChangedAndWhenNothingDid) {
  ASSERT_EQ(Cli("restore " + File("c.json", Cli("generate --claims 4").out)).code, 0);
  const CliRun first = Cli("reserve claim-3 -n team-3 --consumer pods/web-0/u-web");
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(first.out, "team-3/claim-3 reserved for pods/web-0 (uid u-web); revision 5\n");
  const CliRun again = Cli("reserve team-3/claim-3 --consumer pods/web-0/u-web");
  EXPECT_EQ(again.code, 0);
  EXPECT_EQ(again.out,
            "team-3/claim-3 unchanged: pods/web-0 (uid u-web) reserves it already; its revision "
            "is still 5\n");
  EXPECT_EQ(Cli("unreserve team-3/claim-3 --consumer-uid u-web").out,
            "team-3/claim-3 no longer reserved for uid u-web; revision 6\n");
  EXPECT_EQ(Cli("unreserve team-3/claim-3 --consumer-uid u-web").out,
            "team-3/claim-3 unchanged: uid u-web does not reserve it; its revision is still 6\n");
  // The claim's uid as a precondition.
  const CliRun wrong_uid = Cli("reserve team-3/claim-3 --consumer pods/p/u2 --if-claim-uid nope");
  EXPECT_EQ(wrong_uid.code, 3);
  EXPECT_EQ(wrong_uid.out, "");
}

// apply -f: claims written whole, all or nothing, with kubectl apply's
// line per object; --dry-run checks as the write would and writes nothing.
TEST_F(CliTest, ApplyWritesClaimsWholeAllOrNothingAsKubectlSaysIt) {
  const std::string holds_gpu0 =
      R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d.example.com","pool":"p","device":"gpu-0"}]}}})";
  auto claim = [](const std::string& name, const std::string& status) {
    return absl::StrCat(R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1",)",
                        R"("metadata":{"namespace":"ns","name":")", name, R"("},"status":)", status,
                        "}\n");
  };
  const std::string first = File("first.json", claim("a", holds_gpu0) + claim("b", "{}"));
  CliRun r = Cli("apply -f " + first);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "resourceclaim.resource.k8s.io/a created\nresourceclaim.resource.k8s.io/b created\n");
  const std::string after_first = Cli("dump -o jsonl").out;
  r = Cli("apply -f " + first);
  EXPECT_EQ(r.out,
            "resourceclaim.resource.k8s.io/a unchanged\nresourceclaim.resource.k8s.io/b "
            "unchanged\n");
  EXPECT_EQ(Cli("dump -o jsonl").out, after_first);  // nothing written
  // YAML on standard input, -o name; a later object of one claim wins.
  const std::string yaml_c =
      "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {namespace: ns, name: "
      "c}\n";
  r = Cli("apply -o name -f -",
          yaml_c + "status: {}\n---\n" + yaml_c +
              "status:\n  allocation:\n    devices:\n      results:\n      - {request: r, "
              "driver: d.example.com, pool: p, device: gpu-3}\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "resourceclaim.resource.k8s.io/c\nresourceclaim.resource.k8s.io/c\n");
  EXPECT_EQ(Cli("get ns/c -o jsonpath={.status.allocation.devices.results[0].device}").out,
            "gpu-3");
  // Refused whole, naming where the claim stood: a device another claim
  // holds, a rule about a change; --dry-run says the same and writes
  // nothing either way.
  const std::string before = Cli("dump -o jsonl").out;
  const std::string clash = File("clash.json", claim("d", "{}") + claim("e", holds_gpu0));
  for (const char* dry : {"", " --dry-run"}) {
    r = Cli(absl::StrCat("apply -f ", clash, dry));
    EXPECT_EQ(r.code, 3) << dry;
    EXPECT_THAT(r.err, HasSubstr("device d.example.com/p/gpu-0 is")) << dry;
    EXPECT_THAT(r.err, HasSubstr("apply refused: nothing was written")) << dry;
    EXPECT_EQ(r.out, "");
    const std::string other_allocation =
        File("change.json",
             claim("f", "{}") +
                 claim("a", R"({"allocation":{"devices":{"results":[{"request":"r",)"
                            R"("driver":"d.example.com","pool":"p","device":"gpu-7"}]}}})"));
    r = Cli(absl::StrCat("apply -f ", other_allocation, dry));
    EXPECT_EQ(r.code, 4) << dry;
    EXPECT_THAT(r.err, HasSubstr("change.json: document 1 (ns/a): status.allocation: Invalid "
                                 "value: field is immutable"))
        << dry;
    EXPECT_EQ(Cli("dump -o jsonl").out, before) << dry;
  }
  EXPECT_THAT(Cli("apply --dry-run -f " + first).out,
              HasSubstr("resourceclaim.resource.k8s.io/a unchanged (dry run)"));
  r = Cli("apply --dry-run -f " + File("new.json", claim("g", "{}")));
  EXPECT_EQ(r.out, "resourceclaim.resource.k8s.io/g created (dry run)\n");
  EXPECT_EQ(Cli("dump -o jsonl").out, before);
  // What apply does not take.
  r = Cli("apply");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("apply needs -f FILE"));
  r = Cli("apply -f -", R"({"type":"DELETED","object":)" + claim("a", "{}") + "}");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("-: document 0 (ns/a): a DELETED watch event"));
  r = Cli("apply -f -", R"({"kind":"ResourceClaim","metadata":{"name":"x"},"status":{}})");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("metadata.namespace and metadata.name: Required value"));
  EXPECT_EQ(Cli("dump -o jsonl").out, before);
}

TEST_F(CliTest, WritesNeverCreateADatabaseAndMissingFilesSayWhy) {
  const std::string typo = dir_.path() + "/typo.db";
  const std::string err = dir_.path() + "/err";
  EXPECT_EQ(std::system(absl::StrCat(CLAIMSTORE_CLI, " --db ", typo,
                                     " reserve ns/c --consumer pods/p/u 2>", err)
                            .c_str()) >>
                8,
            2);
  EXPECT_THAT(ReadFile(err), HasSubstr("no claimstore database at " + typo));
  EXPECT_FALSE(std::filesystem::exists(typo));
  const CliRun missing = Cli("restore /nonexistent/claims.json");
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err,
              HasSubstr("/nonexistent/claims.json: cannot open: No such file or directory"));
  const CliRun no_allocation = Cli("allocate ns/c -f /nonexistent/a.json");
  EXPECT_NE(no_allocation.code, 0);
}

TEST_F(CliTest, RestoreOnATerminalSaysItReadsStandardInput) {
  if (std::system("command -v script >/dev/null") != 0) GTEST_SKIP() << "no script(1)";
  const std::string out = dir_.path() + "/tty";
  // Standard input a terminal, with nothing typed: the hint, then the wait
  // (polled for up to 20 s, for slow sanitizer builds, then cut short).
  const std::string pid = dir_.path() + "/pid";
  ASSERT_EQ(std::system(absl::StrCat("(timeout 30 script -qec '", CLAIMSTORE_CLI, " --db ", db(),
                                     " restore' /dev/null </dev/null >", out, " 2>&1 & echo $! >",
                                     pid, ")")
                            .c_str()),
            0);
  const auto hinted = [&] {
    return std::filesystem::exists(out) &&
           ReadFile(out).find("Reading claims") != std::string::npos;
  };
  for (int i = 0; i < 200 && !hinted(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::system(absl::StrCat("kill $(cat ", pid, ") 2>/dev/null").c_str());
  EXPECT_THAT(ReadFile(out), HasSubstr("Reading claims to restore from standard input"));
  // Piped: no hint.
  EXPECT_EQ(Cli("restore -", "").err.find("Reading"), std::string::npos);
}

TEST_F(CliTest, WideTablesCutLongDeviceLists) {
  std::string results;
  for (int i = 0; i < 8; ++i) {
    results += absl::StrCat(i ? "," : "", R"({"request":"gpus","driver":"gpu.example.com",)",
                            R"("pool":"node-a","device":"gpu-)", i, R"("})");
  }
  const std::string claim = absl::StrCat(
      R"({"metadata":{"namespace":"ml","name":"all-gpus","uid":"u1"},"status":{"allocation":)",
      R"({"devices":{"results":[)", results, "]}}}}");
  ASSERT_EQ(Cli("restore -", claim).code, 0);
  const CliRun wide = Cli("get ml/all-gpus -o wide");
  ASSERT_EQ(wide.code, 0) << wide.err;
  EXPECT_THAT(wide.out,
              HasSubstr("gpu.example.com/node-a/gpu-0,gpu.example.com/node-a/gpu-1,+6 more"));
  EXPECT_THAT(wide.out, ::testing::Not(HasSubstr("gpu-2")));
}

// `claimstore watch` in another process follows a live writer: its output
// is every committed change after its start, once each, in order, and
// restoring a List plus that output gives the store's state at the end.
TEST_F(CliTest, WatchFollowsALiveWriterAndRestoreReadsItsOutputBack) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE((*store)->Put(ClaimRecordOf(absl::StrCat("c", i), 0)).ok());
  absl::StatusOr<ListPage> start = (*store)->List({});
  ASSERT_TRUE(start.ok());
  ASSERT_EQ(start->revision, 3u);
  std::string list;
  for (const ClaimRecord& r : start->records) list += EncodeClaim(r) + "\n";
  const std::string list_file = File("list.jsonl", list);
  constexpr int kLast = 40;
  CliRun watch;
  std::thread watcher([&] {
    watch = Cli(absl::StrCat("watch -A --from-revision 4 --until-revision ", kLast, " -o json"));
  });
  for (int i = 0; (*store)->Stats()->revision < kLast; ++i) {
    const std::string name = absl::StrCat("c", i % 5);
    if (i % 7 == 6) {
      absl::StatusOr<WriteResult> d = (*store)->Delete({"live", name});
      ASSERT_TRUE(d.ok() || absl::IsNotFound(d.status())) << d.status();
    } else {
      ASSERT_TRUE((*store)->Put(ClaimRecordOf(name, i)).ok());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  watcher.join();
  ASSERT_EQ(watch.code, 0) << watch.err;
  std::istringstream lines(watch.out);
  std::string line;
  int expected = 4;
  while (std::getline(lines, line)) {
    EXPECT_THAT(line, HasSubstr(absl::StrCat(R"(,"revision":)", expected, "}")));
    EXPECT_EQ(line.rfind(R"({"type":")", 0), 0u) << line;
    ++expected;
  }
  EXPECT_EQ(expected, kLast + 1);
  const std::string final_dump = [&] {
    std::string out;
    const absl::StatusOr<ListPage> page = (*store)->List({});
    EXPECT_TRUE(page.ok());
    for (const ClaimRecord& r : page->records) out += EncodeClaim(r) + "\n";
    return out;
  }();
  store->reset();
  const std::string events = File("events.jsonl", watch.out);
  const std::string copy = dir_.path() + "/copy";
  ASSERT_EQ(std::system(absl::StrCat(CLAIMSTORE_CLI, " --db ", copy, " restore ", list_file, " ",
                                     events, " >/dev/null")
                            .c_str()),
            0);
  absl::StatusOr<std::unique_ptr<Store>> restored = Store::Open(copy, {.read_only = true});
  ASSERT_TRUE(restored.ok());
  std::string restored_dump;
  const absl::StatusOr<ListPage> page = (*restored)->List({});
  ASSERT_TRUE(page.ok());
  for (const ClaimRecord& r : page->records) restored_dump += EncodeClaim(r) + "\n";
  EXPECT_EQ(restored_dump, final_dump);
}

TEST_F(CliTest, WatchFromACompactedRevisionExitsSix) {
  {
    absl::StatusOr<std::unique_ptr<Store>> store =
        Store::Open(db(), {.feed_history_revisions = 10});
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 50; ++i) ASSERT_TRUE((*store)->Put(ClaimRecordOf("c", i)).ok());
  }
  const CliRun watch = Cli("watch -A --from-revision 1");
  EXPECT_EQ(watch.code, 6);
  EXPECT_THAT(watch.err, HasSubstr("Error: revision 1 has been compacted"));
  const CliRun stats = Cli("stats");
  EXPECT_THAT(stats.out, ::testing::ContainsRegex(
                             "feed from revision +4[0-9]\n"));  // at least the latest 10 kept
}

// A claim follow/NAME of the cluster at resourceVersion `rv`, generation `gen`.
std::string ClusterClaim(const std::string& name, int rv, int gen) {
  return absl::StrCat(R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{)",
                      R"("namespace":"follow","name":")", name, R"(","uid":"u-)", name,
                      R"(","resourceVersion":")", rv, R"(","generation":)", gen,
                      R"(},"status":{}})");
}
std::string Event(const std::string& type, const std::string& name, int rv, int gen) {
  return absl::StrCat(R"({"type":")", type, R"(","object":)", ClusterClaim(name, rv, gen), "}");
}
std::string Bookmark(int rv) {
  return absl::StrCat(
      R"({"type":"BOOKMARK","object":{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"resourceVersion":")",
      rv, R"("}}})");
}

// A follower fed a recorded stream (kubectl's indented objects, then after a
// restart the raw API's lines) with duplicates, out-of-date events,
// bookmarks and a 410 ends in the state a restore of the final List gives,
// and resumes from the position it stored.
TEST_F(CliTest, FollowAppliesAWatchStreamAsAStoreOfTheFinalListWouldHoldIt) {
  // kubectl get -w --output-watch-events: the list as ADDED (in no order of
  // resourceVersion), then the watch; printed indented, several lines each.
  std::string first;
  for (const std::string& e :
       {Event("ADDED", "a", 10, 1), Event("ADDED", "b", 7, 1), Event("ADDED", "c", 12, 1),
        Event("MODIFIED", "a", 13, 2), Event("MODIFIED", "a", 13, 2) /* duplicate */,
        Event("MODIFIED", "b", 5, 9) /* out of date */, Bookmark(14),
        Event("DELETED", "c", 15, 1)}) {
    std::string indented = e;
    for (size_t at = 0; (at = indented.find(",\"", at)) != std::string::npos; at += 6) {
      indented.replace(at, 1, ",\n    ");
    }
    first += indented + "\n";
  }
  const CliRun one = Cli("follow " + File("first.json", first));
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_THAT(one.out,
              HasSubstr("followed 8 event(s): 5 applied, 2 not newer than the stored claim, "
                        "1 bookmark(s); resourceVersion 15"));
  EXPECT_EQ(Cli("follow --show-resource-version").out, "15\n");
  // The restart: a raw watch from an older resourceVersion replays events.
  std::string second;
  for (const std::string& e :
       {Event("MODIFIED", "a", 13, 2), Event("DELETED", "c", 15, 1), Event("ADDED", "d", 16, 1),
        Event("MODIFIED", "b", 17, 3), Bookmark(20)}) {
    second += e + "\n";
  }
  second += R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",)j"
            R"j("message":"too old resource version: 12 (20)","reason":"Expired","code":410}})j"
            "\n";
  const CliRun two = Cli("follow -", second);
  EXPECT_EQ(two.code, 7) << two.err;
  EXPECT_THAT(two.err, HasSubstr("410 Gone (too old resource version: 12 (20)): re-list"));
  EXPECT_THAT(two.out, HasSubstr("2 applied, 2 not newer"));
  EXPECT_THAT(Cli("stats").out, ::testing::ContainsRegex("follow resourceVersion +20\n"));
  // What a restore of the final List holds.
  const std::string list = absl::StrCat(
      R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1","metadata":{"resourceVersion":"20"},"items":[)",
      ClusterClaim("a", 13, 2), ",", ClusterClaim("b", 17, 3), ",", ClusterClaim("d", 16, 1), "]}");
  const std::string copy = dir_.path() + "/copy";
  ASSERT_EQ(std::system(absl::StrCat(CLAIMSTORE_CLI, " --db ", copy, " restore ",
                                     File("list.json", list), " >/dev/null")
                            .c_str()),
            0);
  const std::string copy_dump = dir_.path() + "/copy.jsonl";
  ASSERT_EQ(
      std::system(
          absl::StrCat(CLAIMSTORE_CLI, " --db ", copy, " dump -o jsonl >", copy_dump).c_str()),
      0);
  EXPECT_EQ(Cli("dump -o jsonl").out, ReadFile(copy_dump));
  // The follower's changes are in its own change feed, as any write's.
  const CliRun watch = Cli("watch -A --from-revision 1 --until-revision 6");
  EXPECT_EQ(watch.code, 0) << watch.err;
  EXPECT_THAT(watch.out, HasSubstr("DELETED   follow               c"));
}

// kubectl get -w -o yaml --output-watch-events: documents separated by ---
// (issue 41); the same events as above, the same outcome.
TEST_F(CliTest, FollowReadsAYamlWatchStream) {
  std::string stream;
  for (const std::string& e :
       {Event("ADDED", "a", 10, 1), Event("ADDED", "b", 7, 1), Event("ADDED", "c", 12, 1),
        Event("MODIFIED", "a", 13, 2), Event("MODIFIED", "a", 13, 2), Event("MODIFIED", "b", 5, 9),
        Bookmark(14), Event("DELETED", "c", 15, 1)}) {
    if (!stream.empty()) stream += "---\n";
    ASSERT_TRUE(::claimstore::cli::AppendYaml(e, &stream)) << e;
  }
  const CliRun run = Cli("follow -", stream);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out,
              HasSubstr("followed 8 event(s): 5 applied, 2 not newer than the stored claim, "
                        "1 bookmark(s); resourceVersion 15"));
  const CliRun bad = Cli("follow -", "type: ADDED\nobject:\n  metadata: [\n");
  EXPECT_EQ(bad.code, 1) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("-: event 0: line 4, column 1 (document 0, byte "));
}

TEST_F(CliTest, FollowRefusesWhatIsNotAWatchStreamAndKeepsWhatCameBefore) {
  const CliRun bad = Cli("follow -", Event("ADDED", "a", 1, 1) + "\n[1]\n");
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("Error: -: after event 1: expected a JSON object"));
  EXPECT_EQ(Cli("get follow/a").code, 0);
  const CliRun no_rv = Cli(
      "follow -",
      R"({"type":"ADDED","object":{"metadata":{"namespace":"follow","name":"x","resourceVersion":"abc"},"status":{}}})");
  EXPECT_EQ(no_rv.code, 1);
  EXPECT_THAT(no_rv.err, HasSubstr("metadata.resourceVersion: Invalid value: \"abc\""));
}

// Issue 16: what is allocated, per device, as the tool prints it.
TEST_F(CliTest, AllocatedPrintsEveryDeviceWithItsHoldersAndCapacity) {
  ASSERT_EQ(Cli(absl::StrCat("restore ", CLAIMSTORE_EXAMPLES, "/claims.json")).code, 0);
  // A second share of gpu-2 (the same capacity in other units) and an admin.
  const std::string more = File("more.json", R"({"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"small","namespace":"serving","uid":"u-small"},
 "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]}},
 "status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.example.com","pool":"node-b","device":"gpu-2",
   "shareID":"3c1f7e2d-8b2a-4e4f-8d66-4a2b3c4d5e6f","consumedCapacity":{"memory":"8192Mi","cores":"250m"}}]}}}},
{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"monitor","namespace":"ops","uid":"u-monitor"},
 "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com","adminAccess":true}}]}},
 "status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.example.com","pool":"node-a","device":"gpu-0","adminAccess":true}]}}}}
]})");
  const CliRun restored = Cli("restore " + more);
  ASSERT_EQ(restored.code, 0) << restored.err;
  const CliRun json = Cli("allocated -o json");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(json.out,
            "{\"revision\":6,\"devices\":[\n"
            "{\"driver\":\"gpu.example.com\",\"pool\":\"node-a\",\"device\":\"gpu-0\","
            "\"exclusive\":\"ml/trainer-0-gpus\",\"shares\":[],\"adminAccess\":[\"ops/monitor\"],"
            "\"consumedCapacity\":{}},\n"
            "{\"driver\":\"gpu.example.com\",\"pool\":\"node-a\",\"device\":\"gpu-1\","
            "\"exclusive\":\"ml/trainer-0-gpus\",\"shares\":[],\"adminAccess\":[],"
            "\"consumedCapacity\":{}},\n"
            "{\"driver\":\"gpu.example.com\",\"pool\":\"node-b\",\"device\":\"gpu-2\",\"shares\":["
            "{\"shareID\":\"2b0e6d1c-7a1f-4d3e-9c55-3f1a2b3c4d5e\",\"claim\":\"serving/"
            "inference-shared-gpu\"},"
            "{\"shareID\":\"3c1f7e2d-8b2a-4e4f-8d66-4a2b3c4d5e6f\",\"claim\":\"serving/small\"}],"
            "\"adminAccess\":[],\"consumedCapacity\":{\"cores\":\"750m\",\"memory\":\"48Gi\"}},\n"
            "{\"driver\":\"nic.example.com\",\"pool\":\"node-c\",\"device\":\"eth1\","
            "\"exclusive\":\"net/router-nic\",\"shares\":[],\"adminAccess\":[],"
            "\"consumedCapacity\":{}}\n"
            "]}\n");
  const CliRun table = Cli("allocated");
  EXPECT_EQ(table.code, 0);
  EXPECT_THAT(table.out, HasSubstr("DEVICE                         EXCLUSIVE"));
  EXPECT_THAT(table.out, HasSubstr("gpu.example.com/node-b/gpu-2   <none>"));
  EXPECT_THAT(table.out, HasSubstr("cores=750m,memory=48Gi"));
  const CliRun wide = Cli("allocated -o wide --device gpu.example.com/node-b");
  EXPECT_EQ(wide.code, 0);
  EXPECT_THAT(wide.out, HasSubstr("3c1f7e2d-8b2a-4e4f-8d66-4a2b3c4d5e6f=serving/small"));
  EXPECT_THAT(wide.out, Not(HasSubstr("node-a")));
  const CliRun one = Cli("allocated --device gpu.example.com/node-a/gpu-0 -o json");
  EXPECT_THAT(one.out, HasSubstr("\"adminAccess\":[\"ops/monitor\"]"));
  EXPECT_THAT(one.out, Not(HasSubstr("gpu-1")));
  const CliRun none = Cli("allocated --device other.example.com");
  EXPECT_EQ(none.code, 0);
  EXPECT_EQ(none.err, "No resources found\n");
  EXPECT_EQ(Cli("allocated --device other.example.com -o json").out,
            "{\"revision\":6,\"devices\":[]}\n");
  const CliRun bad = Cli("allocated --device gpu.example.com//gpu-0");
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("POOL is empty"));
  EXPECT_EQ(Cli("allocated -o yaml").code, 1);
}

// The ```sh lines of a document, in order. Lines that install, build or run
// this very suite (tools/..., cmake ...) are what CI itself runs, so they
// are left out.
std::vector<std::string> ShellExamples(const std::string& document, int* blocks) {
  const std::string text = ReadFile(document);
  std::vector<std::string> lines;
  *blocks = 0;
  for (size_t pos = 0; (pos = text.find("```sh\n", pos)) != std::string::npos;) {
    pos += 6;
    const size_t end = text.find("\n```", pos);
    EXPECT_NE(end, std::string::npos) << document << ": an unclosed ```sh block";
    if (end == std::string::npos) break;
    ++*blocks;
    std::istringstream block(text.substr(pos, end - pos));
    for (std::string line; std::getline(block, line);) {
      if (line.empty() || line.rfind("tools/", 0) == 0 || line.rfind("cmake ", 0) == 0) continue;
      lines.push_back(line);
    }
    pos = end + 4;
  }
  return lines;
}

// Runs `lines` in order in `dir` (which gets tools/examples), with the built
// claimstore first on PATH; each must succeed.
void RunShellExamples(const std::string& document, const std::vector<std::string>& lines,
                      const std::string& dir) {
  std::filesystem::create_directories(dir + "/tools");
  std::filesystem::create_directory_symlink(CLAIMSTORE_EXAMPLES, dir + "/tools/examples");
  const std::string bin = std::filesystem::path(CLAIMSTORE_CLI).parent_path();
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string script = absl::StrCat(dir, "/line.sh");
    std::ofstream(script) << lines[i] << "\n";
    const std::string err = absl::StrCat(dir, "/line.err");
    const int status =
        std::system(absl::StrCat("cd ", dir, " && env -u CLAIMSTORE_DB PATH=", bin,
                                 ":$PATH bash -o pipefail -e ", script, " >/dev/null 2>", err)
                        .c_str());
    EXPECT_EQ(status, 0) << document << " example " << i << ": " << lines[i] << "\n"
                         << ReadFile(err);
  }
}

// The README's shell examples run as written, in order, in an empty
// directory holding tools/examples.
TEST(DocsTest, ReadmeShellExamplesRunAsWritten) {
  int blocks = 0;
  const std::vector<std::string> lines = ShellExamples(CLAIMSTORE_README, &blocks);
  EXPECT_GE(blocks, 2);
  ASSERT_GE(lines.size(), 9u);
  ScopedTempDir dir;
  RunShellExamples("README.md", lines, dir.path());
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/claimstore.db/CURRENT"));
  EXPECT_GT(ReadFile(dir.path() + "/backup.jsonl").size(), 1000u);
}

// So do those of every page of docs/, each page in a directory of its own.
TEST(DocsTest, DocsShellExamplesRunAsWritten) {
  int pages = 0;
  for (const auto& entry : std::filesystem::directory_iterator(CLAIMSTORE_DOCS)) {
    if (entry.path().extension() != ".md") continue;
    int blocks = 0;
    const std::vector<std::string> lines = ShellExamples(entry.path(), &blocks);
    if (lines.empty()) continue;
    ++pages;
    ScopedTempDir dir;
    RunShellExamples(entry.path().filename().string(), lines, dir.path());
    if (entry.path().filename() == "cli.md") {
      // What the tool page's lines left: the database, the dump (three
      // claims: one was deleted), the checkpoint, the generated cluster.
      EXPECT_GE(lines.size(), 15u);
      EXPECT_TRUE(std::filesystem::exists(dir.path() + "/claimstore.db/CURRENT"));
      const std::string dump = ReadFile(dir.path() + "/claims-backup.jsonl");
      EXPECT_EQ(std::count(dump.begin(), dump.end(), '\n'), 3);
      EXPECT_TRUE(std::filesystem::exists(dir.path() + "/claims-checkpoint/CURRENT"));
      EXPECT_GT(ReadFile(dir.path() + "/cluster.json").size(), 1000u);
    }
  }
  EXPECT_GE(pages, 2);  // cli.md and api.md (following a cluster) at least
}

}  // namespace
}  // namespace claimstore
