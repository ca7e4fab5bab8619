#include "profiler/gemm_sweep.h"

#include <fmt/format.h>

#include "schedules/status.h"
#include "sim/core/csv_field.h"

namespace ppsim {

std::vector<GemmShape> gemm_sweep_shapes() {
  std::vector<GemmShape> shapes;
  for (const int64_t k : {256, 512, 1024, 2048, 4096, 8192, 16384})
    shapes.push_back({8192, 8192, k});
  for (const int64_t m : {1024, 2048, 3072, 5120, 6144, 12288, 16384}) {
    shapes.push_back({m, 4096, 4096});
  }
  for (const int64_t n : {512, 1024, 1536, 2048}) shapes.push_back({8192, n, 8192});
  return shapes;
}

std::string gemm_timings_csv(const std::vector<GemmShape>& shapes,
                             const std::vector<double>& seconds, std::string_view source) {
  PPSIM_CHECK(shapes.size() == seconds.size());
  const std::string quoted = csv_quoted(source);
  std::string out = "m,n,k,seconds,label,source\n";
  for (size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape& s = shapes[i];
    out += fmt::format("{},{},{},{:.6e},{} x {} x {},{}\n", s.m, s.n, s.k, seconds[i], s.m, s.n,
                       s.k, quoted);
  }
  return out;
}

}  // namespace ppsim
