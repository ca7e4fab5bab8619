#include "sim/metrics.h"

#include "sim/cost_model.h"

namespace ppsim {

Summary summarize(const Config& config, const std::string& schedule_name,
                  const Timeline& timeline) {
  Summary s;
  s.schedule = schedule_name;
  s.pipeline = config.parallel.pipeline;
  s.tensor = config.parallel.tensor;
  s.data = config.parallel.data;
  s.virtual_stages = config.parallel.virtual_stages;
  s.microbatches = config.num_microbatches();
  s.optimizer_step = to_string(config.training.optimizer_step);
  s.iteration_time_s = picos_to_seconds(timeline.period());
  s.first_iteration_s = picos_to_seconds(
      timeline.iteration_end.empty() ? timeline.makespan : timeline.iteration_end[0]);
  s.iterations_simulated = timeline.iterations;

  // Every iteration does the same work; report one iteration's.
  Picos busy = 0;
  for (int rank = 0; rank < timeline.num_ranks; ++rank) {
    DeviceSummary d;
    d.rank = rank;
    d.busy_s = picos_to_seconds(timeline.busy[rank]) / timeline.iterations;
    d.static_bytes = timeline.static_bytes[rank];
    d.peak_activation_bytes = timeline.peak_activation_bytes[rank];
    d.peak_memory_bytes = d.static_bytes + d.peak_activation_bytes;
    s.devices.push_back(d);
    busy += timeline.busy[rank];
  }
  if (timeline.period() > 0) {
    s.bubble_fraction = 1.0 - static_cast<double>(busy) / timeline.iterations /
                                  (static_cast<double>(timeline.num_ranks) * timeline.period());
    s.throughput.samples_per_s = config.training.global_batch / s.iteration_time_s;
    if (config.model) {
      s.throughput.tokens_per_s = s.throughput.samples_per_s * config.model->seq_len;
      const int gpus = config.parallel.pipeline * config.parallel.tensor * config.parallel.data;
      s.throughput.tflops_per_gpu =
          model_flops_per_iteration(config) / s.iteration_time_s / gpus / 1e12;
      if (config.hardware) {
        const double peak = config.hardware->peak_tflops(config.model->dtype);
        if (peak > 0) s.throughput.mfu = *s.throughput.tflops_per_gpu / peak;
      }
    }
  }
  if (config.hardware) s.memory_capacity_bytes = config.hardware->memory_gib * (1ull << 30);
  return s;
}

}  // namespace ppsim
