// The analytic cost and memory model of a GPT-style transformer, and the
// translation of a Config into the CostTable the engine replays.
//
// Compute: per-layer forward FLOPs of a GPT block (Narayanan et al. 2021:
// 24 b s h^2 + 4 b s^2 h for ffn = 4h), backward = 2x forward, full recompute
// adds a forward, selective recompute the attention core; GEMMs run at
// peak * efficiency(size), elementwise work at HBM bandwidth. Communication:
// ring alpha-beta collectives for tensor parallelism (2 all-reduces per layer
// forward and 2 backward, reduce-scatter + all-gather with sequence
// parallelism), pipeline p2p of b s h dtype bytes (/t with sequence
// parallelism), data-parallel gradient all-reduce at the end of the iteration.
// Memory: mixed-precision Adam (2 + 2 + 12 bytes per parameter, sharded by
// ZeRO stage over d) and activations from Korthikanti et al. 2022.
// Token slices (TeraPipe): every per-microbatch figure for a slice of l
// tokens after c of context, attention work conserved across any cut.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "schedules/status.h"
#include "sim/core/costs.h"
#include "sim/core/workload.h"
#include "sim/cost/layer_ops.h"
#include "sim/cost/op_time.h"

namespace ppsim {

// Layers of each of `stages` stages: an even split, the remainder going one
// each to the middle stages (the first and last also carry embedding and loss).
// The split a config gets unless it gives parallel.layers_per_stage.
// REQUIRES: layers >= stages > 0.
std::vector<int> layers_per_stage(int layers, int stages);

// FLOPs of one layer's forward for one microbatch of `micro_batch` sequences,
// on one GPU of a tensor-parallel group of `tensor`.
double layer_forward_flops(const ModelSpec& model, int micro_batch, int tensor);
// FLOPs of one mixture-of-experts layer's forward for one sequence on one
// GPU, every expert at the mean load: the attention, the router, top_k
// experts' and the shared experts' MLPs per token. REQUIRES: model.moe.
double moe_layer_forward_flops(const ModelSpec& model);
// The share of a sequence's forward FLOPs that runs in the fused attention
// kernel: every layer's kernel over every layer's operations and the
// logits, at the model's sequence length, experts at their mean load. 0
// unless model.attention is flash.
double attention_flop_share(const ModelSpec& model);
// Parameters of one transformer layer (not divided by t): the attention's
// projections (Q and the output h x h; K and V h x kv_heads head_dim each),
// the MLP's matrices (two, or three with SwiGLU), their biases where the
// model has them, and two norms. 12h^2 + 13h for GPT-3's block.
int64_t layer_parameters(const ModelSpec& model);
// One norm's parameters: a weight and a bias (LayerNorm) or a weight (RMSNorm).
int64_t norm_parameters(const ModelSpec& model);
// The first stage's: word embedding, and learned positions where the model has them.
int64_t input_embedding_parameters(const ModelSpec& model);
// The last stage's: the final norm and the output matrix, which with tied
// embeddings is the word embedding itself unless that sits on another rank
// (Megatron then keeps a copy there: `embedding_elsewhere`).
int64_t output_parameters(const ModelSpec& model, bool embedding_elsewhere);
// Parameters of one mixture-of-experts layer: the attention and norms as a
// dense layer's, the router (h x experts) and every expert MLP (routed and
// shared), or with `active` only those one token visits (top_k + shared).
// REQUIRES: model.moe.
int64_t moe_layer_parameters(const ModelSpec& model, bool active);
// The whole model's: layers, input embedding, final norm and, untied, the
// output matrix (a tied copy on the last stage is not a parameter of its own).
int64_t model_parameters(const ModelSpec& model);
// What one token uses: model_parameters with each mixture-of-experts layer's
// top_k + shared experts instead of all of them (equal for a dense model).
int64_t model_active_parameters(const ModelSpec& model);
// Bytes one layer keeps for backward per microbatch on one GPU (Korthikanti
// et al. 2022, 16-bit activations; with FP8, the linear layers' inputs in
// FP8).
int64_t layer_activation_bytes(const ModelSpec& model, int micro_batch,
                               const ParallelSpec& parallel, Recompute recompute,
                               Fp8Recipe fp8 = Fp8Recipe::kNone);
// Model FLOPs of one training iteration, all GPUs together, without
// recompute (the numerator of MFU): 3 x forward of every layer and the logits.
double model_flops_per_iteration(const Config& config);

// The CostTable of a validated Config: the analytic model when the model and
// hardware are given, each field of costs.fixed that is given replacing its
// analytic counterpart. Stages hold parallel.layers_per_stage layers when it
// is given, else the even split (layers_per_stage). Errors name what to fix:
// fewer layers than stages, an explicit split that does not fit (not one
// entry >= 1 per stage, or not summing to model.layers),
// costs.fixed lists of the wrong length or with negative values, a
// weight-gradient time above the backward time, or a hardware figure the
// model needs that is zero.
// `stage_rank` is the schedule's stage -> rank map (Schedule::stage_rank).
// `slice_lengths` cuts each microbatch's sequences into token slices (first
// slice first; empty: one slice, the whole sequence); every per-stage figure
// is then per (stage, slice) and every transfer per (boundary, slice), as
// CostTable lays them out (docs/cost_model.md, "Token slices"). Further
// errors: a slice of no tokens, and, with a model, lengths that do not sum to
// model.seq_len.
// With config.profile_path (costs.profile) the profile is read here and each
// stage's layers take its measured times, layers x kernel_time at the
// stage's shape and slice (docs/cost_model.md, "costs.profile"); its errors
// (unreadable file, shape not measured, selective recompute) name the
// config and the profile.
// REQUIRES: stage_rank.size() == config.num_stages().
Result<CostTable> build_cost_table(const Config& config, const std::vector<int>& stage_rank,
                                   const std::vector<int>& slice_lengths = {});
// The interleaved layout, stage s on rank s mod ranks.
std::vector<int> interleaved_stage_rank(int num_stages, int ranks);

// TeraPipe's t(l, c) for optimal_slicing: forward + backward seconds of a
// slice of l tokens after c tokens of context, on the bottleneck stage (the
// one with the most layers; among several, the slowest on a whole sequence),
// timed by the code that fills build_cost_table's per-slice figures, with
// the interleaved stage -> rank layout for the tensor-parallel link. The
// analytic model only: costs.fixed does not apply (with it a slice's time is
// just its share, l / L, of the stage's). Cheap to call: what does not depend
// on (l, c) is worked out here, once.
// An error, naming the config's file, where the hardware or the layer split
// cannot price it (a parallel.layers_per_stage written for other stages).
// REQUIRES: config.model and config.hardware; the function needs l > 0 and
// c >= 0.
// The type is SliceCostFn (schedules/token_slicing.h), spelled out so that
// this header does not pull the slicing search into every user of the model.
Result<std::function<double(int length, int context)>> slice_cost_function(const Config& config);

// Forward + backward seconds of the pieces a stage is built from, per
// microbatch on a whole sequence, timed by the code that fills
// build_cost_table's stage times: what the layer split (partition.h)
// balances. A stage's time is layers x layer_s, plus embedding_s on stage 0
// and logits_s on the last (up to rounding to picoseconds per piece).
struct PieceTimes {
  double layer_s = 0;      // one transformer layer (dense)
  double moe_layer_s = 0;  // one mixture-of-experts layer (0 without model.moe)
  double embedding_s = 0;  // the embedding lookup on stage 0
  double logits_s = 0;     // the logits and loss on the last stage
};
// With t > 1 every piece talks over the tensor-parallel link of rank 0's
// groups: the split is chosen before it is known which stage sits where, and
// ranks differ only when some straddle nodes. The analytic model only:
// costs.fixed does not apply. Errors: a hardware figure the model needs that
// is zero.
// REQUIRES: config.model and config.hardware.
Result<PieceTimes> piece_times(const Config& config);

// One operation as the analytic model prices it alone, on one GPU for one
// microbatch on a whole sequence (its context rank's share with cp > 1).
struct PricedOp {
  Op op;
  double seconds = 0;
  GemmTiling tiling;  // a GEMM's; zeros for other kernels
};
// A phase of a piece (forward, input gradient, weight gradient): its
// operations, and its time as the stage times count it, which is less than
// the operations' sum where a collective overlaps its GEMM or a ring
// exchange its attention kernel, and more where the GPU waits for the
// host (op_time.h). Recompute is not in it.
struct PricedPhase {
  const char* name = "";
  std::vector<PricedOp> ops;
  double seconds = 0;
  // Of `seconds`, the GPU's idle time waiting for the host's launches
  // (HardwareSpec::host_launch_us).
  double host_wait_seconds = 0;
};
// A piece a stage is built from: a dense layer, a mixture-of-experts layer
// (with model.moe), the embedding, the logits and loss.
struct PricedPiece {
  const char* name = "";
  std::vector<PricedPhase> phases;
  // What a whole backward (B) saves over the input gradient then the
  // weight gradient (StageCost::backward_overlap), in seconds.
  double backward_overlap_seconds = 0;
  // ZeRO 2's and 3's collectives for the piece's weights per microbatch
  // (0 below ZeRO 2 or without data parallelism), alone: ZeRO 3's
  // all-gather of them (before the forward, and again before the input
  // gradient), the reduce-scatter of their gradients after the weight
  // gradient. A stage's times add what outlasts its compute, over all its
  // pieces together (docs/cost_model.md, "ZeRO 2 and 3").
  double gather_seconds = 0;
  double scatter_seconds = 0;
};
// Where each piece's time goes (`ppsim simulate --ops`), priced as
// piece_times prices them (rank 0's links). Errors as piece_times'.
// REQUIRES: config.model and config.hardware.
Result<std::vector<PricedPiece>> priced_pieces(const Config& config);

}  // namespace ppsim
