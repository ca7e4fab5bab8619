#include "real_runtime/validate.h"

#include <fmt/format.h>

#include <algorithm>

#include "real_runtime/runtime.h"
#include "schedules/generators.h"
#include "sim/plan/compare.h"
#include "sim/plan/simulate.h"

namespace ppsim::runtime {
namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// `n` actions per iteration. `stream_m`: 0, or for an asynchronous
// schedule its batch of m microbatches; each iteration is then a run of the
// stream, measured as simulate() measures it, by a steady batch in its middle.
void compare_runs(ScheduleValidation& v, size_t n, int stream_m, int warmup, int iterations) {
  static_assert(kAsyncBatches >= 3, "a steady batch has a batch before it and one after");
  const Timeline& measured = v.measured;
  std::vector<double> periods;
  std::vector<IterationPeriod> spans;
  for (int k = stream_m > 0 ? warmup : std::max(warmup, 1); k < warmup + iterations; ++k) {
    if (stream_m > 0) {
      const std::vector<Picos> ends = stream_batch_ends(measured, k, stream_m);
      const int batches = static_cast<int>(ends.size());
      periods.push_back(picos_to_seconds(ends[batches - 2] - ends[batches - 3]));
      spans.push_back({k, periods.back() * batches});
    } else {
      periods.push_back(
          picos_to_seconds(measured.iteration_end[k] - measured.iteration_end[k - 1]));
      spans.push_back({k, periods.back()});
    }
  }
  v.measured_iteration_s = median(periods);
  const auto [fastest, slowest] = std::minmax_element(periods.begin(), periods.end());
  v.measured_spread = (*slowest - *fastest) / v.measured_iteration_s;
  v.measured_bubble = measured_bubble(measured, spans);
  v.measured_peak_activation_bytes = measured.peak_activation_bytes;
  // Both timelines lay an iteration's records out in the schedule's program
  // order: record i of a measured iteration is record i of the prediction.
  std::vector<std::vector<double>> errors(kNumActionKinds);
  for (int k = warmup; k < warmup + iterations; ++k) {
    for (size_t i = 0; i < n; ++i) {
      const ActionRecord& p = v.predicted.actions[i];
      const ActionRecord& m = measured.actions[k * n + i];
      const double predicted_s = picos_to_seconds(p.end - p.start);
      if (predicted_s <= 0) continue;
      errors[static_cast<int>(p.action.kind)].push_back(
          std::abs(picos_to_seconds(m.end - m.start) - predicted_s) / predicted_s);
    }
  }
  for (int kind = 0; kind < kNumActionKinds; ++kind) {
    if (errors[kind].empty()) continue;
    v.kinds.push_back({static_cast<ActionKind>(kind), static_cast<int>(errors[kind].size()),
                       median(errors[kind])});
  }
}

}  // namespace

double measured_bubble(const Timeline& measured, const std::vector<IterationPeriod>& periods) {
  PPSIM_CHECK(!periods.empty());
  std::vector<double> busy(periods.size(), 0.0);
  for (const ActionRecord& a : measured.actions) {
    for (size_t i = 0; i < periods.size(); ++i) {
      if (a.iteration == periods[i].iteration) busy[i] += picos_to_seconds(a.end - a.start);
    }
  }
  std::vector<double> bubbles;
  for (size_t i = 0; i < periods.size(); ++i) {
    bubbles.push_back(1.0 - busy[i] / (measured.num_ranks * periods[i].seconds));
  }
  return median(bubbles);
}

Status check_counts(const ValidateOptions& options) {
  if (options.warmup < 0) {
    return Error{fmt::format("--warmup {}: at least 0", options.warmup)};
  }
  if (options.iterations < 1) {
    return Error{fmt::format("--iterations {}: at least 1", options.iterations)};
  }
  if (options.warmup + options.iterations < 2) {
    return Error{fmt::format(
        "--warmup {} --iterations {}: an iteration is timed from the end of the one before "
        "it, so run two in all (--warmup 1, or --iterations 2)",
        options.warmup, options.iterations)};
  }
  return {};
}

std::vector<ScheduleValidation> validate(const Config& config, const ValidateOptions& options) {
  PPSIM_CHECK(check_counts(options).ok());
  PPSIM_CHECK(check_executable(config, "validate").ok());
  std::vector<ScheduleValidation> out;
  for (const std::string& entry : options.schedules) {
    ScheduleValidation v;
    v.schedule = entry;
    const Config c = config_for_entry(config, entry);
    Result<Simulation> sim = simulate(c);
    if (!sim) {
      v.reason = sim.error().message;
      out.push_back(std::move(v));
      continue;
    }
    v.predicted_iteration_s = sim->summary.iteration_time_s;
    v.predicted_bubble = sim->summary.bubble_fraction;
    v.predicted_peak_activation_bytes = sim->timeline.peak_activation_bytes;
    v.predicted = std::move(sim->timeline);

    const RuntimeModel model = model_for(c, sim->slice_lengths);
    RunSettings settings;
    settings.iterations = options.warmup + options.iterations;
    settings.learning_rate = 0.01;
    Result<RunResult> run = options.run ? options.run(sim->schedule, model, settings)
                                        : run_threads(sim->schedule, model, settings);
    if (!run) {
      v.reason = run.error().message;
      out.push_back(std::move(v));
      continue;
    }
    v.measured = std::move(run->timeline);
    compare_runs(v, sim->schedule.num_actions(),
                 is_asynchronous(c.schedule.kind) ? c.num_microbatches() : 0, options.warmup,
                 options.iterations);
    out.push_back(std::move(v));
  }
  return out;
}

RunPair run_pair(const ScheduleValidation& v, const ValidateOptions& options) {
  PPSIM_CHECK(v.ok());
  // The measured timeline holds warmup + iterations runs of the programs
  // (of the whole stream, for an asynchronous schedule).
  const size_t n = v.measured.actions.size() / (options.warmup + options.iterations);
  RunPair run =
      pair_runs(v.schedule, v.predicted, v.measured, n, options.warmup, options.iterations);
  run.predicted_iteration_s = v.predicted_iteration_s;
  run.measured_iteration_s = v.measured_iteration_s;
  return run;
}

}  // namespace ppsim::runtime
