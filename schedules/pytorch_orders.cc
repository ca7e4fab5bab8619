#include "schedules/pytorch_orders.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "schedules/generator_util.h"

namespace ppsim {
namespace {

// Counts each local stage's actions of one kind, so that each gets the next
// microbatch of its stage.
class StageCounters {
 public:
  StageCounters(int p, int v, int rank) : p_(p), rank_(rank), next_(v, 0) {}
  int next(int stage) { return next_[(stage - rank_) / p_]++; }

 private:
  int p_;
  int rank_;
  std::vector<int> next_;
};

}  // namespace

Result<Schedule> make_looped_bfs(const ScheduleParams& params) {
  if (Status st = generator_util::check_params("looped-bfs", params, 0, ""); !st) {
    return Error{st.message()};
  }
  const int p = params.ranks;
  const int m = params.microbatches;
  const int v = params.virtual_stages;
  Schedule s = generator_util::make_empty("looped-bfs", params);
  for (int rank = 0; rank < p; ++rank) {
    auto& program = s.programs[rank];
    program.reserve(2 * static_cast<size_t>(m) * v);
    for (int chunk = 0; chunk < v; ++chunk) {
      for (int mb = 0; mb < m; ++mb) {
        program.push_back(Action{ActionKind::kForward, chunk * p + rank, mb});
      }
    }
    for (int chunk = v - 1; chunk >= 0; --chunk) {
      for (int mb = m - 1; mb >= 0; --mb) {
        program.push_back(Action{ActionKind::kBackward, chunk * p + rank, mb});
      }
    }
  }
  return s;
}

Result<Schedule> make_interleaved_zb(const ScheduleParams& params) {
  if (Status st = generator_util::check_params("interleaved-zb", params, 0, ""); !st) {
    return Error{st.message()};
  }
  const int p = params.ranks;
  const int m = params.microbatches;
  const int v = params.virtual_stages;
  const int rounds = std::max(1, m / p);
  if (m % rounds != 0) {
    return Error{fmt::format(
        "schedule interleaved-zb: the number of microbatches ({}) must be a multiple of its "
        "rounds, max(1, microbatches / pipeline) = {}; change training.global_batch or "
        "micro_batch",
        m, rounds)};
  }
  const int per_round = m / rounds;
  const int total = v * m;  // forwards (and backwards) per rank
  Schedule s = generator_util::make_empty("interleaved-zb", params);
  for (int rank = 0; rank < p; ++rank) {
    auto& program = s.programs[rank];
    program.reserve(3 * static_cast<size_t>(total));
    const int warmup = std::min((v - 1) * per_round + (p - 1 - rank), total);
    // The k-th forward goes through the local stages round by round; the
    // k-th backward the other way, starting with the last stage.
    const auto forward_stage = [&](int k) { return (k / per_round) % v * p + rank; };
    const auto backward_stage = [&](int k) { return (v - 1 - (k / per_round) % v) * p + rank; };
    StageCounters forwards(p, v, rank);
    StageCounters input_grads(p, v, rank);
    StageCounters weight_grads(p, v, rank);
    std::vector<int> backward_stages;  // of each input gradient so far
    size_t weights = 0;
    const auto weight_grad = [&] {
      const int stage = backward_stages[weights++];
      program.push_back(Action{ActionKind::kBackwardWeight, stage, weight_grads.next(stage)});
    };
    for (int k = 0; k < warmup + total; ++k) {
      if (k < total) {
        const int stage = forward_stage(k);
        program.push_back(Action{ActionKind::kForward, stage, forwards.next(stage)});
      }
      if (k < warmup) continue;
      const int stage = backward_stage(k - warmup);
      program.push_back(Action{ActionKind::kBackwardInput, stage, input_grads.next(stage)});
      backward_stages.push_back(stage);
      // Rank r holds back its first r weight gradients.
      if (k - warmup >= rank) weight_grad();
    }
    while (weights < backward_stages.size()) weight_grad();
  }
  return s;
}

}  // namespace ppsim
