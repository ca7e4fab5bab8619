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
        if (program[pos].overlaps_next) {
          execute_pair(it, program[pos], program[pos + 1], index);
          ++pos;
        } else {
          execute(it, program[pos], index);
        }
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
void RankExecutor<Stage>::fail_if_asked(int it, const Action& a) const {
  const RunSettings& settings = plan_.settings;
  if (plan_.fail_action && settings.fail_at->rank == rank_ && settings.fail_at->iteration == it &&
      *plan_.fail_action == a) {
    if (settings.fail_at->kill) std::raise(SIGKILL);
    throw std::runtime_error("injected failure (RunSettings::fail_at)");
  }
}

template <typename Stage>
typename RankExecutor<Stage>::Tensor RankExecutor<Stage>::input_of(const Action& a, int32_t index) {
  const Stage& stage = *stages_[a.stage];
  if (a.kind == ActionKind::kForward && !stage.first()) {
    return receive(MessageKind::kActivation, a, index);
  }
  if (sends_input_gradient(a.kind) && !stage.last()) {
    return receive(MessageKind::kGradient, a, index);
  }
  return Tensor{};
}

template <typename Stage>
typename RankExecutor<Stage>::Output RankExecutor<Stage>::compute(int it, const Action& a,
                                                                  int32_t index, const Tensor& in) {
  const RunSettings& settings = plan_.settings;
  Stage& stage = *stages_[a.stage];
  RankLog& log = log_;
  const int64_t held_before = stage.held_bytes(a.microbatch, a.slice);
  Output out;
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
      out.data = stage.forward(it, a.microbatch, a.slice, in, loss);
      out.send = !stage.last();
      out.to_stage = a.stage + 1;
      break;
    }
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      out.data = a.kind == ActionKind::kBackward ? stage.backward(it, a.microbatch, a.slice, in)
                                                 : stage.backward_input(a.microbatch, a.slice, in);
      out.send = !stage.first();
      out.to_stage = a.stage - 1;
      out.kind = MessageKind::kGradient;
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
  return out;
}

template <typename Stage>
void RankExecutor<Stage>::hand_on(const Action& a, Output out, int32_t index) {
  if (out.send) send(out.kind, a, out.to_stage, std::move(out.data), index);
}

template <typename Stage>
void RankExecutor<Stage>::execute(int it, const Action& a, int32_t index) {
  fail_if_asked(it, a);
  const Tensor in = input_of(a, index);
  hand_on(a, compute(it, a, index, in), index);
}

// As the simulator runs a pair: both inputs in first, both outputs on at
// the end. The two computations run one after the other (no overlap here).
template <typename Stage>
void RankExecutor<Stage>::execute_pair(int it, const Action& forward, const Action& backward,
                                       int32_t index) {
  fail_if_asked(it, forward);
  fail_if_asked(it, backward);
  const Tensor forward_in = input_of(forward, index);
  const Tensor backward_in = input_of(backward, index + 1);
  Output forward_out = compute(it, forward, index, forward_in);
  Output backward_out = compute(it, backward, index + 1, backward_in);
  hand_on(forward, std::move(forward_out), index);
  hand_on(backward, std::move(backward_out), index + 1);
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
