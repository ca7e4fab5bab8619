#include "profiler/gpu_profiler.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#ifdef PPSIM_HAVE_NCCL
#include <nccl.h>
#endif

#include <algorithm>
#include <array>
#include <initializer_list>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "profiler/cupti_tracer.h"
#include "profiler/gpt_block.h"
#include "profiler/gpt_head.h"
#include "profiler/gpu_block_io.h"
#include "profiler/gpu_head.h"

namespace ppsim {
namespace {

namespace k = kernels;

Status cuda_status(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return {};
  return Error{fmt::format("{}: {}", what, cudaGetErrorString(e))};
}

#define PPSIM_GPU_TRY(expr)                             \
  do {                                                  \
    if (::ppsim::Status st_ = (expr); !st_) return st_; \
  } while (0)
#define PPSIM_GPU_TRY_RESULT(expr)                                       \
  do {                                                                   \
    if (::ppsim::Status st_ = (expr); !st_) return Error{st_.message()}; \
  } while (0)

// One sample being timed: its kind, part and shape, the tracer's external
// id of each timed repetition, and the bytes it records (forward only).
struct Timed {
  KernelKind kind = KernelKind::kForward;
  KernelPart part = KernelPart::kBlock;
  int tokens = 0, context = 0;
  std::vector<uint64_t> ids;
  int64_t activation_bytes = 0, weight_grad_bytes = 0;
};

// The samples of a part at one shape, in the CPU profiler's order.
std::vector<Timed> part_samples(KernelPart part, std::initializer_list<KernelKind> kinds,
                                int tokens, int context) {
  std::vector<Timed> out;
  for (const KernelKind kind : kinds) {
    Timed& t = out.emplace_back();
    t.kind = kind;
    t.part = part;
    t.tokens = tokens;
    t.context = context;
  }
  return out;
}

// What every run shares: the device, the tracer, the block's parameters
// and gradients (one shape of block for the whole profile) and, with a
// vocabulary, the head's (both ends, at the longest sequence of any shape).
struct KernelBench {
  gpu::GpuContext* ctx = nullptr;
  gpu::GpuTracer* tracer = nullptr;
  gpu::GpuBlockParams params;
  gpu::GpuBlockGrads grads;
  gpu::GpuHeadParams head;
  gpu::GpuHeadParams head_grads;
  uint64_t next_id = 1;

  // The id of repetition `rep` of `t`, taken and recorded; 0 for a warm-up.
  uint64_t id(Timed& t, int rep) {
    if (rep < 0) return 0;
    t.ids.push_back(next_id);
    return next_id++;
  }
  // Issues `action` inside a tracer bracket; id 0 (a warm-up run): none.
  template <typename F>
  Status traced(uint64_t id, F&& action) {
    if (id != 0) PPSIM_GPU_TRY(tracer->begin(id, ctx->stream()));
    PPSIM_GPU_TRY(action());
    if (id != 0) PPSIM_GPU_TRY(tracer->end(id, ctx->stream()));
    return {};
  }
};

// The block's samples, in the CPU profiler's order.
enum Action { kForward, kBackward, kInput, kWeight, kRecompute };

// F, I, W, a recompute and B for one slice shape, as the CPU profiler runs
// them; the context is filled by an untimed forward over `context` tokens.
Status run_shape(KernelBench& bench, const ProfileRequest& r, const gpu::SliceShape& shape,
                 DType storage, std::vector<Timed>* timed) {
  gpu::GpuContext& ctx = *bench.ctx;
  const int64_t n = shape.rows();
  Result<gpu::DeviceMatrix> x =
      gpu::to_device(ctx, k::Mat<float>::Random(n, shape.hidden), storage);
  if (!x) return x.error();
  Result<gpu::DeviceMatrix> dy =
      gpu::to_device(ctx, k::Mat<float>::Random(n, shape.hidden), storage);
  if (!dy) return dy.error();
  Result<gpu::GpuKvCache> kv = gpu::GpuKvCache::create(ctx, shape.batch, shape.hidden,
                                                       shape.context + shape.tokens, storage);
  if (!kv) return kv.error();
  Result<gpu::GpuKvGrad> kv_grad =
      gpu::GpuKvGrad::create(ctx, shape.batch, shape.hidden, shape.context + shape.tokens);
  if (!kv_grad) return kv_grad.error();
  gpu::DeviceMatrix y, dx;
  if (shape.context > 0) {
    Result<gpu::DeviceMatrix> prefix = gpu::to_device(
        ctx, k::Mat<float>::Random(static_cast<int64_t>(shape.batch) * shape.context, shape.hidden),
        storage);
    if (!prefix) return prefix.error();
    gpu::GpuSaved unused;
    PPSIM_GPU_TRY(gpu::forward(ctx, bench.params, *prefix, &*kv, &unused, &y));
  }
  std::vector<Timed> t =
      part_samples(KernelPart::kBlock,
                   {KernelKind::kForward, KernelKind::kBackward, KernelKind::kBackwardInput,
                    KernelKind::kBackwardWeight, KernelKind::kRecompute},
                   shape.tokens, shape.context);
  const gpu::GpuBlockParams& p = bench.params;
  for (int rep = -r.warmup; rep < r.repetitions; ++rep) {
    gpu::GpuSaved saved, again;
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kForward], rep),
                               [&] { return gpu::forward(ctx, p, *x, &*kv, &saved, &y); }));
    t[kForward].activation_bytes = saved.bytes();
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kInput], rep), [&] {
      return gpu::backward_input(ctx, p, *dy, &*kv, &*kv_grad, &saved, &dx);
    }));
    t[kForward].weight_grad_bytes = saved.bytes();
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kWeight], rep),
                               [&] { return gpu::backward_weight(ctx, p, &saved, &bench.grads); }));
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kRecompute], rep),
                               [&] { return gpu::forward(ctx, p, *x, &*kv, &again, &y); }));
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kBackward], rep), [&] {
      return gpu::backward(ctx, p, *dy, &*kv, &*kv_grad, &again, &bench.grads, &dx);
    }));
  }
  for (Timed& s : t) timed->push_back(std::move(s));
  return ctx.synchronize();
}

// The ends' samples, in the CPU profiler's order.
enum End {
  kEmbedForward,
  kEmbedBackward,
  kEmbedWeight,
  kHeadForward,
  kHeadBackward,
  kHeadInput,
  kHeadWeight
};

// The two ends of the model for one slice shape, as the CPU profiler's
// time_ends runs them (profiler/gpu_head.h): the embedding's F and W (its
// `backward` is its W: it has no I), and the head's F, I, W and B = I then
// W after an untimed F. The embedding holds, after I, the input gradient
// the first block hands it (n h, storage type); the head GpuLossSaved.
Status run_ends(KernelBench& bench, const ProfileRequest& r, int tokens, int context, DType storage,
                std::vector<Timed>* timed) {
  gpu::GpuContext& ctx = *bench.ctx;
  const int b = r.micro_batch;
  const int64_t n = static_cast<int64_t>(b) * tokens;
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((7 * i + 3) % r.vocab);
  Result<gpu::DeviceTokens> tokens_in = gpu::upload_tokens(ctx, ids);
  if (!tokens_in) return tokens_in.error();
  Result<gpu::DeviceMatrix> y = gpu::to_device(ctx, k::Mat<float>::Random(n, r.hidden), storage);
  if (!y) return y.error();
  Result<gpu::DeviceMatrix> dx = gpu::to_device(ctx, k::Mat<float>::Random(n, r.hidden), storage);
  if (!dx) return dx.error();
  const float scale = 1.0f / static_cast<float>(n);
  std::vector<Timed> t = part_samples(
      KernelPart::kEmbedding,
      {KernelKind::kForward, KernelKind::kBackward, KernelKind::kBackwardWeight}, tokens, context);
  for (Timed& s : part_samples(KernelPart::kHead,
                               {KernelKind::kForward, KernelKind::kBackward,
                                KernelKind::kBackwardInput, KernelKind::kBackwardWeight},
                               tokens, context)) {
    t.push_back(std::move(s));
  }
  t[kEmbedForward].weight_grad_bytes = dx->rows * dx->cols * dtype_bytes(storage);
  const gpu::GpuHeadParams& p = bench.head;
  for (int rep = -r.warmup; rep < r.repetitions; ++rep) {
    gpu::DeviceMatrix x, dy;
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kEmbedForward], rep), [&] {
      return gpu::embed_forward(ctx, p, *tokens_in, b, context, &x);
    }));
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kEmbedWeight], rep), [&] {
      return gpu::embed_backward_weight(ctx, *tokens_in, b, context, *dx, &bench.head_grads);
    }));
    // Each loss F keeps its targets until W: a copy per F, uploaded untimed.
    gpu::GpuLossSaved saved;
    double loss = 0;
    Result<gpu::DeviceTokens> targets = gpu::upload_tokens(ctx, ids);
    if (!targets) return targets.error();
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kHeadForward], rep), [&] {
      return gpu::loss_forward(ctx, p, *y, std::move(*targets), scale, &saved, &loss);
    }));
    t[kHeadForward].activation_bytes = saved.bytes();
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kHeadInput], rep),
                               [&] { return gpu::loss_backward_input(ctx, p, &saved, &dy); }));
    t[kHeadForward].weight_grad_bytes = saved.bytes();
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kHeadWeight], rep), [&] {
      return gpu::loss_backward_weight(ctx, p, &saved, &bench.head_grads);
    }));
    targets = gpu::upload_tokens(ctx, ids);
    if (!targets) return targets.error();
    PPSIM_GPU_TRY(gpu::loss_forward(ctx, p, *y, std::move(*targets), scale, &saved, &loss));
    PPSIM_GPU_TRY(bench.traced(bench.id(t[kHeadBackward], rep), [&]() -> Status {
      PPSIM_GPU_TRY(gpu::loss_backward_input(ctx, p, &saved, &dy));
      return gpu::loss_backward_weight(ctx, p, &saved, &bench.head_grads);
    }));
  }
  t[kEmbedBackward].ids = t[kEmbedWeight].ids;  // the same runs: W is all of its backward
  for (Timed& s : t) timed->push_back(std::move(s));
  return ctx.synchronize();
}

// The runtime's optimizer step on one block's weights (the CPU profiler's
// time_optimizer_step): mixed-precision SGD over the block's buffers, fp32
// master weights and gradients. Timed last: it overwrites the bench's
// weights and zeroes its gradients. The same at every shape, so recorded at
// the first.
Status run_optimizer_step(KernelBench& bench, const ProfileRequest& r, DType storage,
                          std::vector<Timed>* timed) {
  gpu::GpuContext& ctx = *bench.ctx;
  const gpu::ParamLayout& layout = bench.params.layout;
  Result<gpu::GpuParams> master = gpu::allocate_params(ctx, layout, DType::kFp32);
  if (!master) return master.error();
  std::vector<Timed> t = part_samples(KernelPart::kBlock, {KernelKind::kOptimizerStep},
                                      r.shapes[0].first, r.shapes[0].second);
  for (int rep = -r.warmup; rep < r.repetitions; ++rep) {
    PPSIM_GPU_TRY(bench.traced(bench.id(t[0], rep), [&] {
      return gpu::sgd_step(ctx, 1e-3f, layout.total, static_cast<float*>(master->data.get()),
                           static_cast<float*>(bench.grads.data.get()), bench.params.data.get(),
                           storage);
    }));
  }
  timed->push_back(std::move(t[0]));
  return ctx.synchronize();
}

// The samples from the trace's spans, in the order timed.
Result<std::vector<KernelSample>> samples_of(const ProfileRequest& r, int tensor,
                                             const std::vector<Timed>& timed,
                                             const std::map<uint64_t, double>& seconds) {
  std::vector<KernelSample> out;
  for (const Timed& t : timed) {
    std::vector<double> times;
    for (uint64_t id : t.ids) {
      const auto it = seconds.find(id);
      if (it == seconds.end()) {
        return Error{fmt::format(
            "profile: the tracer recorded no GPU work for {} {} (tokens {}, context {})",
            to_string(t.part), to_string(t.kind), t.tokens, t.context)};
      }
      times.push_back(it->second);
    }
    KernelSample s = t.part == KernelPart::kBlock
                         ? summarize_samples(t.kind, r, t.tokens, t.context, times)
                         : part_sample(t.kind, t.part, r, t.tokens, t.context, times);
    s.tensor = tensor;
    s.activation_bytes = t.activation_bytes;
    s.weight_grad_bytes = t.weight_grad_bytes;
    out.push_back(std::move(s));
  }
  return out;
}

// Times every shape on one tracer; `*clock` gets the clock used.
Result<std::vector<KernelSample>> time_kernels(
    const ProfileRequest& r, const GpuProfileOptions& o, gpu::GpuContext& ctx, std::string* clock,
    const std::function<void(const std::string&)>& progress) {
  const Result<gpu::SliceShape> first =
      gpu_timed_shape(r, o.tensor, r.shapes[0].first, r.shapes[0].second);
  if (!first) return first.error();
  KernelBench bench;
  bench.ctx = &ctx;
  {
    Result<gpu::GpuBlockParams> params = gpu::upload_params(
        ctx, k::init_params<float>(first->hidden, first->ffn, first->heads, 1234), o.storage);
    if (!params) return params.error();
    bench.params = std::move(*params);
  }
  Result<gpu::GpuBlockGrads> grads = gpu::zero_grads(ctx, first->hidden, first->ffn, first->heads);
  if (!grads) return grads.error();
  bench.grads = std::move(*grads);
  if (r.vocab > 0) {
    int max_seq = 0;
    for (const auto& [tokens, context] : r.shapes) max_seq = std::max(max_seq, context + tokens);
    const gpu::HeadLayout layout = gpu::head_layout(r.vocab, r.hidden, max_seq, true, true);
    Result<gpu::GpuHeadParams> head = gpu::upload_head(
        ctx, k::init_head_params<float>(r.vocab, r.hidden, max_seq, 1234), layout, o.storage);
    if (!head) return head.error();
    bench.head = std::move(*head);
    Result<gpu::GpuHeadParams> head_grads = gpu::allocate_head(ctx, layout, DType::kFp32);
    if (!head_grads) return head_grads.error();
    bench.head_grads = std::move(*head_grads);
  }
  Result<std::unique_ptr<gpu::GpuTracer>> tracer = gpu::GpuTracer::start();
  if (!tracer) return tracer.error();
  bench.tracer = tracer->get();
  std::vector<Timed> timed;
  int done = 0;
  for (const auto& [tokens, context] : r.shapes) {
    Result<gpu::SliceShape> shape = gpu_timed_shape(r, o.tensor, tokens, context);
    if (!shape) return shape.error();
    PPSIM_GPU_TRY_RESULT(run_shape(bench, r, *shape, o.storage, &timed));
    if (r.vocab > 0) PPSIM_GPU_TRY_RESULT(run_ends(bench, r, tokens, context, o.storage, &timed));
    if (progress) {
      progress(fmt::format("kernels: {}/{} shapes (tokens {}, context {}{})", ++done,
                           r.shapes.size(), tokens, context,
                           r.vocab > 0 ? "; block, embedding and head" : ""));
    }
  }
  PPSIM_GPU_TRY_RESULT(run_optimizer_step(bench, r, o.storage, &timed));
  if (progress) progress("kernels: optimizer step (one block's SGD update)");
  Result<gpu::Trace> trace = (*tracer)->finish();
  if (!trace) return trace.error();
  if (trace->log.dropped > 0) {
    return Error{fmt::format("profile: CUPTI dropped {} records; the spans would be short",
                             trace->log.dropped)};
  }
  *clock = trace->mode == gpu::TraceMode::kCupti
               ? std::string("CUPTI: span of each action's GPU work")
               : fmt::format("CUDA events around each action ({})", trace->fallback_reason);
  std::map<uint64_t, double> seconds;
  for (const gpu::ActionSpan& span : trace->attribution.spans) {
    seconds[span.external_id] = static_cast<double>(span.end_ns - span.start_ns) * 1e-9;
  }
  // CUPTI can collect records and yet tie none to the brackets (seen on an
  // H200 with driver 580: no external correlation records came back).
  const uint64_t actions = bench.next_id - 1;
  if (trace->mode == gpu::TraceMode::kCupti && seconds.size() < actions) {
    return Error{fmt::format(
        "profile: the CUPTI trace tied GPU work to {} of {} timed actions ({}; {} external "
        "correlations); PPSIM_TRACER=events times each action with CUDA events instead",
        seconds.size(), actions, gpu::summary(trace->log), trace->log.correlations.size())};
  }
  return samples_of(r, o.tensor, timed, seconds);
}

// Owners of the CUDA objects a link sweep uses.
struct DeviceMemory {
  void* p = nullptr;
  ~DeviceMemory() { cudaFree(p); }
};
struct HostMemory {
  void* p = nullptr;
  ~HostMemory() { cudaFreeHost(p); }
};
struct Stream {
  cudaStream_t s = nullptr;
  ~Stream() {
    if (s != nullptr) cudaStreamDestroy(s);
  }
};
struct Event {
  cudaEvent_t e = nullptr;
  ~Event() {
    if (e != nullptr) cudaEventDestroy(e);
  }
};

// `copy(bytes)`, issued on `stream` of `device`, at each size: untimed runs
// first (at least one: the first touches fresh pages and connections), then
// the median of `repetitions` event-timed ones.
template <typename Copy>
Result<std::vector<LinkSample>> sweep(const ProfileRequest& r, const std::vector<int64_t>& sizes,
                                      int device, cudaStream_t stream, Copy&& copy) {
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaSetDevice(device), "cudaSetDevice"));
  Event start, stop;
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaEventCreate(&start.e), "cudaEventCreate"));
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaEventCreate(&stop.e), "cudaEventCreate"));
  std::vector<LinkSample> samples;
  for (int64_t bytes : sizes) {
    std::vector<double> times;
    for (int rep = -std::max(r.warmup, 1); rep < r.repetitions; ++rep) {
      PPSIM_GPU_TRY_RESULT(cuda_status(cudaEventRecord(start.e, stream), "cudaEventRecord"));
      PPSIM_GPU_TRY_RESULT(copy(bytes));
      PPSIM_GPU_TRY_RESULT(cuda_status(cudaEventRecord(stop.e, stream), "cudaEventRecord"));
      PPSIM_GPU_TRY_RESULT(cuda_status(cudaEventSynchronize(stop.e), "cudaEventSynchronize"));
      float ms = 0;
      PPSIM_GPU_TRY_RESULT(
          cuda_status(cudaEventElapsedTime(&ms, start.e, stop.e), "cudaEventElapsedTime"));
      if (rep >= 0) times.push_back(ms * 1e-3);
    }
    std::sort(times.begin(), times.end());
    samples.push_back({bytes, times[times.size() / 2]});
  }
  return samples;
}

// The copies within device `o.device` and between it and pinned host memory.
Result<std::vector<LinkFit>> time_local_links(const ProfileRequest& r, const GpuProfileOptions& o) {
  const int64_t most = *std::max_element(o.link_sizes.begin(), o.link_sizes.end());
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaSetDevice(o.device), "cudaSetDevice"));
  DeviceMemory a, b;
  HostMemory host;
  Stream stream;
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaMalloc(&a.p, most), "cudaMalloc"));
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaMalloc(&b.p, most), "cudaMalloc"));
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaMallocHost(&host.p, most), "cudaMallocHost"));
  PPSIM_GPU_TRY_RESULT(
      cuda_status(cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking), "cudaStreamCreate"));
  std::vector<LinkFit> fits;
  for (const auto& [name, dst, src, kind] :
       {std::tuple{kDeviceToDeviceLink, b.p, a.p, cudaMemcpyDeviceToDevice},
        std::tuple{kHostToDeviceLink, a.p, host.p, cudaMemcpyHostToDevice},
        std::tuple{kDeviceToHostLink, host.p, a.p, cudaMemcpyDeviceToHost}}) {
    // Copies of the bindings: lambdas may capture structured bindings from
    // C++20 on, which clang implements from version 16 (Debian 12 has 14).
    Result<LinkFit> fit = measure_link(std::string(name), [&, to = dst, from = src, how = kind] {
      return sweep(r, o.link_sizes, o.device, stream.s, [&](int64_t bytes) {
        return cuda_status(cudaMemcpyAsync(to, from, bytes, how, stream.s), "cudaMemcpyAsync");
      });
    });
    if (!fit) return Error{fmt::format("profile: link {}: {}", name, fit.error().message)};
    fits.push_back(std::move(*fit));
  }
  return fits;
}

// Device 0 to device 1 with cudaMemcpyPeerAsync.
Result<LinkFit> time_peer(const ProfileRequest& r, const GpuProfileOptions& o,
                          const std::function<void(const std::string&)>& progress) {
  const int64_t most = *std::max_element(o.link_sizes.begin(), o.link_sizes.end());
  int can = 0;
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaDeviceCanAccessPeer(&can, 0, 1), "cudaDeviceCanAccessPeer"));
  DeviceMemory src, dst;
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaSetDevice(1), "cudaSetDevice"));
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaMalloc(&dst.p, most), "cudaMalloc"));
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaSetDevice(0), "cudaSetDevice"));
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaMalloc(&src.p, most), "cudaMalloc"));
  if (can != 0) {
    const cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
    if (e != cudaErrorPeerAccessAlreadyEnabled) {
      PPSIM_GPU_TRY_RESULT(cuda_status(e, "cudaDeviceEnablePeerAccess"));
    }
    cudaGetLastError();  // clears "already enabled"
  } else if (progress) {
    progress("link peer: devices 0 and 1 have no peer access; the driver stages the copies");
  }
  Stream stream;
  PPSIM_GPU_TRY_RESULT(
      cuda_status(cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking), "cudaStreamCreate"));
  return measure_link(std::string(kPeerLink), [&] {
    return sweep(r, o.link_sizes, 0, stream.s, [&](int64_t bytes) {
      return cuda_status(cudaMemcpyPeerAsync(dst.p, 1, src.p, 0, bytes, stream.s),
                         "cudaMemcpyPeerAsync");
    });
  });
}

#ifdef PPSIM_HAVE_NCCL
Status nccl_status(ncclResult_t e, std::string_view what) {
  if (e == ncclSuccess) return {};
  return Error{fmt::format("{}: {}", what, ncclGetErrorString(e))};
}

struct Comms {
  std::array<ncclComm_t, 2> c{};
  ~Comms() {
    for (ncclComm_t comm : c) {
      if (comm != nullptr) ncclCommDestroy(comm);
    }
  }
};

// ncclSend on device 0 and ncclRecv on device 1, one process: the time from
// device 0's start event until the receive is done (device 0's stream waits
// for device 1's).
Result<LinkFit> time_nccl(const ProfileRequest& r, const GpuProfileOptions& o) {
  const int64_t most = *std::max_element(o.link_sizes.begin(), o.link_sizes.end());
  Comms comms;
  const std::array<int, 2> devices = {0, 1};
  PPSIM_GPU_TRY_RESULT(
      nccl_status(ncclCommInitAll(comms.c.data(), 2, devices.data()), "ncclCommInitAll"));
  DeviceMemory src, dst;
  Stream s0, s1;
  Event received;
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaSetDevice(1), "cudaSetDevice"));
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaMalloc(&dst.p, most), "cudaMalloc"));
  PPSIM_GPU_TRY_RESULT(
      cuda_status(cudaStreamCreateWithFlags(&s1.s, cudaStreamNonBlocking), "cudaStreamCreate"));
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaEventCreateWithFlags(&received.e, cudaEventDisableTiming),
                                   "cudaEventCreate"));
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaSetDevice(0), "cudaSetDevice"));
  PPSIM_GPU_TRY_RESULT(cuda_status(cudaMalloc(&src.p, most), "cudaMalloc"));
  PPSIM_GPU_TRY_RESULT(
      cuda_status(cudaStreamCreateWithFlags(&s0.s, cudaStreamNonBlocking), "cudaStreamCreate"));
  return measure_link(std::string(kNcclLink), [&] {
    return sweep(r, o.link_sizes, 0, s0.s, [&](int64_t bytes) -> Status {
      PPSIM_GPU_TRY(nccl_status(ncclGroupStart(), "ncclGroupStart"));
      PPSIM_GPU_TRY(nccl_status(ncclSend(src.p, bytes, ncclInt8, 1, comms.c[0], s0.s), "ncclSend"));
      PPSIM_GPU_TRY(nccl_status(ncclRecv(dst.p, bytes, ncclInt8, 0, comms.c[1], s1.s), "ncclRecv"));
      PPSIM_GPU_TRY(nccl_status(ncclGroupEnd(), "ncclGroupEnd"));
      PPSIM_GPU_TRY(cuda_status(cudaEventRecord(received.e, s1.s), "cudaEventRecord"));
      return cuda_status(cudaStreamWaitEvent(s0.s, received.e, 0), "cudaStreamWaitEvent");
    });
  });
}
#endif

}  // namespace

Result<GpuProfileOptions> gpu_options_for(const Config& config) {
  PPSIM_CHECK(config.model.has_value());
  if (!gpu::is_storage_type(config.model->dtype)) {
    return Error{fmt::format("profile: the GPU block stores bf16 or fp16, not model.dtype {}",
                             to_string(config.model->dtype))};
  }
  GpuProfileOptions o;
  o.tensor = config.parallel.tensor;
  o.storage = config.model->dtype;
  return o;
}

Result<gpu::SliceShape> gpu_timed_shape(const ProfileRequest& r, int tensor, int tokens,
                                        int context) {
  if (tensor < 1 || r.heads % tensor != 0 || r.ffn % tensor != 0) {
    return Error{fmt::format(
        "profile: the tensor-parallel degree {} must divide heads {} and ffn {} (the GPU block "
        "runs a / t heads and f / t feed-forward columns)",
        tensor, r.heads, r.ffn)};
  }
  return gpu::SliceShape{r.micro_batch, tokens,         context,
                         r.hidden,      r.ffn / tensor, r.heads / tensor};
}

std::vector<std::string_view> gpu_link_names(int devices, bool nccl) {
  std::vector<std::string_view> names = {kDeviceToDeviceLink, kHostToDeviceLink, kDeviceToHostLink};
  if (devices >= 2) names.push_back(kPeerLink);
  if (devices >= 2 && nccl) names.push_back(kNcclLink);
  return names;
}

bool gpu_profiler_has_nccl() {
#ifdef PPSIM_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

Result<CostProfile> profile_gpu(const ProfileRequest& r, const GpuProfileOptions& o,
                                const std::function<void(const std::string&)>& progress) {
  PPSIM_GPU_TRY_RESULT(check_request(r));
  if (!gpu::is_storage_type(o.storage)) {
    return Error{
        fmt::format("profile: the GPU block stores bf16 or fp16, not {}", to_string(o.storage))};
  }
  for (const auto& [tokens, context] : r.shapes) {
    if (Result<gpu::SliceShape> s = gpu_timed_shape(r, o.tensor, tokens, context); !s) {
      return s.error();
    }
  }
  if (r.vocab == 1) return Error{"profile: the GPU head needs a vocabulary of 2 or more, not 1"};
  if (o.sm_groups < 1) {
    return Error{fmt::format("profile: SM groups must be 1 or more, not {}", o.sm_groups)};
  }
  std::string why;
  const int devices = gpu::device_count(&why);
  if (devices == 0) return Error{fmt::format("profile: {}", why)};
  if (o.device < 0 || o.device >= devices) {
    return Error{fmt::format("profile: no CUDA device {} ({} usable)", o.device, devices)};
  }
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  CostProfile profile;
  std::string clock, placement;
  {
    // The kernels on a group of the device's SMs, or on all of them; the
    // partition outlives the context made on it.
    std::unique_ptr<gpu::SmPartition> partition;
    if (o.sm_groups > 1) {
      Result<std::unique_ptr<gpu::SmPartition>> made =
          gpu::SmPartition::create(o.device, o.sm_groups);
      if (!made) {
        return Error{fmt::format("profile: {} SM groups: {}", o.sm_groups, made.error().message)};
      }
      partition = std::move(*made);
    }
    Result<std::unique_ptr<gpu::GpuContext>> ctx =
        gpu::GpuContext::create(o.device, partition.get(), 0);
    if (!ctx) return ctx.error();
    placement = (*ctx)->placement();
    say(fmt::format("kernels on {}", placement));
    Result<std::vector<KernelSample>> kernels = time_kernels(r, o, **ctx, &clock, progress);
    if (!kernels) return kernels.error();
    profile.kernels = std::move(*kernels);
  }
  const std::string shard = o.tensor == 1
                                ? std::string("tensor 1")
                                : fmt::format(
                                      "tensor {}: hidden {}, ffn {}/{}, heads {}/{}, not an exact "
                                      "shard (profiler/README.md)",
                                      o.tensor, r.hidden, r.ffn, o.tensor, r.heads, o.tensor);
  profile.provenance =
      profile_provenance(r, fmt::format("ppsim-profile 0.1.0 (GPU: {}; {}; {}; {})", placement,
                                        to_string(o.storage), shard, clock));
  profile.provenance.build += fmt::format(", CUDA runtime {}", CUDART_VERSION);
  if (o.link_sizes.empty()) return profile;
  Result<std::vector<LinkFit>> local = time_local_links(r, o);
  if (!local) return local.error();
  profile.links = std::move(*local);
  if (devices < 2) {
    say("links peer and nccl: left out (one usable CUDA device)");
  } else {
    Result<LinkFit> peer = time_peer(r, o, progress);
    if (!peer) return Error{fmt::format("profile: link peer: {}", peer.error().message)};
    profile.links.push_back(std::move(*peer));
#ifdef PPSIM_HAVE_NCCL
    Result<LinkFit> nccl = time_nccl(r, o);
    if (!nccl) return Error{fmt::format("profile: link nccl: {}", nccl.error().message)};
    profile.links.push_back(std::move(*nccl));
#else
    say("link nccl: left out (this ppsim was built without NCCL)");
#endif
  }
  for (const LinkFit& l : profile.links) {
    say(fmt::format("link {}: latency {:.2f} us, bandwidth {:.2f} GB/s", l.name, l.latency_s * 1e6,
                    l.bandwidth_Bps / 1e9));
  }
  return profile;
}

}  // namespace ppsim
