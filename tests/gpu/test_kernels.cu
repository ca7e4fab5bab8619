// Kernels for the GPU tests: some arithmetic per element, so a launch takes
// measurable time; dropout with its random draws and a copy of its bytes.
#include <cuda_fp16.h>
#include <curand_kernel.h>

#include <algorithm>

#include "tests/gpu/test_kernels.h"

namespace ppsim::gpu::testing {
namespace {

__global__ void busy(float* data, int n, int rounds) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = data[i];
  for (int r = 0; r < rounds; ++r) x = x * 0.999f + 0.001f;
  data[i] = x;
}

// Threads of a grid-stride loop: enough blocks of 256 to fill every SM,
// as PyTorch sizes its elementwise and dropout kernels.
int grid_for(int64_t n) {
  int device = 0, sms = 0, threads_per_sm = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device);
  const int64_t needed = (n + 4 * 256 - 1) / (4 * 256);
  return static_cast<int>(
      std::min<int64_t>(needed, static_cast<int64_t>(sms) * threads_per_sm / 256));
}

__global__ void dropout(const __half* in, __half* out, uint8_t* mask, int64_t n, float keep,
                        uint64_t seed) {
  const int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  curandStatePhilox4_32_10_t state;
  curand_init(seed, thread, 0, &state);
  const float scale = 1.0f / keep;
  for (int64_t base = thread * 4; base < n; base += stride * 4) {
    const float4 u = curand_uniform4(&state);
    const float draws[4] = {u.x, u.y, u.z, u.w};
    for (int j = 0; j < 4 && base + j < n; ++j) {
      const bool kept = draws[j] < keep;
      out[base + j] = __float2half(kept ? __half2float(in[base + j]) * scale : 0.0f);
      mask[base + j] = kept;
    }
  }
}

__global__ void masked_copy(const __half* in, __half* out, uint8_t* mask, int64_t n) {
  const int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t base = thread * 4; base < n; base += stride * 4) {
    for (int j = 0; j < 4 && base + j < n; ++j) {
      out[base + j] = in[base + j];
      mask[base + j] = 1;
    }
  }
}

}  // namespace

void launch_busy(float* data, int n, int rounds, void* stream) {
  busy<<<(n + 255) / 256, 256, 0, static_cast<cudaStream_t>(stream)>>>(data, n, rounds);
}

void launch_dropout(const uint16_t* in, uint16_t* out, uint8_t* mask, int64_t n, float p,
                    uint64_t seed, void* stream) {
  dropout<<<grid_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const __half*>(in), reinterpret_cast<__half*>(out), mask, n, 1.0f - p, seed);
}

void launch_masked_copy(const uint16_t* in, uint16_t* out, uint8_t* mask, int64_t n, void* stream) {
  masked_copy<<<grid_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const __half*>(in), reinterpret_cast<__half*>(out), mask, n);
}

}  // namespace ppsim::gpu::testing
