// Memory in the analytic cost model: what a layer keeps for backward
// (Korthikanti et al. 2022, per token slice), the parameters of each stage and
// rank, and the static bytes of mixed-precision Adam under ZeRO.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/cost/cost_model_internal.h"

namespace ppsim {
namespace {

// A norm over `width` values: a weight and a bias (LayerNorm) or a weight.
int64_t norm_over(const ModelSpec& model, int64_t width) {
  return model.norm == Norm::kLayerNorm ? 2 * width : width;
}

// Multi-head latent attention: the queries' down projection h x q_lora, its
// norm and up projection q_lora x heads (nope + rope) (or one h x heads
// (nope + rope) without a query latent); the keys' and values' down
// projection h x (kv_lora + rope), its norm and up projection kv_lora x
// heads (nope + v); the output heads v x h. No biases (DeepSeek's have none).
int64_t latent_attention_parameters(const ModelSpec& model) {
  const MlaSpec& mla = *model.mla;
  const int64_t h = model.hidden;
  const int64_t heads = model.heads;
  const int64_t q = heads * model.qk_head_dim();
  const int64_t queries =
      mla.q_lora_rank > 0
          ? h * mla.q_lora_rank + norm_over(model, mla.q_lora_rank) + int64_t{mla.q_lora_rank} * q
          : h * q;
  const int64_t keys_values =
      h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + norm_over(model, mla.kv_lora_rank) +
      int64_t{mla.kv_lora_rank} * heads * (mla.qk_nope_head_dim + mla.v_head_dim);
  return queries + keys_values + heads * mla.v_head_dim * h;
}

// Q and the output projection h x heads head_dim each (h x h unless
// model.head_dim says otherwise), K and V h x kv_heads head_dim each, with
// their biases where the model has them; or multi-head latent attention's.
int64_t attention_parameters(const ModelSpec& model) {
  if (model.mla) return latent_attention_parameters(model);
  const int64_t h = model.hidden;
  const int64_t q = static_cast<int64_t>(model.heads) * model.head_dim();
  const int64_t kv = static_cast<int64_t>(model.key_value_heads()) * model.head_dim();
  const int64_t bias = model.bias ? 1 : 0;
  return h * (q + 2 * kv) + q * h + bias * (q + 2 * kv + h);
}

// One MLP of `f` hidden units: two matrices (GeLU) or three (SwiGLU), with
// their biases where the model has them.
int64_t mlp_parameters(const ModelSpec& model, int64_t f) {
  const int64_t h = model.hidden;
  const int64_t bias = model.bias ? 1 : 0;
  return model.mlp == Mlp::kSwiglu ? 3 * h * f + bias * (2 * f + h) : 2 * h * f + bias * (f + h);
}

}  // namespace

namespace cost_model_internal {
namespace {

// Bytes a layer's MLP half keeps for `sb` tokens of the tensor group,
// beyond the norm's input and output: `whole` on every tensor rank unless
// sequence parallelism splits it, `split` over the tensor ranks, and
// `per_gpu` as it stands (a mixture of experts' gathered rows).
struct MlpKept {
  double whole = 0;
  double split = 0;
  double per_gpu = 0;
};

// Bytes a layer keeps for each value of a linear layer's input (what its
// weight gradient reads): the model's dtype, or with FP8 one byte
// (Transformer Engine keeps the FP8 copy it cast; with MXFP8 the copy
// scaled along its columns, and its scales).
double linear_input_bytes(const ModelSpec& model, Fp8Recipe fp8) {
  if (fp8 == Fp8Recipe::kMxfp8) return kMxfp8CopyBytes;
  return fp8 == Fp8Recipe::kNone ? dtype_bytes(model.dtype) : 1;
}

// A dense MLP keeps its activation's input (the up projection's output)
// and output (the down projection's input, `L` bytes a value); `w_only`:
// only what its weight gradients read (the output).
double dense_mlp_kept(const ModelSpec& model, double sb, double f, double L, bool w_only) {
  const double up = model.mlp == Mlp::kSwiglu ? 2 * f : f;
  return sb * (w_only ? f * L : up * dtype_bytes(model.dtype) + f * L);
}

// A MoE layer keeps the router's fp32 probabilities, the shared experts as
// a dense MLP, and on each GPU the rows it gathered for its local experts
// (the busiest GPU's) with their activation's input and output split over
// t; `w_only`: only what the weight gradients read (rows and activation
// output).
MlpKept moe_mlp_kept(const ModelSpec& model, const ParallelSpec& parallel, double sb, double L,
                     bool w_only) {
  const MoeSpec& moe = *model.moe;
  const double B = dtype_bytes(model.dtype);
  const double f = moe.expert_ffn_hidden;
  const double up = model.mlp == Mlp::kSwiglu ? 2 * f : f;
  const double rows = sb * moe.top_k * expert_load(moe, parallel.expert).busiest_gpu;
  MlpKept kept;
  kept.whole = w_only ? 0 : sb * moe.experts * 4.0;
  kept.split = dense_mlp_kept(model, sb, static_cast<double>(moe.shared_experts) * f, L, w_only);
  kept.per_gpu = rows * (model.hidden * L + (w_only ? f * L : up * B + f * L) / parallel.tensor);
  return kept;
}

// Per token, the widths of a layer's Q, K, V and attention output, all
// heads together (before the tensor-parallel split).
double attention_widths(const ModelSpec& model) {
  const double heads = model.heads;
  const double kv_heads = model.key_value_heads();
  return (heads + kv_heads) * model.qk_head_dim() + (heads + kv_heads) * model.v_head_dim();
}

// Per token, what multi-head latent attention keeps on every tensor rank
// (its down projections run whole on each): the query latent before and
// after its norm, the key-value latent likewise and the shared rotary key
// part; `w_only`: what the up projections' weight gradients read (the two
// normed latents).
double latent_widths(const ModelSpec& model, bool w_only) {
  if (!model.mla) return 0;
  const MlaSpec& mla = *model.mla;
  const double latents = static_cast<double>(mla.q_lora_rank) + mla.kv_lora_rank;
  return w_only ? latents : 2 * latents + mla.qk_rope_head_dim;
}

// What one layer keeps for backward on one GPU, for `tokens` positions of
// each sequence and `score_entries` attention scores per head and sequence
// (s and s^2 for a whole sequence): Korthikanti et al. 2022's count, term by
// term, so that it follows the block's shape (docs/cost_model.md, "Memory").
// For GPT-3's block in 16 bits it is their sbh(10 + 24/t + 5as/(ht)).
// With FP8 the linear layers' inputs are kept in FP8, and the attention
// output's FP8 copy beside the one the attention kernel's backward reads.
int64_t layer_kept_bytes(const ModelSpec& model, int micro_batch, const ParallelSpec& parallel,
                         Recompute recompute, Fp8Recipe fp8, int64_t tokens, int64_t score_entries,
                         bool moe) {
  const double B = dtype_bytes(model.dtype);
  const double L = linear_input_bytes(model, fp8);
  const double t = parallel.tensor;
  const double sb = static_cast<double>(tokens) * micro_batch;
  const double h = model.hidden;
  const double mask = model.dropout > 0 ? 1 : 0;
  const bool sp = parallel.sequence_parallel;
  if (recompute == Recompute::kFull) {
    return bytes_to_int(std::ceil(sb * h * B / (sp ? t : 1)));
  }
  const MlpKept mlp = moe ? moe_mlp_kept(model, parallel, sb, L, false)
                          : MlpKept{0, dense_mlp_kept(model, sb, model.ffn(), L, false), 0};
  // Every tensor rank keeps these whole unless sequence parallelism splits
  // them: the two norms' inputs and the two linear inputs after them, and
  // the two residual dropout masks.
  const double whole = sb * h * (2 * B + 2 * L + 2 * mask) + mlp.whole;
  // Split over t: Q, K and V, the attention output, the MLP's.
  double split = sb * B * attention_widths(model) + mlp.split;
  if (fp8 != Fp8Recipe::kNone) split += sb * L * model.heads * model.v_head_dim();
  // The score matrix's softmax output, and with dropout its mask and output;
  // flash attention keeps only an fp32 log-sum-exp per head and token.
  const double scores = static_cast<double>(score_entries) * micro_batch * model.heads;
  if (model.attention == Attention::kFlash) {
    split += 4.0 * sb * model.heads;
  } else if (recompute != Recompute::kSelective) {
    split += scores * (B + mask * (B + 1));
  }
  const double bytes = sp ? (whole + split) / t : whole + split / t;
  const double latents = sb * B * latent_widths(model, false);
  return bytes_to_int(std::ceil(bytes + mlp.per_gpu + latents));
}

// What one layer (a dense one, or with `moe` a mixture-of-experts one) keeps
// for backward for one slice: the slice's rows of the score matrix, b heads
// l (c + l), instead of b heads s^2.
int64_t slice_activation_bytes(const ModelSpec& model, int micro_batch,
                               const ParallelSpec& parallel, Recompute recompute, Fp8Recipe fp8,
                               const Slice& slice, bool moe = false) {
  return layer_kept_bytes(model, micro_batch, parallel, recompute, fp8, slice.tokens,
                          slice.kept_scores(), moe);
}

// What W reads after I is done: the inputs of the linear layers (the two
// norms' outputs, whole unless sequence parallelism splits them, the
// attention output and the MLP's activation output, split over t; a MoE
// layer's gathered rows and their experts' activation output; latent
// attention's two normed latents). Never more
// than the layer keeps (under recompute W reads what I recomputed, which
// this model does not count separately).
int64_t slice_weight_grad_bytes(const ModelSpec& model, int micro_batch,
                                const ParallelSpec& parallel, Recompute recompute, Fp8Recipe fp8,
                                const Slice& slice, bool moe) {
  const double B = dtype_bytes(model.dtype);
  const double L = linear_input_bytes(model, fp8);
  const double t = parallel.tensor;
  const double sb = static_cast<double>(slice.tokens) * micro_batch;
  const MlpKept mlp = moe ? moe_mlp_kept(model, parallel, sb, L, true)
                          : MlpKept{0, dense_mlp_kept(model, sb, model.ffn(), L, true), 0};
  const double whole = 2 * sb * model.hidden * L + mlp.whole;
  const double attention_output = static_cast<double>(model.heads) * model.v_head_dim();
  const double split = sb * attention_output * L + mlp.split;
  const double bytes = parallel.sequence_parallel ? (whole + split) / t : whole + split / t;
  const double latents = sb * B * latent_widths(model, true);
  return std::min<int64_t>(
      bytes_to_int(std::ceil(bytes + mlp.per_gpu + latents)),
      slice_activation_bytes(model, micro_batch, parallel, recompute, fp8, slice, moe));
}

// Parameters of the routed experts of one MoE layer.
int64_t routed_expert_parameters(const ModelSpec& model) {
  return model.moe ? model.moe->experts * mlp_parameters(model, model.moe->expert_ffn_hidden) : 0;
}

// Parameters of one stage, before the tensor-parallel split: the dense ones
// and the routed experts'.
RankParameters stage_parameters(const Config& config, const std::vector<int>& layers,
                                const std::vector<int>& stage_rank, int stage) {
  const ModelSpec& model = *config.model;
  const int moe = stage_moe_layers(model, layers, stage);
  RankParameters params;
  params.expert = moe * routed_expert_parameters(model);
  params.dense = (layers[stage] - moe) * layer_parameters(model);
  if (moe > 0) {
    params.dense += moe * (moe_layer_parameters(model, false) - routed_expert_parameters(model));
  }
  if (config.first_of_chain(stage)) params.dense += input_embedding_parameters(model);
  if (config.last_of_chain(stage)) {
    const int first = stage - (config.model_stages() - 1);
    params.dense +=
        output_parameters(model, stage != first && stage_rank[stage] != stage_rank[first]);
  }
  return params;
}

// One GPU's share of a stage's parameters: the dense ones split over t, the
// routed experts' over t and EP.
RankParameters per_gpu(const RankParameters& stage, const ParallelSpec& parallel) {
  return RankParameters{ceil_div(stage.dense, parallel.tensor),
                        ceil_div(stage.expert, int64_t{parallel.tensor} * parallel.expert)};
}

// ZeRO's stages shard the optimizer state (1), then the gradients (2), then
// the weights (3) over the d copies.
int64_t zero_static_bytes(int64_t params, int data, int zero_stage, const ParameterState& b) {
  switch (zero_stage) {
    case 0:
      return (b.weights + b.grads + b.optimizer()) * params;
    case 1:
      return (b.weights + b.grads) * params + ceil_div(b.optimizer() * params, data);
    case 2:
      return b.weights * params + ceil_div((b.grads + b.optimizer()) * params, data);
    default:
      return ceil_div((b.weights + b.grads + b.optimizer()) * params, data);
  }
}

}  // namespace

// In mixed precision with separate master weights, the weights in the
// model's dtype, the gradient accumulated in fp32 in bf16 training
// (gradient_bytes, or as training.gradient_dtype says) and fp32 master
// weights, m and v (Megatron
// Core's distributed optimizer guide: 18 bytes undistributed and 6 + 12/d
// distributed for bf16 with fp32 gradients, 16 and 8 + 8/d in fp32; in fp16
// Rajbhandari et al. 2020's K = 12, 16 and 4 + 12/d, where the guide's 20
// and 4 + 16/d add the fp32 gradient copy that the step makes and the next
// zero_grad frees, before the activations' peak). With fp32 parameters cast
// for compute (FSDP2's MixedPrecisionPolicy) the parameter is the master and
// its gradient is fp32: 16. Without a master copy, weights and gradients in
// the model's dtype: FSDP2 casts the reduced gradient back to the
// parameter's dtype (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py,
// foreach_reduce): 12 bytes in bf16 with fp32 m and v, 8 with PyTorch's
// Adam, which keeps m and v in the parameter's dtype (zeros_like it).
ParameterState parameter_state(const Config& config) {
  const DType dtype = config.model->dtype;
  const int b = dtype_bytes(dtype);
  const TrainingSpec& training = config.training;
  const int moments = training.optimizer_moments == MomentDType::kFp32 ? 8 : 2 * b;
  // The kept gradient: as training.gradient_dtype says, else as the master
  // weights keep it (fp32 parameters' fp32, no master's the model's dtype).
  const bool stated = training.gradient_dtype != GradientDType::kAuto;
  const auto kept = [&](int unstated) {
    return stated ? gradient_bytes(training, dtype) : unstated;
  };
  switch (training.master_weights) {
    case MasterWeights::kSeparate:
      return ParameterState{b, gradient_bytes(training, dtype), dtype == DType::kFp32 ? 0 : 4,
                            moments};
    case MasterWeights::kParams:
      return ParameterState{4, kept(4), 0, moments};
    case MasterWeights::kNone:
      break;
  }
  return ParameterState{b, kept(b), 0, moments};
}

RankParameters layer_gpu_parameters(const Config& config, bool moe) {
  const ModelSpec& model = *config.model;
  if (!moe) return per_gpu(RankParameters{layer_parameters(model), 0}, config.parallel);
  const int64_t routed = routed_expert_parameters(model);
  return per_gpu(RankParameters{moe_layer_parameters(model, false) - routed, routed},
                 config.parallel);
}

RankParameters stage_gpu_parameters(const Config& config, const std::vector<int>& layers,
                                    const std::vector<int>& stage_rank, int stage) {
  return per_gpu(stage_parameters(config, layers, stage_rank, stage), config.parallel);
}

RankParameters rank_parameters(const Config& config, const std::vector<int>& layers,
                               const std::vector<int>& stage_rank, int rank) {
  RankParameters total;
  for (int stage = 0; stage < config.num_stages(); ++stage) {
    if (stage_rank[stage] != rank) continue;
    const RankParameters params = stage_parameters(config, layers, stage_rank, stage);
    total.dense += params.dense;
    total.expert += params.expert;
  }
  return per_gpu(total, config.parallel);
}

// ZeRO 3 gathers a stage's weights unit by unit: a layer, or the word
// embedding (or output matrix) whole. The largest unit of stage s, per GPU:
// held twice in the model's dtype (the one running and the next, gathered
// ahead of it) and once as the gradient it makes before its reduce-scatter
// (FSDP's forward and backward prefetch, Zhao et al. 2023, section 3.3).
int64_t gathered_unit_bytes(const Config& config, const std::vector<int>& layers, int s) {
  const ModelSpec& model = *config.model;
  const ParallelSpec& parallel = config.parallel;
  const int moe = stage_moe_layers(model, layers, s);
  int64_t unit = 0;
  if (layers[s] > moe) unit = layer_gpu_parameters(config, false).total();
  if (moe > 0) unit = std::max(unit, layer_gpu_parameters(config, true).total());
  if (config.first_of_chain(s) || config.last_of_chain(s)) {
    unit = std::max(unit, ceil_div(int64_t{model.vocab} * model.hidden, parallel.tensor));
  }
  const auto per_value = static_cast<int64_t>(2 * dtype_bytes(model.dtype) +
                                              gradient_bytes(config.training, model.dtype));
  return unit * per_value;
}

// What a rank holds for a while beyond its microbatches' activations, the
// most of: under full recomputation, the layer whose backward recomputes it
// (one microbatch's whole activation, without recomputation); on a stage
// with the logits, one microbatch's logits with what the loss keeps beside
// them for the backward (cross_entropy_bytes: Megatron's vocabulary-parallel
// cross entropy its fp32 softmax). The two come one after the other (the
// loss's backward frees the softmax before the last layer recomputes), so
// the larger counts.
// Under ZeRO 3 the rank also holds, beside all of that, its stages' largest
// gathered unit (gathered_unit_bytes).
std::vector<int64_t> working_bytes(const Config& config, const std::vector<int>& layers,
                                   const std::vector<int>& stage_rank,
                                   const std::vector<Slice>& slices) {
  const ModelSpec& model = *config.model;
  const ParallelSpec& parallel = config.parallel;
  const int b = config.training.micro_batch;
  const bool full = config.training.recompute == Recompute::kFull;
  const std::vector<int> moe_layers = moe_layers_per_stage(model, layers);
  std::vector<int64_t> most(parallel.pipeline, 0);
  for (const Slice& slice : slices) {
    const auto whole_layer = [&](bool moe) {
      return slice_activation_bytes(model, b, parallel, Recompute::kNone, config.training.fp8,
                                    slice, moe);
    };
    const int64_t dense = full ? whole_layer(false) : 0;
    const int64_t moe = full && model.moe ? whole_layer(true) : 0;
    const double held_per_logit =
        cross_entropy_bytes(config.training.cross_entropy, model.dtype).held;
    const auto logits = static_cast<int64_t>(
        static_cast<double>(int64_t{b} * slice.tokens * ceil_div(model.vocab, parallel.tensor)) *
        held_per_logit);
    for (int s = 0; s < config.num_stages(); ++s) {
      int64_t& rank_most = most[stage_rank[s]];
      if (layers[s] > moe_layers[s]) rank_most = std::max(rank_most, dense);
      if (moe_layers[s] > 0) rank_most = std::max(rank_most, moe);
      if (config.last_of_chain(s)) rank_most = std::max(rank_most, logits);
    }
  }
  if (config.training.zero_stage == 3 && parallel.weight_replicas() > 1) {
    std::vector<int64_t> gathered(parallel.pipeline, 0);
    for (int s = 0; s < config.num_stages(); ++s) {
      int64_t& rank_gathered = gathered[stage_rank[s]];
      rank_gathered = std::max(rank_gathered, gathered_unit_bytes(config, layers, s));
    }
    for (int r = 0; r < parallel.pipeline; ++r) most[r] += gathered[r];
  }
  return most;
}

// Figures that need only the model: memory and transfer sizes.
void fill_memory(const Config& config, const std::vector<int>& layers,
                 const std::vector<int>& stage_rank, const std::vector<Slice>& slices,
                 CostTable& table) {
  const ModelSpec& model = *config.model;
  const ParallelSpec& parallel = config.parallel;
  const int k = static_cast<int>(slices.size());
  const int b = config.training.micro_batch;
  const Recompute recompute = config.training.recompute;
  const Fp8Recipe fp8 = config.training.fp8;
  const std::vector<int> moe_layers = moe_layers_per_stage(model, layers);
  for (int j = 0; j < k; ++j) {
    // Per layer: dense, then mixture-of-experts (0 without model.moe).
    const auto kept = [&](bool moe) {
      return static_cast<double>(
          slice_activation_bytes(model, b, parallel, recompute, fp8, slices[j], moe));
    };
    const auto read_by_w = [&](bool moe) {
      return static_cast<double>(
          slice_weight_grad_bytes(model, b, parallel, recompute, fp8, slices[j], moe));
    };
    const double dense_kept = kept(false);
    const double dense_read = read_by_w(false);
    const double moe_kept = model.moe ? kept(true) : 0;
    const double moe_read = model.moe ? read_by_w(true) : 0;
    for (int s = 0; s < config.num_stages(); ++s) {
      const double moe = moe_layers[s];
      const double dense = layers[s] - moe;
      table.stages[s * k + j].activation_bytes =
          bytes_to_int(dense * dense_kept + (moe > 0 ? moe * moe_kept : 0));
      table.stages[s * k + j].weight_grad_bytes =
          bytes_to_int(dense * dense_read + (moe > 0 ? moe * moe_read : 0));
    }
    const int64_t hidden_bytes = static_cast<int64_t>(config.training.micro_batch) *
                                 slices[j].tokens * model.hidden * dtype_bytes(model.dtype);
    const int64_t p2p_bytes =
        parallel.sequence_parallel ? ceil_div(hidden_bytes, parallel.tensor) : hidden_bytes;
    for (int s = 0; s + 1 < config.num_stages(); ++s) table.p2p_bytes[s * k + j] = p2p_bytes;
  }
  // The dense weights' optimizer state is sharded over their d cp copies,
  // the routed experts' over the d cp / EP copies of each.
  const int zero = config.training.zero_stage;
  const ParameterState per_parameter = parameter_state(config);
  for (int r = 0; r < parallel.pipeline; ++r) {
    const RankParameters params = rank_parameters(config, layers, stage_rank, r);
    table.static_bytes[r] =
        zero_static_bytes(params.dense, parallel.weight_replicas(), zero, per_parameter) +
        zero_static_bytes(params.expert, parallel.weight_replicas() / parallel.expert, zero,
                          per_parameter);
  }
  table.working_bytes = working_bytes(config, layers, stage_rank, slices);
  table.stage_weight_bytes.resize(config.num_stages());
  for (int s = 0; s < config.num_stages(); ++s) {
    const RankParameters params = stage_gpu_parameters(config, layers, stage_rank, s);
    table.stage_weight_bytes[s] = params.total() * dtype_bytes(model.dtype);
  }
}

}  // namespace cost_model_internal

using cost_model_internal::rank_sequence;
using cost_model_internal::slice_activation_bytes;

namespace {

// The whole model's, counting a mixture-of-experts layer's experts all, or
// only those one token visits.
int64_t parameters(const ModelSpec& model, bool active) {
  const int64_t output =
      model.tie_embeddings ? 0 : static_cast<int64_t>(model.vocab) * model.hidden;
  const int moe = model.moe_layers();
  const int64_t experts = moe > 0 ? moe * moe_layer_parameters(model, active) : 0;
  return (model.layers - moe) * layer_parameters(model) + experts +
         input_embedding_parameters(model) + norm_parameters(model) + output;
}

}  // namespace

int64_t layer_parameters(const ModelSpec& model) {
  return attention_parameters(model) + mlp_parameters(model, model.ffn()) +
         2 * norm_parameters(model);
}

int64_t moe_layer_parameters(const ModelSpec& model, bool active) {
  PPSIM_CHECK(model.moe.has_value());
  const MoeSpec& moe = *model.moe;
  const int64_t router = static_cast<int64_t>(model.hidden) * moe.experts;
  const int64_t experts = (active ? moe.top_k : moe.experts) + moe.shared_experts;
  return attention_parameters(model) + router +
         experts * mlp_parameters(model, moe.expert_ffn_hidden) + 2 * norm_parameters(model);
}

int64_t norm_parameters(const ModelSpec& model) {
  return model.norm == Norm::kLayerNorm ? 2LL * model.hidden : model.hidden;
}

int64_t output_parameters(const ModelSpec& model, bool embedding_elsewhere) {
  const int64_t matrix = !model.tie_embeddings || embedding_elsewhere
                             ? static_cast<int64_t>(model.vocab) * model.hidden
                             : 0;
  return norm_parameters(model) + matrix;
}

int64_t input_embedding_parameters(const ModelSpec& model) {
  const int64_t words = static_cast<int64_t>(model.vocab) * model.hidden;
  if (model.positions != Positions::kLearned) return words;
  return words + static_cast<int64_t>(model.seq_len) * model.hidden;
}

int64_t model_parameters(const ModelSpec& model) { return parameters(model, false); }

int64_t model_active_parameters(const ModelSpec& model) { return parameters(model, true); }

int64_t layer_activation_bytes(const ModelSpec& model, int micro_batch,
                               const ParallelSpec& parallel, Recompute recompute, Fp8Recipe fp8) {
  return slice_activation_bytes(model, micro_batch, parallel, recompute, fp8,
                                rank_sequence(model, parallel));
}

}  // namespace ppsim
