// The GPU head (gpu_head.h): the embedding's F and W, the loss's F, I and W
// as cuBLAS GEMMs between the small kernels of gpu_block_kernels.cu, and
// the mixed-precision SGD step.
//
// Notation as in gpt_head.h: n = b l token rows, h hidden, V vocab, c
// context. The loss's softmax sits in the storage type; its backward GEMMs
// take `scale` as their alpha, so 16-bit values are never scaled.

// gpu_head.h brings in the CPU head's Eigen types for the host-side bridge;
// Eigen is host code here (nvcc would otherwise compile it for the device
// too, and warn about its constexpr host functions).
#define EIGEN_NO_CUDA

#include <climits>
#include <numeric>
#include <utility>
#include <vector>

#include "profiler/gpu_block_kernels.cuh"
#include "profiler/gpu_head.h"
#include "profiler/gpu_internal.cuh"

namespace ppsim::gpu {
namespace {

// The sequence length l of `tokens` ids in `batch` sequences at `context`.
int slice_tokens(const HeadLayout& layout, int64_t tokens, int batch, int context) {
  PPSIM_CHECK(batch > 0 && tokens > 0 && tokens % batch == 0 && tokens / batch <= INT_MAX);
  const int l = static_cast<int>(tokens / batch);
  PPSIM_CHECK(context >= 0 && context + static_cast<int64_t>(l) <= layout.max_seq);
  return l;
}

template <typename T>
Status embed_forward_t(GpuContext::Impl& cx, const GpuHeadParams& p, const DeviceTokens& tokens,
                       int batch, int context, DeviceMatrix* x) {
  const HeadLayout& layout = p.layout;
  const int l = slice_tokens(layout, tokens.count, batch, context);
  DeviceMatrix out;
  PPSIM_GPU_TRY(alloc_matrix(cx, tokens.count, layout.hidden, p.type, &out));
  PPSIM_CUDA_TRY(detail::embed_forward<T>(param<T>(p, kTokEmb), param<T>(p, kPosEmb), tokens.data(),
                                          out.rows, l, context, layout.hidden, layout.vocab,
                                          ptr<T>(out.buffer), cx.stream));
  *x = std::move(out);
  return {};
}

template <typename T>
Status loss_forward_t(GpuContext::Impl& cx, const GpuHeadParams& p, const DeviceMatrix& y,
                      DeviceTokens targets, float scale, GpuLossSaved* saved, double* loss) {
  const int h = p.layout.hidden, v = p.layout.vocab;
  const int64_t n = y.rows;
  const cudaDataType ct = cuda_type(dtype_of<T>());
  const cudaStream_t s = cx.stream;
  const int64_t e = sizeof(T);

  GpuLossSaved& sv = *saved;
  sv = GpuLossSaved{};
  sv.rows = n;
  sv.hidden = h;
  sv.vocab = v;
  sv.storage = p.type;
  sv.scale = scale;
  sv.targets = std::move(targets);
  PPSIM_GPU_TRY(alloc(cx, n * h * e, &sv.xhat));
  PPSIM_GPU_TRY(alloc(cx, n * 4, &sv.rstd));
  PPSIM_GPU_TRY(alloc(cx, n * v * e, &sv.probs));

  T* z = nullptr;
  float *logits = nullptr, *row_loss = nullptr;
  PPSIM_GPU_TRY(carve_workspace(cx, [&](Scratch& w) {
    z = w.take<T>(n * h);           // LN_f(y)
    logits = w.take<float>(n * v);  // z W_out, fp32 for the softmax
    row_loss = w.take<float>(n);    // -log softmax[target] per token
  }));

  PPSIM_CUDA_TRY(detail::layer_norm_forward<T, T>(static_cast<const T*>(y.data()),
                                                  param<T>(p, kLnfGain), param<T>(p, kLnfBias), n,
                                                  h, ptr<T>(sv.xhat), ptr<float>(sv.rstd), z, s));
  PPSIM_GPU_TRY(gemm(cx, "z W_out", n, v, h, 1.0f, {z, ct, h}, {param<T>(p, kWOut), ct, v}, 0.0f,
                     {logits, CUDA_R_32F, v}));
  PPSIM_CUDA_TRY(
      detail::vocab_softmax<T>(logits, sv.targets.data(), n, v, ptr<T>(sv.probs), row_loss, s));
  std::vector<float> host(n);
  PPSIM_CUDA_TRY(
      cudaMemcpyAsync(host.data(), row_loss, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  PPSIM_CUDA_TRY(cudaStreamSynchronize(s));
  *loss = scale * std::accumulate(host.begin(), host.end(), 0.0);
  sv.phase = GpuLossSaved::Phase::kForward;
  return {};
}

template <typename T>
Status loss_backward_input_t(GpuContext::Impl& cx, const GpuHeadParams& p, GpuLossSaved* saved,
                             DeviceMatrix* dy) {
  GpuLossSaved& sv = *saved;
  const int h = sv.hidden, v = sv.vocab;
  const int64_t n = sv.rows;
  const cudaDataType ct = cuda_type(dtype_of<T>());
  const cudaStream_t s = cx.stream;

  float* dz = nullptr;
  PPSIM_GPU_TRY(carve_workspace(cx, [&](Scratch& w) {
    dz = w.take<float>(n * h);  // d loss / d LN_f(y)
  }));
  T* d = ptr<T>(sv.probs);  // softmax, then softmax - onehot: the logits' gradient / scale
  PPSIM_CUDA_TRY(detail::subtract_onehot<T>(sv.targets.data(), n, v, d, s));
  PPSIM_GPU_TRY(gemm(cx, "d W_out^T", n, h, v, sv.scale, {d, ct, v},
                     {param<T>(p, kWOut), ct, v, true}, 0.0f, {dz, CUDA_R_32F, h}));
  PPSIM_GPU_TRY(alloc(cx, 2LL * h * 4, &sv.d_ln));
  float* d_ln = ptr<float>(sv.d_ln);  // gain, bias
  const T* xhat = ptr<T>(sv.xhat);
  PPSIM_CUDA_TRY(detail::layer_norm_param_grads<T>(dz, xhat, n, h, d_ln, d_ln + h, s));
  DeviceMatrix result;
  PPSIM_GPU_TRY(alloc_matrix(cx, n, h, dtype_of<T>(), &result));
  PPSIM_CUDA_TRY(detail::layer_norm_backward<T, float>(dz, xhat, ptr<float>(sv.rstd),
                                                       param<T>(p, kLnfGain), nullptr, n, h,
                                                       nullptr, ptr<T>(result.buffer), s));
  *dy = std::move(result);
  sv.rstd.reset();
  sv.phase = GpuLossSaved::Phase::kInputDone;
  return {};
}

template <typename T>
Status loss_backward_weight_t(GpuContext::Impl& cx, const GpuHeadParams& p, GpuLossSaved* saved,
                              GpuHeadParams* grads) {
  GpuLossSaved& sv = *saved;
  const int h = sv.hidden, v = sv.vocab;
  const int64_t n = sv.rows;
  const cudaDataType ct = cuda_type(dtype_of<T>());
  auto grad = [&](int tensor) { return static_cast<float*>(grads->tensor(tensor)); };

  T* z = nullptr;
  PPSIM_GPU_TRY(carve_workspace(cx, [&](Scratch& w) {
    z = w.take<T>(n * h);  // LN_f(y), rebuilt from xhat
  }));
  PPSIM_CUDA_TRY(detail::layer_norm_output<T>(ptr<T>(sv.xhat), param<T>(p, kLnfGain),
                                              param<T>(p, kLnfBias), n, h, z, cx.stream));
  PPSIM_GPU_TRY(gemm(cx, "z^T d", h, v, n, sv.scale, {z, ct, h, true}, {ptr<T>(sv.probs), ct, v},
                     1.0f, {grad(kWOut), CUDA_R_32F, v}));
  const float one = 1.0f;
  const float* d_ln = ptr<float>(sv.d_ln);
  PPSIM_CUBLAS_TRY(cublasSaxpy(cx.cublas, h, &one, d_ln, 1, grad(kLnfGain), 1));
  PPSIM_CUBLAS_TRY(cublasSaxpy(cx.cublas, h, &one, d_ln + h, 1, grad(kLnfBias), 1));
  sv = GpuLossSaved{};
  return {};
}

}  // namespace

Result<GpuHeadParams> allocate_head(GpuContext& ctx, const HeadLayout& layout, DType type) {
  GpuHeadParams p;
  p.layout = layout;
  p.type = type;
  PPSIM_GPU_TRY(alloc(ctx.impl(), layout.total * dtype_bytes(type), &p.data));
  return Result<GpuHeadParams>(std::move(p));
}

Result<DeviceTokens> upload_tokens(GpuContext& ctx, const std::vector<int32_t>& ids) {
  GpuContext::Impl& cx = ctx.impl();
  DeviceTokens t;
  t.count = static_cast<int64_t>(ids.size());
  const int64_t bytes = t.count * static_cast<int64_t>(sizeof(int32_t));
  PPSIM_GPU_TRY(alloc(cx, bytes, &t.buffer));
  if (bytes > 0) {
    // Pageable memory: the call returns once `ids` is staged, so it may go.
    PPSIM_CUDA_TRY(cudaMemcpyAsync(t.buffer.get(), ids.data(), static_cast<size_t>(bytes),
                                   cudaMemcpyHostToDevice, cx.stream));
  }
  return Result<DeviceTokens>(std::move(t));
}

Status embed_forward(GpuContext& ctx, const GpuHeadParams& p, const DeviceTokens& tokens, int batch,
                     int context, DeviceMatrix* x) {
  PPSIM_CHECK(p.layout.embedding);
  return with_storage_type(p.type, [&](auto tag) {
    return embed_forward_t<decltype(tag)>(ctx.impl(), p, tokens, batch, context, x);
  });
}

Status embed_backward_weight(GpuContext& ctx, const DeviceTokens& tokens, int batch, int context,
                             const DeviceMatrix& dx, GpuHeadParams* grads) {
  const HeadLayout& layout = grads->layout;
  PPSIM_CHECK(grads->type == DType::kFp32 && layout.embedding);
  PPSIM_CHECK(dx.rows == tokens.count && dx.cols == layout.hidden);
  const int l = slice_tokens(layout, tokens.count, batch, context);
  return with_storage_type(dx.type, [&](auto tag) -> Status {
    using T = decltype(tag);
    PPSIM_CUDA_TRY(detail::embed_backward_weight<T>(
        tokens.data(), static_cast<const T*>(dx.data()), dx.rows, l, context, layout.hidden,
        layout.vocab, static_cast<float*>(grads->tensor(kTokEmb)),
        static_cast<float*>(grads->tensor(kPosEmb)), ctx.impl().stream));
    return {};
  });
}

Status loss_forward(GpuContext& ctx, const GpuHeadParams& p, const DeviceMatrix& y,
                    DeviceTokens targets, float scale, GpuLossSaved* saved, double* loss) {
  PPSIM_CHECK(p.layout.loss && y.type == p.type && y.cols == p.layout.hidden && y.rows > 0);
  PPSIM_CHECK(targets.count == y.rows);
  return with_storage_type(p.type, [&](auto tag) {
    return loss_forward_t<decltype(tag)>(ctx.impl(), p, y, std::move(targets), scale, saved, loss);
  });
}

Status loss_backward_input(GpuContext& ctx, const GpuHeadParams& p, GpuLossSaved* saved,
                           DeviceMatrix* dy) {
  PPSIM_CHECK(saved->phase == GpuLossSaved::Phase::kForward);
  PPSIM_CHECK(p.layout.loss && p.type == saved->storage && p.layout.hidden == saved->hidden &&
              p.layout.vocab == saved->vocab);
  return with_storage_type(p.type, [&](auto tag) {
    return loss_backward_input_t<decltype(tag)>(ctx.impl(), p, saved, dy);
  });
}

Status loss_backward_weight(GpuContext& ctx, const GpuHeadParams& p, GpuLossSaved* saved,
                            GpuHeadParams* grads) {
  PPSIM_CHECK(saved->phase == GpuLossSaved::Phase::kInputDone);
  PPSIM_CHECK(p.layout.loss && p.type == saved->storage && p.layout.hidden == saved->hidden &&
              p.layout.vocab == saved->vocab);
  PPSIM_CHECK(grads->type == DType::kFp32 && grads->layout.loss &&
              grads->layout.hidden == saved->hidden && grads->layout.vocab == saved->vocab);
  return with_storage_type(p.type, [&](auto tag) {
    return loss_backward_weight_t<decltype(tag)>(ctx.impl(), p, saved, grads);
  });
}

Status sgd_step(GpuContext& ctx, float learning_rate, int64_t count, float* master, float* grads,
                void* params, DType storage) {
  PPSIM_CHECK(count >= 0);
  return with_storage_type(storage, [&](auto tag) -> Status {
    using T = decltype(tag);
    PPSIM_CUDA_TRY(detail::sgd_step<T>(learning_rate, count, master, grads, static_cast<T*>(params),
                                       ctx.impl().stream));
    return {};
  });
}

}  // namespace ppsim::gpu
