#include "util/parallel.h"

#include <system_error>
#include <thread>

namespace claimstore::internal {

void RunConcurrently(std::vector<std::function<void()>> tasks) {
  std::vector<std::thread> threads;
  std::vector<const std::function<void()>*> here;
  for (size_t i = 0; i + 1 < tasks.size(); ++i) {
    try {
      threads.emplace_back(tasks[i]);
    } catch (const std::system_error&) {
      here.push_back(&tasks[i]);
    }
  }
  if (!tasks.empty()) tasks.back()();
  for (const std::function<void()>* task : here) (*task)();
  for (std::thread& t : threads) t.join();
}

}  // namespace claimstore::internal
