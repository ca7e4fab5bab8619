#include "profiler/cupti_tracer.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "profiler/cupti_records.h"

namespace ppsim::gpu {
namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlign = 8;  // CUPTI's requirement
// CUPTI writes an external-correlation record along with the record of the
// runtime or driver API call it tags, and only while those API kinds are
// enabled: without them a trace has kernels but no correlation records (seen
// on an H200 with CUDA 13). Their own records are counted as `other`.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
};
constexpr CUpti_ExternalCorrelationKind kCorrelationKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

std::string cupti_message(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s != nullptr ? s : fmt::format("CUPTI error {}", static_cast<int>(r));
}

// What the running tracer's CUPTI buffers held; CUPTI's callbacks are plain
// functions, so they reach it through this pointer (one tracer at a time).
struct Collected {
  std::mutex mu;
  ActivityLog log;
  std::string error;  // the first malformed buffer
};
std::atomic<bool> g_running{false};
Collected* g_collected = nullptr;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;  // 0: CUPTI drops and counts what follows
  *max_records = 0;                               // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid_size) {
  ActivityLog part;
  const Status read = read_activity_buffer(buffer, valid_size, &part);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) {
    part.dropped += dropped;
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_collected->mu);
  g_collected->log.merge(std::move(part));
  if (!read && g_collected->error.empty()) g_collected->error = read.message();
}

// A new event recorded on `stream` now.
Result<cudaEvent_t> record_event(void* stream) {
  cudaEvent_t event = nullptr;
  if (cudaEventCreate(&event) != cudaSuccess) {
    return Error{fmt::format("CUDA events: {}", cudaGetErrorString(cudaGetLastError()))};
  }
  if (cudaEventRecord(event, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
    cudaEventDestroy(event);
    return Error{fmt::format("CUDA events: {}", cudaGetErrorString(cudaGetLastError()))};
  }
  return event;
}

}  // namespace

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = fmt::format("no usable CUDA device: {}", cudaGetErrorString(e));
    return 0;
  }
  if (n == 0) *why = "no CUDA device found";
  return n;
}

Status check_device(int device) {
  std::string why;
  const int devices = device_count(&why);
  if (devices == 0) return Error{why};
  if (device < 0 || device >= devices) {
    return Error{fmt::format("no CUDA device {} (this machine has {})", device, devices)};
  }
  return {};
}

struct GpuTracer::Impl {
  TraceMode mode = TraceMode::kCupti;
  std::string reason;
  Collected collected;
  int enabled = 0;  // CUPTI kinds enabled so far (to undo on failure)
  // Events mode: an origin event and the brackets' events by external id.
  cudaEvent_t origin = nullptr;
  std::mutex mu;
  std::map<uint64_t, std::pair<cudaEvent_t, cudaEvent_t>> brackets;

  Status start_cupti() {
    g_collected = &collected;
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    for (; r == CUPTI_SUCCESS && enabled < static_cast<int>(std::size(kKinds)); ++enabled) {
      r = cuptiActivityEnable(kKinds[enabled]);
      if (r != CUPTI_SUCCESS) break;
    }
    if (r == CUPTI_SUCCESS) return {};
    stop_cupti();
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      return Error{"another profiler (Nsight Systems, Nsight Compute, ...) holds CUPTI"};
    }
    return Error{cupti_message(r)};
  }

  void stop_cupti() {
    while (enabled > 0) cuptiActivityDisable(kKinds[--enabled]);
  }

  Status start_events() {
    if (cudaEventCreate(&origin) != cudaSuccess ||
        cudaEventRecord(origin, nullptr) != cudaSuccess) {
      return Error{fmt::format("CUDA events: {}", cudaGetErrorString(cudaGetLastError()))};
    }
    return {};
  }

  ~Impl() {
    for (auto& [id, events] : brackets) {
      cudaEventDestroy(events.first);
      if (events.second != nullptr) cudaEventDestroy(events.second);
    }
    if (origin != nullptr) cudaEventDestroy(origin);
  }
};

GpuTracer::GpuTracer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GpuTracer::~GpuTracer() {
  if (impl_->mode == TraceMode::kCupti) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    impl_->stop_cupti();
  }
  g_collected = nullptr;
  g_running = false;
}

Result<std::unique_ptr<GpuTracer>> GpuTracer::start() {
  std::string why;
  if (device_count(&why) == 0) return Error{fmt::format("GPU tracer: {}", why)};
  if (g_running.exchange(true)) {
    return Error{"GPU tracer: one is already running in this process"};
  }
  auto impl = std::make_unique<Impl>();
  const char* forced = std::getenv("PPSIM_TRACER");
  if (forced != nullptr && std::strcmp(forced, "events") == 0) {
    impl->reason = "PPSIM_TRACER=events";
  } else if (forced != nullptr && std::strcmp(forced, "cupti") != 0 && forced[0] != '\0') {
    g_running = false;
    return Error{fmt::format("PPSIM_TRACER={}: expected cupti or events", forced)};
  } else if (Status st = impl->start_cupti(); !st) {
    impl->reason = fmt::format("CUPTI unavailable: {}", st.message());
  }
  if (!impl->reason.empty()) {
    impl->mode = TraceMode::kEvents;
    if (Status st = impl->start_events(); !st) {
      g_running = false;
      return Error{fmt::format("GPU tracer: {}", st.message())};
    }
  }
  return std::unique_ptr<GpuTracer>(new GpuTracer(std::move(impl)));
}

TraceMode GpuTracer::mode() const { return impl_->mode; }
const std::string& GpuTracer::fallback_reason() const { return impl_->reason; }

Status GpuTracer::begin(uint64_t external_id, void* stream) {
  if (impl_->mode == TraceMode::kCupti) {
    const CUptiResult r = cuptiActivityPushExternalCorrelationId(kCorrelationKind, external_id);
    if (r != CUPTI_SUCCESS) return Error{fmt::format("CUPTI: {}", cupti_message(r))};
    return {};
  }
  Result<cudaEvent_t> start = record_event(stream);
  if (!start) return start.error();
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->brackets.try_emplace(external_id, *start, nullptr).second) {
    cudaEventDestroy(*start);
    return Error{fmt::format("GPU tracer: action {} was bracketed twice", external_id)};
  }
  return {};
}

Status GpuTracer::end(uint64_t external_id, void* stream) {
  if (impl_->mode == TraceMode::kCupti) {
    uint64_t popped = 0;
    const CUptiResult r = cuptiActivityPopExternalCorrelationId(kCorrelationKind, &popped);
    if (r != CUPTI_SUCCESS) return Error{fmt::format("CUPTI: {}", cupti_message(r))};
    if (popped != external_id) {
      return Error{
          fmt::format("GPU tracer: ended action {} inside action {}", external_id, popped)};
    }
    return {};
  }
  Result<cudaEvent_t> end = record_event(stream);
  if (!end) return end.error();
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto it = impl_->brackets.find(external_id);
  if (it == impl_->brackets.end() || it->second.second != nullptr) {
    cudaEventDestroy(*end);
    return Error{fmt::format("GPU tracer: action {} ended without a begin", external_id)};
  }
  it->second.second = *end;
  return {};
}

Result<Trace> GpuTracer::finish() {
  if (cudaDeviceSynchronize() != cudaSuccess) {
    return Error{fmt::format("GPU tracer: {}", cudaGetErrorString(cudaGetLastError()))};
  }
  Trace trace;
  trace.mode = impl_->mode;
  trace.fallback_reason = impl_->reason;
  if (impl_->mode == TraceMode::kCupti) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    impl_->stop_cupti();
    std::lock_guard<std::mutex> lock(impl_->collected.mu);
    if (!impl_->collected.error.empty()) return Error{impl_->collected.error};
    trace.log = std::move(impl_->collected.log);
    trace.attribution = action_spans(trace.log);
    return trace;
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& [id, events] : impl_->brackets) {
    if (events.second == nullptr) {
      return Error{fmt::format("GPU tracer: action {} was begun but not ended", id)};
    }
    float from_origin_ms = 0, span_ms = 0;
    if (cudaEventElapsedTime(&from_origin_ms, impl_->origin, events.first) != cudaSuccess ||
        cudaEventElapsedTime(&span_ms, events.first, events.second) != cudaSuccess) {
      return Error{fmt::format("CUDA events: {}", cudaGetErrorString(cudaGetLastError()))};
    }
    ActionSpan span;
    span.external_id = id;
    span.start_ns = static_cast<uint64_t>(from_origin_ms * 1e6);
    span.end_ns = span.start_ns + static_cast<uint64_t>(span_ms * 1e6);
    trace.attribution.spans.push_back(span);
  }
  return trace;
}

}  // namespace ppsim::gpu
