// The sweep `ppsim profile-gemms` times (profiler/gemm_sweep.h), on the
// host: its shapes within the bounds it states, and the CSV it writes read
// back by `ppsim calibrate --gemms`'s reader, shape for shape.
#include "profiler/gemm_sweep.h"

#include <gtest/gtest.h>

#include <vector>

#include "sim/fit/gemm_fit.h"

namespace ppsim {
namespace gemm_sweep_test {
namespace {

TEST(GemmSweepShapes, VaryDepthHeightAndWidthWithinTheirBound) {
  const std::vector<GemmShape> shapes = gemm_sweep_shapes();
  int depths = 0, heights = 0, widths = 0;
  for (const GemmShape& s : shapes) {
    EXPECT_LE(s.m * s.k, int64_t{1} << 27);
    EXPECT_LE(s.k * s.n, int64_t{1} << 27);
    EXPECT_LE(s.m * s.n, int64_t{1} << 27);
    depths += s.m == 8192 && s.n == 8192;
    heights += s.n == 4096 && s.k == 4096;
    widths += s.m == 8192 && s.k == 8192 && s.n <= 2048;
  }
  EXPECT_EQ(depths, 7);
  EXPECT_EQ(heights, 7);
  EXPECT_EQ(widths, 4);
}

TEST(GemmTimingsCsv, ReadsBackAsTheFitsInput) {
  const std::vector<GemmShape> shapes = {{8192, 8192, 256}, {1024, 4096, 4096}};
  const std::vector<double> seconds = {8.9056e-5, 1.25e-4};
  const Result<GemmTimings> t =
      parse_gemm_timings(gemm_timings_csv(shapes, seconds, "H200, \"bf16\""), "gemms.csv");
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->rows.size(), 2u);
  for (size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(t->rows[i].m, shapes[i].m);
    EXPECT_EQ(t->rows[i].n, shapes[i].n);
    EXPECT_EQ(t->rows[i].k, shapes[i].k);
    EXPECT_DOUBLE_EQ(t->rows[i].seconds, seconds[i]);
    EXPECT_EQ(t->rows[i].source, "H200, \"bf16\"");
  }
  EXPECT_EQ(t->rows[1].label, "1024 x 4096 x 4096");
}

}  // namespace
}  // namespace gemm_sweep_test
}  // namespace ppsim
