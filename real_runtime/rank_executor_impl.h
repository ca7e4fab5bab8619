// RankExecutor's member definitions (rank_executor.h), for the files that
// instantiate it for a stage type. Internal to real_runtime/.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <stdexcept>

#include "real_runtime/rank_executor.h"

namespace ppsim::runtime {

template <typename Stage>
RankExecutor<Stage>::RankExecutor(const RunPlan& plan, int rank, Transport<Tensor>* transport,
                                  const RunClock* clock, const StageFactory& make_stage)
    : plan_(plan),
      schedule_(*plan.schedule),
      rank_(rank),
      transport_(transport),
      clock_(clock),
      stages_(schedule_.num_stages) {
  for (int s = 0; s < schedule_.num_stages; ++s) {
    if (schedule_.stage_rank[s] != rank) continue;
    stages_[s] = make_stage(s);
  }
  log_.actions.reserve(schedule_.programs[rank].size() * plan.settings.iterations);
}

template <typename Stage>
RankExecutor<Stage>::~RankExecutor() = default;

// The rank's boundary: nothing thrown inside a rank leaves it.
template <typename Stage>
bool RankExecutor<Stage>::run() {
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
    transport_->abort_run(fmt::format("rank {}, {}: {}", rank_, where, e.what()));
  } catch (...) {
    transport_->abort_run(fmt::format("rank {}, {}: unknown exception", rank_, where));
  }
  return false;
}

// Receives the input of `index` under its own stage's key.
template <typename Stage>
typename RankExecutor<Stage>::Tensor RankExecutor<Stage>::receive(MessageKind kind, const Action& a,
                                                                  int32_t index) {
  Message<Tensor> m = transport_->receive(rank_, MessageKey{kind, a.microbatch, a.stage, a.slice});
  if (m.src_rank != rank_) {
    log_.transfers.push_back(TransferRecord{m.producer, index, m.send_start, m.send_end});
  }
  return std::move(m.data);
}

template <typename Stage>
void RankExecutor<Stage>::send(MessageKind kind, const Action& a, int to_stage, Tensor data,
                               int32_t index) {
  Message<Tensor> m;
  m.producer = index;
  m.src_rank = rank_;
  m.send_start = clock_->now();
  m.data = std::move(data);
  transport_->send(schedule_.stage_rank[to_stage],
                   MessageKey{kind, a.microbatch, to_stage, a.slice}, std::move(m));
}

template <typename Stage>
void RankExecutor<Stage>::execute(int it, const Action& a, int32_t index) {
  const RunSettings& settings = plan_.settings;
  if (plan_.fail_action && settings.fail_at->rank == rank_ && settings.fail_at->iteration == it &&
      *plan_.fail_action == a) {
    if (settings.fail_at->kill) std::raise(SIGKILL);
    throw std::runtime_error("injected failure (RunSettings::fail_at)");
  }
  Stage& stage = *stages_[a.stage];
  RankLog& log = log_;
  const int64_t held_before = stage.held_bytes(a.microbatch, a.slice);
  Tensor in, out;
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
  const uint64_t id = static_cast<uint64_t>(index) + 1;
  transport_->compute_begin(rank_, id);
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
  transport_->compute_end(rank_, id);
  record.end = clock_->now();
  log.held += stage.held_bytes(a.microbatch, a.slice) - held_before;
  log.peak = std::max(log.peak, log.held);
  if (send_out) send(out_kind, a, to_stage, std::move(out), index);
}

template <typename Stage>
void RankExecutor<Stage>::epilogue(int it) {
  // Asynchronous schedules stepped in their S actions and never flush.
  if (plan_.steps_in_programs) return;
  // Synchronous step: every rank waits for the whole pipeline first.
  const Picos sync_start = clock_->now();
  transport_->barrier(rank_);
  const Picos step_start = clock_->now();
  log_.epilogue.push_back({EpilogueKind::kPipelineSync, rank_, it, sync_start, step_start});
  transport_->compute_begin(rank_, 0);
  for (auto& stage : stages_) {
    if (stage) stage->sgd_step(plan_.settings.learning_rate);
  }
  transport_->compute_end(rank_, 0);
  log_.epilogue.push_back({EpilogueKind::kOptimizerStep, rank_, it, step_start, clock_->now()});
}

}  // namespace ppsim::runtime
