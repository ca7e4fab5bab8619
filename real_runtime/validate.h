// `ppsim validate`: prediction against measurement. For each schedule: the
// simulator's prediction from a cost profile of this machine, then the same
// per-rank programs run for real (by the threads backend, or the one the
// options name), then how far apart
// they are: iteration time, per-action-kind durations (the two timelines
// join on the record index), bubble fraction and peak activation memory.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "real_runtime/runtime.h"
#include "schedules/action.h"
#include "schedules/status.h"
#include "sim/core/timeline.h"
#include "sim/core/workload.h"
#include "sim/fit/runs_file.h"

namespace ppsim::runtime {

struct ValidateOptions {
  std::vector<std::string> schedules;  // compare-style entries ("1f1b", "interleaved-1f1b:2")
  int warmup = 1;                      // iterations run before measuring
  int iterations = 3;                  // measured iterations
  // Runs one schedule for real; unset: run_threads. The CUDA backend's
  // tools set run_cuda here, or run_cuda_mpi under mpirun (then every rank
  // calls validate() with the same config and options).
  std::function<Result<RunResult>(const Schedule&, const RuntimeModel&, const RunSettings&)> run;
};

struct KindError {
  ActionKind kind;
  int count = 0;
  double median_relative_error = 0;  // |measured - predicted| / predicted, median over actions
};

// The measured spread above which `ppsim validate` warns that the machine
// was not quiet: iterations that differ by more than the 5 % accuracy
// target cannot check a prediction to that target.
inline constexpr double kUnsteadySpread = 0.05;

struct ScheduleValidation {
  std::string schedule;
  std::string reason;  // why it could not be validated; empty when it was
  double predicted_iteration_s = 0;
  double measured_iteration_s = 0;  // median over the measured iterations
  // (slowest - fastest) / median of the measured iterations: how steady the
  // machine was. Above kUnsteadySpread, the timings say more about other
  // load than about the schedule.
  double measured_spread = 0;
  double predicted_bubble = 0;
  double measured_bubble = 0;
  std::vector<int64_t> predicted_peak_activation_bytes;  // per rank
  std::vector<int64_t> measured_peak_activation_bytes;
  std::vector<KindError> kinds;
  Timeline predicted;
  Timeline measured;

  bool ok() const { return reason.empty(); }
  double relative_error() const {
    return (measured_iteration_s - predicted_iteration_s) / measured_iteration_s;
  }
};

// The counts validate() can measure: warmup >= 0, iterations >= 1, and two
// iterations in all, as a synchronous schedule's iteration is timed from the
// end of the one before it. The error names the command-line flags.
Status check_counts(const ValidateOptions& options);

// REQUIRES: config.model and config.profile_path set (the profile of this
// machine), check_counts(options) and check_executable(config) ok. Schedules
// that cannot run (a layout the model does not split into) are returned
// with their reason. An asynchronous schedule
// (pipedream, pipedream-2bw) is predicted as one run of simulate()'s stream
// of batches and run `warmup + iterations` times; its iteration time, on
// both sides, is a steady batch in the middle of a run of the stream.
std::vector<ScheduleValidation> validate(const Config& config, const ValidateOptions& options);

// One measured iteration's period: its span (an asynchronous stream's:
// its steady batch's period times the batches of a run).
struct IterationPeriod {
  int iteration = 0;
  double seconds = 0;
};

// The median over the iterations of each one's bubble, 1 - its busy time /
// (ranks x its period): an iteration's busy time is only ever set against
// its own period, so a slow iteration cannot be set against a fast one's
// period and push the bubble below 0. REQUIRES: `periods` non-empty.
double measured_bubble(const Timeline& measured, const std::vector<IterationPeriod>& periods);

// What `ppsim calibrate` fits on (sim/runs_file.h): each action and
// cross-rank transfer, predicted against its median over the measured
// iterations, and the two iteration times. REQUIRES: v.ok(), from
// validate() with `options`.
RunPair run_pair(const ScheduleValidation& v, const ValidateOptions& options);

}  // namespace ppsim::runtime
