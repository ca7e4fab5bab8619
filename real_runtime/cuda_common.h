// What the CUDA backends share (cuda.h: every rank on one GPU, cuda_backend.cc;
// cuda_mpi.h: one process per GPU over NCCL, cuda_mpi_backend.cc): the
// checks before a run, the GPU stages of a plan, each action's compute
// bracket on the GPU tracer, and the tracer's spans in place of the host
// brackets. Internal to real_runtime/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "real_runtime/device_spans.h"
#include "real_runtime/gpu_stage.h"
#include "real_runtime/rank_executor.h"

namespace ppsim::runtime {

extern template class RankExecutor<GpuStage>;

// plan_run's checks, and that the schedule is synchronous and the model
// stores bf16 or fp16. `backend` names the backend in the errors.
Result<RunPlan> plan_cuda_run(const Schedule& schedule, const RuntimeModel& model,
                              const RunSettings& settings, const std::string& backend);

// The GPU stages of a plan, on `ctx` (current on the rank's thread).
RankExecutor<GpuStage>::StageFactory gpu_stage_factory(const RunPlan& plan, gpu::GpuContext* ctx);

// The compute bracket of a rank on `ctx` (Transport::compute_begin, _end):
// the action `id` (> 0; 0, the optimizer step, is not traced) is marked for
// `tracer` (none: null), and the end waits for the rank's stream. Throw
// std::runtime_error on a CUDA or tracer error.
void begin_compute(gpu::GpuTracer* tracer, gpu::GpuContext& ctx, uint64_t id);
void end_compute(gpu::GpuTracer* tracer, gpu::GpuContext& ctx, uint64_t id);

// How a run is timed with `tracer` (started or not), for CudaRunInfo::timing.
std::string timing_of(const Result<std::unique_ptr<gpu::GpuTracer>>& tracer);

// The traced actions' spans, by record index (the tracer's external id -
// 1); an Error when the trace failed or CUPTI dropped records.
Result<std::vector<DeviceSpan>> action_spans(const Result<gpu::Trace>& trace);

// Replaces `timeline`'s host brackets by `spans` (apply_device_spans) and
// says so in `timing`: the actions that kept their brackets are appended,
// and when the spans cannot be used, `timing` becomes "host brackets (the
// device spans could not be used: <why>)".
void use_device_spans(const Result<std::vector<DeviceSpan>>& spans,
                      const std::vector<int>& device_of_rank, Timeline* timeline,
                      std::string* timing);

}  // namespace ppsim::runtime
