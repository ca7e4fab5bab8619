// One pre-LN GPT block on a GPU: the function of the CPU block (gpt_block.h)
// with its actions, shapes and token slices -- F forward(), I
// backward_input(), W backward_weight(), B backward() = I then W -- on cuBLAS
// GEMMs (16-bit inputs, fp32 accumulation: CUBLAS_COMPUTE_32F, tensor cores)
// and small CUDA kernels for the rest: layer norm, the softmax that is causal
// within the slice and sees the whole KV context, tanh GeLU (the CPU block's
// formula), bias and residual adds, and their backwards.
//
// Precision: parameters, activations, the KV cache and what `GpuSaved` keeps
// are bf16 or fp16 (the storage type). Every kernel computes in fp32; the GEMMs
// that feed a kernel write fp32; per-token layer-norm statistics, the
// residual stream inside a call, the KV-gradient accumulator (`GpuKvGrad`)
// and the weight gradients (fp32 master gradients) are fp32.
//
// Plain C++: no CUDA type appears here (a stream is a void*), so host code
// can include it; gpu_block_io.h moves the CPU block's Eigen data in and out.
// Work is issued on the context's stream and is asynchronous; the calls that
// return host data synchronise. CUDA and cuBLAS failures come back as an
// Error that names the call; shape preconditions are PPSIM_CHECKs, as on the
// CPU. Device memory is allocated and freed in stream order
// (cudaMallocAsync), so every buffer must be destroyed before its context.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "schedules/status.h"
#include "sim/core/workload.h"

namespace ppsim::gpu {

// Buffers hold ppsim::DType (sim/workload.h): the block stores parameters
// and activations in a 16-bit "storage type", kBf16 or kFp16 (the model's
// dtype), and gradients that accumulate in kFp32.
bool is_storage_type(DType type);  // kBf16 or kFp16

// kernels::kLayerNormEps; this header does not include Eigen (a unit test
// checks that the two agree).
inline constexpr float kGpuLayerNormEps = 1e-5f;

// One slice's work, as the CPU block's Saved records it: `tokens` (l) tokens
// of `batch` (b) sequences after `context` (c) tokens already in the cache.
struct SliceShape {
  int batch = 0, tokens = 0, context = 0, hidden = 0, ffn = 0, heads = 0;
  int64_t rows() const { return static_cast<int64_t>(batch) * tokens; }  // n = b l
};

// What GpuSaved holds for backward, in bytes, from the shape. The CPU block's
// Saved figures (gpt_block.h) with 16-bit activations, except that the
// per-token layer-norm statistics (rstd1, rstd2: 2 n) and the reduced
// layer-norm gain/bias gradients (4 h) stay fp32. So, against Saved<float>:
//   after_forward  = cpu / 2 + 4 n bytes
//   weight_grad    = cpu / 2
//   grad_stash     = cpu / 2 + 8 h bytes.
struct SavedFigures {
  int64_t after_forward = 0;  // activations + the slice's K/V rows in the cache
  int64_t weight_grad = 0;    // what W reads: xhat1, o, xhat2, u
  int64_t grad_stash = 0;     // what I leaves for W: d_qkv, d_h, dy, du, LN grads
  int64_t after_input() const { return weight_grad + grad_stash; }
};
// REQUIRES: is_storage_type(storage).
SavedFigures saved_figures(const SliceShape& shape, DType storage);

// The block's parameters in one buffer: the tensors of kernels::BlockParams,
// in the order of its tensors(), each starting at a multiple of kParamAlign
// elements (so every GEMM operand is at least 128-byte aligned). Matrices
// are row-major (in x out), as on the CPU.
enum ParamTensor : int {
  kLn1Gain,
  kLn1Bias,
  kWQkv,
  kBQkv,
  kWO,
  kBO,
  kLn2Gain,
  kLn2Bias,
  kW1,
  kB1,
  kW2,
  kB2,
  kNumParamTensors
};
const char* param_tensor_name(int tensor);  // BlockParams::tensors()'s names
inline constexpr int64_t kParamAlign = 64;

struct ParamLayout {
  int hidden = 0, ffn = 0, heads = 0;
  std::array<int64_t, kNumParamTensors> offset{}, size{};  // elements
  int64_t total = 0;                                       // elements, padding included
};
// REQUIRES: hidden, ffn, heads > 0, hidden % heads == 0.
ParamLayout param_layout(int hidden, int ffn, int heads);

// One device allocation, zeroed, allocated and freed in the order of the
// work on `stream` (cudaMallocAsync / cudaFreeAsync). Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(int64_t bytes, void* stream);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  int64_t bytes() const { return bytes_; }
  void reset();  // frees (in stream order); bytes() becomes 0
  // Frees in the order of `stream` from now on: for a buffer handed to the
  // thread of another stream (the runtime's links). REQUIRES: the work that
  // used it on its old stream is complete.
  void set_stream(void* stream) { stream_ = stream; }

 private:
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
  void* stream_ = nullptr;
};

// A row-major matrix on the device.
struct DeviceMatrix {
  int64_t rows = 0, cols = 0;
  DType type = DType::kFp32;
  DeviceBuffer buffer;
  void* data() const { return buffer.get(); }
};

// Whether cuDevSmResourceSplitByCount can cut `device_sms` SMs into
// `groups` equal groups: the SMs of each (the most the device allows:
// device_sms / groups rounded down to a multiple of `alignment`, the
// device's smCoscheduledAlignment), or 0 when that is below
// `min_partition` (the device's minSmPartitionSize). Host logic, for tests.
int sms_per_group(int device_sms, int groups, int min_partition, int alignment);

// A device's SMs cut into equal, disjoint groups, each to be run by one
// green context (CUDA 12.4+ driver API, reached through
// cudaGetDriverEntryPoint so that nothing links libcuda): on one GPU, each
// pipeline rank of the runtime gets a group, as if it had a smaller GPU of
// its own, and the profiler times kernels on a group of the same size.
class SmPartition {
 public:
  // Makes `device` current (its primary context). Errors, each saying why:
  // no such device, the driver has no green contexts (older than 12.4, or
  // the entry points are missing; their streams need 12.5), the device has
  // too few SMs for `groups` groups, the split made fewer groups than asked.
  // REQUIRES: groups >= 1.
  static Result<std::unique_ptr<SmPartition>> create(int device, int groups);
  ~SmPartition();
  SmPartition(const SmPartition&) = delete;
  SmPartition& operator=(const SmPartition&) = delete;

  int device() const;
  int groups() const;
  int sms_per_group() const;  // what the driver gave each group
  int device_sms() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  explicit SmPartition(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A device, a stream and a cuBLAS handle bound to it, and the scratch the
// block's calls share (grown on demand). One per thread that issues work.
// REQUIRES of every call taking a context: its device is the current one
// and, for a context on a green context, that green context is current on
// the calling thread (create() makes it so; another thread calls
// make_current() first).
class GpuContext {
 public:
  // Makes `device` current. With a partition, the context runs on its group
  // `group` only: a green context of those SMs, made current on the calling
  // thread, with a stream of its own. Errors: no such device, no
  // stream-ordered allocation, cuBLAS unavailable, the green context's.
  // REQUIRES: partition null or of `device`, 0 <= group < groups().
  static Result<std::unique_ptr<GpuContext>> create(int device = 0,
                                                    const SmPartition* partition = nullptr,
                                                    int group = 0);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const;
  void* stream() const;  // a cudaStream_t
  // The SMs its work may use: a group's, or all of the device's.
  int sm_count() const;
  // For people: "device 0 (NVIDIA H200), all 132 SMs" or "device 0 (NVIDIA
  // H200), green context of 32 of 132 SMs".
  std::string placement() const;
  // Makes the context's device and green context current on this thread.
  Status make_current();
  // Waits for the stream; reports an error an earlier kernel left.
  Status synchronize();

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  explicit GpuContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A zeroed rows x cols matrix.
Result<DeviceMatrix> allocate_matrix(GpuContext& ctx, int64_t rows, int64_t cols, DType type);
// A copy of m (on any device) on ctx's device, allocated and copied in the
// order of ctx's stream (a peer copy when m is on another device);
// asynchronous: synchronize before another stream uses it.
Result<DeviceMatrix> copy_matrix(GpuContext& ctx, const DeviceMatrix& m);
// Copies `count` floats from the host to `device`, converting to `type`
// (round to nearest even). The host buffer may be reused when it returns.
Status upload(GpuContext& ctx, const float* host, int64_t count, DType type, void* device);
// Copies `count` elements of `type` from `device` to the host as floats;
// waits for them (and so for the work before them on the stream).
Status download(GpuContext& ctx, const void* device, DType type, int64_t count, float* host);

// Parameters (in the storage type) or gradients (fp32) of one block.
struct GpuParams {
  ParamLayout layout;
  DType type = DType::kFp32;
  DeviceBuffer data;
  void* tensor(int t) const {
    return static_cast<char*>(data.get()) + layout.offset[t] * dtype_bytes(type);
  }
};
using GpuBlockParams = GpuParams;  // type: the storage type
using GpuBlockGrads = GpuParams;   // type: kFp32; W adds into them
Result<GpuParams> allocate_params(GpuContext& ctx, const ParamLayout& layout, DType type);
Result<GpuBlockGrads> zero_grads(GpuContext& ctx, int hidden, int ffn, int heads);

// The K/V rows of the tokens each sequence of a microbatch has seen, in the
// storage type: per sequence, `capacity` x `hidden` rows of K and of V, the
// CPU KvCache's contract (F appends, I gives back).
class GpuKvCache {
 public:
  // REQUIRES: is_storage_type(storage).
  static Result<GpuKvCache> create(GpuContext& ctx, int batch, int hidden, int capacity,
                                   DType storage);
  int batch() const { return batch_; }
  int hidden() const { return hidden_; }
  int capacity() const { return capacity_; }
  int length() const { return length_; }
  DType storage() const { return storage_; }
  void* k(int seq) const { return row_ptr(k_, seq); }  // capacity x hidden
  void* v(int seq) const { return row_ptr(v_, seq); }
  // REQUIRES: 0 <= length <= capacity(). Used by the block only.
  void set_length(int length);

 private:
  void* row_ptr(const DeviceBuffer& b, int seq) const;
  int batch_ = 0, hidden_ = 0, capacity_ = 0, length_ = 0;
  DType storage_ = DType::kBf16;
  DeviceBuffer k_, v_;
};

// The gradient w.r.t. a GpuKvCache's rows, fp32 (slices add into it), zero
// at creation; the CPU KvGrad's contract.
class GpuKvGrad {
 public:
  static Result<GpuKvGrad> create(GpuContext& ctx, int batch, int hidden, int capacity);
  int batch() const { return batch_; }
  int hidden() const { return hidden_; }
  int capacity() const { return capacity_; }
  float* dk(int seq) const { return row_ptr(dk_, seq); }  // capacity x hidden
  float* dv(int seq) const { return row_ptr(dv_, seq); }

 private:
  float* row_ptr(const DeviceBuffer& b, int seq) const;
  int batch_ = 0, hidden_ = 0, capacity_ = 0;
  DeviceBuffer dk_, dv_;
};

// What F keeps for I and W, and what I leaves for W, for one slice: the
// CPU Saved's fields, in the storage type but for the fp32 rstd and LN
// gradients. bytes() counts the buffers held (plus, after F, the slice's
// K/V rows in the cache) and equals saved_figures() in each phase.
struct GpuSaved {
  enum class Phase { kEmpty, kForward, kInputDone };
  Phase phase = Phase::kEmpty;
  SliceShape shape;
  DType storage = DType::kBf16;

  DeviceBuffer xhat1, q, o, xhat2, u;  // n h (u: n f)
  DeviceBuffer rstd1, rstd2;           // n, fp32
  DeviceBuffer probs;                  // b a l t: per sequence, heads stacked, (a l) x t
  DeviceBuffer d_qkv, d_h, dy, du;     // n 3h, n h, n h, n f
  DeviceBuffer d_ln;                   // 4 h fp32: ln1 gain, ln1 bias, ln2 gain, ln2 bias

  int64_t bytes() const;
};

// F for one slice: x is (b l) x h in the storage type, b = kv->batch(),
// c = kv->length(); appends the slice's K/V to kv, fills *saved and sets *y
// ((b l) x h, storage type).
// REQUIRES: x.rows() % b == 0, c + l <= kv->capacity(), types and widths
// consistent with p.
Status forward(GpuContext& ctx, const GpuBlockParams& p, const DeviceMatrix& x, GpuKvCache* kv,
               GpuSaved* saved, DeviceMatrix* y);

// I for the slice `saved` belongs to: sets *dx. Reads from kv_grad what later
// slices left for this slice's K/V rows (and zeroes them), adds the gradient
// w.r.t. the context rows [0, c), gives the slice's rows of kv back.
// REQUIRES: saved->phase == kForward, kv->length() == c + l, dy (b l) x h in
// the storage type.
Status backward_input(GpuContext& ctx, const GpuBlockParams& p, const DeviceMatrix& dy,
                      GpuKvCache* kv, GpuKvGrad* kv_grad, GpuSaved* saved, DeviceMatrix* dx);

// W: adds the weight gradients into *grads (fp32) and empties *saved.
// REQUIRES: saved->phase == kInputDone.
Status backward_weight(GpuContext& ctx, const GpuBlockParams& p, GpuSaved* saved,
                       GpuBlockGrads* grads);

// B: I then W.
Status backward(GpuContext& ctx, const GpuBlockParams& p, const DeviceMatrix& dy, GpuKvCache* kv,
                GpuKvGrad* kv_grad, GpuSaved* saved, GpuBlockGrads* grads, DeviceMatrix* dx);

}  // namespace ppsim::gpu
