// The GPU block's and head's small CUDA kernels: simple before fast.
// Elementwise work is a grid-stride loop; row reductions (layer norm, the
// attention's softmax) are one warp a row, but the softmax over the
// vocabulary (tens of thousands of columns) is one block a row; column
// reductions are one thread a column; the embedding's scatter is fp32
// atomics. All arithmetic is fp32 (16-bit values are converted on reading),
// so nothing here needs sm_80's bf16 arithmetic: the conversions are
// available on every architecture built.
#include <algorithm>

#include "profiler/gpu_block.h"
#include "profiler/gpu_block_kernels.cuh"

namespace ppsim::gpu::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp;
// GeLU's constants, as in block_kernels.cc: sqrt(2 / pi) and the cubic term.
constexpr float kGeluK = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The first element index of this thread and the grid's stride.
__device__ __forceinline__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// The row a warp owns (warp-per-row kernels); the whole warp shares it, so
// a warp leaves together and the full-mask shuffles are safe.
__device__ __forceinline__ int64_t warp_row() {
  return static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
}
__device__ __forceinline__ int lane() { return static_cast<int>(threadIdx.x % kWarp); }

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Every thread of a block of kThreads calls it and gets the reduction of
// the block's values; `shared` holds kThreads / kWarp floats.
template <typename Op>
__device__ float block_reduce(float v, float identity, float* shared) {
  const Op op;
  for (int o = kWarp / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane() == 0) shared[threadIdx.x / kWarp] = v;
  __syncthreads();
  v = lane() < kThreads / kWarp ? shared[lane()] : identity;
  for (int o = kWarp / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // before `shared` is written again
  return v;
}

__device__ __forceinline__ float gelu_f(float x) {
  return 0.5f * x * (1.0f + tanhf(kGeluK * (x + kGeluC * x * x * x)));
}

__device__ __forceinline__ float gelu_grad_f(float x) {
  const float t = tanhf(kGeluK * (x + kGeluC * x * x * x));
  const float dt = (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluC * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * dt;
}

// Blocks for an elementwise kernel over `count` elements (the loops stride
// over the grid, so the cap only bounds the launch).
unsigned elementwise_blocks(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 1 << 16));
}
unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}
unsigned column_blocks(int cols) { return static_cast<unsigned>((cols + kThreads - 1) / kThreads); }

template <typename In, typename Out>
__global__ void convert_kernel(const In* in, int64_t count, Out* out) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    out[i] = from_float<Out>(to_float(in[i]));
  }
}

template <typename T, typename In>
__global__ void layer_norm_forward_kernel(const In* x, const T* gain, const T* bias, int64_t rows,
                                          int h, T* xhat, float* rstd, T* y) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const In* xr = x + row * h;
  float sum = 0.0f;
  for (int j = lane(); j < h; j += kWarp) sum += to_float(xr[j]);
  const float mean = warp_sum(sum) / h;
  float sq = 0.0f;
  for (int j = lane(); j < h; j += kWarp) {
    const float dev = to_float(xr[j]) - mean;
    sq += dev * dev;
  }
  const float r = rsqrtf(warp_sum(sq) / h + kGpuLayerNormEps);
  for (int j = lane(); j < h; j += kWarp) {
    const float xh = (to_float(xr[j]) - mean) * r;
    xhat[row * h + j] = from_float<T>(xh);
    y[row * h + j] = from_float<T>(xh * to_float(gain[j]) + to_float(bias[j]));
  }
  if (lane() == 0) rstd[row] = r;
}

template <typename T>
__global__ void layer_norm_output_kernel(const T* xhat, const T* gain, const T* bias, int64_t count,
                                         int h, T* y) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int j = static_cast<int>(i % h);
    y[i] = from_float<T>(to_float(xhat[i]) * to_float(gain[j]) + to_float(bias[j]));
  }
}

template <typename T, typename R>
__global__ void layer_norm_backward_kernel(const float* dy, const T* xhat, const float* rstd,
                                           const T* gain, const R* residual, int64_t rows, int h,
                                           float* dx32, T* dx) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int64_t base = row * h;
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int j = lane(); j < h; j += kWarp) {
    const float g = dy[base + j] * to_float(gain[j]);
    sum_g += g;
    sum_gx += g * to_float(xhat[base + j]);
  }
  const float mean_g = warp_sum(sum_g) / h;
  const float mean_gx = warp_sum(sum_gx) / h;
  const float r = rstd[row];
  for (int j = lane(); j < h; j += kWarp) {
    const float g = dy[base + j] * to_float(gain[j]);
    float v = r * (g - mean_g - to_float(xhat[base + j]) * mean_gx);
    if (residual != nullptr) v += to_float(residual[base + j]);
    if (dx32 != nullptr) dx32[base + j] = v;
    if (dx != nullptr) dx[base + j] = from_float<T>(v);
  }
}

template <typename T>
__global__ void layer_norm_param_grads_kernel(const float* dy, const T* xhat, int64_t rows, int h,
                                              float* dgain, float* dbias) {
  const int col = static_cast<int>(first_index());
  if (col >= h) return;
  float sum_gain = 0.0f, sum_bias = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float d = dy[r * h + col];
    sum_gain += d * to_float(xhat[r * h + col]);
    sum_bias += d;
  }
  dgain[col] = sum_gain;
  dbias[col] = sum_bias;
}

template <typename T, typename R>
__global__ void bias_residual_kernel(const float* acc, const T* bias, const R* residual,
                                     int64_t count, int cols, float* out32, T* out) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    float v = acc[i] + to_float(bias[i % cols]);
    if (residual != nullptr) v += to_float(residual[i]);
    if (out32 != nullptr) out32[i] = v;
    if (out != nullptr) out[i] = from_float<T>(v);
  }
}

template <typename T>
__global__ void gelu_kernel(const T* u, int64_t count, T* g) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    g[i] = from_float<T>(gelu_f(to_float(u[i])));
  }
}

template <typename T>
__global__ void gelu_backward_kernel(const float* dg, const T* u, int64_t count, T* du) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    du[i] = from_float<T>(dg[i] * gelu_grad_f(to_float(u[i])));
  }
}

template <typename T>
__global__ void qkv_split_kernel(const float* acc, const T* b_qkv, int64_t count, int tokens,
                                 int context, int hidden, int capacity, T* q, T* k, T* v) {
  const int64_t width = 3 * static_cast<int64_t>(hidden);
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t row = i / width;  // token row of the slice, sequence-major
    const int64_t col = i % width;
    const T value = from_float<T>(acc[i] + to_float(b_qkv[col]));
    const int64_t part = col / hidden;  // 0 Q, 1 K, 2 V
    const int64_t c = col % hidden;
    if (part == 0) {
      q[row * hidden + c] = value;
    } else {
      const int64_t seq = row / tokens, r = row % tokens;
      T* cache = part == 1 ? k : v;
      cache[(seq * capacity + context + r) * hidden + c] = value;
    }
  }
}

template <typename T>
__global__ void causal_softmax_kernel(const float* scores, int64_t rows, int tokens, int keys,
                                      int context, T* probs) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const float* s = scores + row * keys;
  T* p = probs + row * keys;
  const int seen = context + static_cast<int>(row % tokens) + 1;  // keys 0 .. seen - 1
  float mx = -INFINITY;
  for (int j = lane(); j < seen; j += kWarp) mx = fmaxf(mx, s[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int j = lane(); j < seen; j += kWarp) sum += expf(s[j] - mx);
  const float inv = 1.0f / warp_sum(sum);
  for (int j = lane(); j < keys; j += kWarp) {
    p[j] = from_float<T>(j < seen ? expf(s[j] - mx) * inv : 0.0f);
  }
}

template <typename T>
__global__ void softmax_backward_kernel(const T* probs, const float* dp, int64_t rows, int keys,
                                        float scale, T* ds) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int64_t base = row * keys;
  float dot = 0.0f;
  for (int j = lane(); j < keys; j += kWarp) dot += to_float(probs[base + j]) * dp[base + j];
  dot = warp_sum(dot);
  for (int j = lane(); j < keys; j += kWarp) {
    ds[base + j] = from_float<T>(scale * to_float(probs[base + j]) * (dp[base + j] - dot));
  }
}

template <typename T>
__global__ void kv_grad_combine_kernel(const float* dk, const float* dv, int64_t count, int context,
                                       int hidden, float* gk, float* gv, T* d_qkv) {
  const int64_t width = 3 * static_cast<int64_t>(hidden);
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t r = i / hidden, c = i % hidden;  // key row r: position r of the sequence
    if (r < context) {
      gk[i] += dk[i];
      gv[i] += dv[i];
    } else {
      const int64_t row = r - context;  // the slice's own token
      d_qkv[row * width + hidden + c] = from_float<T>(dk[i] + gk[i]);
      d_qkv[row * width + 2 * hidden + c] = from_float<T>(dv[i] + gv[i]);
      gk[i] = 0.0f;
      gv[i] = 0.0f;
    }
  }
}

template <typename T>
__global__ void column_sum_add_kernel(const T* m, int64_t rows, int cols, float* out) {
  const int col = static_cast<int>(first_index());
  if (col >= cols) return;
  float sum = 0.0f;
  for (int64_t r = 0; r < rows; ++r) sum += to_float(m[r * cols + col]);
  out[col] += sum;
}

// ---- The head.

__device__ __forceinline__ int clamp_id(int32_t id, int vocab) {
  return min(max(id, 0), vocab - 1);
}

template <typename T>
__global__ void embed_forward_kernel(const T* tok_emb, const T* pos_emb, const int32_t* ids,
                                     int64_t count, int tokens, int context, int hidden, int vocab,
                                     T* x) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t r = i / hidden, j = i % hidden;
    const int64_t token = clamp_id(ids[r], vocab), position = context + r % tokens;
    x[i] = from_float<T>(to_float(tok_emb[token * hidden + j]) +
                         to_float(pos_emb[position * hidden + j]));
  }
}

template <typename T>
__global__ void embed_backward_weight_kernel(const int32_t* ids, const T* dx, int64_t count,
                                             int tokens, int context, int hidden, int vocab,
                                             float* tok_grad, float* pos_grad) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t r = i / hidden, j = i % hidden;
    const int64_t token = clamp_id(ids[r], vocab), position = context + r % tokens;
    const float d = to_float(dx[i]);
    atomicAdd(&tok_grad[token * hidden + j], d);
    atomicAdd(&pos_grad[position * hidden + j], d);
  }
}

// One block of kThreads a row.
template <typename T>
__global__ void vocab_softmax_kernel(const float* logits, const int32_t* targets, int vocab,
                                     T* probs, float* row_loss) {
  __shared__ float shared[kThreads / kWarp];
  const int64_t row = blockIdx.x;
  const float* l = logits + row * vocab;
  T* p = probs + row * vocab;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < vocab; j += kThreads) mx = fmaxf(mx, l[j]);
  mx = block_reduce<Max>(mx, -INFINITY, shared);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < vocab; j += kThreads) sum += expf(l[j] - mx);
  sum = block_reduce<Sum>(sum, 0.0f, shared);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < vocab; j += kThreads) p[j] = from_float<T>(expf(l[j] - mx) * inv);
  if (threadIdx.x == 0) row_loss[row] = logf(sum) - (l[clamp_id(targets[row], vocab)] - mx);
}

template <typename T>
__global__ void subtract_onehot_kernel(const int32_t* targets, int64_t rows, int vocab, T* probs) {
  for (int64_t r = first_index(); r < rows; r += grid_stride()) {
    T& p = probs[r * vocab + clamp_id(targets[r], vocab)];
    p = from_float<T>(to_float(p) - 1.0f);
  }
}

template <typename T>
__global__ void sgd_step_kernel(float learning_rate, int64_t count, float* master, float* grads,
                                T* params) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const float w = master[i] - learning_rate * grads[i];
    master[i] = w;
    params[i] = from_float<T>(w);
    grads[i] = 0.0f;
  }
}

}  // namespace

template <typename In, typename Out>
cudaError_t convert(const In* in, int64_t count, Out* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  convert_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(in, count, out);
  return cudaGetLastError();
}

template <typename T, typename In>
cudaError_t layer_norm_forward(const In* x, const T* gain, const T* bias, int64_t rows, int h,
                               T* xhat, float* rstd, T* y, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  layer_norm_forward_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(x, gain, bias, rows, h, xhat,
                                                                       rstd, y);
  return cudaGetLastError();
}

template <typename T>
cudaError_t layer_norm_output(const T* xhat, const T* gain, const T* bias, int64_t rows, int h,
                              T* y, cudaStream_t stream) {
  const int64_t count = rows * h;
  if (count == 0) return cudaSuccess;
  layer_norm_output_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(xhat, gain, bias,
                                                                               count, h, y);
  return cudaGetLastError();
}

template <typename T, typename R>
cudaError_t layer_norm_backward(const float* dy, const T* xhat, const float* rstd, const T* gain,
                                const R* residual, int64_t rows, int h, float* dx32, T* dx,
                                cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  layer_norm_backward_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(
      dy, xhat, rstd, gain, residual, rows, h, dx32, dx);
  return cudaGetLastError();
}

template <typename T>
cudaError_t layer_norm_param_grads(const float* dy, const T* xhat, int64_t rows, int h,
                                   float* dgain, float* dbias, cudaStream_t stream) {
  if (h == 0) return cudaSuccess;
  layer_norm_param_grads_kernel<<<column_blocks(h), kThreads, 0, stream>>>(dy, xhat, rows, h, dgain,
                                                                           dbias);
  return cudaGetLastError();
}

template <typename T, typename R>
cudaError_t bias_residual(const float* acc, const T* bias, const R* residual, int64_t rows,
                          int cols, float* out32, T* out, cudaStream_t stream) {
  const int64_t count = rows * cols;
  if (count == 0) return cudaSuccess;
  bias_residual_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(acc, bias, residual,
                                                                           count, cols, out32, out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t gelu(const T* u, int64_t count, T* g, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  gelu_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(u, count, g);
  return cudaGetLastError();
}

template <typename T>
cudaError_t gelu_backward(const float* dg, const T* u, int64_t count, T* du, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  gelu_backward_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(dg, u, count, du);
  return cudaGetLastError();
}

template <typename T>
cudaError_t qkv_split(const float* acc, const T* b_qkv, int batch, int tokens, int context,
                      int hidden, int capacity, T* q, T* k, T* v, cudaStream_t stream) {
  const int64_t count = static_cast<int64_t>(batch) * tokens * 3 * hidden;
  if (count == 0) return cudaSuccess;
  qkv_split_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(
      acc, b_qkv, count, tokens, context, hidden, capacity, q, k, v);
  return cudaGetLastError();
}

template <typename T>
cudaError_t causal_softmax(const float* scores, int64_t rows, int tokens, int keys, int context,
                           T* probs, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  causal_softmax_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(scores, rows, tokens, keys,
                                                                   context, probs);
  return cudaGetLastError();
}

template <typename T>
cudaError_t softmax_backward(const T* probs, const float* dp, int64_t rows, int keys, float scale,
                             T* ds, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  softmax_backward_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(probs, dp, rows, keys, scale,
                                                                     ds);
  return cudaGetLastError();
}

template <typename T>
cudaError_t kv_grad_combine(const float* dk, const float* dv, int tokens, int context, int hidden,
                            float* gk, float* gv, T* d_qkv, cudaStream_t stream) {
  const int64_t count = static_cast<int64_t>(context + tokens) * hidden;
  if (count == 0) return cudaSuccess;
  kv_grad_combine_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(dk, dv, count, context,
                                                                             hidden, gk, gv, d_qkv);
  return cudaGetLastError();
}

template <typename T>
cudaError_t column_sum_add(const T* m, int64_t rows, int cols, float* out, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  column_sum_add_kernel<<<column_blocks(cols), kThreads, 0, stream>>>(m, rows, cols, out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t embed_forward(const T* tok_emb, const T* pos_emb, const int32_t* ids, int64_t rows,
                          int tokens, int context, int hidden, int vocab, T* x,
                          cudaStream_t stream) {
  const int64_t count = rows * hidden;
  if (count == 0) return cudaSuccess;
  embed_forward_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(
      tok_emb, pos_emb, ids, count, tokens, context, hidden, vocab, x);
  return cudaGetLastError();
}

template <typename T>
cudaError_t embed_backward_weight(const int32_t* ids, const T* dx, int64_t rows, int tokens,
                                  int context, int hidden, int vocab, float* tok_grad,
                                  float* pos_grad, cudaStream_t stream) {
  const int64_t count = rows * hidden;
  if (count == 0) return cudaSuccess;
  embed_backward_weight_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(
      ids, dx, count, tokens, context, hidden, vocab, tok_grad, pos_grad);
  return cudaGetLastError();
}

template <typename T>
cudaError_t vocab_softmax(const float* logits, const int32_t* targets, int64_t rows, int vocab,
                          T* probs, float* row_loss, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  vocab_softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, targets, vocab,
                                                                             probs, row_loss);
  return cudaGetLastError();
}

template <typename T>
cudaError_t subtract_onehot(const int32_t* targets, int64_t rows, int vocab, T* probs,
                            cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  subtract_onehot_kernel<<<elementwise_blocks(rows), kThreads, 0, stream>>>(targets, rows, vocab,
                                                                            probs);
  return cudaGetLastError();
}

template <typename T>
cudaError_t sgd_step(float learning_rate, int64_t count, float* master, float* grads, T* params,
                     cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  sgd_step_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(learning_rate, count, master,
                                                                      grads, params);
  return cudaGetLastError();
}

#define PPSIM_INSTANTIATE_GPU_KERNELS(T)                                                           \
  template cudaError_t convert<float, T>(const float*, int64_t, T*, cudaStream_t);                 \
  template cudaError_t convert<T, float>(const T*, int64_t, float*, cudaStream_t);                 \
  template cudaError_t layer_norm_forward<T, T>(const T*, const T*, const T*, int64_t, int, T*,    \
                                                float*, T*, cudaStream_t);                         \
  template cudaError_t layer_norm_forward<T, float>(const float*, const T*, const T*, int64_t,     \
                                                    int, T*, float*, T*, cudaStream_t);            \
  template cudaError_t layer_norm_output<T>(const T*, const T*, const T*, int64_t, int, T*,        \
                                            cudaStream_t);                                         \
  template cudaError_t layer_norm_backward<T, T>(const float*, const T*, const float*, const T*,   \
                                                 const T*, int64_t, int, float*, T*,               \
                                                 cudaStream_t);                                    \
  template cudaError_t layer_norm_backward<T, float>(const float*, const T*, const float*,         \
                                                     const T*, const float*, int64_t, int, float*, \
                                                     T*, cudaStream_t);                            \
  template cudaError_t layer_norm_param_grads<T>(const float*, const T*, int64_t, int, float*,     \
                                                 float*, cudaStream_t);                            \
  template cudaError_t bias_residual<T, T>(const float*, const T*, const T*, int64_t, int, float*, \
                                           T*, cudaStream_t);                                      \
  template cudaError_t bias_residual<T, float>(const float*, const T*, const float*, int64_t, int, \
                                               float*, T*, cudaStream_t);                          \
  template cudaError_t gelu<T>(const T*, int64_t, T*, cudaStream_t);                               \
  template cudaError_t gelu_backward<T>(const float*, const T*, int64_t, T*, cudaStream_t);        \
  template cudaError_t qkv_split<T>(const float*, const T*, int, int, int, int, int, T*, T*, T*,   \
                                    cudaStream_t);                                                 \
  template cudaError_t causal_softmax<T>(const float*, int64_t, int, int, int, T*, cudaStream_t);  \
  template cudaError_t softmax_backward<T>(const T*, const float*, int64_t, int, float, T*,        \
                                           cudaStream_t);                                          \
  template cudaError_t kv_grad_combine<T>(const float*, const float*, int, int, int, float*,       \
                                          float*, T*, cudaStream_t);                               \
  template cudaError_t column_sum_add<T>(const T*, int64_t, int, float*, cudaStream_t);            \
  template cudaError_t embed_forward<T>(const T*, const T*, const int32_t*, int64_t, int, int,     \
                                        int, int, T*, cudaStream_t);                               \
  template cudaError_t embed_backward_weight<T>(const int32_t*, const T*, int64_t, int, int, int,  \
                                                int, float*, float*, cudaStream_t);                \
  template cudaError_t vocab_softmax<T>(const float*, const int32_t*, int64_t, int, T*, float*,    \
                                        cudaStream_t);                                             \
  template cudaError_t subtract_onehot<T>(const int32_t*, int64_t, int, T*, cudaStream_t);         \
  template cudaError_t sgd_step<T>(float, int64_t, float*, float*, T*, cudaStream_t);

PPSIM_INSTANTIATE_GPU_KERNELS(__nv_bfloat16)
PPSIM_INSTANTIATE_GPU_KERNELS(__half)
#undef PPSIM_INSTANTIATE_GPU_KERNELS

}  // namespace ppsim::gpu::detail
