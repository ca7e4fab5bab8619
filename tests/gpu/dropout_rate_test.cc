// Dropout's random draws on the device: what the A100 preset's
// dropout_rng_gsamples_per_s stands for (configs/hardware/a100-80gb.yaml,
// fitted to Zero Bubble Table 9; docs/validation.md finds Selene's runs
// without that cost). The kernel draws as PyTorch's fused dropout does
// (tests/gpu/test_kernels.h); its rate against a copy of the same bytes says
// whether the draws or the bytes bound it on this GPU. Skips, saying why,
// without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "tests/gpu/test_kernels.h"

namespace ppsim::gpu {
namespace {

constexpr uint16_t kHalfOne = 0x3c00;  // 1.0 in IEEE binary16

// Input, output and mask of n elements on the device; the input all ones.
class DropoutBuffers {
 public:
  explicit DropoutBuffers(int64_t n) : n_(n) {
    ok_ = cudaMalloc(reinterpret_cast<void**>(&in_), n * sizeof(uint16_t)) == cudaSuccess &&
          cudaMalloc(reinterpret_cast<void**>(&out_), n * sizeof(uint16_t)) == cudaSuccess &&
          cudaMalloc(reinterpret_cast<void**>(&mask_), n) == cudaSuccess;
    if (!ok_) return;
    const std::vector<uint16_t> ones(n, kHalfOne);
    ok_ = cudaMemcpy(in_, ones.data(), n * sizeof(uint16_t), cudaMemcpyHostToDevice) == cudaSuccess;
  }
  ~DropoutBuffers() {
    cudaFree(in_);
    cudaFree(out_);
    cudaFree(mask_);
  }
  DropoutBuffers(const DropoutBuffers&) = delete;
  DropoutBuffers& operator=(const DropoutBuffers&) = delete;

  bool ok() const { return ok_; }
  void dropout(float p) { testing::launch_dropout(in_, out_, mask_, n_, p, 1234, nullptr); }
  void copy() { testing::launch_masked_copy(in_, out_, mask_, n_, nullptr); }
  std::vector<uint16_t> out() const { return fetch(out_, n_); }
  std::vector<uint8_t> mask() const { return fetch(mask_, n_); }

 private:
  template <typename T>
  static std::vector<T> fetch(const T* device, int64_t n) {
    std::vector<T> host(n);
    cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

  int64_t n_;
  bool ok_ = false;
  uint16_t* in_ = nullptr;
  uint16_t* out_ = nullptr;
  uint8_t* mask_ = nullptr;
};

// Mean seconds of `launch` over `reps` runs after one to warm up.
template <typename Launch>
double seconds_per_run(Launch launch, int reps) {
  launch();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, nullptr);
  for (int i = 0; i < reps; ++i) launch();
  cudaEventRecord(stop, nullptr);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e-3 / reps;
}

class DropoutDraws : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (device_count(&why) == 0) GTEST_SKIP() << why;
  }
};

// Of 4M ones at p = 0.1: each kept element is 1/0.9 in fp16 (0x3c72) and its
// mask 1, each dropped one 0 and its mask 0, and the kept share is 0.9 within
// five standard deviations of a binomial (5 sqrt(0.09 / n) = 0.00073).
TEST_F(DropoutDraws, KeepOneMinusPScaledAndZeroTheRest) {
  constexpr int64_t n = int64_t{1} << 22;
  DropoutBuffers buffers(n);
  ASSERT_TRUE(buffers.ok()) << "could not place " << n << " elements on the device";
  buffers.dropout(0.1f);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> out = buffers.out();
  const std::vector<uint8_t> mask = buffers.mask();
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], mask[i] ? 0x3c72 : 0) << "element " << i;
    kept += mask[i];
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.9, 5 * std::sqrt(0.09 / n));
}

// 256M elements (1.34 GB moved a run). Dropout moves the copy's bytes and
// draws besides, so it cannot be faster than the copy (1 % for timing
// noise). The rates are printed for docs/validation.md (scripts/gpu_check.sh
// puts the line in its summary).
TEST_F(DropoutDraws, RateAgainstACopyOfTheSameBytes) {
  constexpr int64_t n = int64_t{1} << 28;
  DropoutBuffers buffers(n);
  if (!buffers.ok()) GTEST_SKIP() << "this GPU cannot hold 1.34 GB for the rate";
  const double draws_s = seconds_per_run([&] { buffers.dropout(0.1f); }, 10);
  const double copy_s = seconds_per_run([&] { buffers.copy(); }, 10);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_GT(draws_s, 0);
  ASSERT_GT(copy_s, 0);
  std::printf(
      "dropout draws: %.0f G elements/s (%.0f GB/s of its 5 bytes an element); "
      "a copy of the same bytes %.0f G elements/s (%.0f GB/s)\n",
      n / draws_s * 1e-9, 5 * n / draws_s * 1e-9, n / copy_s * 1e-9, 5 * n / copy_s * 1e-9);
  RecordProperty("dropout_g_elements_per_s", std::to_string(n / draws_s * 1e-9));
  RecordProperty("copy_g_elements_per_s", std::to_string(n / copy_s * 1e-9));
  EXPECT_GE(draws_s, 0.99 * copy_s);
}

}  // namespace
}  // namespace ppsim::gpu
