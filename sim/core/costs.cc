#include "sim/core/costs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace ppsim {
namespace {

// "" when `t` is a duration ppsim replays, else what is wrong with it.
std::string duration_problem(Picos t) {
  if (t < 0) return "is not a duration (negative or not a number)";
  if (t > kMaxDuration) {
    return fmt::format("is more than {:g} s (11.6 days), the longest ppsim simulates",
                       kMaxDurationSeconds);
  }
  return "";
}

std::string bytes_problem(int64_t bytes) {
  if (bytes < 0) return "is not a byte count (negative or not a number)";
  if (bytes > kMaxBytes) return "is more than 1 PiB, which no GPU holds";
  return "";
}

// Where the figures of a cost table come from, for the user to look at.
constexpr const char* kFrom =
    " (from costs.fixed, or from the model and hardware: check their sizes, peak FLOP/s, "
    "bandwidths and efficiencies)";

Status check_stages(const CostTable& costs) {
  const int k = costs.num_slices;
  for (size_t i = 0; i < costs.stages.size(); ++i) {
    const StageCost& c = costs.stages[i];
    const std::string where =
        k == 1 ? fmt::format("stage {}", i) : fmt::format("stage {} slice {}", i / k, i % k);
    struct Entry {
      const char* what;
      std::string problem;
    };
    for (const Entry& e : {Entry{"forward time", duration_problem(c.forward)},
                           Entry{"backward time", duration_problem(c.backward)},
                           Entry{"weight-gradient time", duration_problem(c.weight_grad)},
                           Entry{"forward communication", duration_problem(c.forward_comm)},
                           Entry{"backward communication", duration_problem(c.backward_comm)},
                           Entry{"backward overlap", duration_problem(c.backward_overlap)},
                           Entry{"action overhead", duration_problem(c.action_overhead)},
                           Entry{"activation bytes", bytes_problem(c.activation_bytes)},
                           Entry{"weight-gradient bytes", bytes_problem(c.weight_grad_bytes)}}) {
      if (!e.problem.empty())
        return Error{fmt::format("{}: {} {}{}", where, e.what, e.problem, kFrom)};
    }
    if (c.weight_grad > c.backward) {
      return Error{
          fmt::format("{}: the weight-gradient time is more than the backward time it is "
                      "part of{}",
                      where, kFrom)};
    }
    if (c.backward_overlap > std::min(c.weight_grad, c.backward_comm)) {
      return Error{fmt::format(
          "{}: the backward's overlap is more than its weight gradient or its communication{}",
          where, kFrom)};
    }
    if (c.forward_comm > c.forward || c.backward_comm > input_grad_time(c)) {
      return Error{fmt::format(
          "{}: the communication of the {} is more than the time it is part of{}", where,
          c.forward_comm > c.forward ? "forward"
                                     : "input gradient (backward less weight gradient, plus the "
                                       "backward's overlap)",
          kFrom)};
    }
  }
  return {};
}

Status check_per_rank(const CostTable& costs) {
  for (size_t i = 0; i < costs.p2p_forward.size(); ++i) {
    for (Picos t : {costs.p2p_forward[i], costs.p2p_backward[i]}) {
      if (std::string p = duration_problem(t); !p.empty()) {
        return Error{fmt::format("the transfer after stage {}: its time {}{}", i / costs.num_slices,
                                 p, kFrom)};
      }
    }
  }
  for (size_t r = 0; r < costs.grad_sync.size(); ++r) {
    for (Picos t : {costs.grad_sync[r], costs.optimizer_step[r]}) {
      if (std::string p = duration_problem(t); !p.empty()) {
        return Error{fmt::format("rank {}: its gradient sync or optimizer step {}{}", r, p, kFrom)};
      }
    }
  }
  for (size_t r = 0; r < costs.static_bytes.size(); ++r) {
    if (std::string p = bytes_problem(costs.static_bytes[r]); !p.empty()) {
      return Error{
          fmt::format("rank {}: its weights, gradients and optimizer state {}{}", r, p, kFrom)};
    }
  }
  for (size_t r = 0; r < costs.working_bytes.size(); ++r) {
    if (std::string p = bytes_problem(costs.working_bytes[r]); !p.empty()) {
      return Error{
          fmt::format("rank {}: its working set (recomputation, logits) {}{}", r, p, kFrom)};
    }
  }
  if (std::string p = duration_problem(costs.pipeline_sync); !p.empty()) {
    return Error{fmt::format("the pipeline-wide all-reduce {}{}", p, kFrom)};
  }
  return {};
}

}  // namespace

int64_t bytes_to_int(double bytes) {
  if (!(bytes >= 0)) return -1;
  if (bytes > static_cast<double>(kMaxBytes)) return kMaxBytes + 1;
  return std::llround(bytes);
}

Status check_costs(const CostTable& costs, const std::vector<int>& stage_rank, int microbatches) {
  if (Status st = check_stages(costs); !st) return st;
  if (Status st = check_per_rank(costs); !st) return st;
  if (!(costs.comm_sm_fraction >= 0 && costs.comm_sm_fraction < 1)) {
    return Error{fmt::format("comm_sm_fraction is {}: a share of the SMs from 0 to below 1",
                             costs.comm_sm_fraction)};
  }
  // What a rank can hold at once is at most what all its forwards (and the
  // I that keep more than their F) take in one iteration.
  const int ranks =
      stage_rank.empty() ? 0 : *std::max_element(stage_rank.begin(), stage_rank.end()) + 1;
  std::vector<double> held(ranks, 0.0);
  for (size_t i = 0; i < costs.stages.size(); ++i) {
    const StageCost& c = costs.stages[i];
    const double most = static_cast<double>(std::max(c.activation_bytes, c.weight_grad_bytes));
    held[stage_rank[i / costs.num_slices]] += most * microbatches;
  }
  for (size_t rank = 0; rank < held.size(); ++rank) {
    if (held[rank] > 0x1p62) {
      return Error{fmt::format(
          "rank {}: its activations could reach {:.3g} bytes, past the 2^62 ppsim accounts and "
          "far past any GPU: use more pipeline stages, recomputation or smaller microbatches",
          rank, held[rank])};
    }
  }
  return {};
}

Picos overlapped_pair_time(Picos forward, Picos forward_comm, Picos backward, Picos backward_comm,
                           double comm_sm_fraction) {
  const auto saved = [&](Picos comm) {
    return static_cast<Picos>(std::llround(static_cast<double>(comm) * (1 - comm_sm_fraction)));
  };
  const Picos hidden = std::min(saved(forward_comm), backward - backward_comm) +
                       std::min(saved(backward_comm), forward - forward_comm);
  return forward + backward - hidden;
}

void cap_communication(StageCost& cost) {
  cost.forward_comm = std::min(cost.forward_comm, cost.forward);
  cost.backward_overlap = std::min(cost.backward_overlap, cost.weight_grad);
  cost.backward_comm = std::min(cost.backward_comm, input_grad_time(cost));
  cost.backward_overlap = std::min(cost.backward_overlap, cost.backward_comm);
}

CostTable uniform_costs(int num_stages, int num_ranks, Picos forward, Picos backward, Picos p2p,
                        int64_t activation_bytes, int num_slices) {
  CostTable table;
  table.num_slices = num_slices;
  table.stages.assign(static_cast<size_t>(num_stages) * num_slices,
                      StageCost{forward, backward, 0, activation_bytes});
  const int boundaries = num_stages > 0 ? (num_stages - 1) * num_slices : 0;
  table.p2p_forward.assign(boundaries, p2p);
  table.p2p_backward.assign(boundaries, p2p);
  table.p2p_bytes.assign(boundaries, 0);
  table.static_bytes.assign(num_ranks, 0);
  table.grad_sync.assign(num_ranks, 0);
  table.optimizer_step.assign(num_ranks, 0);
  return table;
}

}  // namespace ppsim
