// A benchmark's child process: run, waited for, and its peak resident
// memory sampled meanwhile (tool_bench runs the tool, open_bench itself).
#ifndef CLAIMSTORE_BENCH_CHILD_PROCESS_H_
#define CLAIMSTORE_BENCH_CHILD_PROCESS_H_

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace claimstore::bench {

// The peak resident memory of a child, from /proc/PID/status: anonymous
// (the heap) and file-backed (mapped files and the binary, which the
// kernel may write back and reclaim) apart.
struct Peak {
  double anon_mb = 0, file_mb = 0;
};

// Runs `argv` (argv[0] a path) and waits for it, sampling its memory into
// *peak (each the larger) every `every`. Whether it exited with 0.
inline bool RunSampled(const std::vector<std::string>& argv, std::chrono::milliseconds every,
                       Peak* peak) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    execv(args[0], args.data());
    _exit(127);
  }
  const auto kb = [](const std::string& status, const char* field) {
    const size_t at = status.find(field);
    return at == std::string::npos ? 0 : std::atof(status.c_str() + at + std::strlen(field));
  };
  const std::string status_path = "/proc/" + std::to_string(pid) + "/status";
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    std::ifstream in(status_path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    peak->anon_mb = std::max(peak->anon_mb, kb(text, "RssAnon:") / 1024);
    peak->file_mb = std::max(peak->file_mb, kb(text, "RssFile:") / 1024);
    std::this_thread::sleep_for(every);
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace claimstore::bench

#endif  // CLAIMSTORE_BENCH_CHILD_PROCESS_H_
