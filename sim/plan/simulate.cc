#include "sim/plan/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "schedules/csv.h"
#include "schedules/generators.h"
#include "schedules/token_slicing.h"
#include "schedules/validate.h"
#include "sim/core/text_file.h"
#include "sim/cost/calibration.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/engine.h"
#include "sim/plan/zb_auto.h"

namespace ppsim {

Result<ScheduleFile> load_schedule_csv(const std::string& path, const Config& config) {
  const Result<std::string> text = read_text_file(path, kMaxDataFileBytes);
  if (!text) return text.error();
  Result<ScheduleFile> file = read_schedule_csv(*text, path);
  if (!file) return file;
  const Schedule& s = file->schedule;
  if (s.num_ranks != config.parallel.pipeline || s.num_stages != config.num_stages() ||
      s.num_microbatches != config.num_microbatches()) {
    return Error{fmt::format(
        "{}: has {} ranks, {} stages and {} microbatches, but {} asks for {}, {} and {} "
        "(parallel.pipeline, pipeline x virtual_stages, global_batch / (micro_batch x data))",
        path, s.num_ranks, s.num_stages, s.num_microbatches, config.source,
        config.parallel.pipeline, config.num_stages(), config.num_microbatches())};
  }
  if (Status st = validate(s); !st) return Error{fmt::format("{}: {}", path, st.message())};
  return file;
}

Result<std::vector<int>> slice_lengths_for(const Config& config) {
  const ScheduleSpec& spec = config.schedule;
  if (spec.kind != ScheduleKind::kTeraPipe) return std::vector<int>{};
  if (spec.slicing == SlicingMethod::kEven) {
    if (spec.slices < 1) {
      return Error{fmt::format("{}: schedule terapipe: set schedule.slices (equal token slices){}",
                               config.source,
                               config.model ? ", or schedule.slicing: optimal" : "")};
    }
    const int unit = config.model ? config.model->seq_len / spec.slices : 1;
    return std::vector<int>(spec.slices, unit);
  }
  if (!config.model || !config.hardware) {  // a Config built in code, not by the loader
    return Error{fmt::format(
        "{}: schedule.slicing: optimal needs a model and hardware (the analytic model's times)",
        config.source)};
  }
  const int tokens = config.model->seq_len;
  int granularity = spec.slice_granularity;
  if (granularity == 0) {  // the finest cut that keeps the search quick
    granularity = 1;
    while (tokens / granularity > 256 || tokens % granularity != 0) ++granularity;
  }
  Result<std::function<double(int, int)>> slice_cost = slice_cost_function(config);
  if (!slice_cost) return slice_cost.error();
  Result<Slicing> cut = optimal_slicing(tokens, granularity, config.parallel.pipeline, *slice_cost);
  if (!cut)
    return Error{fmt::format("{}: schedule.slicing: {}", config.source, cut.error().message)};
  return cut->lengths;
}

namespace {

// zb-auto's memory limit: the config's, else what the device has left after
// the tightest rank's static bytes, else 1F1B's peak (p microbatches of the
// largest stage, each counted at the most it holds: after F, or after I
// where I leaves more).
int64_t zb_auto_limit(const Config& config, const CostTable& costs) {
  constexpr double kGiB = 1ull << 30;
  if (config.schedule.memory_limit_gib > 0) {
    return static_cast<int64_t>(config.schedule.memory_limit_gib * kGiB);
  }
  if (config.hardware) {
    const int64_t fullest = *std::max_element(costs.static_bytes.begin(), costs.static_bytes.end());
    return static_cast<int64_t>(config.hardware->memory_gib * kGiB) - fullest;
  }
  int64_t largest = 0;
  for (const StageCost& c : costs.stages) {
    largest = std::max({largest, c.activation_bytes, c.weight_grad_bytes});
  }
  return config.parallel.pipeline * largest;
}

Result<Schedule> make_zb_auto_for(const Config& config, const Calibration* calibration) {
  const int p = config.parallel.pipeline;
  if (config.parallel.virtual_stages != 1) {
    return Error{fmt::format(
        "{}: schedule zb-auto runs one stage per rank: virtual_stages must be 1, got {}",
        config.source, config.parallel.virtual_stages)};
  }
  const std::vector<int> stage_rank = interleaved_stage_rank(p, p);
  Result<CostTable> costs = build_cost_table(config, stage_rank);
  if (!costs) return costs.error();
  // Its candidates all split their backwards.
  const Result<Calibration> calibrated = calibration_for(config, calibration);
  if (!calibrated) return calibrated.error();
  apply_calibration(*calibrated, stage_rank, uniform_forms(p, BackwardForm::kSplit), config.fixed,
                    *costs);
  if (Status st = check_costs(*costs, stage_rank, config.num_microbatches()); !st) {
    return Error{fmt::format("{}: {}", config.source, st.message())};
  }
  // Judge the candidates the way simulate() will measure the winner.
  RunOptions judge;
  if (config.training.optimizer_step == OptimizerStep::kPostValidation) {
    judge = RunOptions{4, false};
  }
  judge.blocking_sends = config.training.blocking_p2p;
  Result<Schedule> s =
      make_zb_auto(p, config.num_microbatches(), *costs, zb_auto_limit(config, *costs), judge);
  if (!s) return Error{fmt::format("{}: {}", config.source, s.error().message)};
  return s;
}

}  // namespace

Result<Schedule> schedule_for(const Config& config, int slices, const Calibration* calibration,
                              std::vector<std::string>* notes) {
  if (config.schedule.kind == ScheduleKind::kCustom) {
    Result<ScheduleFile> file = load_schedule_csv(config.schedule.file, config);
    if (!file) return file.error();
    if (notes != nullptr) *notes = std::move(file->notes);
    if (file->schedule.num_chains > 1) {
      // Config::num_chains() follows schedule.kind: the cost model would cut
      // the model over all the file's stages as one chain.
      return Error{fmt::format(
          "{}: schedule.file {} runs its microbatches through {} chains of stages (DualPipe's "
          "shape); ppsim prices two chains only for schedule.kind: dualpipe",
          config.source, config.schedule.file, file->schedule.num_chains)};
    }
    return std::move(file->schedule);
  }
  if (const std::string misfit = flushes_misfit(config); !misfit.empty()) {
    return Error{fmt::format("{}: schedule.flushes: {}", config.source, misfit)};
  }
  if (config.schedule.kind == ScheduleKind::kZbAuto) return make_zb_auto_for(config, calibration);
  const int m = config.num_microbatches();
  const int flushes = config.schedule.flushes;
  // An asynchronous schedule never flushes: simulate a stream of several
  // batches and measure the batches in its middle. A synchronous one runs
  // its passes one after another.
  const int stream = is_asynchronous(config.schedule.kind) ? kAsyncBatches * m : m / flushes;
  const ScheduleParams params{config.parallel.pipeline, stream, config.parallel.virtual_stages,
                              slices, m};
  Result<Schedule> schedule = make_schedule(config.schedule.kind, params);
  if (!schedule) {
    const std::string pass =
        flushes > 1 ? fmt::format(" (one of schedule.flushes' {} passes)", flushes) : "";
    return Error{fmt::format("{}: {}{}", config.source, schedule.error().message, pass)};
  }
  // Generated: the engine checks its coverage as it numbers the actions, and
  // finds a deadlock by stalling, without a search.
  if (flushes > 1) return repeat_passes(*schedule, flushes);
  return schedule;
}

std::vector<Picos> stream_batch_ends(const Timeline& timeline, int iteration, int m) {
  std::vector<Picos> ends;
  for (const ActionRecord& a : timeline.actions) {
    if (a.iteration != iteration || a.action.kind != ActionKind::kStep ||
        (a.action.microbatch + 1) % m != 0) {
      continue;
    }
    const size_t batch = static_cast<size_t>((a.action.microbatch + 1) / m - 1);
    if (ends.size() <= batch) ends.resize(batch + 1, 0);
    ends[batch] = std::max(ends[batch], a.end);
  }
  return ends;
}

void batches_as_iterations(int m, Timeline* t) {
  std::vector<Picos> ends;
  int batches = 0;
  for (int k = 0; k < t->iterations; ++k) {
    std::vector<Picos> run = stream_batch_ends(*t, k, m);
    batches += static_cast<int>(run.size());
    if (!run.empty()) run.pop_back();  // drains the pipeline
    ends.insert(ends.end(), run.begin(), run.end());
  }
  t->iteration_end = std::move(ends);
  t->iterations = batches;
}

Result<Simulation> simulate(const Config& config, Engine* shared_engine,
                            const Calibration* calibration, Keep keep) {
  Simulation sim;
  Result<std::vector<int>> lengths = slice_lengths_for(config);
  if (!lengths) return lengths.error();
  sim.slice_lengths = std::move(*lengths);
  const Result<Calibration> calibrated = calibration_for(config, calibration);
  if (!calibrated) return calibrated.error();
  Result<Schedule> schedule = schedule_for(
      config, std::max(1, static_cast<int>(sim.slice_lengths.size())), &*calibrated, &sim.notes);
  if (!schedule) return schedule.error();
  sim.schedule = std::move(*schedule);
  Result<CostTable> costs = build_cost_table(config, sim.schedule.stage_rank, sim.slice_lengths);
  if (!costs) return costs.error();
  sim.costs = std::move(*costs);
  if (*calibrated != Calibration{}) {  // the scan of every action is not free at p = 64
    apply_calibration(*calibrated, sim.schedule.stage_rank, backward_forms(sim.schedule),
                      config.fixed, sim.costs);
  }
  // With a synchronous step every iteration after the first starts from the
  // same state (all ranks leave one barrier, each then runs its own
  // optimizer step), so two iterations give the steady period, and one when
  // every rank's step takes as long (the next iteration is then this one
  // shifted: nothing else outlives the barrier). Without the barrier
  // iterations overlap and the pipeline may take a while to settle: double
  // the run until the last two periods agree.
  if (Status st = check_costs(sim.costs, sim.schedule.stage_rank, sim.schedule.num_microbatches);
      !st) {
    return Error{fmt::format("{}: {}", config.source, st.message())};
  }
  Engine own_engine;
  Engine& engine = shared_engine != nullptr ? *shared_engine : own_engine;
  RunOptions options;
  options.synchronous_step = config.training.optimizer_step == OptimizerStep::kSynchronous;
  options.blocking_sends = config.training.blocking_p2p;
  // Post-validated runs start at 4 iterations: the loop below needs three periods.
  const auto& steps = sim.costs.optimizer_step;
  const bool even_steps =
      std::adjacent_find(steps.begin(), steps.end(), std::not_equal_to<>()) == steps.end();
  options.iterations = is_asynchronous(config.schedule.kind) ? 1
                       : options.synchronous_step            ? (even_steps ? 1 : 2)
                                                             : 4;
  options.record = keep == Keep::kTimeline || is_asynchronous(config.schedule.kind);
  const auto replay = [&]() -> Status {
    const int64_t actions = static_cast<int64_t>(sim.schedule.num_actions()) * options.iterations;
    if (actions > kMaxReplayedActions) {
      return Error{fmt::format(
          "{}: replaying {} iterations of {} actions is more than the {} actions ppsim replays "
          "(about 10 GiB of memory): use fewer microbatches or stages",
          config.source, options.iterations, sim.schedule.num_actions(), kMaxReplayedActions)};
    }
    const Status st = engine.run(sim.schedule, sim.costs, &sim.timeline, options);
    if (!st) return Error{fmt::format("{}: {}", config.source, st.message())};
    return {};
  };
  if (Status st = replay(); !st) return Error{st.message()};
  bool settled = true;  // the last two periods were equal
  if (is_asynchronous(config.schedule.kind)) {
    batches_as_iterations(config.num_microbatches(), &sim.timeline);
  } else if (!options.synchronous_step) {
    while (true) {
      const auto& end = sim.timeline.iteration_end;
      const size_t n = end.size();
      settled = end[n - 1] - end[n - 2] == end[n - 2] - end[n - 3];
      if (settled || options.iterations >= kMaxIterations) break;
      options.iterations *= 2;
      if (Status st = replay(); !st) return Error{st.message()};
    }
  }
  if (sim.timeline.period() <= 0) {
    return Error{fmt::format(
        "{}: the iteration takes no time: every action and transfer costs 0 s, so there is no "
        "iteration time, throughput or bubble to report; give the actions a duration "
        "(costs.fixed.forward_s and backward_s, or the profile's kernels)",
        config.source)};
  }
  sim.summary = summarize(config, sim.schedule.name, sim.timeline, sim.costs.stage_weight_bytes);
  sim.summary.settled = settled;
  sim.summary.slice_lengths = sim.slice_lengths;
  if (const std::string figure = implausible_figure(sim.summary); !figure.empty()) {
    return Error{fmt::format(
        "{}: internal error: the simulation gave {}, which cannot be right: please report it "
        "with this config",
        config.source, figure)};
  }
  return sim;
}

}  // namespace ppsim
