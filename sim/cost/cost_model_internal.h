// Internal to the analytic cost model (sim/cost_model.cc,
// sim/cost_model_time.cc, sim/cost_model_comm.cc and sim/cost_model_memory.cc);
// nothing else includes it. What those files share: units, the token slice
// every per-microbatch figure is worked out for, GPU placement and links, and
// the steps that fill a CostTable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "schedules/status.h"
#include "sim/core/costs.h"
#include "sim/core/workload.h"
#include "sim/cost/layer_ops.h"
#include "sim/cost/op_time.h"

namespace ppsim {
namespace cost_model_internal {

inline constexpr double kGiga = 1e9;
inline constexpr double kTera = 1e12;
inline constexpr double kMicro = 1e-6;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A stretch of one microbatch's sequences (TeraPipe's token slice): `tokens`
// positions whose queries attend causally to the `context` positions before
// them and to themselves. The whole sequence is {seq_len, 0}.
struct Slice {
  int64_t tokens = 0;
  int64_t context = 0;

  // Query-key pairs the attention core is charged for, per head and
  // sequence. The unsliced model charges the full s x s score matrix (as
  // Narayanan et al. do), twice the causal triangle; a slice is charged twice
  // its causal share, l c + l^2 / 2. Any cut of s then sums to s^2, so
  // slicing neither adds nor removes attention work.
  int64_t attention_pairs() const { return 2 * tokens * context + tokens * tokens; }
  // Score entries a slice materializes and keeps for backward: its l rows
  // over the c + l keys it attends to. Not additive: the masked blocks above
  // the diagonal that a cut leaves out are never stored.
  int64_t kept_scores() const { return tokens * (context + tokens); }
};

// The part of each sequence one GPU computes (context_rank_slice).
inline Slice rank_sequence(const ModelSpec& model, const ParallelSpec& parallel) {
  const TokenSlice share = context_rank_slice(model.seq_len, parallel.context);
  return Slice{share.tokens, share.context};
}

// How many of stage `stage`'s layers are mixture-of-experts layers: the
// stages hold the model's layers in order, whose first moe.dense_layers are
// dense (none without model.moe).
// Of the model's layers [first, end), the mixture-of-experts ones.
inline int moe_layers_between(const ModelSpec& model, int first, int end) {
  return model.moe ? std::max(0, end - std::max(first, model.moe->dense_layers)) : 0;
}
// A stage's first layer counts from its chain's first stage: each chain
// holds model.layers (stage_layers).
inline int stage_moe_layers(const ModelSpec& model, const std::vector<int>& layers, int stage) {
  int first = 0;
  for (int s = 0; s < stage; ++s) first += layers[s];
  first %= model.layers;
  return moe_layers_between(model, first, first + layers[stage]);
}
// stage_moe_layers of every stage, in one pass.
inline std::vector<int> moe_layers_per_stage(const ModelSpec& model,
                                             const std::vector<int>& layers) {
  std::vector<int> moe(layers.size(), 0);
  int first = 0;
  for (size_t s = 0; s < layers.size(); ++s) {
    moe[s] = moe_layers_between(model, first, first + layers[s]);
    first = (first + layers[s]) % model.layers;  // the next chain starts again
  }
  return moe;
}

// GPU placement in Megatron's order (tensor fastest, then context, then
// data, then pipeline): pipeline rank r owns GPUs [r t cp d, (r + 1) t cp d).
class Placement {
 public:
  Placement(const ParallelSpec& parallel, int gpus_per_node)
      : tensor_(parallel.tensor),
        context_span_(parallel.tensor * parallel.context),
        expert_(parallel.expert),
        gpus_per_rank_(parallel.tensor * parallel.context * parallel.data),
        gpus_per_node_(gpus_per_node) {}

  // Whether each GPU of rank `a` and its counterpart (same tensor and data
  // index) in rank `b` share a node; the slowest pair sets the transfer time.
  bool ranks_share_nodes(int a, int b) const {
    for (int k = 0; k < gpus_per_rank_; ++k) {
      if (node(first_gpu(a) + k) != node(first_gpu(b) + k)) return false;
    }
    return true;
  }
  // Whether every tensor group of the rank lies inside one node.
  bool tensor_groups_in_node(int rank) const {
    for (int k = 0; k < gpus_per_rank_; k += tensor_) {
      if (!in_one_node(first_gpu(rank) + k, tensor_)) return false;
    }
    return true;
  }
  // Whether every context-parallel ring of the rank (cp GPUs strided by t)
  // lies inside one node.
  bool context_groups_in_node(int rank) const {
    for (int k = 0; k < gpus_per_rank_; k += context_span_) {
      if (!in_one_node(first_gpu(rank) + k, context_span_)) return false;
    }
    return true;
  }
  // A data-parallel group (with its context ranks: the d cp GPUs that sum
  // their gradients) is strided by t inside the rank's block, so the groups
  // stay in one node exactly when the whole block does.
  bool data_groups_in_node(int rank) const { return in_one_node(first_gpu(rank), gpus_per_rank_); }
  // How many GPUs of the rank's first tensor (data-parallel) group share its
  // first GPU's node: the members whose NICs the group's ring can use side
  // by side.
  int tensor_members_per_node(int rank) const { return members_in_first_node(rank, 1, tensor_); }
  int data_members_per_node(int rank) const {
    return members_in_first_node(rank, tensor_, gpus_per_rank_ / tensor_);
  }
  // An expert-parallel group is EP GPUs strided by t (Megatron-Core's expert
  // ranks in the order tensor, expert, data); the GPUs holding the same
  // experts, d cp / EP of them, are strided by t EP.
  int expert_members_per_node(int rank) const {
    return members_in_first_node(rank, tensor_, expert_);
  }
  int expert_data_members_per_node(int rank) const {
    return members_in_first_node(rank, tensor_ * expert_, gpus_per_rank_ / (tensor_ * expert_));
  }

 private:
  int first_gpu(int rank) const { return rank * gpus_per_rank_; }
  int node(int gpu) const { return gpu / gpus_per_node_; }
  bool in_one_node(int first, int count) const { return node(first) == node(first + count - 1); }
  int members_in_first_node(int rank, int stride, int members) const {
    const int first = first_gpu(rank);
    int count = 0;
    while (count < members && node(first + count * stride) == node(first)) ++count;
    return count;
  }

  int tensor_;
  int context_span_;  // t cp: the GPUs one context ring spans
  int expert_;
  int gpus_per_rank_;
  int gpus_per_node_;
};

// Parameters one GPU holds: the dense ones (replicated over the d cp GPUs
// of the data-parallel group) and the routed experts' (replicated over d cp
// / EP).
struct RankParameters {
  int64_t dense = 0;
  int64_t expert = 0;

  int64_t total() const { return dense + expert; }
};

// cost_model_memory.cc
// What Adam's training keeps per parameter between steps, in bytes
// (training.master_weights, training.optimizer_moments; docs/cost_model.md,
// "Memory"): the weights as stored, the gradient as accumulated over the
// microbatches, the fp32 master copy beside the weights (0 where the
// weights are the copy the optimizer updates) and Adam's m and v.
struct ParameterState {
  int weights = 0;
  int grads = 0;
  int master = 0;
  int moments = 0;

  int optimizer() const { return master + moments; }
  // The weight Adam updates: the master copy, or the weights themselves.
  int updated() const { return master > 0 ? master : weights; }
};
ParameterState parameter_state(const Config& config);
// What one GPU of pipeline rank `rank` holds: its layers, the word and
// position embedding on the first stage, and the last stage's copy of the
// tied output embedding where it lives on another rank; the dense split over
// t, the routed experts over t and EP.
RankParameters rank_parameters(const Config& config, const std::vector<int>& layers,
                               const std::vector<int>& stage_rank, int rank);
// What one GPU holds of one layer's parameters (a mixture-of-experts layer
// with `moe`).
RankParameters layer_gpu_parameters(const Config& config, bool moe);
// What one GPU holds of stage `stage`'s parameters (as rank_parameters, one
// stage).
RankParameters stage_gpu_parameters(const Config& config, const std::vector<int>& layers,
                                    const std::vector<int>& stage_rank, int stage);
void fill_memory(const Config& config, const std::vector<int>& layers,
                 const std::vector<int>& stage_rank, const std::vector<Slice>& slices,
                 CostTable& table);

// cost_model_comm.cc
Status check_hardware(const Config& config);
// The links of pipeline rank `rank`'s tensor groups and context rings (each
// empty, and unused, without that parallelism).
Result<GroupLinks> group_links(const Config& config, const Placement& placement, int rank);
Status fill_p2p_times(const Config& config, const std::vector<int>& stage_rank,
                      const Placement& placement, int num_slices, CostTable& table);
// ZeRO 3's traffic for one microbatch of a stage whose GPUs hold `held`
// (stage_gpu_parameters) on pipeline rank `rank`: the all-gather of its
// weights, which its forward runs and its backward runs again, and the
// reduce-scatter of its gradients after the backward. Zero below ZeRO 3 or
// without data parallelism.
struct ShardedWeightTraffic {
  double gather_s = 0;
  double scatter_s = 0;
};
Result<ShardedWeightTraffic> sharded_weight_traffic(const Config& config,
                                                    const Placement& placement,
                                                    const RankParameters& held, int rank);
Status fill_rank_times(const Config& config, const std::vector<int>& layers,
                       const std::vector<int>& stage_rank, const Placement& placement,
                       CostTable& table);
// What of a rank's overlapped weight all-gather (`gather_s` in all;
// training.overlap_param_gather) its forwards leave exposed, `forward_s`
// one microbatch's forward through all the rank's chunks: in Megatron's
// interleaved 1F1B chunk c's share is gathered while the chunk before it
// runs its first p microbatches, in other schedules the whole behind one
// microbatch's forward (docs/cost_model.md, "End of iteration, per rank").
double exposed_weight_gather(const Config& config, double gather_s, double forward_s);

// One piece of a stage (a layer, the embedding, or the logits and loss) for
// one token slice as a cost profile measured it: its times, and the bytes
// it holds per microbatch right after F and right after I (each 0 where not
// measured: a layer then keeps the model's figure, and the embedding and
// head, which the model does not count, add nothing).
struct MeasuredPiece {
  Picos forward = 0;
  Picos backward = 0;  // a layer's recompute included under full recompute
  Picos weight_grad = 0;
  int64_t activation_bytes = 0;
  int64_t weight_grad_bytes = 0;
};

// cost_model_profile.cc
// What a config's cost profile gives, per slice: a layer, and the embedding
// and the head where the profile has them (empty vectors where it has no
// kernel of that part); and the pipeline's link (costs.link, else
// "thread-copy", else "device-to-device"), if it has one.
struct ProfiledLayers {
  std::vector<MeasuredPiece> layer;
  std::vector<MeasuredPiece> embedding;
  std::vector<MeasuredPiece> head;
  bool has_link = false;
  Link link;
  // One block's optimizer step, where the profile has one of this shape.
  std::optional<Picos> block_step;

  // Slice j's embedding or head; null where the profile has none.
  const MeasuredPiece* embedding_at(int j) const {
    return embedding.empty() ? nullptr : &embedding[j];
  }
  const MeasuredPiece* head_at(int j) const { return head.empty() ? nullptr : &head[j]; }
};
// REQUIRES: config.model and config.profile_path set.
Result<ProfiledLayers> profiled_layers(const Config& config, const std::vector<Slice>& slices);
// Puts them into a table that fill_memory (and, with hardware, fill_times
// given the same profile) filled: the stage times without hardware, the
// bytes, and every cross-rank transfer over the link.
void apply_profile(const Config& config, const std::vector<int>& layers,
                   const std::vector<int>& stage_rank, const ProfiledLayers& profiled,
                   CostTable& table);

// cost_model_time.cc
// `measured`, when given, holds the profile's pieces, which replace their
// analytic counterparts.
Status fill_times(const Config& config, const std::vector<int>& layers,
                  const std::vector<int>& stage_rank, const std::vector<Slice>& slices,
                  CostTable& table, const ProfiledLayers* measured = nullptr);

// cost_model.cc
// The layers of each stage: the model's cut over Config::model_stages()
// (parallel.layers_per_stage, else even), repeated for each chain.
// REQUIRES: config.model; without an explicit split, at least as many layers
// as the cut has stages.
Result<std::vector<int>> stage_layers(const Config& config);
// The status as an error that names the config's file first, when it has one.
Error in_source(const Config& config, const Status& status);

}  // namespace cost_model_internal
}  // namespace ppsim
