// Device code for the GPU tests (tests/gpu/test_kernels.cu).
#pragma once

#include <cstdint>

namespace ppsim::gpu::testing {

// Launches a kernel that updates data[0, n) `rounds` times on `stream` (a
// cudaStream_t; nullptr for the default stream).
void launch_busy(float* data, int n, int rounds, void* stream);

// Dropout of n 16-bit floats (fp16, as uint16_t bits) as PyTorch's fused
// dropout draws it: Philox-4x32-10 per thread (curand_init(seed, thread,
// 0)), four uniform numbers a call, one per element; an element is kept
// where its number is below 1 - p, scaled by 1 / (1 - p), and mask[i] says
// which (1 kept, 0 dropped). 5 bytes an element: 2 read, 2 and 1 written.
void launch_dropout(const uint16_t* in, uint16_t* out, uint8_t* mask, int64_t n, float p,
                    uint64_t seed, void* stream);

// The same bytes without the draws: out = in, mask[i] = 1.
void launch_masked_copy(const uint16_t* in, uint16_t* out, uint8_t* mask, int64_t n, void* stream);

}  // namespace ppsim::gpu::testing
