// The GPU head's host side (gpu_head.h): names, the parameter layout, the
// memory figures, GpuLossSaved::bytes(), packing, and the parameters'
// transfers, which go through gpu_block.h's upload and download. No CUDA
// call here, so the unit tests check the arithmetic without a device.
#include <algorithm>
#include <array>

#include "profiler/gpu_head.h"

namespace ppsim::gpu {
namespace {

// HeadParams::tensors() does not write; it is non-const only because its
// views hand out mutable pointers.
std::vector<kernels::TensorView<float>> views(const kernels::HeadParams<float>& p) {
  return const_cast<kernels::HeadParams<float>&>(p).tensors();
}

}  // namespace

const char* head_tensor_name(int tensor) {
  static constexpr const char* kNames[kNumHeadTensors] = {"tok_emb", "pos_emb", "lnf_gain",
                                                          "lnf_bias", "w_out"};
  PPSIM_CHECK(tensor >= 0 && tensor < kNumHeadTensors);
  return kNames[tensor];
}

HeadLayout head_layout(int vocab, int hidden, int max_seq, bool embedding, bool loss) {
  PPSIM_CHECK(vocab >= 2 && hidden > 0 && max_seq > 0);
  HeadLayout layout;
  layout.vocab = vocab;
  layout.hidden = hidden;
  layout.max_seq = max_seq;
  layout.embedding = embedding;
  layout.loss = loss;
  const int64_t v = vocab, h = hidden, s = max_seq;
  const std::array<int64_t, kNumHeadTensors> sizes = {embedding ? v * h : 0, embedding ? s * h : 0,
                                                      loss ? h : 0, loss ? h : 0, loss ? h * v : 0};
  for (int t = 0; t < kNumHeadTensors; ++t) {
    layout.offset[t] = layout.total;
    layout.size[t] = sizes[t];
    layout.total += (sizes[t] + kParamAlign - 1) / kParamAlign * kParamAlign;
  }
  return layout;
}

int64_t GpuLossSaved::bytes() const {
  int64_t total = targets.buffer.bytes();
  for (const DeviceBuffer* b : {&xhat, &rstd, &probs, &d_ln}) total += b->bytes();
  return total;
}

LossFigures loss_figures(int64_t rows, int hidden, int vocab, DType storage) {
  PPSIM_CHECK(is_storage_type(storage) && rows >= 0 && hidden > 0 && vocab > 0);
  const int64_t e = dtype_bytes(storage), n = rows, h = hidden, v = vocab;
  // The int32 targets, xhat and the softmax (or softmax - onehot) in 16 bits.
  const int64_t kept = 4 * n + e * (n * h + n * v);
  LossFigures out;
  out.after_forward = kept + 4 * n;    // rstd, fp32
  out.after_input = kept + 4 * 2 * h;  // the final layer norm's gain and bias gradients, fp32
  return out;
}

std::vector<float> pack_head(const kernels::HeadParams<float>& p, const HeadLayout& layout) {
  PPSIM_CHECK(p.vocab == layout.vocab && p.hidden == layout.hidden);
  const std::vector<kernels::TensorView<float>> tensors = views(p);
  PPSIM_CHECK(static_cast<int>(tensors.size()) == kNumHeadTensors);
  std::vector<float> packed(layout.total, 0.0f);
  for (int t = 0; t < kNumHeadTensors; ++t) {
    if (layout.size[t] == 0) continue;  // a tensor this stage does not keep
    PPSIM_CHECK(tensors[t].size == layout.size[t]);
    std::copy_n(tensors[t].data, tensors[t].size, packed.begin() + layout.offset[t]);
  }
  return packed;
}

Result<GpuHeadParams> upload_head(GpuContext& ctx, const kernels::HeadParams<float>& p,
                                  const HeadLayout& layout, DType type) {
  const std::vector<float> packed = pack_head(p, layout);
  Result<GpuHeadParams> params = allocate_head(ctx, layout, type);
  if (!params) return params;
  if (Status st = upload(ctx, packed.data(), layout.total, type, params->data.get()); !st)
    return Error{st.message()};
  return params;
}

Result<kernels::HeadParams<float>> download_head(GpuContext& ctx, const GpuHeadParams& p) {
  const HeadLayout& layout = p.layout;
  std::vector<float> packed(layout.total);
  if (Status st = download(ctx, p.data.get(), p.type, layout.total, packed.data()); !st)
    return Error{st.message()};
  kernels::HeadParams<float> out;
  out.vocab = layout.vocab;
  out.hidden = layout.hidden;
  out.max_seq = layout.max_seq;
  const int64_t v = layout.vocab, h = layout.hidden, s = layout.max_seq;
  if (layout.embedding) {
    out.tok_emb.resize(v, h);
    out.pos_emb.resize(s, h);
  }
  if (layout.loss) {
    out.lnf_gain.resize(h);
    out.lnf_bias.resize(h);
    out.w_out.resize(h, v);
  }
  const std::vector<kernels::TensorView<float>> tensors = out.tensors();
  for (int t = 0; t < kNumHeadTensors; ++t) {
    PPSIM_CHECK(tensors[t].size == layout.size[t]);
    std::copy_n(packed.begin() + layout.offset[t], layout.size[t], tensors[t].data);
  }
  return out;
}

}  // namespace ppsim::gpu
