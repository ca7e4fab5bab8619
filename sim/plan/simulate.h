// One simulation from a loaded Config: generate and validate the schedule,
// build the cost table, replay it, summarise. The CLI and the tests share it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/csv.h"
#include "schedules/limits.h"
#include "schedules/schedule.h"
#include "schedules/status.h"
#include "sim/core/costs.h"
#include "sim/core/timeline.h"
#include "sim/core/workload.h"
#include "sim/cost/cost_profile.h"
#include "sim/engine/engine.h"
#include "sim/plan/metrics.h"

namespace ppsim {

// What a simulation keeps of its run: the whole timeline (every action and
// transfer: traces, reports, memory curves), or only what its summary reads
// (no action or transfer records; an asynchronous schedule's are kept all
// the same, its summary reads them).
enum class Keep { kTimeline, kSummary };

struct Simulation {
  Schedule schedule;
  CostTable costs;
  Timeline timeline;  // several consecutive iterations (see Keep)
  Summary summary;
  std::vector<int> slice_lengths;  // terapipe's cut, else empty
  // What reading the schedule's file had to interpret (schedules/csv.h).
  std::vector<std::string> notes;
};

// Iterations simulated at most while waiting for a post-validation pipeline
// to settle into a steady period.
inline constexpr int kMaxIterations = 32;
// Actions times iterations replayed at most: two iterations of the largest
// schedule (schedules/limits.h), about 150 bytes each.
inline constexpr int64_t kMaxReplayedActions = 2 * kMaxScheduleActions;
// Batches of m microbatches in the stream of an asynchronous schedule: the
// first fills the pipeline, the last drains it, the ones between are steady.
inline constexpr int kAsyncBatches = 4;

// The ends of the batches of m microbatches in iteration `iteration` of a
// timeline of an asynchronous stream: batch b ends when every stage has
// stepped after its microbatch (b + 1) m - 1. The first batch fills the
// pipeline, the last drains it, the ones between are steady.
std::vector<Picos> stream_batch_ends(const Timeline& timeline, int iteration, int m);
// Makes an asynchronous stream's batches the timeline's iterations, as
// simulate() reports them: `iteration_end` gets every run's batch ends but
// its last (the drain), so that period() is a steady batch of the last run,
// and `iterations` counts batches.
void batches_as_iterations(int m, Timeline* timeline);

// The token slices of a terapipe config, in tokens (in equal units when
// there is no model): schedule.slices equal ones, or TeraPipe's optimal cut
// for the model's costs. Empty for other kinds.
Result<std::vector<int>> slice_lengths_for(const Config& config);
// The config's schedule: generated for its kind and (p, m, v) with `slices`
// token slices (correct by construction; Engine::run checks its coverage
// all the same), or read from schedule.file for kind "custom" and validated.
// zb-auto judges its candidates with `calibration` applied (as simulate()
// takes it: null for the profile's own).
// `notes`, when given, gets what reading a custom schedule's file had to
// interpret (an older PyTorch spelling).
Result<Schedule> schedule_for(const Config& config, int slices = 1,
                              const Calibration* calibration = nullptr,
                              std::vector<std::string>* notes = nullptr);
// Reads a CSV schedule (one row per rank) and checks that it has the
// config's ranks, stages and microbatches, and that it is valid.
Result<ScheduleFile> load_schedule_csv(const std::string& path, const Config& config);
// `engine`, when given, is reused (its buffers survive between calls): the
// explorer passes one per thread. The cost table is the profile's
// calibration applied (sim/calibration.h), or `calibration` instead when
// given (`ppsim calibrate` cross-validating a fit); `costs` holds it so.
Result<Simulation> simulate(const Config& config, Engine* engine = nullptr,
                            const Calibration* calibration = nullptr, Keep keep = Keep::kTimeline);

}  // namespace ppsim
