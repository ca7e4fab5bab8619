#include "real_runtime/cuda_common.h"

#include <fmt/format.h>

#include "real_runtime/rank_executor_impl.h"

namespace ppsim::runtime {

template class RankExecutor<GpuStage>;

Result<RunPlan> plan_cuda_run(const Schedule& schedule, const RuntimeModel& model,
                              const RunSettings& settings, const std::string& backend) {
  Result<RunPlan> plan = plan_run(schedule, model, settings);
  if (!plan) return plan.error();
  if (plan->steps_in_programs) {
    return Error{fmt::format(
        "{}: schedule {} steps inside its programs (S actions); the GPU stages have no weight "
        "stashing yet, so only synchronous schedules run on the GPU",
        backend, schedule.name)};
  }
  if (!gpu::is_storage_type(model.dtype)) {
    return Error{fmt::format("{}: the GPU stages store bf16 or fp16, not {}", backend,
                             to_string(model.dtype))};
  }
  return plan;
}

RankExecutor<GpuStage>::StageFactory gpu_stage_factory(const RunPlan& plan, gpu::GpuContext* ctx) {
  return [&plan, ctx](int s) {
    const Schedule& sc = *plan.schedule;
    return std::make_unique<GpuStage>(ctx, plan.model, s, sc.num_stages, sc.num_microbatches,
                                      plan.lengths);
  };
}

void begin_compute(gpu::GpuTracer* tracer, gpu::GpuContext& ctx, uint64_t id) {
  if (tracer != nullptr && id > 0) throw_if_failed(tracer->begin(id, ctx.stream()));
}

void end_compute(gpu::GpuTracer* tracer, gpu::GpuContext& ctx, uint64_t id) {
  if (tracer != nullptr && id > 0) throw_if_failed(tracer->end(id, ctx.stream()));
  throw_if_failed(ctx.synchronize());
}

std::string timing_of(const Result<std::unique_ptr<gpu::GpuTracer>>& tracer) {
  if (!tracer) return fmt::format("host brackets (no tracer: {})", tracer.error().message);
  if ((*tracer)->mode() == gpu::TraceMode::kCupti) return "CUPTI spans of each action's GPU work";
  return fmt::format("CUDA event pairs around each action ({})", (*tracer)->fallback_reason());
}

Result<std::vector<DeviceSpan>> action_spans(const Result<gpu::Trace>& trace) {
  if (!trace) return trace.error();
  if (trace->log.dropped > 0) {
    return Error{fmt::format("CUPTI dropped {} records", trace->log.dropped)};
  }
  std::vector<DeviceSpan> out;
  for (const gpu::ActionSpan& s : trace->attribution.spans) {
    out.push_back({static_cast<int64_t>(s.external_id) - 1, s.start_ns, s.end_ns});
  }
  return out;
}

void use_device_spans(const Result<std::vector<DeviceSpan>>& spans,
                      const std::vector<int>& device_of_rank, Timeline* timeline,
                      std::string* timing) {
  Result<SpanAlignment> aligned = spans ? apply_device_spans(*spans, device_of_rank, timeline)
                                        : Result<SpanAlignment>(spans.error());
  if (!aligned) {
    *timing = fmt::format("host brackets (the device spans could not be used: {})",
                          aligned.error().message);
  } else if (aligned->missing > 0) {
    *timing +=
        fmt::format("; {} actions without a span keep their host brackets", aligned->missing);
  }
}

}  // namespace ppsim::runtime
