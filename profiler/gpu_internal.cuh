// What the GPU block's files share, for them only (gpu_block.cu,
// gpu_head.cu, and gpu_gemm_sweep.cc, host code that the C++ compiler builds
// against the CUDA headers, several times faster than nvcc's passes for
// every architecture): the error macros that turn a CUDA or cuBLAS failure
// into an Error naming the call, the context's innards (GpuContext::Impl),
// stream-ordered allocation and the scratch carved from the context's
// workspace, the storage types, and the row-major GEMM wrapper. CUDA types
// throughout, so no file outside the GPU libraries includes it; <cuda.h> is
// here for the green context's handle types only (nothing calls the driver
// directly: gpu_block.cu reaches it through the runtime, so that nothing
// links libcuda).
#pragma once

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

#include "profiler/gpu_block.h"

namespace ppsim::gpu {

inline Error cuda_error(const char* what, cudaError_t e, const char* file, int line) {
  return Error{std::string("CUDA error in ") + what + ": " + cudaGetErrorName(e) + " (" +
               cudaGetErrorString(e) + ") at " + file + ":" + std::to_string(line)};
}

inline Error cublas_error(const char* what, cublasStatus_t s) {
  return Error{std::string("cuBLAS error in ") + what + ": " + cublasGetStatusName(s) + " (" +
               cublasGetStatusString(s) + ")"};
}

}  // namespace ppsim::gpu

// Each returns an Error (which converts to Status or Result) from the
// enclosing function on failure. Variadic: the calls carry template
// arguments and braced operands, whose commas a macro would split.
#define PPSIM_CUDA_TRY(...)                                                        \
  do {                                                                             \
    const cudaError_t ppsim_e_ = (__VA_ARGS__);                                    \
    if (ppsim_e_ != cudaSuccess)                                                   \
      return ::ppsim::gpu::cuda_error(#__VA_ARGS__, ppsim_e_, __FILE__, __LINE__); \
  } while (0)
#define PPSIM_CUBLAS_TRY(...)                                    \
  do {                                                           \
    const cublasStatus_t ppsim_s_ = (__VA_ARGS__);               \
    if (ppsim_s_ != CUBLAS_STATUS_SUCCESS)                       \
      return ::ppsim::gpu::cublas_error(#__VA_ARGS__, ppsim_s_); \
  } while (0)
#define PPSIM_GPU_TRY(...)                                           \
  do {                                                               \
    ::ppsim::Status ppsim_st_ = (__VA_ARGS__);                       \
    if (!ppsim_st_.ok()) return ::ppsim::Error{ppsim_st_.message()}; \
  } while (0)

namespace ppsim::gpu {

struct GpuContext::Impl {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  DeviceBuffer workspace;  // the calls' scratch, grown on demand
  // On a group of an SmPartition: the green context and the CUDA context
  // that stands for it (current while the context's work is issued); null
  // on the whole device.
  CUgreenCtx green = nullptr;
  CUcontext green_context = nullptr;
  int sm_count = 0, device_sms = 0;  // the SMs its work may use, the device's
  std::string device_name;

  // In gpu_block.cu: a green context is destroyed through the driver.
  ~Impl();
};

// ---- Buffers and scratch.

inline Status alloc(GpuContext::Impl& cx, int64_t bytes, DeviceBuffer* out) {
  Result<DeviceBuffer> b = DeviceBuffer::allocate(bytes, cx.stream);
  if (!b) return b.error();
  *out = std::move(*b);
  return {};
}

// A zeroed rows x cols matrix of `type` (what allocate_matrix returns).
inline Status alloc_matrix(GpuContext::Impl& cx, int64_t rows, int64_t cols, DType type,
                           DeviceMatrix* out) {
  PPSIM_CHECK(rows >= 0 && cols >= 0);
  DeviceMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.type = type;
  PPSIM_GPU_TRY(alloc(cx, rows * cols * dtype_bytes(type), &m.buffer));
  *out = std::move(m);
  return {};
}

inline constexpr int64_t kScratchAlign = 256;  // bytes; cuBLAS's tensor-core kernels want >= 16

// Carves a call's scratch out of the context's workspace, one region after
// another. With a null base it only measures.
class Scratch {
 public:
  explicit Scratch(char* base) : base_(base) {}
  template <typename U>
  U* take(int64_t count) {
    U* p = base_ == nullptr ? nullptr : reinterpret_cast<U*>(base_ + used_);
    used_ += (count * static_cast<int64_t>(sizeof(U)) + kScratchAlign - 1) / kScratchAlign *
             kScratchAlign;
    return p;
  }
  int64_t used() const { return used_; }

 private:
  char* base_;
  int64_t used_ = 0;
};

// Runs `carve` (which takes its regions from a Scratch) once to measure and
// once on the workspace, grown to fit.
template <typename Carve>
Status carve_workspace(GpuContext::Impl& cx, Carve carve) {
  Scratch measure(nullptr);
  carve(measure);
  if (cx.workspace.bytes() < measure.used()) {
    cx.workspace.reset();
    PPSIM_GPU_TRY(alloc(cx, measure.used(), &cx.workspace));
  }
  Scratch real(static_cast<char*>(cx.workspace.get()));
  carve(real);
  return {};
}

// ---- Types.

inline cudaDataType cuda_type(DType type) {
  switch (type) {
    case DType::kFp32:
      return CUDA_R_32F;
    case DType::kBf16:
      return CUDA_R_16BF;
    case DType::kFp16:
      return CUDA_R_16F;
  }
  PPSIM_CHECK(false);
  return CUDA_R_32F;
}

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<__nv_bfloat16>() {
  return DType::kBf16;
}
template <>
constexpr DType dtype_of<__half>() {
  return DType::kFp16;
}

// Calls f(T{}) with T the storage type of `type` (bf16 or fp16).
template <typename F>
Status with_storage_type(DType type, F&& f) {
  PPSIM_CHECK(is_storage_type(type));
  if (type == DType::kBf16) return f(__nv_bfloat16{});
  return f(__half{});
}

// A tensor of a block's or a head's parameters (GpuParams, GpuHeadParams).
template <typename T, typename Params>
const T* param(const Params& p, int tensor) {
  return static_cast<const T*>(p.tensor(tensor));
}

template <typename U>
U* ptr(const DeviceBuffer& b) {
  return static_cast<U*>(b.get());
}

// ---- GEMM: C = alpha op(A) op(B) + beta C, all row-major, op(A) m x k,
// op(B) k x n, fp32 accumulation; `batch` products at the given element
// strides. `ld` is a stored matrix's row stride.

struct Operand {
  const void* data;
  cudaDataType type;
  int64_t ld;
  bool trans = false;
  int64_t stride = 0;
};

struct Output {
  void* data;
  cudaDataType type;
  int64_t ld;
  int64_t stride = 0;
};

inline Status gemm(GpuContext::Impl& cx, const char* what, int64_t m, int64_t n, int64_t k,
                   float alpha, const Operand& a, const Operand& b, float beta, const Output& c,
                   int batch = 1) {
  // A stored row-major is m x k (k x m when transposed), and so on.
  PPSIM_CHECK(m > 0 && n > 0 && k > 0 && batch > 0);
  PPSIM_CHECK(a.ld >= (a.trans ? m : k) && b.ld >= (b.trans ? k : n) && c.ld >= n);
  PPSIM_CHECK(std::max({m, n, k, a.ld, b.ld, c.ld}) <= INT_MAX);
  // cuBLAS is column-major, where a row-major matrix reads as its transpose:
  // it computes C^T (n x m) = op(B)^T op(A)^T, B first.
  const cublasOperation_t op_b = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  const int lda = static_cast<int>(a.ld), ldb = static_cast<int>(b.ld),
            ldc = static_cast<int>(c.ld);
  cublasStatus_t s;
  if (batch == 1) {
    s = cublasGemmEx(cx.cublas, op_b, op_a, in, im, ik, &alpha, b.data, b.type, ldb, a.data, a.type,
                     lda, &beta, c.data, c.type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  } else {
    s = cublasGemmStridedBatchedEx(cx.cublas, op_b, op_a, in, im, ik, &alpha, b.data, b.type, ldb,
                                   b.stride, a.data, a.type, lda, a.stride, &beta, c.data, c.type,
                                   ldc, c.stride, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  if (s != CUBLAS_STATUS_SUCCESS) return cublas_error(what, s);
  return {};
}

}  // namespace ppsim::gpu
