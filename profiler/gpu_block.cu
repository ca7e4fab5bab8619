// The GPU block (gpu_block.h): buffers, the context (on a whole device or
// on a green context of an SmPartition), transfers, and F, I, W as cuBLAS
// GEMMs between the small kernels of gpu_block_kernels.cu.
//
// Notation as in gpt_block.h: n = b l token rows, h hidden, f ffn, a heads,
// d = h / a, c context, t = c + l keys. All matrices are row-major; the GEMM
// wrapper (gpu_internal.cuh) turns a row-major product into cuBLAS's
// column-major one.
#include <cudaTypedefs.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "profiler/gpu_block.h"
#include "profiler/gpu_block_kernels.cuh"
#include "profiler/gpu_internal.cuh"

// A CUresult that is not CUDA_SUCCESS returns an Error naming the call
// (driver_error, below), as PPSIM_CUDA_TRY does for the runtime.
#define PPSIM_CU_TRY(...)                                                                    \
  do {                                                                                       \
    const CUresult ppsim_r_ = (__VA_ARGS__);                                                 \
    if (ppsim_r_ != CUDA_SUCCESS) return ::ppsim::gpu::driver_error(#__VA_ARGS__, ppsim_r_); \
  } while (0)

namespace ppsim::gpu {
namespace {

// ---- The driver API, for green contexts.

// The driver calls green contexts need, reached through the runtime
// (cudaGetDriverEntryPointByVersion, each at the ABI version of its
// typedef) so that nothing links libcuda: machines without a driver could
// not start a binary that does.
struct Driver {
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetDevResource_v12040 device_get_resource = nullptr;
  PFN_cuDevSmResourceSplitByCount_v12040 split_by_count = nullptr;
  PFN_cuDevResourceGenerateDesc_v12040 generate_desc = nullptr;
  PFN_cuGreenCtxCreate_v12040 green_create = nullptr;
  PFN_cuGreenCtxDestroy_v12040 green_destroy = nullptr;
  PFN_cuCtxFromGreenCtx_v12040 context_of_green = nullptr;
  PFN_cuCtxSetCurrent_v4000 set_current = nullptr;
  PFN_cuGreenCtxStreamCreate_v12050 stream_create = nullptr;
  PFN_cuStreamDestroy_v4000 stream_destroy = nullptr;
};

template <typename Fn>
Status entry_point(const char* symbol, unsigned version, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  PPSIM_CUDA_TRY(cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || p == nullptr) {
    int driver = 0;
    cudaDriverGetVersion(&driver);
    return Error{"green contexts: the CUDA driver (" + std::to_string(driver / 1000) + "." +
                 std::to_string(driver % 1000 / 10) + ") has no " + symbol + " (version " +
                 std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) +
                 "; green contexts need a 12.4 driver, their own streams 12.5)"};
  }
  *fn = reinterpret_cast<Fn>(p);
  return {};
}

Result<Driver> load_driver() {
  Driver d;
  PPSIM_GPU_TRY(entry_point("cuGetErrorName", 6000, &d.get_error_name));
  PPSIM_GPU_TRY(entry_point("cuDeviceGet", 2000, &d.device_get));
  PPSIM_GPU_TRY(entry_point("cuDeviceGetDevResource", 12040, &d.device_get_resource));
  PPSIM_GPU_TRY(entry_point("cuDevSmResourceSplitByCount", 12040, &d.split_by_count));
  PPSIM_GPU_TRY(entry_point("cuDevResourceGenerateDesc", 12040, &d.generate_desc));
  PPSIM_GPU_TRY(entry_point("cuGreenCtxCreate", 12040, &d.green_create));
  PPSIM_GPU_TRY(entry_point("cuGreenCtxDestroy", 12040, &d.green_destroy));
  PPSIM_GPU_TRY(entry_point("cuCtxFromGreenCtx", 12040, &d.context_of_green));
  PPSIM_GPU_TRY(entry_point("cuCtxSetCurrent", 4000, &d.set_current));
  PPSIM_GPU_TRY(entry_point("cuGreenCtxStreamCreate", 12050, &d.stream_create));
  PPSIM_GPU_TRY(entry_point("cuStreamDestroy", 4000, &d.stream_destroy));
  return d;
}

// Loaded once per process; the error, if any, every time.
Result<const Driver*> driver() {
  static const Result<Driver> loaded = load_driver();
  if (!loaded) return loaded.error();
  return &*loaded;
}

// REQUIRES: driver() succeeded (a green context or a partition exists).
const Driver& loaded_driver() {
  const Result<const Driver*> d = driver();
  PPSIM_CHECK(d.ok());
  return **d;
}

Error driver_error(const char* what, CUresult r) {
  const char* name = nullptr;
  if (loaded_driver().get_error_name(r, &name) != CUDA_SUCCESS || name == nullptr) {
    name = "unknown CUresult";
  }
  return Error{std::string("CUDA driver error in ") + what + ": " + name + " (" +
               std::to_string(static_cast<int>(r)) + ")"};
}

// ---- The block, for storage type T.

template <typename T>
Status forward_t(GpuContext::Impl& cx, const GpuParams& p, const DeviceMatrix& x, GpuKvCache* kv,
                 GpuSaved* saved, DeviceMatrix* y) {
  const int b = kv->batch(), h = p.layout.hidden, f = p.layout.ffn, a = p.layout.heads;
  const int c = kv->length();
  PPSIM_CHECK(x.cols == h && x.rows > 0 && x.rows % b == 0 && x.rows / b <= INT_MAX);
  const int l = static_cast<int>(x.rows / b);
  const int t = c + l, d = h / a, cap = kv->capacity();
  const int64_t n = x.rows;
  PPSIM_CHECK(t <= cap && kv->hidden() == h);
  const cudaDataType ct = cuda_type(dtype_of<T>());
  const cudaStream_t s = cx.stream;

  GpuSaved& sv = *saved;
  sv = GpuSaved{};
  sv.shape = SliceShape{b, l, c, h, f, a};
  sv.storage = kv->storage();
  const int64_t e = sizeof(T);
  PPSIM_GPU_TRY(alloc(cx, n * h * e, &sv.xhat1));
  PPSIM_GPU_TRY(alloc(cx, n * 4, &sv.rstd1));
  PPSIM_GPU_TRY(alloc(cx, n * h * e, &sv.q));
  PPSIM_GPU_TRY(alloc(cx, static_cast<int64_t>(b) * a * l * t * e, &sv.probs));
  PPSIM_GPU_TRY(alloc(cx, n * h * e, &sv.o));
  PPSIM_GPU_TRY(alloc(cx, n * h * e, &sv.xhat2));
  PPSIM_GPU_TRY(alloc(cx, n * 4, &sv.rstd2));
  PPSIM_GPU_TRY(alloc(cx, n * f * e, &sv.u));

  T *ln_out = nullptr, *g = nullptr;
  float *acc = nullptr, *scores = nullptr, *hid = nullptr;
  PPSIM_GPU_TRY(carve_workspace(cx, [&](Scratch& w) {
    ln_out = w.take<T>(n * h);                                // LN1's, then LN2's output
    g = w.take<T>(n * f);                                     // gelu(u)
    acc = w.take<float>(n * std::max(3 * h, f));              // each GEMM's fp32 output
    scores = w.take<float>(static_cast<int64_t>(a) * l * t);  // one sequence's
    hid = w.take<float>(n * h);                               // the residual stream, x + attention
  }));

  const T* xd = static_cast<const T*>(x.data());
  T* xhat1 = ptr<T>(sv.xhat1);
  T* q = ptr<T>(sv.q);
  T* probs = ptr<T>(sv.probs);
  T* o = ptr<T>(sv.o);
  T* xhat2 = ptr<T>(sv.xhat2);
  T* u = ptr<T>(sv.u);

  // LN1, then QKV: Q to saved, K/V into the cache at rows c .. c + l - 1.
  PPSIM_CUDA_TRY(detail::layer_norm_forward<T, T>(xd, param<T>(p, kLn1Gain), param<T>(p, kLn1Bias),
                                                  n, h, xhat1, ptr<float>(sv.rstd1), ln_out, s));
  PPSIM_GPU_TRY(gemm(cx, "a1 W_qkv", n, 3 * h, h, 1.0f, {ln_out, ct, h},
                     {param<T>(p, kWQkv), ct, 3 * h}, 0.0f, {acc, CUDA_R_32F, 3 * h}));
  PPSIM_CUDA_TRY(detail::qkv_split<T>(acc, param<T>(p, kBQkv), b, l, c, h, cap, q,
                                      static_cast<T*>(kv->k(0)), static_cast<T*>(kv->v(0)), s));

  // Attention, sequence by sequence; one strided-batched GEMM over the heads
  // (head j: columns [j d, (j + 1) d)). Q K^T / sqrt(d), masked softmax, P V.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t head_probs = static_cast<int64_t>(l) * t;  // one head's l x t
  for (int i = 0; i < b; ++i) {
    const T* qi = q + static_cast<int64_t>(i) * l * h;
    const T* ki = static_cast<const T*>(kv->k(i));
    const T* vi = static_cast<const T*>(kv->v(i));
    T* pi = probs + static_cast<int64_t>(i) * a * head_probs;
    PPSIM_GPU_TRY(gemm(cx, "Q K^T", l, t, d, scale, {qi, ct, h, false, d}, {ki, ct, h, true, d},
                       0.0f, {scores, CUDA_R_32F, t, head_probs}, a));
    PPSIM_CUDA_TRY(detail::causal_softmax<T>(scores, static_cast<int64_t>(a) * l, l, t, c, pi, s));
    PPSIM_GPU_TRY(gemm(cx, "P V", l, d, t, 1.0f, {pi, ct, t, false, head_probs},
                       {vi, ct, h, false, d}, 0.0f, {o + static_cast<int64_t>(i) * l * h, ct, h, d},
                       a));
  }

  // hid = x + o W_o + b_o (fp32); LN2; u = a2 W1 + b1; y = hid + gelu(u) W2 + b2.
  PPSIM_GPU_TRY(gemm(cx, "o W_o", n, h, h, 1.0f, {o, ct, h}, {param<T>(p, kWO), ct, h}, 0.0f,
                     {acc, CUDA_R_32F, h}));
  PPSIM_CUDA_TRY(detail::bias_residual<T, T>(acc, param<T>(p, kBO), xd, n, h, hid, nullptr, s));
  PPSIM_CUDA_TRY(detail::layer_norm_forward<T, float>(hid, param<T>(p, kLn2Gain),
                                                      param<T>(p, kLn2Bias), n, h, xhat2,
                                                      ptr<float>(sv.rstd2), ln_out, s));
  PPSIM_GPU_TRY(gemm(cx, "a2 W1", n, f, h, 1.0f, {ln_out, ct, h}, {param<T>(p, kW1), ct, f}, 0.0f,
                     {acc, CUDA_R_32F, f}));
  PPSIM_CUDA_TRY(detail::bias_residual<T, T>(acc, param<T>(p, kB1), static_cast<const T*>(nullptr),
                                             n, f, nullptr, u, s));
  PPSIM_CUDA_TRY(detail::gelu<T>(u, n * f, g, s));
  PPSIM_GPU_TRY(gemm(cx, "g W2", n, h, f, 1.0f, {g, ct, f}, {param<T>(p, kW2), ct, h}, 0.0f,
                     {acc, CUDA_R_32F, h}));
  DeviceMatrix result;
  PPSIM_GPU_TRY(alloc_matrix(cx, n, h, dtype_of<T>(), &result));
  PPSIM_CUDA_TRY(detail::bias_residual<T, float>(acc, param<T>(p, kB2), hid, n, h, nullptr,
                                                 ptr<T>(result.buffer), s));
  *y = std::move(result);
  kv->set_length(t);
  sv.phase = GpuSaved::Phase::kForward;
  return {};
}

template <typename T>
Status backward_input_t(GpuContext::Impl& cx, const GpuParams& p, const DeviceMatrix& dy,
                        GpuKvCache* kv, GpuKvGrad* kv_grad, GpuSaved* saved, DeviceMatrix* dx) {
  GpuSaved& sv = *saved;
  PPSIM_CHECK(sv.phase == GpuSaved::Phase::kForward);
  const SliceShape& sh = sv.shape;
  const int b = sh.batch, l = sh.tokens, c = sh.context, h = sh.hidden, f = sh.ffn, a = sh.heads;
  const int t = c + l, d = h / a;
  const int64_t n = sh.rows();
  PPSIM_CHECK(p.layout.hidden == h && p.layout.ffn == f && p.layout.heads == a);
  PPSIM_CHECK(kv->batch() == b && kv->length() == t && kv->storage() == sv.storage);
  PPSIM_CHECK(kv_grad->batch() == b && kv_grad->hidden() == h && kv_grad->capacity() >= t);
  PPSIM_CHECK(dy.rows == n && dy.cols == h && dy.type == dtype_of<T>());
  const cudaDataType ct = cuda_type(dtype_of<T>());
  const cudaStream_t s = cx.stream;
  const int64_t e = sizeof(T);

  PPSIM_GPU_TRY(alloc(cx, n * f * e, &sv.du));
  PPSIM_GPU_TRY(alloc(cx, n * h * e, &sv.d_h));
  PPSIM_GPU_TRY(alloc(cx, n * 3 * h * e, &sv.d_qkv));
  PPSIM_GPU_TRY(alloc(cx, n * h * e, &sv.dy));
  PPSIM_GPU_TRY(alloc(cx, 4LL * h * 4, &sv.d_ln));

  float *acc = nullptr, *d_h32 = nullptr, *dp = nullptr, *dk = nullptr, *dv = nullptr;
  T *d_o = nullptr, *ds = nullptr;
  const int64_t head_probs = static_cast<int64_t>(l) * t;
  PPSIM_GPU_TRY(carve_workspace(cx, [&](Scratch& w) {
    acc = w.take<float>(n * std::max(h, f));          // each GEMM's fp32 output
    d_h32 = w.take<float>(n * h);                     // gradient at the residual stream h
    d_o = w.take<T>(n * h);                           // at the attention output
    dp = w.take<float>(a * head_probs);               // one sequence's dP
    ds = w.take<T>(a * head_probs);                   // and dS
    dk = w.take<float>(static_cast<int64_t>(t) * h);  // and dK, dV over its t keys
    dv = w.take<float>(static_cast<int64_t>(t) * h);
  }));

  const T* dyd = static_cast<const T*>(dy.data());
  const T* xhat1 = ptr<T>(sv.xhat1);
  const T* xhat2 = ptr<T>(sv.xhat2);
  const T* q = ptr<T>(sv.q);
  const T* probs = ptr<T>(sv.probs);
  const T* u = ptr<T>(sv.u);
  T* du = ptr<T>(sv.du);
  T* d_h = ptr<T>(sv.d_h);
  T* d_qkv = ptr<T>(sv.d_qkv);
  float* d_ln = ptr<float>(sv.d_ln);  // ln1 gain, ln1 bias, ln2 gain, ln2 bias

  // MLP and LN2; the residual passes dy straight to h.
  PPSIM_GPU_TRY(gemm(cx, "dy W2^T", n, f, h, 1.0f, {dyd, ct, h}, {param<T>(p, kW2), ct, h, true},
                     0.0f, {acc, CUDA_R_32F, f}));
  PPSIM_CUDA_TRY(detail::gelu_backward<T>(acc, u, n * f, du, s));
  PPSIM_GPU_TRY(gemm(cx, "du W1^T", n, h, f, 1.0f, {du, ct, f}, {param<T>(p, kW1), ct, f, true},
                     0.0f, {acc, CUDA_R_32F, h}));
  PPSIM_CUDA_TRY(
      detail::layer_norm_param_grads<T>(acc, xhat2, n, h, d_ln + 2 * h, d_ln + 3 * h, s));
  PPSIM_CUDA_TRY(detail::layer_norm_backward<T, T>(
      acc, xhat2, ptr<float>(sv.rstd2), param<T>(p, kLn2Gain), dyd, n, h, d_h32, d_h, s));

  // Attention, sequence by sequence, batched over the heads.
  PPSIM_GPU_TRY(gemm(cx, "d_h W_o^T", n, h, h, 1.0f, {d_h, ct, h}, {param<T>(p, kWO), ct, h, true},
                     0.0f, {d_o, ct, h}));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int i = 0; i < b; ++i) {
    const int64_t row0 = static_cast<int64_t>(i) * l;  // the sequence's first token row
    const T* qi = q + row0 * h;
    const T* ki = static_cast<const T*>(kv->k(i));
    const T* vi = static_cast<const T*>(kv->v(i));
    const T* pi = probs + static_cast<int64_t>(i) * a * head_probs;
    const T* d_oi = d_o + row0 * h;
    PPSIM_GPU_TRY(gemm(cx, "P^T dO", t, d, l, 1.0f, {pi, ct, t, true, head_probs},
                       {d_oi, ct, h, false, d}, 0.0f, {dv, CUDA_R_32F, h, d}, a));
    PPSIM_GPU_TRY(gemm(cx, "dO V^T", l, t, d, 1.0f, {d_oi, ct, h, false, d}, {vi, ct, h, true, d},
                       0.0f, {dp, CUDA_R_32F, t, head_probs}, a));
    PPSIM_CUDA_TRY(
        detail::softmax_backward<T>(pi, dp, static_cast<int64_t>(a) * l, t, scale, ds, s));
    PPSIM_GPU_TRY(gemm(cx, "dS K", l, d, t, 1.0f, {ds, ct, t, false, head_probs},
                       {ki, ct, h, false, d}, 0.0f, {d_qkv + row0 * 3 * h, ct, 3 * h, d}, a));
    PPSIM_GPU_TRY(gemm(cx, "dS^T Q", t, d, l, 1.0f, {ds, ct, t, true, head_probs},
                       {qi, ct, h, false, d}, 0.0f, {dk, CUDA_R_32F, h, d}, a));
    PPSIM_CUDA_TRY(detail::kv_grad_combine<T>(dk, dv, l, c, h, kv_grad->dk(i), kv_grad->dv(i),
                                              d_qkv + row0 * 3 * h, s));
  }

  // QKV projection and LN1; the residual passes d_h straight to x.
  PPSIM_GPU_TRY(gemm(cx, "d_qkv W_qkv^T", n, h, 3 * h, 1.0f, {d_qkv, ct, 3 * h},
                     {param<T>(p, kWQkv), ct, 3 * h, true}, 0.0f, {acc, CUDA_R_32F, h}));
  PPSIM_CUDA_TRY(detail::layer_norm_param_grads<T>(acc, xhat1, n, h, d_ln, d_ln + h, s));
  DeviceMatrix result;
  PPSIM_GPU_TRY(alloc_matrix(cx, n, h, dtype_of<T>(), &result));
  PPSIM_CUDA_TRY(detail::layer_norm_backward<T, float>(acc, xhat1, ptr<float>(sv.rstd1),
                                                       param<T>(p, kLn1Gain), d_h32, n, h, nullptr,
                                                       ptr<T>(result.buffer), s));
  PPSIM_CUDA_TRY(cudaMemcpyAsync(sv.dy.get(), dyd, n * h * e, cudaMemcpyDeviceToDevice, s));
  *dx = std::move(result);

  kv->set_length(c);
  sv.q.reset();
  sv.rstd1.reset();
  sv.rstd2.reset();
  sv.probs.reset();
  sv.phase = GpuSaved::Phase::kInputDone;
  return {};
}

template <typename T>
Status backward_weight_t(GpuContext::Impl& cx, const GpuParams& p, GpuSaved* saved,
                         GpuParams* grads) {
  GpuSaved& sv = *saved;
  PPSIM_CHECK(sv.phase == GpuSaved::Phase::kInputDone);
  const SliceShape& sh = sv.shape;
  const int h = sh.hidden, f = sh.ffn;
  const int64_t n = sh.rows();
  PPSIM_CHECK(p.layout.hidden == h && p.layout.ffn == f && p.layout.heads == sh.heads);
  PPSIM_CHECK(grads->type == DType::kFp32 && grads->layout.hidden == h && grads->layout.ffn == f);
  const cudaDataType ct = cuda_type(dtype_of<T>());
  const cudaStream_t s = cx.stream;

  T *ln_out = nullptr, *g = nullptr;
  PPSIM_GPU_TRY(carve_workspace(cx, [&](Scratch& w) {
    ln_out = w.take<T>(n * h);  // the layer norms' outputs, rebuilt from xhat
    g = w.take<T>(n * f);       // gelu(u), rebuilt
  }));
  auto grad = [&](int tensor) { return static_cast<float*>(grads->tensor(tensor)); };
  const T* d_qkv = ptr<T>(sv.d_qkv);
  const T* d_h = ptr<T>(sv.d_h);
  const T* dy = ptr<T>(sv.dy);
  const T* du = ptr<T>(sv.du);

  // Each weight's gradient += its input^T times its output's gradient.
  PPSIM_CUDA_TRY(detail::layer_norm_output<T>(ptr<T>(sv.xhat1), param<T>(p, kLn1Gain),
                                              param<T>(p, kLn1Bias), n, h, ln_out, s));
  PPSIM_GPU_TRY(gemm(cx, "a1^T d_qkv", h, 3 * h, n, 1.0f, {ln_out, ct, h, true}, {d_qkv, ct, 3 * h},
                     1.0f, {grad(kWQkv), CUDA_R_32F, 3 * h}));
  PPSIM_CUDA_TRY(detail::column_sum_add<T>(d_qkv, n, 3 * h, grad(kBQkv), s));
  PPSIM_GPU_TRY(gemm(cx, "o^T d_h", h, h, n, 1.0f, {ptr<T>(sv.o), ct, h, true}, {d_h, ct, h}, 1.0f,
                     {grad(kWO), CUDA_R_32F, h}));
  PPSIM_CUDA_TRY(detail::column_sum_add<T>(d_h, n, h, grad(kBO), s));
  PPSIM_CUDA_TRY(detail::layer_norm_output<T>(ptr<T>(sv.xhat2), param<T>(p, kLn2Gain),
                                              param<T>(p, kLn2Bias), n, h, ln_out, s));
  PPSIM_CUDA_TRY(detail::gelu<T>(ptr<T>(sv.u), n * f, g, s));
  PPSIM_GPU_TRY(gemm(cx, "g^T dy", f, h, n, 1.0f, {g, ct, f, true}, {dy, ct, h}, 1.0f,
                     {grad(kW2), CUDA_R_32F, h}));
  PPSIM_CUDA_TRY(detail::column_sum_add<T>(dy, n, h, grad(kB2), s));
  PPSIM_GPU_TRY(gemm(cx, "a2^T du", h, f, n, 1.0f, {ln_out, ct, h, true}, {du, ct, f}, 1.0f,
                     {grad(kW1), CUDA_R_32F, f}));
  PPSIM_CUDA_TRY(detail::column_sum_add<T>(du, n, f, grad(kB1), s));
  // The layer norms' gain/bias gradients I already reduced over tokens.
  const float one = 1.0f;
  const float* d_ln = ptr<float>(sv.d_ln);
  const int tensors[4] = {kLn1Gain, kLn1Bias, kLn2Gain, kLn2Bias};
  for (int i = 0; i < 4; ++i) {
    PPSIM_CUBLAS_TRY(cublasSaxpy(cx.cublas, h, &one, d_ln + i * h, 1, grad(tensors[i]), 1));
  }
  sv = GpuSaved{};
  return {};
}

}  // namespace

// ---- DeviceBuffer.

Result<DeviceBuffer> DeviceBuffer::allocate(int64_t bytes, void* stream) {
  PPSIM_CHECK(bytes >= 0);
  DeviceBuffer b;
  b.stream_ = stream;
  if (bytes == 0) return Result<DeviceBuffer>(std::move(b));
  const auto s = static_cast<cudaStream_t>(stream);
  PPSIM_CUDA_TRY(cudaMallocAsync(&b.ptr_, static_cast<size_t>(bytes), s));
  b.bytes_ = bytes;
  PPSIM_CUDA_TRY(cudaMemsetAsync(b.ptr_, 0, static_cast<size_t>(bytes), s));
  return Result<DeviceBuffer>(std::move(b));
}

DeviceBuffer::~DeviceBuffer() { reset(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      stream_(other.stream_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    stream_ = other.stream_;
  }
  return *this;
}

void DeviceBuffer::reset() {
  // A destructor cannot report; a failed free leaks, which is all it can do.
  if (ptr_ != nullptr) cudaFreeAsync(ptr_, static_cast<cudaStream_t>(stream_));
  ptr_ = nullptr;
  bytes_ = 0;
}

// ---- SmPartition.

struct SmPartition::Impl {
  int device = 0;
  CUdevice cu_device = 0;
  int device_sms = 0;
  std::vector<CUdevResource> groups;  // disjoint, of equal size
};

SmPartition::SmPartition(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SmPartition::~SmPartition() = default;

Result<std::unique_ptr<SmPartition>> SmPartition::create(int device, int groups) {
  PPSIM_CHECK(groups >= 1);
  PPSIM_CUDA_TRY(cudaSetDevice(device));  // initialises the driver and the primary context
  Result<const Driver*> loaded = driver();
  if (!loaded) return loaded.error();
  const Driver& d = **loaded;
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  PPSIM_CU_TRY(d.device_get(&impl->cu_device, device));
  CUdevResource all{};
  PPSIM_CU_TRY(d.device_get_resource(impl->cu_device, &all, CU_DEV_RESOURCE_TYPE_SM));
  const int sms = static_cast<int>(all.sm.smCount);
  const int minimum = static_cast<int>(all.sm.minSmPartitionSize);
  // A driver that reports no alignment places the SMs freely.
  const int alignment = std::max(1, static_cast<int>(all.sm.smCoscheduledAlignment));
  impl->device_sms = sms;
  const int per_group = gpu::sms_per_group(sms, groups, minimum, alignment);
  const std::string what =
      "green contexts: device " + std::to_string(device) + " has " + std::to_string(sms) + " SMs";
  if (per_group == 0) {
    return Error{what + ", too few for " + std::to_string(groups) + " groups of at least " +
                 std::to_string(minimum) + " (the driver's smallest partition; groups are " +
                 "multiples of " + std::to_string(alignment) + " SMs)"};
  }
  impl->groups.resize(groups);
  unsigned made = static_cast<unsigned>(groups);
  CUdevResource remaining{};
  PPSIM_CU_TRY(d.split_by_count(impl->groups.data(), &made, &all, &remaining, 0,
                                static_cast<unsigned>(per_group)));
  if (made < static_cast<unsigned>(groups)) {
    return Error{what + ": the driver made " + std::to_string(made) + " groups of " +
                 std::to_string(per_group) + ", not " + std::to_string(groups)};
  }
  return std::unique_ptr<SmPartition>(new SmPartition(std::move(impl)));
}

int SmPartition::device() const { return impl_->device; }
int SmPartition::groups() const { return static_cast<int>(impl_->groups.size()); }
int SmPartition::sms_per_group() const { return static_cast<int>(impl_->groups[0].sm.smCount); }
int SmPartition::device_sms() const { return impl_->device_sms; }

// ---- GpuContext.

GpuContext::Impl::~Impl() {
  // The green context current for the last frees and the stream's work,
  // then the primary context, so that the thread is not left on a
  // destroyed context. A destructor cannot report; failures leak.
  if (green_context != nullptr) loaded_driver().set_current(green_context);
  workspace.reset();
  if (cublas != nullptr) cublasDestroy(cublas);
  if (stream != nullptr) {
    cudaStreamSynchronize(stream);
    if (green != nullptr) {
      loaded_driver().stream_destroy(stream);
    } else {
      cudaStreamDestroy(stream);
    }
  }
  if (green != nullptr) {
    loaded_driver().green_destroy(green);
    cudaSetDevice(device);
  }
}

GpuContext::GpuContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuContext::~GpuContext() = default;

Result<std::unique_ptr<GpuContext>> GpuContext::create(int device, const SmPartition* partition,
                                                       int group) {
  PPSIM_CHECK(partition == nullptr ||
              (partition->device() == device && group >= 0 && group < partition->groups()));
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  PPSIM_CUDA_TRY(cudaSetDevice(device));
  int pools = 0;
  PPSIM_CUDA_TRY(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
  if (pools == 0) {
    return Error{"GPU block: device " + std::to_string(device) +
                 " has no stream-ordered allocator (cudaMallocAsync)"};
  }
  cudaDeviceProp prop{};
  PPSIM_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  impl->device_name = prop.name;
  impl->device_sms = impl->sm_count = prop.multiProcessorCount;
  if (partition == nullptr) {
    PPSIM_CUDA_TRY(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  } else {
    const Driver& d = loaded_driver();
    const SmPartition::Impl& part = partition->impl();
    CUdevResource resource = part.groups[group];  // the call takes a mutable array
    CUdevResourceDesc desc = nullptr;
    PPSIM_CU_TRY(d.generate_desc(&desc, &resource, 1));
    PPSIM_CU_TRY(d.green_create(&impl->green, desc, part.cu_device, CU_GREEN_CTX_DEFAULT_STREAM));
    PPSIM_CU_TRY(d.context_of_green(&impl->green_context, impl->green));
    PPSIM_CU_TRY(d.set_current(impl->green_context));
    PPSIM_CU_TRY(d.stream_create(&impl->stream, impl->green, CU_STREAM_NON_BLOCKING, 0));
    impl->sm_count = static_cast<int>(resource.sm.smCount);
  }
  // Created while the green context (if any) is current: cuBLAS binds to it.
  PPSIM_CUBLAS_TRY(cublasCreate(&impl->cublas));
  PPSIM_CUBLAS_TRY(cublasSetStream(impl->cublas, impl->stream));
  // fp32 accumulation throughout: no split-K partial sums in 16 bits.
  PPSIM_CUBLAS_TRY(cublasSetMathMode(
      impl->cublas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  return std::unique_ptr<GpuContext>(new GpuContext(std::move(impl)));
}

int GpuContext::device() const { return impl_->device; }
void* GpuContext::stream() const { return impl_->stream; }
int GpuContext::sm_count() const { return impl_->sm_count; }

std::string GpuContext::placement() const {
  const std::string where =
      "device " + std::to_string(impl_->device) + " (" + impl_->device_name + "), ";
  const std::string all = std::to_string(impl_->device_sms);
  if (impl_->green == nullptr) return where + "all " + all + " SMs";
  return where + "green context of " + std::to_string(impl_->sm_count) + " of " + all + " SMs";
}

Status GpuContext::make_current() {
  PPSIM_CUDA_TRY(cudaSetDevice(impl_->device));
  if (impl_->green_context != nullptr) {
    PPSIM_CU_TRY(loaded_driver().set_current(impl_->green_context));
  }
  return {};
}

Status GpuContext::synchronize() {
  PPSIM_CUDA_TRY(cudaStreamSynchronize(impl_->stream));
  return {};
}

// ---- Allocation and transfers.

Result<DeviceMatrix> allocate_matrix(GpuContext& ctx, int64_t rows, int64_t cols, DType type) {
  DeviceMatrix m;
  PPSIM_GPU_TRY(alloc_matrix(ctx.impl(), rows, cols, type, &m));
  return Result<DeviceMatrix>(std::move(m));
}

Result<DeviceMatrix> copy_matrix(GpuContext& ctx, const DeviceMatrix& m) {
  GpuContext::Impl& cx = ctx.impl();
  DeviceMatrix out;
  PPSIM_GPU_TRY(alloc_matrix(cx, m.rows, m.cols, m.type, &out));
  const int64_t bytes = out.buffer.bytes();
  if (bytes > 0) {
    // Unified addressing: the driver sees which devices the pointers are on.
    PPSIM_CUDA_TRY(cudaMemcpyAsync(out.data(), m.data(), static_cast<size_t>(bytes),
                                   cudaMemcpyDefault, cx.stream));
  }
  return Result<DeviceMatrix>(std::move(out));
}

Status upload(GpuContext& ctx, const float* host, int64_t count, DType type, void* device) {
  GpuContext::Impl& cx = ctx.impl();
  PPSIM_CHECK(count >= 0);
  if (count == 0) return {};
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  if (type == DType::kFp32) {
    PPSIM_CUDA_TRY(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, cx.stream));
    return {};
  }
  DeviceBuffer staging;
  PPSIM_GPU_TRY(alloc(cx, static_cast<int64_t>(bytes), &staging));
  PPSIM_CUDA_TRY(cudaMemcpyAsync(staging.get(), host, bytes, cudaMemcpyHostToDevice, cx.stream));
  return with_storage_type(type, [&](auto tag) -> Status {
    using T = decltype(tag);
    PPSIM_CUDA_TRY(
        detail::convert<float, T>(ptr<float>(staging), count, static_cast<T*>(device), cx.stream));
    return {};
  });
}

Status download(GpuContext& ctx, const void* device, DType type, int64_t count, float* host) {
  GpuContext::Impl& cx = ctx.impl();
  PPSIM_CHECK(count >= 0);
  if (count == 0) return {};
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  DeviceBuffer staging;
  const void* src = device;
  if (type != DType::kFp32) {
    PPSIM_GPU_TRY(alloc(cx, static_cast<int64_t>(bytes), &staging));
    PPSIM_GPU_TRY(with_storage_type(type, [&](auto tag) -> Status {
      using T = decltype(tag);
      PPSIM_CUDA_TRY(detail::convert<T, float>(static_cast<const T*>(device), count,
                                               ptr<float>(staging), cx.stream));
      return {};
    }));
    src = staging.get();
  }
  PPSIM_CUDA_TRY(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, cx.stream));
  PPSIM_CUDA_TRY(cudaStreamSynchronize(cx.stream));
  return {};
}

Result<GpuParams> allocate_params(GpuContext& ctx, const ParamLayout& layout, DType type) {
  GpuParams p;
  p.layout = layout;
  p.type = type;
  PPSIM_GPU_TRY(alloc(ctx.impl(), layout.total * dtype_bytes(type), &p.data));
  return Result<GpuParams>(std::move(p));
}

Result<GpuBlockGrads> zero_grads(GpuContext& ctx, int hidden, int ffn, int heads) {
  return allocate_params(ctx, param_layout(hidden, ffn, heads), DType::kFp32);
}

Result<GpuKvCache> GpuKvCache::create(GpuContext& ctx, int batch, int hidden, int capacity,
                                      DType storage) {
  PPSIM_CHECK(batch > 0 && hidden > 0 && capacity > 0 && is_storage_type(storage));
  GpuKvCache kv;
  kv.batch_ = batch;
  kv.hidden_ = hidden;
  kv.capacity_ = capacity;
  kv.storage_ = storage;
  const int64_t bytes = static_cast<int64_t>(batch) * capacity * hidden * dtype_bytes(storage);
  PPSIM_GPU_TRY(alloc(ctx.impl(), bytes, &kv.k_));
  PPSIM_GPU_TRY(alloc(ctx.impl(), bytes, &kv.v_));
  return Result<GpuKvCache>(std::move(kv));
}

Result<GpuKvGrad> GpuKvGrad::create(GpuContext& ctx, int batch, int hidden, int capacity) {
  PPSIM_CHECK(batch > 0 && hidden > 0 && capacity > 0);
  GpuKvGrad g;
  g.batch_ = batch;
  g.hidden_ = hidden;
  g.capacity_ = capacity;
  const int64_t bytes = static_cast<int64_t>(batch) * capacity * hidden * 4;
  PPSIM_GPU_TRY(alloc(ctx.impl(), bytes, &g.dk_));
  PPSIM_GPU_TRY(alloc(ctx.impl(), bytes, &g.dv_));
  return Result<GpuKvGrad>(std::move(g));
}

// ---- The block.

Status forward(GpuContext& ctx, const GpuBlockParams& p, const DeviceMatrix& x, GpuKvCache* kv,
               GpuSaved* saved, DeviceMatrix* y) {
  const DType st = kv->storage();
  PPSIM_CHECK(p.type == st && x.type == st);
  return with_storage_type(
      st, [&](auto tag) { return forward_t<decltype(tag)>(ctx.impl(), p, x, kv, saved, y); });
}

Status backward_input(GpuContext& ctx, const GpuBlockParams& p, const DeviceMatrix& dy,
                      GpuKvCache* kv, GpuKvGrad* kv_grad, GpuSaved* saved, DeviceMatrix* dx) {
  const DType st = saved->storage;
  PPSIM_CHECK(p.type == st);
  return with_storage_type(st, [&](auto tag) {
    return backward_input_t<decltype(tag)>(ctx.impl(), p, dy, kv, kv_grad, saved, dx);
  });
}

Status backward_weight(GpuContext& ctx, const GpuBlockParams& p, GpuSaved* saved,
                       GpuBlockGrads* grads) {
  const DType st = saved->storage;
  PPSIM_CHECK(p.type == st);
  return with_storage_type(
      st, [&](auto tag) { return backward_weight_t<decltype(tag)>(ctx.impl(), p, saved, grads); });
}

Status backward(GpuContext& ctx, const GpuBlockParams& p, const DeviceMatrix& dy, GpuKvCache* kv,
                GpuKvGrad* kv_grad, GpuSaved* saved, GpuBlockGrads* grads, DeviceMatrix* dx) {
  PPSIM_GPU_TRY(backward_input(ctx, p, dy, kv, kv_grad, saved, dx));
  return backward_weight(ctx, p, saved, grads);
}

}  // namespace ppsim::gpu
