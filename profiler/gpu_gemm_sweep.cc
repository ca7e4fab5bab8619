#include "profiler/gpu_gemm_sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "profiler/gpu_block.h"
#include "profiler/gpu_internal.cuh"

namespace ppsim::gpu {
namespace {

struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~EventPair() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
};

// `elements` values uniform in [-1, 1] of `type` at `device`, uploaded in
// chunks of one host buffer.
Status fill_uniform(GpuContext& ctx, DType type, int64_t elements, void* device) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<float> host(static_cast<size_t>(std::min(elements, kChunk)));
  std::mt19937 rng(20261205);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : host) v = uniform(rng);
  const int64_t bytes = dtype_bytes(type);
  for (int64_t at = 0; at < elements; at += kChunk) {
    const int64_t count = std::min(kChunk, elements - at);
    PPSIM_GPU_TRY(upload(ctx, host.data(), count, type, static_cast<char*>(device) + at * bytes));
  }
  return {};
}

// The median of `options.repetitions` event-timed products of `shape`,
// after `options.warmup` untimed ones.
Result<double> time_one(GpuContext& ctx, const GemmShape& shape, const GemmSweepOptions& options,
                        const void* a, const void* b, void* c, const EventPair& events) {
  GpuContext::Impl& cx = ctx.impl();
  const cudaDataType type = cuda_type(options.type);
  const auto product = [&]() -> Status {
    return gemm(cx, "the sweep's product", shape.m, shape.n, shape.k, 1.0f, {a, type, shape.k},
                {b, type, shape.n}, 0.0f, {c, type, shape.n});
  };
  std::vector<double> times;
  for (int rep = -std::max(options.warmup, 1); rep < options.repetitions; ++rep) {
    PPSIM_CUDA_TRY(cudaEventRecord(events.start, cx.stream));
    PPSIM_GPU_TRY(product());
    PPSIM_CUDA_TRY(cudaEventRecord(events.stop, cx.stream));
    PPSIM_CUDA_TRY(cudaEventSynchronize(events.stop));
    float ms = 0;
    PPSIM_CUDA_TRY(cudaEventElapsedTime(&ms, events.start, events.stop));
    if (rep >= 0) times.push_back(ms * 1e-3);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

Result<std::vector<double>> time_gemm_sweep(
    const std::vector<GemmShape>& shapes, const GemmSweepOptions& options,
    const std::function<void(const std::string&)>& progress) {
  if (!is_storage_type(options.type)) {
    return Error{fmt::format("GEMM sweep: the operands must be bf16 or fp16, not {}",
                             to_string(options.type))};
  }
  if (shapes.empty() || options.repetitions < 1) return std::vector<double>{};
  Result<std::unique_ptr<GpuContext>> ctx = GpuContext::create(options.device);
  if (!ctx) return ctx.error();
  int64_t most_a = 0, most_b = 0, most_c = 0;
  for (const GemmShape& s : shapes) {
    most_a = std::max(most_a, s.m * s.k);
    most_b = std::max(most_b, s.k * s.n);
    most_c = std::max(most_c, s.m * s.n);
  }
  const int64_t bytes = dtype_bytes(options.type);
  void* stream = (*ctx)->stream();
  Result<DeviceBuffer> a = DeviceBuffer::allocate(most_a * bytes, stream);
  if (!a) return a.error();
  Result<DeviceBuffer> b = DeviceBuffer::allocate(most_b * bytes, stream);
  if (!b) return b.error();
  Result<DeviceBuffer> c = DeviceBuffer::allocate(most_c * bytes, stream);
  if (!c) return c.error();
  PPSIM_GPU_TRY(fill_uniform(**ctx, options.type, most_a, a->get()));
  PPSIM_GPU_TRY(fill_uniform(**ctx, options.type, most_b, b->get()));
  EventPair events;
  PPSIM_CUDA_TRY(cudaEventCreate(&events.start));
  PPSIM_CUDA_TRY(cudaEventCreate(&events.stop));
  std::vector<double> medians;
  for (const GemmShape& s : shapes) {
    Result<double> t = time_one(**ctx, s, options, a->get(), b->get(), c->get(), events);
    if (!t) return t.error();
    medians.push_back(*t);
    if (progress) {
      progress(fmt::format("{} x {} x {}: {:.4f} ms, {:.1f} TFLOP/s", s.m, s.n, s.k, *t * 1e3,
                           2.0 * s.m * s.n * s.k / *t / 1e12));
    }
  }
  return medians;
}

}  // namespace ppsim::gpu
