#include "testutil/test_util.h"

#include <stdlib.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace claimstore::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string K8sPath(const std::string& relative) {
  return std::string(CLAIMSTORE_K8S_DIR) + "/" + relative;
}

std::string TestDataPath(const std::string& relative) {
  return std::string(CLAIMSTORE_TESTDATA_DIR) + "/" + relative;
}

ScopedTempDir::ScopedTempDir() {
  const char* tmp = getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/claimstore_test_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed for " << pattern;
  }
  path_ = pattern;
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

Tmpfs::Tmpfs(uint64_t bytes) : path_(dir_.path() + "/mnt") {
  std::filesystem::create_directories(path_);
  const std::string data = "size=" + std::to_string(bytes);
  mounted_ = mount("tmpfs", path_.c_str(), "tmpfs", 0, data.c_str()) == 0;
  if (!mounted_) error_ = std::strerror(errno);
}

Tmpfs::~Tmpfs() {
  if (mounted_) umount2(path_.c_str(), MNT_DETACH);
}

uint64_t Tmpfs::FreeBytes() const {
  struct statvfs st {};
  if (statvfs(path_.c_str(), &st) != 0) return 0;
  return uint64_t{st.f_bavail} * st.f_frsize;
}

void Tmpfs::FillLeaving(const std::string& file, uint64_t leave) const {
  const uint64_t free = FreeBytes();
  const uint64_t bytes = free > leave ? free - leave : 0;
  std::FILE* f = std::fopen(file.c_str(), "ab");
  if (f == nullptr) {
    ADD_FAILURE() << "cannot open " << file;
    return;
  }
  const std::string chunk(1 << 16, '\0');
  for (uint64_t written = 0; written < bytes;) {
    const size_t n = std::min<uint64_t>(chunk.size(), bytes - written);
    if (std::fwrite(chunk.data(), 1, n, f) != n) break;
    written += n;
  }
  std::fclose(f);
}

bool Tmpfs::Remount(bool read_only) {
  return mount("tmpfs", path_.c_str(), "tmpfs", MS_REMOUNT | (read_only ? MS_RDONLY : 0),
               nullptr) == 0;
}

}  // namespace claimstore::testing
