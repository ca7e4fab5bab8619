// libFuzzer harness for the schedule CSV reader: the input is the text of a
// `schedule.file` CSV, read by schedule_from_csv (schedules/csv.h) and, when
// it parses, checked by validate (schedules/validate.h): coverage and the
// deadlock search. Any Error is the expected answer to a bad schedule; only a
// crash, a sanitizer report, an uncaught exception or an abort is a finding.
// A schedule validate accepts must also replay to the end in the engine
// (overlapped pairs included, with communication for them to hide): a failed
// run of a valid schedule aborts, as a finding.
// Seeds: configs/**/*.csv and every generator's schedule as CSV
// (fuzz_seeds.cc, run by scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "schedules/csv.h"
#include "schedules/validate.h"
#include "sim/core/costs.h"
#include "sim/engine/engine.h"

namespace {

// Schedules past this many actions are only validated: the replay is for
// finding wrong states, which small programs reach as well, fast.
constexpr size_t kMaxReplayedActions = 4096;

void replay(const ppsim::Schedule& schedule) {
  if (schedule.num_actions() > kMaxReplayedActions) return;
  ppsim::CostTable costs = ppsim::uniform_costs(schedule.num_stages, schedule.num_ranks, 1000, 3000,
                                                100, 1, schedule.num_slices);
  for (ppsim::StageCost& stage : costs.stages) {
    stage.weight_grad = 1000;
    stage.forward_comm = 400;
    stage.backward_comm = 700;
  }
  ppsim::RunOptions options;
  options.iterations = 2;
  options.record = false;
  ppsim::Timeline timeline;
  if (!ppsim::Engine().run(schedule, costs, &timeline, options).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ppsim::Result<ppsim::Schedule> schedule = ppsim::schedule_from_csv(text, "fuzz.csv");
  if (schedule.ok() && ppsim::validate(*schedule).ok()) replay(*schedule);
  return 0;
}
