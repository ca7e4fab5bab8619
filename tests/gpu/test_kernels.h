// Device code for the GPU tests (tests/gpu/test_kernels.cu).
#pragma once

namespace ppsim::gpu::testing {

// Launches a kernel that updates data[0, n) `rounds` times on `stream` (a
// cudaStream_t; nullptr for the default stream).
void launch_busy(float* data, int n, int rounds, void* stream);

}  // namespace ppsim::gpu::testing
