#include "profiler/gpu_block_io.h"

#include <algorithm>

namespace ppsim::gpu {
namespace {

// BlockParams::tensors() does not write; it is non-const only because its
// views hand out mutable pointers.
std::vector<kernels::TensorView<float>> views(const kernels::BlockParams<float>& p) {
  return const_cast<kernels::BlockParams<float>&>(p).tensors();
}

}  // namespace

std::vector<float> pack_params(const kernels::BlockParams<float>& p, const ParamLayout& layout) {
  PPSIM_CHECK(p.hidden == layout.hidden && p.ffn == layout.ffn && p.heads == layout.heads);
  const std::vector<kernels::TensorView<float>> tensors = views(p);
  PPSIM_CHECK(static_cast<int>(tensors.size()) == kNumParamTensors);
  std::vector<float> packed(layout.total, 0.0f);
  for (int t = 0; t < kNumParamTensors; ++t) {
    PPSIM_CHECK(tensors[t].size == layout.size[t]);
    std::copy_n(tensors[t].data, tensors[t].size, packed.begin() + layout.offset[t]);
  }
  return packed;
}

kernels::BlockParams<float> unpack_params(const std::vector<float>& packed,
                                          const ParamLayout& layout) {
  PPSIM_CHECK(static_cast<int64_t>(packed.size()) == layout.total);
  kernels::BlockParams<float> p =
      kernels::zero_params<float>(layout.hidden, layout.ffn, layout.heads);
  const std::vector<kernels::TensorView<float>> tensors = p.tensors();
  for (int t = 0; t < kNumParamTensors; ++t) {
    PPSIM_CHECK(tensors[t].size == layout.size[t]);
    std::copy_n(packed.begin() + layout.offset[t], layout.size[t], tensors[t].data);
  }
  return p;
}

Result<GpuBlockParams> upload_params(GpuContext& ctx, const kernels::BlockParams<float>& p,
                                     DType storage) {
  PPSIM_CHECK(is_storage_type(storage));
  const ParamLayout layout = param_layout(p.hidden, p.ffn, p.heads);
  const std::vector<float> packed = pack_params(p, layout);
  Result<GpuParams> params = allocate_params(ctx, layout, storage);
  if (!params) return params.error();
  if (Status st = upload(ctx, packed.data(), layout.total, params->type, params->data.get()); !st)
    return Error{st.message()};
  return params;
}

Result<kernels::BlockParams<float>> download_params(GpuContext& ctx, const GpuParams& params) {
  std::vector<float> packed(params.layout.total);
  if (Status st = download(ctx, params.data.get(), params.type, params.layout.total, packed.data());
      !st)
    return Error{st.message()};
  return unpack_params(packed, params.layout);
}

Result<DeviceMatrix> to_device(GpuContext& ctx, const kernels::Mat<float>& m, DType type) {
  Result<DeviceMatrix> out = allocate_matrix(ctx, m.rows(), m.cols(), type);
  if (!out) return out;
  if (Status st = upload(ctx, m.data(), m.size(), type, out->data()); !st)
    return Error{st.message()};
  return out;
}

Result<kernels::Mat<float>> to_host(GpuContext& ctx, const DeviceMatrix& m) {
  return to_host(ctx, m.data(), m.type, m.rows, m.cols);
}

Result<kernels::Mat<float>> to_host(GpuContext& ctx, const void* data, DType type, int64_t rows,
                                    int64_t cols) {
  kernels::Mat<float> out(rows, cols);
  if (Status st = download(ctx, data, type, out.size(), out.data()); !st)
    return Error{st.message()};
  return out;
}

}  // namespace ppsim::gpu
