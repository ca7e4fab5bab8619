#include "profiler/memory_sweep.h"

#include <fmt/format.h>

#include "schedules/status.h"
#include "sim/core/csv_field.h"

namespace ppsim {

std::vector<int64_t> memory_sweep_sizes() {
  std::vector<int64_t> sizes;
  for (int64_t bytes = int64_t{1} << 16; bytes <= int64_t{1} << 30; bytes *= 2) {
    sizes.push_back(bytes);
  }
  return sizes;
}

std::string memory_timings_csv(const std::vector<int64_t>& sizes,
                               const std::vector<double>& seconds, std::string_view source) {
  PPSIM_CHECK(sizes.size() == seconds.size());
  const std::string quoted = csv_quoted(source);
  std::string out = "bytes,seconds,label,source\n";
  for (size_t i = 0; i < sizes.size(); ++i) {
    out += fmt::format("{},{:.6e},copy {} KiB,{}\n", 2 * sizes[i], seconds[i], sizes[i] / 1024,
                       quoted);
  }
  return out;
}

}  // namespace ppsim
