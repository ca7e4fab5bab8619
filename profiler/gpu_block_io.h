// The CPU block's data in and out of the GPU block (host side, Eigen):
// parameters packed in the GPU layout, matrices converted to and from the
// storage type. The GPU tests use it to give both blocks the same function
// and to compare them; the real runtime, to seed a GPU stage from the CPU
// block's initialisation.
#pragma once

#include <vector>

#include "profiler/gpt_block.h"
#include "profiler/gpu_block.h"

namespace ppsim::gpu {

// The tensors of `p` at their offsets in `layout`, padding zero.
// REQUIRES: p's shapes are the layout's.
std::vector<float> pack_params(const kernels::BlockParams<float>& p, const ParamLayout& layout);
// The inverse: `packed` holds layout.total floats.
kernels::BlockParams<float> unpack_params(const std::vector<float>& packed,
                                          const ParamLayout& layout);

// p in the storage type (each value rounded to nearest even).
// REQUIRES: is_storage_type(storage).
Result<GpuBlockParams> upload_params(GpuContext& ctx, const kernels::BlockParams<float>& p,
                                     DType storage);
// The values as they are held on the device: for parameters, the rounded
// values the GPU block computes with; for gradients, the fp32 sums.
Result<kernels::BlockParams<float>> download_params(GpuContext& ctx, const GpuParams& params);

Result<DeviceMatrix> to_device(GpuContext& ctx, const kernels::Mat<float>& m, DType type);
Result<kernels::Mat<float>> to_host(GpuContext& ctx, const DeviceMatrix& m);
// rows x cols row-major elements of `type` at `data` (a KV cache's rows, ...).
Result<kernels::Mat<float>> to_host(GpuContext& ctx, const void* data, DType type, int64_t rows,
                                    int64_t cols);

}  // namespace ppsim::gpu
