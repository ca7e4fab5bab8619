#include "real_runtime/rank_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <stdexcept>
#include <tuple>

#include "schedules/validate.h"

namespace ppsim::runtime {
namespace {

// Whether the schedule steps inside its programs (see steps_in_programs).
Result<bool> check_schedule(const Schedule& schedule) {
  if (Status st = validate(schedule); !st) return Error{st.message()};
  return steps_in_programs(schedule);
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
  RunPlan plan;
  plan.schedule = &schedule;
  plan.model = model;
  plan.settings = settings;
  plan.steps_in_programs = *asynchronous;
  Result<std::vector<int>> lengths = slice_lengths(model, schedule.num_slices);
  if (!lengths) return lengths.error();
  plan.lengths = std::move(*lengths);
  if (settings.fail_at) {
    Result<Action> a = parse_action(settings.fail_at->action);
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

template <typename S>
RankExecutor<S>::RankExecutor(const RunPlan& plan, int rank, Transport<S>* transport,
                              const RunClock* clock)
    : plan_(plan),
      schedule_(*plan.schedule),
      rank_(rank),
      transport_(transport),
      clock_(clock),
      stages_(schedule_.num_stages) {
  for (int s = 0; s < schedule_.num_stages; ++s) {
    if (schedule_.stage_rank[s] != rank) continue;
    stages_[s] = std::make_unique<StageCompute<S>>(plan.model, s, schedule_.num_stages,
                                                   schedule_.num_microbatches, plan.lengths);
  }
  log_.actions.reserve(schedule_.programs[rank].size() * plan.settings.iterations);
}

template <typename S>
RankExecutor<S>::~RankExecutor() = default;

// The rank's boundary: nothing thrown inside a rank leaves it.
template <typename S>
bool RankExecutor<S>::run() {
  std::string where = "start";
  try {
    const auto& program = schedule_.programs[rank_];
    for (int it = 0; it < plan_.settings.iterations; ++it) {
      for (size_t pos = 0; pos < program.size(); ++pos) {
        where = to_string(program[pos]);
        transport_->entering(rank_, it, where);
        const int32_t index =
            static_cast<int32_t>(it * plan_.per_iteration + plan_.program_offset[rank_] + pos);
        execute(it, program[pos], index);
      }
      where = "optimizer step";
      transport_->entering(rank_, it, where);
      epilogue(it);
    }
    where = "end";
    for (int s = 0; s < schedule_.num_stages; ++s) {
      if (!stages_[s]) continue;
      StageLog stage{s,
                     {},
                     stages_[s]->weights(),
                     stages_[s]->max_weight_versions(),
                     stages_[s]->weight_bytes()};
      for (int j = 0; j < schedule_.num_slices; ++j) {
        stage.memory.push_back({stages_[s]->activation_bytes(j), stages_[s]->weight_grad_bytes(j)});
      }
      log_.stages.push_back(std::move(stage));
    }
    return true;
  } catch (const Aborted&) {
    // Another rank failed and reported it.
  } catch (const std::exception& e) {
    transport_->fail(fmt::format("rank {}, {}: {}", rank_, where, e.what()));
  } catch (...) {
    transport_->fail(fmt::format("rank {}, {}: unknown exception", rank_, where));
  }
  return false;
}

// Receives the input of `index` under its own stage's key.
template <typename S>
kernels::Mat<S> RankExecutor<S>::receive(MessageKind kind, const Action& a, int32_t index) {
  Message<S> m = transport_->receive(rank_, MessageKey{kind, a.microbatch, a.stage, a.slice});
  if (m.src_rank != rank_) {
    log_.transfers.push_back(TransferRecord{m.producer, index, m.send_start, m.send_end});
  }
  return std::move(m.data);
}

template <typename S>
void RankExecutor<S>::send(MessageKind kind, const Action& a, int to_stage, kernels::Mat<S> data,
                           int32_t index) {
  Message<S> m;
  m.producer = index;
  m.src_rank = rank_;
  m.send_start = clock_->now();
  m.data = std::move(data);
  transport_->send(schedule_.stage_rank[to_stage],
                   MessageKey{kind, a.microbatch, to_stage, a.slice}, std::move(m));
}

template <typename S>
void RankExecutor<S>::execute(int it, const Action& a, int32_t index) {
  const RunSettings& settings = plan_.settings;
  if (plan_.fail_action && settings.fail_at->rank == rank_ && settings.fail_at->iteration == it &&
      *plan_.fail_action == a) {
    if (settings.fail_at->kill) std::raise(SIGKILL);
    throw std::runtime_error("injected failure (RunSettings::fail_at)");
  }
  StageCompute<S>& stage = *stages_[a.stage];
  RankLog& log = log_;
  const int64_t held_before = stage.held_bytes(a.microbatch, a.slice);
  kernels::Mat<S> in, out;
  bool send_out = false;
  int to_stage = 0;
  MessageKind out_kind = MessageKind::kActivation;
  if (a.kind == ActionKind::kForward && !stage.first()) {
    in = receive(MessageKind::kActivation, a, index);
  } else if (sends_input_gradient(a.kind) && !stage.last()) {
    in = receive(MessageKind::kGradient, a, index);
  }
  log.actions.push_back(ActionRecord{a, rank_, it, clock_->now(), 0});
  ActionRecord& record = log.actions.back();
  switch (a.kind) {
    case ActionKind::kForward: {
      // Only the last stage computes a loss; the others get no slot for one.
      double* loss = nullptr;
      if (stage.last()) {
        log.losses.resize(settings.iterations, 0.0);
        loss = &log.losses[it];
      }
      out = stage.forward(it, a.microbatch, a.slice, in, loss);
      send_out = !stage.last();
      to_stage = a.stage + 1;
      break;
    }
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      out = a.kind == ActionKind::kBackward ? stage.backward(it, a.microbatch, a.slice, in)
                                            : stage.backward_input(a.microbatch, a.slice, in);
      send_out = !stage.first();
      to_stage = a.stage - 1;
      out_kind = MessageKind::kGradient;
      break;
    case ActionKind::kBackwardWeight:
      stage.backward_weight(it, a.microbatch, a.slice);
      break;
    case ActionKind::kStep:  // the microbatches in flight keep the versions they stashed
      stage.sgd_step(settings.learning_rate);
      break;
  }
  record.end = clock_->now();
  log.busy += record.end - record.start;
  log.held += stage.held_bytes(a.microbatch, a.slice) - held_before;
  log.peak = std::max(log.peak, log.held);
  if (send_out) send(out_kind, a, to_stage, std::move(out), index);
}

template <typename S>
void RankExecutor<S>::epilogue(int it) {
  // Asynchronous schedules stepped in their S actions and never flush.
  if (plan_.steps_in_programs) return;
  // Synchronous step: every rank waits for the whole pipeline first.
  const Picos sync_start = clock_->now();
  transport_->barrier(rank_);
  const Picos step_start = clock_->now();
  log_.epilogue.push_back({EpilogueKind::kPipelineSync, rank_, it, sync_start, step_start});
  for (auto& stage : stages_) {
    if (stage) stage->sgd_step(plan_.settings.learning_rate);
  }
  log_.epilogue.push_back({EpilogueKind::kOptimizerStep, rank_, it, step_start, clock_->now()});
}

template class RankExecutor<float>;
template class RankExecutor<double>;

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
    t.busy.push_back(log.busy);
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
