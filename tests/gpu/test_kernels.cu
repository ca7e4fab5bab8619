// A kernel for the GPU tests: some arithmetic per element, so a launch takes
// measurable time.
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

}  // namespace

void launch_busy(float* data, int n, int rounds, void* stream) {
  busy<<<(n + 255) / 256, 256, 0, static_cast<cudaStream_t>(stream)>>>(data, n, rounds);
}

}  // namespace ppsim::gpu::testing
