// The codec against a well-known JSON library, in one binary.
//
//   claimstore: JSON → verified ClaimRecord (FlatBuffers) → JSON in API form.
//   rapidjson:  JSON → rapidjson::Document (DOM) → JSON (Writer).
//
// Names: BM_<Operation>/<backend>/<input>, so results pair up by input.
#include <benchmark/benchmark.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "claimstore/codec.h"
#include "claimstore/validation.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) {
    fprintf(stderr, "cannot read %s\n", path.c_str());
    abort();
  }
  return ss.str();
}

struct Input {
  const char* name;
  std::string json;
};

void DecodeEncodeClaimstore(benchmark::State& state, const std::string& json) {
  for (auto _ : state) {
    absl::StatusOr<claimstore::ClaimRecord> record = claimstore::DecodeClaim(json);
    if (!record.ok()) {
      state.SkipWithError("decode failed");
      break;
    }
    std::string out = claimstore::EncodeClaim(*record);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * json.size()));
}

void DecodeClaimstore(benchmark::State& state, const std::string& json) {
  for (auto _ : state) {
    absl::StatusOr<claimstore::ClaimRecord> record = claimstore::DecodeClaim(json);
    benchmark::DoNotOptimize(record->bytes().data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * json.size()));
}

void EncodeClaimstore(benchmark::State& state, const std::string& json) {
  const claimstore::ClaimRecord record = *claimstore::DecodeClaim(json);
  for (auto _ : state) {
    std::string out = claimstore::EncodeClaim(record);
    benchmark::DoNotOptimize(out.data());
  }
}

void DecodeEncodeRapidjson(benchmark::State& state, const std::string& json) {
  for (auto _ : state) {
    rapidjson::Document doc;
    doc.Parse(json.data(), json.size());
    if (doc.HasParseError()) {
      state.SkipWithError("parse failed");
      break;
    }
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    doc.Accept(writer);
    benchmark::DoNotOptimize(buffer.GetString());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * json.size()));
}

void DecodeRapidjson(benchmark::State& state, const std::string& json) {
  for (auto _ : state) {
    rapidjson::Document doc;
    doc.Parse(json.data(), json.size());
    benchmark::DoNotOptimize(doc.IsObject());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * json.size()));
}

void EncodeRapidjson(benchmark::State& state, const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  for (auto _ : state) {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    doc.Accept(writer);
    benchmark::DoNotOptimize(buffer.GetString());
  }
}

// Validation of a decoded claim, as every store write runs it.
void ValidateClaimstore(benchmark::State& state, const std::string& json) {
  const claimstore::ClaimRecord record = *claimstore::DecodeClaim(json);
  for (auto _ : state) {
    std::vector<claimstore::FieldError> errors = claimstore::ValidateClaimStatus(nullptr, record);
    benchmark::DoNotOptimize(errors.data());
  }
}

void Register() {
  static const Input* inputs = new Input[2]{
      {"typical", ReadFile(std::string(CLAIMSTORE_BENCH_DATA) + "/typical_claim.json")},
      {"fixture",
       ReadFile(std::string(CLAIMSTORE_K8S_DIR) + "/fixtures/ResourceClaim.roundtrip.json")},
  };
  using Fn = void (*)(benchmark::State&, const std::string&);
  const struct {
    const char* operation;
    const char* backend;
    Fn fn;
  } cases[] = {
      {"CodecRoundTrip", "claimstore", DecodeEncodeClaimstore},
      {"CodecRoundTrip", "rapidjson", DecodeEncodeRapidjson},
      {"CodecDecode", "claimstore", DecodeClaimstore},
      {"CodecDecode", "rapidjson", DecodeRapidjson},
      {"CodecEncode", "claimstore", EncodeClaimstore},
      {"CodecEncode", "rapidjson", EncodeRapidjson},
      {"Validate", "claimstore", ValidateClaimstore},
  };
  for (int i = 0; i < 2; ++i) {
    const Input& input = inputs[i];
    for (const auto& c : cases) {
      const std::string name =
          std::string("BM_") + c.operation + "/" + c.backend + "/" + input.name;
      Fn fn = c.fn;
      benchmark::RegisterBenchmark(
          name.c_str(), [fn, &input](benchmark::State& state) { fn(state, input.json); });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
