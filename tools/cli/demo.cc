// The main job (demo) and the generator of realistic claims it uses.
//
// The demo generates a cluster of 10,000 claims, restores it, asks what a
// scheduler asks, reserves and releases, races two scheduler threads for
// the last free consumer slot, dumps and verifies, and prints what each
// step took. It empties its database first, so it refuses one it did not
// create itself.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "cli_core.h"
#include "commands.h"

namespace claimstore::cli {
namespace {

constexpr char kGenerateUsage[] =
    "Usage: claimstore generate --claims N [--seed S]\n"
    "Prints N realistic claims as a ResourceClaimList (JSON lines with -o jsonl).\n";
constexpr char kDemoUsage[] =
    "Usage: claimstore demo [--db DIR]\n"
    "The main job: restores 10,000 generated claims into its own database (refusing one\n"
    "it did not create), asks what a scheduler asks, races two schedulers, verifies.\n";
constexpr int kClaims = 10000;

struct GenerateFlags {
  uint64_t claims = 0, seed = 1;
  std::string format = "json";
};

int Generate(const GenerateFlags& flags) {
  const bool lines = flags.format == "jsonl";
  std::string out = lines ? ""
                          : R"({"kind":"ResourceClaimList","apiVersion":"resource.k8s.io/v1",)"
                            R"("metadata":{"resourceVersion":""},"items":[)";
  for (uint64_t i = 0; i < flags.claims; ++i) {
    if (!lines && i > 0) out += ",";
    out += GenerateClaimJson(i, flags.seed);
    if (lines) out += "\n";
    if (out.size() > (1 << 20)) {
      std::cout << out;
      out.clear();
    }
  }
  if (!lines) out += "]}\n";
  std::cout << out;
  return 0;
}

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

// Opens the demo's database, refusing one that holds claims the demo did
// not write (it has no marker), and empties it.
absl::StatusOr<std::unique_ptr<Store>> OpenDemoDatabase(const std::string& db) {
  const std::string marker = db + "/CLAIMSTORE_DEMO";
  const bool ours = std::ifstream(marker).good();
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, {});
  if (!store.ok()) return store.status();
  if (!ours) {
    absl::StatusOr<StoreStats> stats = (*store)->Stats();
    if (!stats.ok()) return stats.status();
    if (stats->claims > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          db, " holds ", stats->claims,
          " claim(s) the demo did not write; the demo empties its database, so it refuses "
          "this one (use --db to point it elsewhere)"));
    }
    std::ofstream(marker) << "created by claimstore demo\n";
  }
  std::vector<ClaimKey> existing;
  if (absl::Status s = ForEachClaimKey(**store, [&](ClaimKey k) { existing.push_back(k); });
      !s.ok()) {
    return s;
  }
  for (const ClaimKey& k : existing) (void)(*store)->Delete(k);
  return store;
}

absl::Status RestoreRecords(Store& store, const std::vector<ClaimRecord>& records) {
  for (size_t i = 0; i < records.size(); i += 2500) {
    const size_t n = std::min<size_t>(2500, records.size() - i);
    if (auto r = store.PutAll({records.data() + i, n}); !r.ok()) return r.status();
  }
  return store.Compact();
}

// A pod's claims, a device's holder, a pool's allocations.
void AskWhatASchedulerAsks(Store& store, const ClaimRecord& sample) {
  const std::string pod = sample.table().status()->reserved_for()->Get(0)->uid()->str();
  auto t = Clock::now();
  auto mine = store.ClaimsReservedFor(pod);
  std::printf("claims of pod %s: %zu (%.3f ms)\n", pod.c_str(), mine->claims.size(),
              MillisSince(t));
  const auto* res = sample.table().status()->allocation()->results()->Get(0);
  t = Clock::now();
  auto who =
      store.ClaimsUsingDevice({res->driver()->str(), res->pool()->str(), res->device()->str(), {}});
  std::printf("holders of %s/%s/%s: %s (%.3f ms)\n", res->driver()->c_str(), res->pool()->c_str(),
              res->device()->c_str(), who->holdings.at(0).claim.ToString().c_str(), MillisSince(t));
  t = Clock::now();
  auto pool = store.ClaimsUsingDevice({"gpu.example.com", "node-5", {}, {}});
  std::printf("allocations in pool gpu.example.com/node-5: %zu (%.3f ms)\n", pool->holdings.size(),
              MillisSince(t));
}

absl::Status ReserveAndRelease(Store& store, const ClaimKey& key) {
  const auto t = Clock::now();
  auto reserved = store.Reserve(key, {"", "pods", "demo-pod", "demo-pod-uid"});
  if (!reserved.ok()) return reserved.status();
  auto released = store.Unreserve(key, "demo-pod-uid");
  if (!released.ok()) return released.status();
  std::printf("reserve + unreserve %s: revisions %llu, %llu (%.3f ms)\n", key.ToString().c_str(),
              static_cast<unsigned long long>(reserved->revision),
              static_cast<unsigned long long>(released->revision), MillisSince(t));
  return absl::OkStatus();
}

// Two schedulers race for the last free consumer slot of `contested`:
// whether exactly one won.
bool RaceForTheLastSlot(Store& store, const ClaimKey& contested) {
  for (int i = 0; ConsumerCount(store.Get(contested)->record) < 255; ++i) {
    (void)store.Reserve(contested,
                        {"", "pods", absl::StrCat("filler-", i), absl::StrCat("filler-uid-", i)});
  }
  absl::Status results[2];
  const auto t = Clock::now();
  {
    std::thread a([&] {
      results[0] = store.Reserve(contested, {"", "pods", "sched-a", "uid-a"}).status();
    });
    std::thread b([&] {
      results[1] = store.Reserve(contested, {"", "pods", "sched-b", "uid-b"}).status();
    });
    a.join();
    b.join();
  }
  for (int i = 0; i < 2; ++i) {
    std::printf("scheduler %c: %s\n", 'a' + i,
                results[i].ok() ? "reserved the last slot"
                                : absl::StrCat("requeue (", results[i].message(), ")").c_str());
  }
  const bool one_winner = results[0].ok() != results[1].ok();
  std::printf("race: %.3f ms; exactly one winner: %s\n", MillisSince(t), one_winner ? "yes" : "NO");
  return one_winner;
}

// Whether Verify found nothing.
bool DumpAndVerify(Store& store) {
  auto t = Clock::now();
  auto all = store.List({});
  std::string dump = EncodeClaimList(all->records, absl::StrCat(all->revision));
  std::printf("dump: %zu claims, %zu bytes of JSON (%.0f ms)\n", all->records.size(), dump.size(),
              MillisSince(t));
  t = Clock::now();
  auto report = store.Verify(false);
  std::printf("verify: %zu problem(s) in %llu claims, %llu index entries (%.0f ms)\n",
              report->problems.size(), static_cast<unsigned long long>(report->records),
              static_cast<unsigned long long>(report->index_entries), MillisSince(t));
  return report->problems.empty();
}

int Demo(const Context& context) {
  const std::string db = context.DbPath();
  std::cout << "== claimstore main job on " << db << "\n";
  auto t = Clock::now();
  std::vector<ClaimRecord> records;
  for (int i = 0; i < kClaims; ++i) records.push_back(*DecodeClaim(GenerateClaimJson(i, 7)));
  std::printf("generate + decode %d claims: %.0f ms\n", kClaims, MillisSince(t));

  t = Clock::now();
  absl::StatusOr<std::unique_ptr<Store>> store = OpenDemoDatabase(db);
  if (!store.ok()) return Fail(store.status());
  if (absl::Status s = RestoreRecords(**store, records); !s.ok()) return Fail(s);
  std::printf("restore (validate + write + compact) %d claims: %.0f ms\n", kClaims, MillisSince(t));

  const ClaimRecord& sample = records[3];
  AskWhatASchedulerAsks(**store, sample);
  const ClaimKey key{std::string(sample.claim_namespace()), std::string(sample.name())};
  if (absl::Status s = ReserveAndRelease(**store, key); !s.ok()) return Fail(s);
  const bool one_winner = RaceForTheLastSlot(**store, key);
  const bool clean = DumpAndVerify(**store);
  return one_winner && clean ? 0 : 1;
}

}  // namespace

void AddDemoCommands(CLI::App& app, Context& context) {
  CLI::App* demo = AddCommand(app, "demo", kDemoUsage, "The main job");
  demo->callback([&context] { context.exit_code = Demo(context); });

  const auto flags = std::make_shared<GenerateFlags>();
  CLI::App* generate = AddCommand(app, "generate", kGenerateUsage, "Print generated claims");
  generate->add_option("--claims", flags->claims, "how many")->required();
  generate->add_option("--seed", flags->seed, "the generator's seed (default 1)");
  generate->add_option("-o", flags->format, "json (a ResourceClaimList) or jsonl")
      ->check(CLI::IsMember({"json", "jsonl"}));
  generate->callback([flags, &context] { context.exit_code = Generate(*flags); });
}

}  // namespace claimstore::cli
