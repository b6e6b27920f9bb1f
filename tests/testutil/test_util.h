// Helpers shared by claimstore's tests.
#ifndef CLAIMSTORE_TESTS_TESTUTIL_TEST_UTIL_H_
#define CLAIMSTORE_TESTS_TESTUTIL_TEST_UTIL_H_

#include <unistd.h>

#include <cstdint>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// Defined when this build runs under AddressSanitizer or ThreadSanitizer,
// for tests that scale their work down there. GCC defines
// __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__; clang (14, the asan-ubsan
// preset) defines neither and answers __has_feature instead.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CLAIMSTORE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CLAIMSTORE_TEST_SANITIZED 1
#endif
#endif

namespace claimstore::testing {

// Runs `body(i)` for i in [0, n) on n threads released together, and joins
// them: the races of the concurrency tests.
template <typename F>
void RaceThreads(int n, F&& body) {
  std::latch start(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      body(t);
    });
  }
  for (std::thread& th : threads) th.join();
}

// Reads a whole file; fails the test (and returns "") when it cannot.
std::string ReadFile(const std::string& path);

// ../shared/k8s/<relative>.
std::string K8sPath(const std::string& relative);

// tests/testdata/<relative>.
std::string TestDataPath(const std::string& relative);

// A fresh directory under $TMPDIR (or /tmp) for one test, removed with its
// contents when the object goes away.
class ScopedTempDir {
 public:
  ScopedTempDir();
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A tmpfs of `bytes` mounted at a fresh directory, unmounted (lazily) when
// the object goes away: a small disk that a test can fill for real. Needs
// root (CI runs tests as root): mounted() says whether it worked, error()
// why not.
class Tmpfs {
 public:
  explicit Tmpfs(uint64_t bytes);
  ~Tmpfs();
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  // The bytes still free.
  uint64_t FreeBytes() const;
  // Writes zeros to `file` until the disk is full but for `leave` bytes.
  void FillLeaving(const std::string& file, uint64_t leave) const;
  // Remounts read-only (or read-write again).
  bool Remount(bool read_only);

 private:
  ScopedTempDir dir_;
  std::string path_;
  bool mounted_ = false;
  std::string error_;
};

// Skips the test unless it runs as root, and fails it unless `fs` mounted.
#define CLAIMSTORE_REQUIRE_TMPFS(fs)                                                     \
  do {                                                                                   \
    if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root (CI runs as root)"; \
    ASSERT_TRUE((fs).mounted()) << "mounting a tmpfs: " << (fs).error();                 \
  } while (false)

// Matches an OK absl::Status or absl::StatusOr.
MATCHER(IsOk, "is OK") {
  if constexpr (std::is_same_v<std::decay_t<arg_type>, absl::Status>) {
    *result_listener << arg;
    return arg.ok();
  } else {
    *result_listener << arg.status();
    return arg.ok();
  }
}

// Matches a status (or StatusOr) with `code` whose message contains
// `substring`.
MATCHER_P2(StatusIs, code, substring, "") {
  const absl::Status& s = [&]() -> const absl::Status& {
    if constexpr (std::is_same_v<std::decay_t<arg_type>, absl::Status>) {
      return arg;
    } else {
      return arg.status();
    }
  }();
  *result_listener << s;
  return s.code() == code && s.message().find(std::string(substring)) != absl::string_view::npos;
}

}  // namespace claimstore::testing

#endif  // CLAIMSTORE_TESTS_TESTUTIL_TEST_UTIL_H_
