// What the GPU numerics tests share (gpu_block_test.cc, gpu_head_test.cc):
// assertions on Status and Result, random matrices, the comparison of a GPU
// tensor with the CPU's as max |gpu - cpu| / max |cpu|, and a fixture with
// a context on device 0 per storage type.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "profiler/block_kernels.h"
#include "profiler/cupti_tracer.h"
#include "profiler/gpu_block.h"
#include "profiler/gpu_block_io.h"
#include "schedules/status.h"
#include "sim/core/workload.h"

namespace ppsim {
// Test listings name the precision, not its bytes.
inline void PrintTo(DType dtype, std::ostream* os) { *os << to_string(dtype); }
}  // namespace ppsim

#define ASSERT_OK(expr)                                      \
  do {                                                       \
    const ::ppsim::Status st_ = (expr);                      \
    ASSERT_TRUE(st_.ok()) << #expr << ": " << st_.message(); \
  } while (0)
#define PPSIM_CONCAT_INNER(a, b) a##b
#define PPSIM_CONCAT(a, b) PPSIM_CONCAT_INNER(a, b)
#define ASSIGN_OR_FAIL(lhs, expr) ASSIGN_OR_FAIL_IMPL(PPSIM_CONCAT(result_, __LINE__), lhs, expr)
#define ASSIGN_OR_FAIL_IMPL(result, lhs, expr)                         \
  auto result = (expr);                                                \
  ASSERT_TRUE(result.ok()) << #expr << ": " << result.error().message; \
  lhs = std::move(*result)

namespace ppsim::gpu::testing {

// N(0, 1) entries.
inline kernels::Mat<float> random_matrix(int64_t rows, int64_t cols, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  kernels::Mat<float> m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

// max |gpu - cpu| relative to max |cpu|, which must not be ~0 (a zero
// reference would pass anything).
inline void expect_close(const std::string& what, const float* gpu, const float* cpu, int64_t size,
                         double tolerance) {
  double err = 0, ref = 0;
  for (int64_t i = 0; i < size; ++i) {
    err = std::max(err, std::abs(static_cast<double>(gpu[i]) - cpu[i]));
    ref = std::max(ref, std::abs(static_cast<double>(cpu[i])));
  }
  EXPECT_GT(ref, 1e-3) << what << ": the reference is ~0, the check would prove nothing";
  EXPECT_LE(err / ref, tolerance) << what << ": max abs error " << err << ", max |cpu| " << ref;
}

inline void expect_close(const std::string& what, const kernels::Mat<float>& gpu,
                         const kernels::Mat<float>& cpu, double tolerance) {
  ASSERT_EQ(gpu.rows(), cpu.rows()) << what;
  ASSERT_EQ(gpu.cols(), cpu.cols()) << what;
  expect_close(what, gpu.data(), cpu.data(), gpu.size(), tolerance);
}

// Tensor by tensor (a parameter set's tensors(), gradients' names prefixed).
inline void expect_tensors_close(const std::vector<kernels::TensorView<float>>& gpu,
                                 const std::vector<kernels::TensorView<float>>& cpu,
                                 double tolerance) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t t = 0; t < gpu.size(); ++t) {
    ASSERT_EQ(gpu[t].size, cpu[t].size) << gpu[t].name;
    expect_close(std::string("grad ") + gpu[t].name, gpu[t].data, cpu[t].data, gpu[t].size,
                 tolerance);
  }
}

// A context on device 0 (skips, saying why, without a device), the test's
// parameter the storage type.
class GpuTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    std::string why;
    if (device_count(&why) == 0) GTEST_SKIP() << why;
    Result<std::unique_ptr<GpuContext>> ctx = GpuContext::create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.error().message;
    ctx_ = std::move(*ctx);
  }

  DType storage() const { return GetParam(); }
  void expect_device_close(const std::string& what, const DeviceMatrix& gpu,
                           const kernels::Mat<float>& cpu, double tolerance) {
    ASSIGN_OR_FAIL(const kernels::Mat<float> host, to_host(*ctx_, gpu));
    expect_close(what, host, cpu, tolerance);
  }

  std::unique_ptr<GpuContext> ctx_;  // declared first: destroyed after every buffer
};

}  // namespace ppsim::gpu::testing
