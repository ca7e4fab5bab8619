// The numbers a user reads off a simulated (or measured) run: iteration
// time, bubbles, throughput and memory per device.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/core/timeline.h"
#include "sim/core/workload.h"

namespace ppsim {

struct DeviceSummary {
  int rank = 0;
  double busy_s = 0;  // F/B/I/W compute time in one iteration
  int64_t static_bytes = 0;
  int64_t peak_activation_bytes = 0;
  int64_t weight_version_bytes = 0;  // extra weight versions (asynchronous schedules)
  int64_t working_bytes = 0;         // CostTable::working_bytes
  // static + weight versions + peak activation + working set
  int64_t peak_memory_bytes = 0;
};

// An asynchronous schedule's weights on one stage: how many versions it
// keeps at once (each microbatch runs its backward on the weights its
// forward saw), how many updates a gradient is late by when applied, and the
// memory of the extra versions.
struct StageWeights {
  int stage = 0;
  int rank = 0;
  int versions = 1;
  int staleness = 0;
  int64_t extra_bytes = 0;
};

// Walks each rank's records (its program order is its time order) and
// counts, per stage that steps inside its program, the distinct weight
// versions alive and the largest delay between the version a microbatch's
// forward used and the version its gradient is applied to.
// `stage_weight_bytes` (per stage, may be empty) prices the extra versions.
std::vector<StageWeights> weight_versions(const Timeline& timeline,
                                          const std::vector<int64_t>& stage_weight_bytes);

struct Throughput {
  double samples_per_s = 0;
  std::optional<double> tokens_per_s;    // needs model.seq_len
  std::optional<double> tflops_per_gpu;  // needs the model (its FLOPs)
  std::optional<double> mfu;             // needs model and hardware
};

// The whole model's parameters (all GPUs together, not divided by any
// parallelism) and those each token uses; equal for dense models.
struct ModelSize {
  int64_t parameters = 0;
  int64_t active_parameters = 0;
};

struct Summary {
  std::string schedule;
  std::optional<ModelSize> model;  // needs the model
  int pipeline = 1;
  int tensor = 1;
  int data = 1;
  int context = 1;
  int expert = 1;
  int virtual_stages = 1;
  int microbatches = 1;
  int flushes = 1;             // schedule.flushes: passes of microbatches / flushes each
  std::string optimizer_step;  // synchronous | post_validation
  // The steady state: the period between the ends of the last two simulated
  // iterations. `settled` is false when the last two periods still differed.
  double iteration_time_s = 0;
  double first_iteration_s = 0;  // from the start to the end of the first iteration
  int iterations_simulated = 1;
  bool settled = true;
  // 1 - F/B/I/W busy time summed over ranks / (p * iteration time), both of
  // the last iteration (Timeline::busy_per_iteration)
  double bubble_fraction = 0;
  Throughput throughput;
  std::optional<double> memory_capacity_bytes;  // per device, from the hardware
  std::vector<int> slice_lengths;               // token slices (terapipe), else empty
  std::vector<StageWeights> weights;            // asynchronous schedules, else empty
  std::vector<DeviceSummary> devices;
  // Figures that cannot be right or will not run, each a sentence: an MFU
  // above 100 %, a rank needing more memory than the device has.
  std::vector<std::string> warnings;
};

// The rank with the highest peak memory; null when there are no devices.
const DeviceSummary* fullest_device(const Summary& summary);

// The first figure of `summary` that cannot be right, in words: an
// iteration time that is not a positive finite number, a bubble outside
// [0, 1], a rank busy longer than the iteration, a negative memory figure,
// a negative or non-finite MFU (one above 1 is the times' doing, and a
// warning says so). Empty when every figure can be. A simulated run's
// always can (issue 14): simulate() reports anything else as ppsim's own
// error rather than print it.
std::string implausible_figure(const Summary& summary);

// `stage_weight_bytes` (CostTable::stage_weight_bytes) prices the extra
// weight versions of asynchronous schedules.
Summary summarize(const Config& config, const std::string& schedule_name, const Timeline& timeline,
                  const std::vector<int64_t>& stage_weight_bytes = {});

}  // namespace ppsim
