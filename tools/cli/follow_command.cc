// claimstore follow: keeps the store in step with a cluster by applying a
// Kubernetes watch stream of ResourceClaims as it arrives (what `kubectl get
// resourceclaims -A -w -o json --output-watch-events` prints, indented
// objects one after another, or the raw API's `?watch=1`, one per line; or
// -o yaml's documents, separated by ---).

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "cli_core.h"
#include "commands.h"
#include "simdjson.h"

namespace claimstore::cli {
namespace {

constexpr char kFollowUsage[] =
    "Usage: claimstore follow [FILE|-] [--db DIR]\n"
    "       claimstore follow --show-resource-version [--db DIR]\n"
    "Applies a Kubernetes watch stream of ResourceClaims as it arrives, e.g.\n"
    "  kubectl get resourceclaims -A -w -o json --output-watch-events | claimstore follow\n"
    "  kubectl get resourceclaims -A -w -o yaml --output-watch-events | claimstore follow\n"
    "  kubectl get --raw '/apis/resource.k8s.io/v1/resourceclaims?watch=1&resourceVersion=R' \\\n"
    "    | claimstore follow\n"
    "An event whose resourceVersion is not newer than the stored claim's changes nothing\n"
    "(duplicates, replays after a reconnect); claims are applied as state, as a restore\n"
    "applies them. BOOKMARKs advance the stored position, which --show-resource-version\n"
    "prints (and `claimstore stats` shows): resume a watch from it after a restart.\n"
    "Each event is one atomic write, with the position. Ends at the end of the stream (0),\n"
    "or at an ERROR event: 410 Gone exits 7 (re-list: restore --replace a fresh list, then\n"
    "follow from its resourceVersion); other errors exit 5.\n";

// The exit code of a stream that ended with 410 Gone: re-list.
constexpr int kGoneExit = 7;

// Cuts a byte stream into its top-level JSON objects as they complete.
class ObjectCutter {
 public:
  // Appends `bytes`; complete objects go to `out`. False on a byte outside
  // an object that is not whitespace (the objects before it are in `out`).
  bool Feed(std::string_view bytes, std::vector<std::string>* out) {
    for (char c : bytes) {
      if (depth_ == 0) {
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c != '{') return false;
      }
      current_.push_back(c);
      if (in_string_) {
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
        continue;
      }
      if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        if (--depth_ == 0) {
          out->push_back(std::move(current_));
          current_.clear();
        }
      }
    }
    return true;
  }
  bool InObject() const { return depth_ > 0; }

 private:
  std::string current_;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
};

// Cuts a YAML byte stream into its documents (kubectl get -w -o yaml
// --output-watch-events writes `---` between events): a document is done
// at the next `---` or `...` line, the last one at the end of the stream.
class YamlCutter {
 public:
  void Feed(std::string_view bytes, std::vector<std::string>* out) {
    for (char c : bytes) {
      line_.push_back(c);
      if (c == '\n') EndLine(out);
    }
  }
  // The end of the stream: the last document.
  void Finish(std::vector<std::string>* out) {
    EndLine(out);
    Emit(out);
  }

 private:
  void EndLine(std::vector<std::string>* out) {
    const absl::string_view line = absl::StripTrailingAsciiWhitespace(line_);
    if (line == "---" || absl::StartsWith(line, "--- ") || line == "...") {
      Emit(out);
    } else {
      current_ += line_;
      if (!line.empty() && line[0] != '#') content_ = true;
    }
    line_.clear();
  }
  void Emit(std::vector<std::string>* out) {
    if (content_) out->push_back(std::move(current_));
    current_.clear();
    content_ = false;
  }

  std::string line_, current_;
  bool content_ = false;  // current_ has more than blank lines and comments
};

struct Counts {
  uint64_t events = 0, applied = 0, skipped = 0, bookmarks = 0;
};

uint64_t ResourceVersion(const ClaimRecord& r) {
  uint64_t rv = 0;
  const auto* s = r.table().resource_version();
  if (s != nullptr && !absl::SimpleAtoi(absl::string_view(s->data(), s->size()), &rv)) rv = 0;
  return rv;
}

// Applies one event document. Sets *gone for a 410; returns the exit code
// of a failure (0: go on).
int ApplyDocument(Store& store, const std::string& doc, bool yaml, size_t index,
                  const std::string& input, Counts* counts, bool* gone) {
  const std::string where = absl::StrCat(input, ": event ", index);
  if (yaml) {
    absl::StatusOr<std::string> json = YamlToJson(doc);
    if (!json.ok()) return Fail(json.status(), where);
    return ApplyDocument(store, *json, /*yaml=*/false, index, input, counts, gone);
  }
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(doc).get(root) != simdjson::SUCCESS || !root.is_object()) {
    return Fail(absl::InvalidArgumentError("not a JSON object"), where);
  }
  std::string_view type;
  if (root["type"].get(type) != simdjson::SUCCESS) {
    return Fail(absl::InvalidArgumentError("type: Required value: not a watch event"), where);
  }
  ++counts->events;
  if (type == "BOOKMARK") {
    std::string_view rv_text;
    uint64_t rv = 0;
    if (root["object"]["metadata"]["resourceVersion"].get(rv_text) != simdjson::SUCCESS ||
        !absl::SimpleAtoi(absl::string_view(rv_text.data(), rv_text.size()), &rv)) {
      return Fail(
          absl::InvalidArgumentError(
              "object.metadata.resourceVersion: a BOOKMARK needs a numeric resourceVersion"),
          where);
    }
    ++counts->bookmarks;
    const absl::Status s = store.ApplyClusterEvents({}, rv).status();
    return s.ok() ? 0 : Fail(s, where);
  }
  if (type == "ERROR") {
    int64_t code = 0;
    if (root["object"]["code"].get(code) != simdjson::SUCCESS) code = 0;
    std::string_view message;
    if (root["object"]["message"].get(message) != simdjson::SUCCESS) message = "";
    if (code == 410) {
      *gone = true;
      std::cerr << "Error: " << where << ": the watch stream ended with 410 Gone (" << message
                << "): re-list (claimstore restore --replace a fresh list), "
                << "then follow from its resourceVersion\n";
      return kGoneExit;
    }
    std::cerr << "Error: " << where << ": the watch stream carries an ERROR event (code " << code
              << "): " << message << "\n";
    return 5;
  }
  std::vector<ClusterEvent> events;
  absl::Status s = DecodeClaims(doc, [&](DecodedClaim c) {
    events.push_back(ClusterEvent{std::move(c.record), c.event == WatchEventType::kDeleted});
    return absl::OkStatus();
  });
  if (!s.ok()) return Fail(s, where);
  if (events.size() != 1) {
    return Fail(absl::InvalidArgumentError("a watch event must carry one ResourceClaim"), where);
  }
  absl::StatusOr<std::vector<WriteResult>> r =
      store.ApplyClusterEvents(events, ResourceVersion(events[0].record));
  if (!r.ok()) return Fail(r.status(), where);
  if ((*r)[0].changed) {
    ++counts->applied;
  } else {
    ++counts->skipped;
  }
  return 0;
}

int Follow(const Context& context, const std::string& file, bool show) {
  if (show) {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenForReading(context);
    if (!store.ok()) return Fail(store.status());
    absl::StatusOr<StoreStats> stats = (*store)->Stats();
    if (!stats.ok()) return Fail(stats.status());
    std::cout << stats->follow_resource_version << "\n";
    return 0;
  }
  const std::string input = file.empty() ? "-" : file;
  int fd = 0;
  if (input != "-") {
    fd = open(input.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Fail(CannotOpen(input, errno));
  } else {
    HintReadingStdin("a watch stream");
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenForWriting(context, /*create=*/true);
  if (!store.ok()) return Fail(store.status());
  ObjectCutter cutter;
  YamlCutter yaml_cutter;
  std::optional<bool> yaml;  // known at the first byte that is not white space
  Counts counts;
  std::vector<std::string> docs;
  char buffer[1 << 16];
  int code = 0;
  bool gone = false;
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      code =
          Fail(absl::UnavailableError(absl::StrCat("reading ", input, ": ", std::strerror(errno))));
      break;
    }
    docs.clear();
    const std::string_view bytes(buffer, static_cast<size_t>(n));
    if (!yaml.has_value()) {
      const absl::string_view text =
          absl::StripLeadingAsciiWhitespace(absl::string_view(bytes.data(), bytes.size()));
      if (!text.empty()) yaml = text[0] != '{';
    }
    if (n == 0) {
      if (yaml.value_or(false)) {
        yaml_cutter.Finish(&docs);
      } else if (cutter.InObject()) {
        code = Fail(absl::InvalidArgumentError("the stream ends inside an event"), input);
        break;
      }
    }
    // The events before a byte that is no event are applied first.
    bool well_formed = true;
    if (yaml.value_or(false)) {
      yaml_cutter.Feed(bytes, &docs);
    } else {
      well_formed = cutter.Feed(bytes, &docs);
    }
    for (const std::string& doc : docs) {
      code =
          ApplyDocument(**store, doc, yaml.value_or(false), counts.events, input, &counts, &gone);
      if (code != 0) break;
    }
    if (n == 0) break;
    if (code != 0) break;
    if (!well_formed) {
      code = Fail(absl::InvalidArgumentError("expected a JSON object (a watch event)"),
                  absl::StrCat(input, ": after event ", counts.events));
      break;
    }
  }
  if (fd != 0) close(fd);
  absl::StatusOr<StoreStats> stats = (*store)->Stats();
  std::cout << "followed " << counts.events << " event(s): " << counts.applied << " applied, "
            << counts.skipped << " not newer than the stored claim, " << counts.bookmarks
            << " bookmark(s); resourceVersion "
            << (stats.ok() ? absl::StrCat(stats->follow_resource_version) : "?") << "\n";
  return code;
}

}  // namespace

void AddFollowCommand(CLI::App& app, Context& context) {
  auto file = std::make_shared<std::string>();
  auto show = std::make_shared<bool>(false);
  CLI::App* follow =
      AddCommand(app, "follow", kFollowUsage, "Apply a Kubernetes watch stream as it arrives");
  follow->add_option("FILE", *file, "the stream; - or none for standard input");
  follow->add_flag("--show-resource-version", *show, "print the stored position and exit");
  follow->callback([&context, file, show] { context.exit_code = Follow(context, *file, *show); });
}

}  // namespace claimstore::cli
