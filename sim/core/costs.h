// What the engine needs to replay a schedule: durations per stage and action
// kind, transfer times between stages, and memory per rank. Built from a
// Config by `build_cost_table` (the analytic transformer model, with
// `costs.fixed` overriding it), or by hand in tests.
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/action.h"
#include "schedules/status.h"
#include "sim/core/time.h"
#include "sim/core/workload.h"

namespace ppsim {

struct StageCost {
  Picos forward = 0;
  Picos backward = 0;     // full backward (B); I takes input_grad_time
  Picos weight_grad = 0;  // W, part of backward
  // Taken when F(mb) starts and kept until its B ends. With a split
  // backward, I leaves weight_grad_bytes held until W gives them back: the
  // inputs of the linear layers, which W reads, and whatever gradients I
  // stashes for W. That may be more than F took (I then allocates the
  // difference rather than freeing it).
  int64_t activation_bytes = 0;
  int64_t weight_grad_bytes = 0;
  // The communication inside forward and inside the input-gradient part of
  // backward (input_grad_time) that an overlapped pair's other action
  // can hide under its compute (overlapped_pair_time).
  Picos forward_comm = 0;
  Picos backward_comm = 0;
  // What B saves over its I then its W: I's collectives that run beside W's
  // GEMMs when both are one action (parallel.tp_backward_overlap), so
  // backward = I + W - backward_overlap; an I on its own pays it. At most
  // weight_grad and backward_comm.
  Picos backward_overlap = 0;
  // What every action of the stage (F, B, I or W) takes beyond the times
  // above (HardwareSpec::action_overhead_us): B pays it once, its I and W
  // each once.
  Picos action_overhead = 0;
};

// Figures per stage are per (stage, token slice) when a schedule cuts
// microbatches into slices: entry `stage * num_slices + slice`, and likewise
// per (boundary, slice) for transfers.
struct CostTable {
  int num_slices = 1;
  std::vector<StageCost> stages;  // num_stages * num_slices
  // Transfer time of the activation from stage s to s+1 and of the gradient
  // from s+1 back to s; (num_stages - 1) * num_slices. Ignored when both
  // stages share a rank.
  std::vector<Picos> p2p_forward;
  std::vector<Picos> p2p_backward;
  std::vector<int64_t> p2p_bytes;  // bytes of one such transfer
  // Per rank: bytes that stay for the whole iteration (weights, gradients,
  // optimizer state), and the end-of-iteration work.
  std::vector<int64_t> static_bytes;
  // Per rank: what it holds for a while beyond its microbatches'
  // activations, at most once at a time (full recomputation's working set of
  // one layer, the last stage's logits and their fp32 softmax); counted in
  // its peak memory. Empty: none.
  std::vector<int64_t> working_bytes;
  // Per stage, its weights in the model's dtype on one GPU: what each extra
  // weight version of an asynchronous schedule costs. Empty without a model.
  std::vector<int64_t> stage_weight_bytes;
  std::vector<Picos> grad_sync;       // data-parallel gradient reduction
  std::vector<Picos> optimizer_step;  // optimizer update of the rank's weights
  // A synchronous step's all-reduce of a scalar (the gradient norm) across
  // the pipeline ranks, after every rank has its gradients.
  Picos pipeline_sync = 0;
  // The share of the SMs that an overlapped pair's communication holds
  // (HardwareSpec::comm_sm_fraction; overlapped_pair_time).
  double comm_sm_fraction = 0;

  int num_stages() const { return static_cast<int>(stages.size()) / num_slices; }
};

// The most bytes one entry of a cost table may hold (1 PiB): a figure past
// it cannot be a GPU's, and sums of such entries over a rank's program stay
// far from int64's limit (check_costs bounds them).
inline constexpr int64_t kMaxBytes = int64_t{1} << 50;
// A byte count computed in floating point, rounded to the nearest. One that is no count
// (negative or NaN) becomes -1 and one past kMaxBytes kMaxBytes + 1, for
// check_costs to reject by name.
int64_t bytes_to_int(double bytes);

// OK when every duration of `costs` is in [0, kMaxDuration] and every byte
// count in [0, kMaxBytes], and the activations a rank can hold at once stay
// below 2^62 bytes; otherwise an error naming the entry (stage, slice,
// rank) and the limit. Run before the engine: within these bounds it
// cannot overflow (a run longer than 2^63 ps is its own error).
// `stage_rank` is the schedule's stage -> rank map, `microbatches` its count
// (of a stream, for an asynchronous one).
Status check_costs(const CostTable& costs, const std::vector<int>& stage_rank, int microbatches);

// An overlapped pair's time (Action::overlaps_next): a forward of time
// `forward` and a backward (B or I) of time `backward` run together, and each
// one's communication hides under the other's compute, as far as that
// compute lasts. While communication kernels hold `comm_sm_fraction` s of
// the SMs, the compute beside them runs at 1 - s of its speed, so hiding
// communication c under compute C saves min((1 - s) c, C) instead of
// min(c, C) (the compute stretched by s c while c lasts, or c outlasting
// it): forward + backward - min((1 - s) forward_comm, backward -
// backward_comm) - min((1 - s) backward_comm, forward - forward_comm).
// REQUIRES: 0 <= forward_comm <= forward, 0 <= backward_comm <= backward,
// 0 <= comm_sm_fraction < 1.
Picos overlapped_pair_time(Picos forward, Picos forward_comm, Picos backward, Picos backward_comm,
                           double comm_sm_fraction);

// Caps forward_comm and backward_comm at the times they are part of, after
// those times were set by hand or calibrated, and backward_overlap at
// weight_grad and backward_comm.
void cap_communication(StageCost& cost);

// An input gradient run on its own (I): B less W, plus what B hid beside W.
inline Picos input_grad_time(const StageCost& cost) {
  return cost.backward - cost.weight_grad + cost.backward_overlap;
}

// How long an action of `kind` takes: F forward, B backward, I backward
// less its weight gradient, W the weight gradient, each with the stage's
// action_overhead; 0 for S (a rank's step is its gradient sync and optimizer
// step, not a stage's). Inline: the replay asks for every action.
inline Picos compute_time(const StageCost& cost, ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return cost.forward + cost.action_overhead;
    case ActionKind::kBackward:
      return cost.backward + cost.action_overhead;
    case ActionKind::kBackwardInput:
      return input_grad_time(cost) + cost.action_overhead;
    case ActionKind::kBackwardWeight:
      return cost.weight_grad + cost.action_overhead;
    case ActionKind::kStep:
      break;
  }
  return 0;
}

// Activation bytes an action of `kind` gives back when it ends; negative
// for an I that leaves more than its F took.
inline int64_t freed_bytes(const StageCost& cost, ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
    case ActionKind::kStep:
      return 0;
    case ActionKind::kBackward:
      return cost.activation_bytes;
    case ActionKind::kBackwardInput:
      return cost.activation_bytes - cost.weight_grad_bytes;
    case ActionKind::kBackwardWeight:
      return cost.weight_grad_bytes;
  }
  return 0;
}

// A cost table with the same figures for every (stage, slice) and nothing at
// the end of the iteration; the idealized case of the closed forms.
CostTable uniform_costs(int num_stages, int num_ranks, Picos forward, Picos backward, Picos p2p = 0,
                        int64_t activation_bytes = 0, int num_slices = 1);

}  // namespace ppsim
