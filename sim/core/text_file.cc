#include "sim/core/text_file.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ppsim {
std::string why_not_readable(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::strerror(errno);
  if (S_ISDIR(info.st_mode)) return "is a directory, not a file";
  if (!S_ISREG(info.st_mode)) return "is not a regular file (a device, a pipe or a socket)";
  if (::access(path.c_str(), R_OK) != 0) return std::strerror(errno);
  return "";
}

Result<std::string> read_text_file(const std::string& path, int64_t max_bytes) {
  if (const std::string why = why_not_readable(path); !why.empty()) {
    return Error{fmt::format("{}: cannot read: {}", path, why)};
  }
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return Error{fmt::format("{}: cannot read: {}", path, std::strerror(errno))};
  std::string text;
  char buffer[1 << 14];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) {
    text.append(buffer, n);
    if (static_cast<int64_t>(text.size()) > max_bytes) break;
  }
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (failed) return Error{fmt::format("{}: cannot read: {}", path, std::strerror(error))};
  if (static_cast<int64_t>(text.size()) > max_bytes) {
    return Error{fmt::format("{}: larger than {} MiB, the most ppsim reads from such a file", path,
                             max_bytes >> 20)};
  }
  return text;
}

}  // namespace ppsim
