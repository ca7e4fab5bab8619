// One simulation from a loaded Config: generate and validate the schedule,
// build the cost table, replay it, summarise. The CLI and the tests share it.
#pragma once

#include "schedules/schedule.h"
#include "schedules/status.h"
#include "sim/costs.h"
#include "sim/metrics.h"
#include "sim/timeline.h"
#include "sim/workload.h"

namespace ppsim {

struct Simulation {
  Schedule schedule;
  CostTable costs;
  Timeline timeline;
  Summary summary;
};

// The config's schedule kind with its (p, m, v), validated.
Result<Schedule> schedule_for(const Config& config);
Result<Simulation> simulate(const Config& config);

}  // namespace ppsim
