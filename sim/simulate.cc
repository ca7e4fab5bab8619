#include "sim/simulate.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "schedules/csv.h"
#include "schedules/generators.h"
#include "schedules/validate.h"
#include "sim/cost_model.h"
#include "sim/engine.h"

namespace ppsim {

Result<Schedule> load_schedule_csv(const std::string& path, const Config& config) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Error{fmt::format("{}: cannot read", path)};
  std::stringstream text;
  text << file.rdbuf();
  Result<Schedule> schedule = schedule_from_csv(text.str(), path);
  if (!schedule) return schedule;
  const Schedule& s = *schedule;
  if (s.num_ranks != config.parallel.pipeline || s.num_stages != config.num_stages() ||
      s.num_microbatches != config.num_microbatches()) {
    return Error{fmt::format(
        "{}: has {} ranks, {} stages and {} microbatches, but {} asks for {}, {} and {} "
        "(parallel.pipeline, pipeline x virtual_stages, global_batch / (micro_batch x data))",
        path, s.num_ranks, s.num_stages, s.num_microbatches, config.source,
        config.parallel.pipeline, config.num_stages(), config.num_microbatches())};
  }
  if (Status st = validate(s); !st) return Error{fmt::format("{}: {}", path, st.message())};
  return schedule;
}

Result<Schedule> schedule_for(const Config& config) {
  if (config.schedule.kind == "custom") return load_schedule_csv(config.schedule.file, config);
  const ScheduleParams params{config.parallel.pipeline, config.num_microbatches(),
                              config.parallel.virtual_stages};
  Result<Schedule> schedule = make_schedule(config.schedule.kind, params);
  if (!schedule) return Error{fmt::format("{}: {}", config.source, schedule.error().message)};
  if (Status st = validate(*schedule); !st) return Error{st.message()};
  return schedule;
}

Result<Simulation> simulate(const Config& config) {
  Simulation sim;
  Result<Schedule> schedule = schedule_for(config);
  if (!schedule) return schedule.error();
  sim.schedule = std::move(*schedule);
  Result<CostTable> costs = build_cost_table(config, sim.schedule.stage_rank);
  if (!costs) return costs.error();
  sim.costs = std::move(*costs);
  // With a synchronous step every iteration after the first starts from the
  // same state (all ranks leave one barrier), so two iterations give the
  // steady period. Without the barrier iterations overlap and the pipeline
  // may take a while to settle: double the run until the last two periods
  // agree.
  Engine engine;
  RunOptions options;
  options.synchronous_step = config.training.optimizer_step == OptimizerStep::kSynchronous;
  options.iterations = 2;
  engine.run(sim.schedule, sim.costs, &sim.timeline, options);
  if (!options.synchronous_step) {
    for (options.iterations = 4;; options.iterations *= 2) {
      engine.run(sim.schedule, sim.costs, &sim.timeline, options);
      const auto& end = sim.timeline.iteration_end;
      const size_t n = end.size();
      sim.settled = end[n - 1] - end[n - 2] == end[n - 2] - end[n - 3];
      if (sim.settled || options.iterations >= kMaxIterations) break;
    }
  }
  sim.summary = summarize(config, sim.schedule.name, sim.timeline);
  sim.summary.steady = sim.settled;
  return sim;
}

}  // namespace ppsim
