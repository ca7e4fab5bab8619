// Traces this process's GPU work and attributes it to schedule actions.
// Built only with the CUDA toolkit; no CUDA or CUPTI type appears here.
//
// Two modes, said in the output of every tool that traces:
// - CUPTI activity (the default): kernels, memcpys (including peer copies)
//   and memsets with the GPU's own timestamps, attributed to actions by
//   external correlation ids (profiler/gpu_activity.h). Buffers are handed to
//   CUPTI on request and read the moment CUPTI returns them; records CUPTI
//   had to drop are counted, never silently lost.
// - CUDA events: when CUPTI cannot be used (another profiler already
//   subscribed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; a driver
//   older than the toolkit's CUPTI; no permission), or when asked with
//   PPSIM_TRACER=events. An event pair around each action on its stream
//   gives the action's span; there are no per-kernel records.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "profiler/gpu_activity.h"
#include "schedules/status.h"

namespace ppsim::gpu {

// The number of usable CUDA devices; 0 with *why set (no driver, no device,
// ...) when there are none, so GPU tests can skip saying why.
int device_count(std::string* why);

// Whether `device` is one of this machine's usable CUDA devices. Errors:
// device_count's why, or "no CUDA device N (this machine has M)".
Status check_device(int device);

enum class TraceMode { kCupti, kEvents };

struct Trace {
  TraceMode mode = TraceMode::kCupti;
  std::string fallback_reason;  // why events were used; empty with CUPTI
  ActivityLog log;              // CUPTI mode only
  Attribution attribution;      // the actions' spans, in either mode
};

class GpuTracer {
 public:
  // Starts tracing. One tracer per process at a time (CUPTI's callbacks are
  // process-wide): a second start is an Error.
  static Result<std::unique_ptr<GpuTracer>> start();
  ~GpuTracer();
  GpuTracer(const GpuTracer&) = delete;
  GpuTracer& operator=(const GpuTracer&) = delete;

  TraceMode mode() const;
  const std::string& fallback_reason() const;

  // Brackets the GPU work of one action, issued by this thread on `stream`
  // (a cudaStream_t; nullptr for the default stream). Brackets do not nest.
  Status begin(uint64_t external_id, void* stream);
  Status end(uint64_t external_id, void* stream);

  // Waits for the GPU, collects every record and stops tracing.
  Result<Trace> finish();

  struct Impl;

 private:
  explicit GpuTracer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ppsim::gpu
