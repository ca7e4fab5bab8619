#include "real_runtime/rank_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "real_runtime/rank_executor_impl.h"
#include "schedules/validate.h"

namespace ppsim::runtime {
namespace {

// Whether the schedule steps inside its programs (see steps_in_programs).
Result<bool> check_schedule(const Schedule& schedule) {
  if (Status st = validate(schedule); !st) return Error{st.message()};
  if (schedule.num_chains > 1) {
    // Its stage p+k would need stage k's weights, kept equal by summing the
    // two copies' gradients: not built.
    return Error{fmt::format(
        "schedule {}: the runtime runs one chain of stages, not {} (DualPipe holds the model "
        "twice); simulate it instead",
        schedule.name, schedule.num_chains)};
  }
  if (!schedule.comm_posts.empty()) {
    // Its transfers leave when their actions end, as the simulator's do for
    // a compute-only file: the posts would not be what it measures.
    return Error{fmt::format(
        "schedule {}: the runtime sends every output when its action ends and does not follow a "
        "file's SEND/RECV cells; give it the compute-only form of the file",
        schedule.name)};
  }
  return steps_in_programs(schedule);
}

// RunSettings::fail_at's action: one the rank runs, in an iteration the run
// has (a hook that can never fire would let a fault test pass unexercised).
Result<Action> fail_action(const Schedule& schedule, const RunSettings& settings) {
  const FailAt& at = *settings.fail_at;
  Result<Action> a = parse_action(at.action);
  if (!a) return a.error();
  if (at.rank < 0 || at.rank >= schedule.num_ranks) {
    return Error{fmt::format("fail_at: rank {}: the schedule has ranks 0 to {}", at.rank,
                             schedule.num_ranks - 1)};
  }
  const std::vector<Action>& program = schedule.programs[at.rank];
  if (std::find(program.begin(), program.end(), *a) == program.end()) {
    return Error{fmt::format("fail_at: rank {} does not run {} in schedule {}", at.rank, at.action,
                             schedule.name)};
  }
  if (at.iteration < 0 || at.iteration >= settings.iterations) {
    return Error{fmt::format("fail_at: iteration {}: the run has iterations 0 to {}", at.iteration,
                             settings.iterations - 1)};
  }
  return a;
}

}  // namespace

Result<RunPlan> plan_run(const Schedule& schedule, const RuntimeModel& model,
                         const RunSettings& settings) {
  Result<bool> asynchronous = check_schedule(schedule);
  if (!asynchronous) return asynchronous.error();
  if (Status st = check_model(model, schedule.num_stages); !st) return Error{st.message()};
  if (settings.iterations < 1) {
    return Error{
        fmt::format("run settings: iterations must be at least 1, got {}", settings.iterations)};
  }
  if (!std::isfinite(settings.learning_rate) || settings.learning_rate < 0) {
    return Error{
        fmt::format("run settings: the learning rate must be a finite number, 0 or more, "
                    "got {}",
                    settings.learning_rate)};
  }
  RunPlan plan;
  plan.schedule = &schedule;
  plan.model = model;
  plan.settings = settings;
  plan.steps_in_programs = *asynchronous;
  Result<std::vector<int>> lengths = slice_lengths(model, schedule.num_slices);
  if (!lengths) return lengths.error();
  plan.lengths = std::move(*lengths);
  if (settings.fail_at) {
    Result<Action> a = fail_action(schedule, settings);
    if (!a) return a.error();
    plan.fail_action = *a;
  }
  plan.per_iteration = static_cast<int64_t>(schedule.num_actions());
  int32_t offset = 0;
  for (const auto& program : schedule.programs) {
    plan.program_offset.push_back(offset);
    offset += static_cast<int32_t>(program.size());
  }
  return plan;
}

template class RankExecutor<StageCompute<float>>;
template class RankExecutor<StageCompute<double>>;

RunResult assemble(const RunPlan& plan, int scalar_bytes, std::vector<RankLog> logs) {
  const Schedule& schedule = *plan.schedule;
  const int iterations = plan.settings.iterations;
  RunResult result;
  Timeline& t = result.timeline;
  t.num_ranks = schedule.num_ranks;
  t.iterations = iterations;
  t.num_slices = schedule.num_slices;
  t.actions.resize(plan.per_iteration * iterations);
  t.iteration_end.assign(iterations, 0);
  t.static_bytes.assign(schedule.num_ranks, 0);
  std::vector<const StageLog*> stages(schedule.num_stages, nullptr);
  for (int r = 0; r < schedule.num_ranks; ++r) {
    RankLog& log = logs[r];
    const size_t n = schedule.programs[r].size();
    PPSIM_CHECK(log.actions.size() == n * iterations);
    for (int it = 0; it < iterations; ++it) {
      std::copy_n(log.actions.begin() + it * n, n,
                  t.actions.begin() + it * plan.per_iteration + plan.program_offset[r]);
    }
    t.transfers.insert(t.transfers.end(), log.transfers.begin(), log.transfers.end());
    t.epilogue.insert(t.epilogue.end(), log.epilogue.begin(), log.epilogue.end());
    t.peak_activation_bytes.push_back(log.peak);
    for (const StageLog& s : log.stages) stages[s.stage] = &s;
  }
  result.losses = logs[schedule.stage_rank[schedule.num_stages - 1]].losses;
  std::sort(t.transfers.begin(), t.transfers.end(),
            [](const TransferRecord& a, const TransferRecord& b) {
              return std::tie(a.start, a.producer) < std::tie(b.start, b.producer);
            });
  std::sort(t.epilogue.begin(), t.epilogue.end(),
            [](const EpilogueRecord& a, const EpilogueRecord& b) {
              return std::tie(a.iteration, a.kind, a.rank) < std::tie(b.iteration, b.kind, b.rank);
            });
  for (const EpilogueRecord& e : t.epilogue) {
    t.iteration_end[e.iteration] = std::max(t.iteration_end[e.iteration], e.end);
    t.makespan = std::max(t.makespan, e.end);
  }
  // An asynchronous schedule's iteration ends with its last action.
  for (const ActionRecord& a : t.actions) {
    t.iteration_end[a.iteration] = std::max(t.iteration_end[a.iteration], a.end);
    t.makespan = std::max(t.makespan, a.end);
  }
  for (const StageLog* s : stages) {
    PPSIM_CHECK(s != nullptr);
    t.stage_memory.insert(t.stage_memory.end(), s->memory.begin(), s->memory.end());
    result.weights.push_back(s->weights);
    result.weight_versions.push_back(s->weight_versions);
    result.weight_bytes.push_back(s->weight_bytes);
  }
  // micro_batch * hidden scalars per token of a transfer.
  const int64_t rows = static_cast<int64_t>(plan.model.micro_batch) * plan.model.hidden;
  for (int s = 0; s + 1 < schedule.num_stages; ++s) {
    for (int j = 0; j < schedule.num_slices; ++j) {
      t.p2p_bytes.push_back(rows * plan.lengths[j] * scalar_bytes);
    }
  }
  return result;
}

}  // namespace ppsim::runtime
