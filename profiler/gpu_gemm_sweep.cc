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

// The median of `repetitions` event-timed brackets of `run`, after
// `warmup` untimed ones (at least one), each divided by `per_bracket`.
Result<double> median_time(GpuContext& ctx, int warmup, int repetitions, int per_bracket,
                           const EventPair& events, const std::function<Status()>& run) {
  cudaStream_t stream = ctx.impl().stream;
  std::vector<double> times;
  for (int rep = -std::max(warmup, 1); rep < repetitions; ++rep) {
    PPSIM_CUDA_TRY(cudaEventRecord(events.start, stream));
    PPSIM_GPU_TRY(run());
    PPSIM_CUDA_TRY(cudaEventRecord(events.stop, stream));
    PPSIM_CUDA_TRY(cudaEventSynchronize(events.stop));
    float ms = 0;
    PPSIM_CUDA_TRY(cudaEventElapsedTime(&ms, events.start, events.stop));
    if (rep >= 0) times.push_back(ms * 1e-3 / per_bracket);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

Status create_events(EventPair* events) {
  PPSIM_CUDA_TRY(cudaEventCreate(&events->start));
  PPSIM_CUDA_TRY(cudaEventCreate(&events->stop));
  return {};
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
  PPSIM_GPU_TRY(create_events(&events));
  GpuContext::Impl& cx = (*ctx)->impl();
  const cudaDataType type = cuda_type(options.type);
  std::vector<double> medians;
  for (const GemmShape& s : shapes) {
    const auto product = [&]() -> Status {
      return gemm(cx, "the sweep's product", s.m, s.n, s.k, 1.0f, {a->get(), type, s.k},
                  {b->get(), type, s.n}, 0.0f, {c->get(), type, s.n});
    };
    Result<double> t = median_time(**ctx, options.warmup, options.repetitions, 1, events, product);
    if (!t) return t.error();
    medians.push_back(*t);
    if (progress) {
      progress(fmt::format("{} x {} x {}: {:.4f} ms, {:.1f} TFLOP/s", s.m, s.n, s.k, *t * 1e3,
                           2.0 * s.m * s.n * s.k / *t / 1e12));
    }
  }
  return medians;
}

Result<std::vector<double>> time_copy_sweep(
    const std::vector<int64_t>& sizes, const CopySweepOptions& options,
    const std::function<void(const std::string&)>& progress) {
  if (sizes.empty() || options.repetitions < 1 || options.back_to_back < 1) {
    return std::vector<double>{};
  }
  Result<std::unique_ptr<GpuContext>> ctx = GpuContext::create(options.device);
  if (!ctx) return ctx.error();
  const int64_t most = *std::max_element(sizes.begin(), sizes.end());
  void* stream = (*ctx)->stream();
  Result<DeviceBuffer> source = DeviceBuffer::allocate(most, stream);
  if (!source) return source.error();
  Result<DeviceBuffer> target = DeviceBuffer::allocate(most, stream);
  if (!target) return target.error();
  cudaStream_t cuda_stream = (*ctx)->impl().stream;
  PPSIM_CUDA_TRY(cudaMemsetAsync(source->get(), 0x5a, most, cuda_stream));
  EventPair events;
  PPSIM_GPU_TRY(create_events(&events));
  std::vector<double> medians;
  for (const int64_t size : sizes) {
    const auto copies = [&]() -> Status {
      for (int i = 0; i < options.back_to_back; ++i) {
        PPSIM_CUDA_TRY(cudaMemcpyAsync(target->get(), source->get(), size, cudaMemcpyDeviceToDevice,
                                       cuda_stream));
      }
      return {};
    };
    Result<double> t = median_time(**ctx, options.warmup, options.repetitions, options.back_to_back,
                                   events, copies);
    if (!t) return t.error();
    medians.push_back(*t);
    if (progress) {
      progress(fmt::format("copy {} KiB: {:.2f} us, {:.1f} GB/s read and written", size / 1024,
                           *t * 1e6, 2.0 * size / *t / 1e9));
    }
  }
  return medians;
}

}  // namespace ppsim::gpu
