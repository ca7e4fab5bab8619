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
namespace cost_model_internal {
namespace {

// What one layer keeps for backward on one GPU, for `tokens` positions of
// each sequence and `score_entries` attention scores per head and sequence
// (s and s^2 for a whole sequence): Korthikanti et al. 2022's count, term by
// term, so that it follows the block's shape (docs/cost_model.md, "Memory").
// For GPT-3's block in 16 bits it is their sbh(10 + 24/t + 5as/(ht)).
int64_t layer_kept_bytes(const ModelSpec& model, int micro_batch, const ParallelSpec& parallel,
                         Recompute recompute, int64_t tokens, int64_t score_entries) {
  const double B = dtype_bytes(model.dtype);
  const double t = parallel.tensor;
  const double sb = static_cast<double>(tokens) * micro_batch;
  const double h = model.hidden;
  const double kv = static_cast<double>(model.key_value_heads()) * model.head_dim();
  const double f = model.ffn();
  const double up = model.mlp == Mlp::kSwiglu ? 2 * f : f;
  const double mask = model.dropout > 0 ? 1 : 0;
  const bool sp = parallel.sequence_parallel;
  // Every tensor rank keeps these whole unless sequence parallelism splits
  // them: the two norms' inputs and the two linear inputs after them, and
  // the two residual dropout masks.
  const double whole = sb * h * (4 * B + 2 * mask);
  if (recompute == Recompute::kFull) {
    return bytes_to_int(std::ceil(sb * h * B / (sp ? t : 1)));
  }
  // Split over t: Q, K and V, the attention output, the MLP's activation
  // input and output.
  double split = sb * B * (h + 2 * kv + h + up + f);
  // The score matrix's softmax output, and with dropout its mask and output;
  // flash attention keeps only an fp32 log-sum-exp per head and token.
  const double scores = static_cast<double>(score_entries) * micro_batch * model.heads;
  if (model.attention == Attention::kFlash) {
    split += 4.0 * sb * model.heads;
  } else if (recompute != Recompute::kSelective) {
    split += scores * (B + mask * (B + 1));
  }
  return bytes_to_int(std::ceil((sp ? (whole + split) / t : whole + split / t)));
}

// What one layer keeps for backward for one slice: the slice's rows of the
// score matrix, b heads l (c + l), instead of b heads s^2.
int64_t slice_activation_bytes(const ModelSpec& model, int micro_batch,
                               const ParallelSpec& parallel, Recompute recompute,
                               const Slice& slice) {
  return layer_kept_bytes(model, micro_batch, parallel, recompute, slice.tokens,
                          slice.kept_scores());
}

// What W reads after I is done: the inputs of the four linear layers (the
// two norms' outputs, whole unless sequence parallelism splits them, the
// attention output and the MLP's activation output, split over t). Never
// more than the layer keeps (under recompute W reads what I recomputed,
// which this model does not count separately).
int64_t slice_weight_grad_bytes(const ModelSpec& model, int micro_batch,
                                const ParallelSpec& parallel, Recompute recompute,
                                const Slice& slice) {
  const double B = dtype_bytes(model.dtype);
  const double t = parallel.tensor;
  const double sb = static_cast<double>(slice.tokens) * micro_batch;
  const double whole = 2 * sb * model.hidden * B;
  const double split = sb * (model.hidden + static_cast<double>(model.ffn())) * B;
  const double bytes = parallel.sequence_parallel ? (whole + split) / t : whole + split / t;
  return std::min<int64_t>(bytes_to_int(std::ceil(bytes)),
                           slice_activation_bytes(model, micro_batch, parallel, recompute, slice));
}

// Parameters of one stage, before the tensor-parallel split.
int64_t stage_parameters(const Config& config, const std::vector<int>& layers,
                         const std::vector<int>& stage_rank, int stage) {
  const ModelSpec& model = *config.model;
  int64_t total = layers[stage] * layer_parameters(model);
  const int64_t word_embedding = static_cast<int64_t>(model.vocab) * model.hidden;
  const int last = config.num_stages() - 1;
  if (stage == 0) total += input_embedding_parameters(model);
  if (stage == last) {
    total += norm_parameters(model);
    // Untied: the output layer's own matrix. Tied: Megatron keeps a copy of
    // the word embedding on the last stage when that is another rank.
    const bool copy = stage != 0 && stage_rank[last] != stage_rank[0];
    if (!model.tie_embeddings || copy) total += word_embedding;
  }
  return total;
}

// Mixed-precision Adam, K = 12 (Rajbhandari et al. 2020): 2 bytes of 16-bit
// weights, 2 of gradients, 12 of fp32 master weights, m and v per parameter.
int64_t zero_static_bytes(int64_t params, int data, int zero_stage) {
  switch (zero_stage) {
    case 0:
      return 16 * params;
    case 1:
      return 4 * params + ceil_div(12 * params, data);
    case 2:
      return 2 * params + ceil_div(14 * params, data);
    default:
      return ceil_div(16 * params, data);
  }
}

}  // namespace

// Parameters one GPU of pipeline rank `rank` holds: its layers, the word and
// position embedding on the first stage, and the last stage's copy of the
// tied output embedding where it lives on another rank; all split over t.
int64_t rank_parameters(const Config& config, const std::vector<int>& layers,
                        const std::vector<int>& stage_rank, int rank) {
  int64_t total = 0;
  for (int stage = 0; stage < config.num_stages(); ++stage) {
    if (stage_rank[stage] == rank) total += stage_parameters(config, layers, stage_rank, stage);
  }
  return ceil_div(total, config.parallel.tensor);
}

// Figures that need only the model: memory and transfer sizes.
void fill_memory(const Config& config, const std::vector<int>& layers,
                 const std::vector<int>& stage_rank, const std::vector<Slice>& slices,
                 CostTable& table) {
  const ModelSpec& model = *config.model;
  const ParallelSpec& parallel = config.parallel;
  const int k = static_cast<int>(slices.size());
  for (int j = 0; j < k; ++j) {
    const int64_t per_layer = slice_activation_bytes(model, config.training.micro_batch, parallel,
                                                     config.training.recompute, slices[j]);
    const int64_t per_layer_w = slice_weight_grad_bytes(
        model, config.training.micro_batch, parallel, config.training.recompute, slices[j]);
    for (int s = 0; s < config.num_stages(); ++s) {
      table.stages[s * k + j].activation_bytes =
          bytes_to_int(static_cast<double>(layers[s]) * static_cast<double>(per_layer));
      table.stages[s * k + j].weight_grad_bytes =
          bytes_to_int(static_cast<double>(layers[s]) * static_cast<double>(per_layer_w));
    }
    const int64_t hidden_bytes = static_cast<int64_t>(config.training.micro_batch) *
                                 slices[j].tokens * model.hidden * dtype_bytes(model.dtype);
    const int64_t p2p_bytes =
        parallel.sequence_parallel ? ceil_div(hidden_bytes, parallel.tensor) : hidden_bytes;
    for (int s = 0; s + 1 < config.num_stages(); ++s) table.p2p_bytes[s * k + j] = p2p_bytes;
  }
  for (int r = 0; r < parallel.pipeline; ++r) {
    table.static_bytes[r] =
        zero_static_bytes(rank_parameters(config, layers, stage_rank, r),
                          parallel.weight_replicas(), config.training.zero_stage);
  }
  table.stage_weight_bytes.resize(config.num_stages());
  for (int s = 0; s < config.num_stages(); ++s) {
    table.stage_weight_bytes[s] =
        ceil_div(stage_parameters(config, layers, stage_rank, s), parallel.tensor) *
        dtype_bytes(model.dtype);
  }
}

}  // namespace cost_model_internal

using cost_model_internal::rank_sequence;
using cost_model_internal::slice_activation_bytes;

namespace {

// Q and the output projection h x h each, K and V h x kv_heads head_dim
// each, with their biases where the model has them.
int64_t attention_parameters(const ModelSpec& model) {
  const int64_t h = model.hidden;
  const int64_t q = h;
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

int64_t input_embedding_parameters(const ModelSpec& model) {
  const int64_t words = static_cast<int64_t>(model.vocab) * model.hidden;
  if (model.positions != Positions::kLearned) return words;
  return words + static_cast<int64_t>(model.seq_len) * model.hidden;
}

int64_t model_parameters(const ModelSpec& model) { return parameters(model, false); }

int64_t model_active_parameters(const ModelSpec& model) { return parameters(model, true); }

int64_t layer_activation_bytes(const ModelSpec& model, int micro_batch,
                               const ParallelSpec& parallel, Recompute recompute) {
  return slice_activation_bytes(model, micro_batch, parallel, recompute,
                                rank_sequence(model, parallel));
}

}  // namespace ppsim
