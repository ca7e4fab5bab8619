// The layer split: which contiguous layers each pipeline stage holds. A
// pipeline runs at the pace of its slowest stage, so the split that matters is
// the one minimising the largest stage time (min-max partition of a sequence,
// solved exactly by dynamic programming). The embedding on stage 0 and the
// logits and loss on the last stage make the even split lopsided; this moves
// layers off the stages that carry them.
#pragma once

#include <vector>

#include "schedules/status.h"
#include "sim/core/workload.h"

namespace ppsim {

// Min-max partition by dynamic programming: `layer_cost[i]` is layer i's time
// (forward + backward), stage 0 also pays `first_extra` (embedding), the last
// stage `last_extra` (logits and loss); with one stage it pays both. Returns
// the layers per stage (each >= 1, summing to layer_cost.size()) minimising
// the largest stage cost. Among those, the most even: the least sum of
// squared stage costs; and among those, the lexicographically smallest, so
// that earlier stages get fewer layers (in 1F1B stage k keeps p - k
// microbatches of activations, the most on stage 0). Costs
// within a relative 1e-9 of each other count as equal in both comparisons:
// equal layers summed at different offsets round differently, and must still
// tie. E.g. 10 equal layers over 4 stages: {2, 2, 3, 3}.
// Errors: stages < 1, fewer layers than stages, a negative or non-finite cost
// or extra, or costs too large to square their sum in a double.
// O(L^2 S) time, O(L S) memory.
Result<std::vector<int>> partition_layers(const std::vector<double>& layer_cost, int stages,
                                          double first_extra, double last_extra);

// The split of config.model's layers over config.num_stages() stages that
// partition_layers finds for the analytic model's times (piece_times in
// cost_model.h: one layer of each kind, dense or mixture-of-experts, the
// embedding, the logits and loss, all per
// microbatch on a whole sequence, with rank 0's tensor-parallel link for every
// stage). costs.fixed does not enter: its figures are per stage, not per layer.
// It ignores config.parallel.layers_per_stage (this is what one would put
// there). Without hardware there are no times, and it returns the even split
// (layers_per_stage in cost_model.h).
// Errors: no model (nothing to split), fewer layers than stages, or a hardware
// figure the analytic model needs that is zero.
Result<std::vector<int>> balanced_layers(const Config& config);

}  // namespace ppsim
