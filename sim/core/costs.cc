#include "sim/core/costs.h"

namespace ppsim {

int64_t freed_bytes(const StageCost& c, ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
    case ActionKind::kStep:
      return 0;
    case ActionKind::kBackward:
      return c.activation_bytes;
    case ActionKind::kBackwardInput:
      return c.activation_bytes - c.weight_grad_bytes;
    case ActionKind::kBackwardWeight:
      return c.weight_grad_bytes;
  }
  return 0;
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
