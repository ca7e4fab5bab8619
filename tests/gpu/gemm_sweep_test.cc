// The sweeps of profiler/gpu_gemm_sweep.h on device 0. cuBLAS products at
// small shapes: a positive median per shape, a product of four times the
// depth slower, and the error for a type cuBLAS's sweep does not take.
// Copies: a positive median per size, and 64 MiB slower than 64 KiB (a
// thousand times the bytes). Skips, saying why, without a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "profiler/gpu_gemm_sweep.h"

namespace ppsim {
namespace gemm_sweep_test {
namespace {

TEST(GemmSweep, TimesEachShapeAndDeeperProductsTakeLonger) {
  std::string why;
  if (gpu::device_count(&why) == 0) GTEST_SKIP() << why;
  const std::vector<GemmShape> shapes = {{2048, 2048, 512}, {2048, 2048, 2048}};
  std::vector<std::string> lines;
  gpu::GemmSweepOptions options;
  options.repetitions = 5;
  const Result<std::vector<double>> t = gpu::time_gemm_sweep(
      shapes, options, [&](const std::string& line) { lines.push_back(line); });
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->size(), 2u);
  EXPECT_GT((*t)[0], 0);
  EXPECT_GT((*t)[1], (*t)[0]);  // four times the work; launch costs aside
  EXPECT_EQ(lines.size(), 2u);
}

TEST(GemmSweep, RefusesWhatItCannotTime) {
  std::string why;
  if (gpu::device_count(&why) == 0) GTEST_SKIP() << why;
  gpu::GemmSweepOptions fp32;
  fp32.type = DType::kFp32;
  const Result<std::vector<double>> t = gpu::time_gemm_sweep({{64, 64, 64}}, fp32);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "GEMM sweep: the operands must be bf16 or fp16, not fp32");
}

TEST(CopySweep, TimesEachSizeAndLargerCopiesTakeLonger) {
  std::string why;
  if (gpu::device_count(&why) == 0) GTEST_SKIP() << why;
  std::vector<std::string> lines;
  gpu::CopySweepOptions options;
  options.repetitions = 5;
  const Result<std::vector<double>> t =
      gpu::time_copy_sweep({int64_t{1} << 16, int64_t{1} << 26}, options,
                           [&](const std::string& line) { lines.push_back(line); });
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->size(), 2u);
  EXPECT_GT((*t)[0], 0);
  EXPECT_GT((*t)[1], (*t)[0]);
  EXPECT_EQ(lines.size(), 2u);
}

}  // namespace
}  // namespace gemm_sweep_test
}  // namespace ppsim
