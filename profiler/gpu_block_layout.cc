// The GPU block's host-side arithmetic (gpu_block.h): names, element sizes,
// the parameter layout, the memory figures and the size of an SM group. No
// CUDA call here, so the unit tests check all of it without a device.
#include <initializer_list>

#include "profiler/gpu_block.h"

namespace ppsim::gpu {

bool is_storage_type(DType type) { return type == DType::kBf16 || type == DType::kFp16; }

SavedFigures saved_figures(const SliceShape& s, DType storage) {
  PPSIM_CHECK(is_storage_type(storage));
  const int64_t e = dtype_bytes(storage);
  const int64_t n = s.rows(), h = s.hidden, f = s.ffn;
  const int64_t probs = static_cast<int64_t>(s.batch) * s.heads * s.tokens * (s.context + s.tokens);
  SavedFigures out;
  // xhat1, xhat2, q, o; u; probs; the slice's K/V rows; rstd1, rstd2 (fp32).
  out.after_forward = e * (4 * n * h + n * f + probs + 2 * n * h) + 4 * (2 * n);
  out.weight_grad = e * (3 * n * h + n * f);
  // d_qkv, d_h, dy; du; the layer norms' gain/bias gradients (fp32).
  out.grad_stash = e * (5 * n * h + n * f) + 4 * (4 * h);
  return out;
}

const char* param_tensor_name(int tensor) {
  static constexpr const char* kNames[kNumParamTensors] = {
      "ln1_gain", "ln1_bias", "w_qkv", "b_qkv", "w_o", "b_o",
      "ln2_gain", "ln2_bias", "w1",    "b1",    "w2",  "b2"};
  PPSIM_CHECK(tensor >= 0 && tensor < kNumParamTensors);
  return kNames[tensor];
}

ParamLayout param_layout(int hidden, int ffn, int heads) {
  PPSIM_CHECK(hidden > 0 && ffn > 0 && heads > 0 && hidden % heads == 0);
  ParamLayout layout;
  layout.hidden = hidden;
  layout.ffn = ffn;
  layout.heads = heads;
  const int64_t h = hidden, f = ffn;
  const std::initializer_list<int64_t> sizes = {h, h, h * 3 * h, 3 * h, h * h, h,
                                                h, h, h * f,     f,     f * h, h};
  int tensor = 0;
  for (const int64_t size : sizes) {
    layout.offset[tensor] = layout.total;
    layout.size[tensor] = size;
    layout.total += (size + kParamAlign - 1) / kParamAlign * kParamAlign;
    ++tensor;
  }
  PPSIM_CHECK(tensor == kNumParamTensors);
  return layout;
}

int64_t GpuSaved::bytes() const {
  int64_t total = 0;
  for (const DeviceBuffer* b :
       {&xhat1, &q, &o, &xhat2, &u, &rstd1, &rstd2, &probs, &d_qkv, &d_h, &dy, &du, &d_ln}) {
    total += b->bytes();
  }
  // The slice's K/V rows sit in the cache until its I gives them back.
  if (phase == Phase::kForward) {
    total += 2 * shape.rows() * shape.hidden * dtype_bytes(storage);
  }
  return total;
}

int sms_per_group(int device_sms, int groups, int min_partition, int alignment) {
  PPSIM_CHECK(device_sms >= 0 && groups >= 1 && min_partition >= 0 && alignment >= 1);
  const int sms = device_sms / groups / alignment * alignment;
  return sms < min_partition ? 0 : sms;
}

void GpuKvCache::set_length(int length) {
  PPSIM_CHECK(length >= 0 && length <= capacity_);
  length_ = length;
}

void* GpuKvCache::row_ptr(const DeviceBuffer& b, int seq) const {
  PPSIM_CHECK(seq >= 0 && seq < batch_);
  const int64_t e = dtype_bytes(storage_);
  return static_cast<char*>(b.get()) + static_cast<int64_t>(seq) * capacity_ * hidden_ * e;
}

float* GpuKvGrad::row_ptr(const DeviceBuffer& b, int seq) const {
  PPSIM_CHECK(seq >= 0 && seq < batch_);
  return static_cast<float*>(b.get()) + static_cast<int64_t>(seq) * capacity_ * hidden_;
}

}  // namespace ppsim::gpu
