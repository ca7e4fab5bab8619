// Microbenchmark sweeps on a GPU: matrix products (`ppsim profile-gemms`),
// each shape of a sweep (gemm_sweep.h) as cuBLAS runs it, for `ppsim
// calibrate --gemms` to fit a hardware preset's GEMM fields to; and copies
// (`ppsim profile-memory`), each size of a sweep (memory_sweep.h), for
// `ppsim calibrate --memory`. No CUDA type appears here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "profiler/gemm_sweep.h"
#include "profiler/memory_sweep.h"
#include "schedules/status.h"
#include "sim/core/workload.h"

namespace ppsim::gpu {

struct GemmSweepOptions {
  int device = 0;
  DType type = DType::kBf16;  // operands and result: bf16 or fp16
  int warmup = 3;             // untimed runs of each shape first (at least 1)
  int repetitions = 10;       // timed runs of each shape; the median is kept
};

// Times each shape's product on the whole device: C = A B, row-major,
// operands and result of `options.type`, fp32 accumulation, cuBLAS's
// default algorithm (cublasGemmEx, as the GPU block's GEMMs), A and B
// filled with values uniform in [-1, 1] (zeros would draw less power and run
// at higher clocks than training's operands), each run timed by a CUDA event
// pair on the stream. Returns the medians, in the shapes' order; `progress`,
// when given, hears a line per shape. Errors: no such device, a type other
// than bf16 or fp16, memory, CUDA's or cuBLAS's (each naming the call).
Result<std::vector<double>> time_gemm_sweep(
    const std::vector<GemmShape>& shapes, const GemmSweepOptions& options,
    const std::function<void(const std::string&)>& progress = {});

struct CopySweepOptions {
  int device = 0;
  int back_to_back = 16;  // copies between one pair of events, as a layer's kernels run
  int warmup = 3;         // untimed brackets of each size first (at least 1)
  int repetitions = 10;   // timed brackets of each size; the median is kept
};

// Times a device-to-device copy of each size on the whole device
// (cudaMemcpyAsync within the device, what PyTorch's contiguous copy
// runs): `back_to_back` copies on one stream between a pair of CUDA
// events, so each copy's time holds the gap to the next kernel as in a
// layer. Returns the median time of one copy, in the sizes' order;
// `progress`, when given, hears a line per size. Errors: no such device,
// memory, CUDA's (each naming the call).
Result<std::vector<double>> time_copy_sweep(
    const std::vector<int64_t>& sizes, const CopySweepOptions& options,
    const std::function<void(const std::string&)>& progress = {});

}  // namespace ppsim::gpu
