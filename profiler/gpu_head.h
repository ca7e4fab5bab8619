// The two ends of a GPT model on a GPU, and the optimizer step: the function
// of the CPU head (gpt_head.h) in the GPU block's precision (gpu_block.h),
// so that the real runtime's CUDA backend runs whole stages on the device.
//
//   first stage   x = tok_emb[token] + pos_emb[position]
//   last stage    loss = scale * sum_tokens -log softmax(LN_f(y) W_out)[target]
//
// Precision as in the block: parameters and activations in the storage type
// (bf16 or fp16), every kernel computing in fp32, GEMMs accumulating in fp32
// (CUBLAS_COMPUTE_32F), gradients in fp32. The loss keeps the softmax in the
// storage type; I turns it into softmax - onehot in place, and `scale` enters
// the backward GEMMs as their alpha, so that no 16-bit value is ever scaled
// by 1 / tokens (fp16 would flush it to zero). The loss itself is summed in
// fp32 per token and in double over tokens on the host.
//
// The optimizer step is mixed-precision SGD: fp32 master weights, updated
// from the fp32 gradients, rounded to the storage type for the next forward.
//
// Plain C++: no CUDA type appears here. Shapes are PPSIM_CHECKs; CUDA and
// cuBLAS failures come back as an Error naming the call.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "profiler/gpt_head.h"
#include "profiler/gpu_block.h"

namespace ppsim::gpu {

// The head's tensors in one buffer, in the order of HeadParams::tensors(),
// each starting at a multiple of kParamAlign elements. A stage keeps only
// the ends it runs: the embedding (tok_emb, pos_emb) at the first stage, the
// loss (lnf_gain, lnf_bias, w_out) at the last; the others have size 0.
// Matrices are row-major as on the CPU: tok_emb vocab x hidden, pos_emb
// max_seq x hidden, w_out hidden x vocab.
enum HeadTensor : int { kTokEmb, kPosEmb, kLnfGain, kLnfBias, kWOut, kNumHeadTensors };
const char* head_tensor_name(int tensor);  // HeadParams::tensors()'s names

struct HeadLayout {
  int vocab = 0, hidden = 0, max_seq = 0;
  bool embedding = false, loss = false;
  std::array<int64_t, kNumHeadTensors> offset{}, size{};  // elements
  int64_t total = 0;                                      // elements, padding included
};
// REQUIRES: vocab >= 2, hidden, max_seq > 0.
HeadLayout head_layout(int vocab, int hidden, int max_seq, bool embedding, bool loss);

// Parameters (storage type), master weights or gradients (kFp32) of a head.
struct GpuHeadParams {
  HeadLayout layout;
  DType type = DType::kFp32;
  DeviceBuffer data;
  void* tensor(int t) const {
    return static_cast<char*>(data.get()) + layout.offset[t] * dtype_bytes(type);
  }
};
// Zeroed.
Result<GpuHeadParams> allocate_head(GpuContext& ctx, const HeadLayout& layout, DType type);
// The layout's tensors of `p` at their offsets, padding zero. REQUIRES: the
// shapes of p's tensors that the layout holds are the layout's.
std::vector<float> pack_head(const kernels::HeadParams<float>& p, const HeadLayout& layout);
// p's tensors that the layout holds, in `type` (16-bit: rounded to nearest
// even; kFp32: as they are, e.g. the master weights sgd_step updates).
Result<GpuHeadParams> upload_head(GpuContext& ctx, const kernels::HeadParams<float>& p,
                                  const HeadLayout& layout, DType type);
// The values as held on the device, as a HeadParams of the layout's shapes;
// tensors the layout does not hold come back empty (0 x 0).
Result<kernels::HeadParams<float>> download_head(GpuContext& ctx, const GpuHeadParams& p);

// Token ids on the device (int32), for the embedding and the loss's targets.
struct DeviceTokens {
  int64_t count = 0;
  DeviceBuffer buffer;
  const int32_t* data() const { return static_cast<const int32_t*>(buffer.get()); }
};
Result<DeviceTokens> upload_tokens(GpuContext& ctx, const std::vector<int32_t>& ids);

// F of the first stage: *x ((b l) x hidden, storage type) for b sequences
// of l tokens at context c, the ids sequence-major as in gpt_head.h.
// REQUIRES: p.layout.embedding, tokens.count % batch == 0, c + l <= max_seq,
// every id in [0, vocab) (ids out of range are clamped on the device,
// checked on the host by the caller).
Status embed_forward(GpuContext& ctx, const GpuHeadParams& p, const DeviceTokens& tokens, int batch,
                     int context, DeviceMatrix* x);
// W of the first stage: adds dx's rows into the rows of tok_emb and pos_emb
// the tokens used (fp32 atomics: the order of the additions varies).
// REQUIRES: grads->type == kFp32, dx (count x hidden, storage type).
Status embed_backward_weight(GpuContext& ctx, const DeviceTokens& tokens, int batch, int context,
                             const DeviceMatrix& dx, GpuHeadParams* grads);

// What the loss keeps for its backward: targets (n int32) throughout; after
// F xhat (n h, storage), rstd (n fp32) and the softmax (n vocab, storage);
// after I xhat, softmax - onehot in the softmax's buffer, and the final
// layer norm's gain and bias gradients reduced over tokens (2 h fp32).
// bytes() counts what is held and equals loss_figures() in each phase.
struct GpuLossSaved {
  enum class Phase { kEmpty, kForward, kInputDone };
  Phase phase = Phase::kEmpty;
  int64_t rows = 0;
  int hidden = 0, vocab = 0;
  DType storage = DType::kBf16;
  float scale = 0;
  DeviceTokens targets;
  DeviceBuffer xhat, rstd, probs, d_ln;

  int64_t bytes() const;
};
struct LossFigures {
  int64_t after_forward = 0;  // targets + xhat + rstd + softmax
  int64_t after_input = 0;    // targets + xhat + (softmax - onehot) + 2 h fp32
};
// REQUIRES: is_storage_type(storage).
LossFigures loss_figures(int64_t rows, int hidden, int vocab, DType storage);

// F of the last stage's head: y (n x hidden, storage type); sets *loss to
// scale times the sum over the n tokens of -log softmax[target] (waits for
// the GPU). REQUIRES: p.layout.loss, targets.count == n, ids in [0, vocab).
Status loss_forward(GpuContext& ctx, const GpuHeadParams& p, const DeviceMatrix& y,
                    DeviceTokens targets, float scale, GpuLossSaved* saved, double* loss);
// I: *dy = d loss / d y (n x hidden, storage type). REQUIRES: kForward.
Status loss_backward_input(GpuContext& ctx, const GpuHeadParams& p, GpuLossSaved* saved,
                           DeviceMatrix* dy);
// W: adds the W_out and final layer norm gradients into *grads (fp32) and
// empties *saved. REQUIRES: kInputDone.
Status loss_backward_weight(GpuContext& ctx, const GpuHeadParams& p, GpuLossSaved* saved,
                            GpuHeadParams* grads);

// Mixed-precision SGD over `count` elements: master -= learning_rate *
// grads (fp32), params = master rounded to `storage`, grads = 0. Works on
// whole GpuParams / GpuHeadParams buffers (their padding stays zero).
// REQUIRES: is_storage_type(storage).
Status sgd_step(GpuContext& ctx, float learning_rate, int64_t count, float* master, float* grads,
                void* params, DType storage);

}  // namespace ppsim::gpu
