#include "sim/simulate.h"

#include "schedules/generators.h"
#include "schedules/validate.h"
#include "sim/cost_model.h"
#include "sim/engine.h"

namespace ppsim {

Result<Schedule> schedule_for(const Config& config) {
  const ScheduleParams params{config.parallel.pipeline, config.num_microbatches(),
                              config.parallel.virtual_stages};
  Result<Schedule> schedule = make_schedule(config.schedule.kind, params);
  if (!schedule) return schedule;
  if (Status st = validate(*schedule); !st) return Error{st.message()};
  return schedule;
}

Result<Simulation> simulate(const Config& config) {
  Simulation sim;
  Result<Schedule> schedule = schedule_for(config);
  if (!schedule) return schedule.error();
  sim.schedule = std::move(*schedule);
  Result<CostTable> costs = build_cost_table(config);
  if (!costs) return costs.error();
  sim.costs = std::move(*costs);
  Engine engine;
  engine.run(sim.schedule, sim.costs, &sim.timeline);
  sim.summary = summarize(config, sim.schedule.name, sim.timeline);
  return sim;
}

}  // namespace ppsim
