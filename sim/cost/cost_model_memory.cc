// Memory in the analytic cost model: what a layer keeps for backward
// (Korthikanti et al. 2022, per token slice), the parameters of each stage and
// rank, and the static bytes of mixed-precision Adam under ZeRO.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/cost/cost_model_internal.h"

namespace ppsim {
namespace cost_model_internal {
namespace {

// Korthikanti et al. 2022 per layer and GPU, for `tokens` positions of each
// sequence and `score_entries` attention scores per head and sequence (s and
// s^2 for a whole sequence).
int64_t korthikanti_bytes(const ModelSpec& model, int micro_batch, const ParallelSpec& parallel,
                          Recompute recompute, int64_t tokens, int64_t score_entries) {
  const int64_t sbh = tokens * micro_batch * model.hidden;
  const int64_t attention = 5LL * model.heads * score_entries * micro_batch;
  const bool sp = parallel.sequence_parallel;
  // In 16-bit bytes: a part every tensor rank keeps whole and a part split over t.
  int64_t whole = 0;
  int64_t split = 0;
  switch (recompute) {
    case Recompute::kNone:
      whole = sp ? 0 : 10 * sbh;
      split = (sp ? 34 : 24) * sbh + attention;
      break;
    case Recompute::kSelective:
      whole = sp ? 0 : 10 * sbh;
      split = (sp ? 34 : 24) * sbh;
      break;
    case Recompute::kFull:
      whole = sp ? 0 : 2 * sbh;
      split = sp ? 2 * sbh : 0;
      break;
  }
  const int64_t bytes16 = whole + ceil_div(split, parallel.tensor);
  // The formula counts 16-bit values; wider activations scale it (the 1-byte
  // dropout masks with them, a small overcount).
  return bytes16 * dtype_bytes(model.dtype) / 2;
}

// What one layer keeps for backward for one slice: the slice's rows of the
// score matrix (5 a b l (c + l) / t bytes at 16 bits) instead of 5 a s^2 b / t.
int64_t slice_activation_bytes(const ModelSpec& model, int micro_batch,
                               const ParallelSpec& parallel, Recompute recompute,
                               const Slice& slice) {
  return korthikanti_bytes(model, micro_batch, parallel, recompute, slice.tokens,
                           slice.kept_scores());
}

// What W reads after I is done: the inputs of the four linear layers, the
// two layer-norm outputs (2 s b h each, split over t only with sequence
// parallelism), the attention output (2 s b h / t) and the GeLU output
// (2 s b f / t), in 16-bit values scaled to the dtype. Never more than the
// layer keeps (under recompute W reads what I recomputed, which this model
// does not count separately).
int64_t slice_weight_grad_bytes(const ModelSpec& model, int micro_batch,
                                const ParallelSpec& parallel, Recompute recompute,
                                const Slice& slice) {
  const int64_t sbh = slice.tokens * micro_batch * model.hidden;
  const int64_t sbf = slice.tokens * micro_batch * static_cast<int64_t>(ffn_of(model));
  const bool sp = parallel.sequence_parallel;
  const int64_t whole = sp ? 0 : 4 * sbh;
  const int64_t split = (sp ? 4 * sbh : 0) + 2 * sbh + 2 * sbf;
  const int64_t bytes = (whole + ceil_div(split, parallel.tensor)) * dtype_bytes(model.dtype) / 2;
  return std::min(bytes, slice_activation_bytes(model, micro_batch, parallel, recompute, slice));
}

// Parameters of one stage, before the tensor-parallel split.
int64_t stage_parameters(const Config& config, const std::vector<int>& layers,
                         const std::vector<int>& stage_rank, int stage) {
  const ModelSpec& model = *config.model;
  int64_t total = layers[stage] * layer_parameters(model);
  const int64_t word_embedding = static_cast<int64_t>(model.vocab) * model.hidden;
  const int last = config.num_stages() - 1;
  if (stage == 0) total += word_embedding + static_cast<int64_t>(model.seq_len) * model.hidden;
  if (stage == last && stage != 0 && stage_rank[last] != stage_rank[0]) total += word_embedding;
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

// Bytes the layer's elementwise kernels read or write once: the
// no-recompute activations, with the attention scores counted like the
// attention GEMMs (attention_pairs), so that like them they sum over any cut
// to the unsliced figure.
double elementwise_bytes(const ModelSpec& model, int micro_batch, const ParallelSpec& parallel,
                         const Slice& slice) {
  return static_cast<double>(korthikanti_bytes(model, micro_batch, parallel, Recompute::kNone,
                                               slice.tokens, slice.attention_pairs()));
}

// The attention-score term of Korthikanti et al. (softmax output, its dropout
// mask and output: 5 a s^2 b bytes at 16 bits), on one GPU, for the work of
// one slice.
double attention_score_bytes(const ModelSpec& model, int micro_batch, int tensor,
                             const Slice& slice) {
  return 5.0 * model.heads * static_cast<double>(slice.attention_pairs()) * micro_batch / tensor *
         dtype_bytes(model.dtype) / 2;
}

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
      table.stages[s * k + j].activation_bytes = layers[s] * per_layer;
      table.stages[s * k + j].weight_grad_bytes = layers[s] * per_layer_w;
    }
    const int64_t hidden_bytes = static_cast<int64_t>(config.training.micro_batch) *
                                 slices[j].tokens * model.hidden * dtype_bytes(model.dtype);
    const int64_t p2p_bytes =
        parallel.sequence_parallel ? ceil_div(hidden_bytes, parallel.tensor) : hidden_bytes;
    for (int s = 0; s + 1 < config.num_stages(); ++s) table.p2p_bytes[s * k + j] = p2p_bytes;
  }
  for (int r = 0; r < parallel.pipeline; ++r) {
    table.static_bytes[r] = zero_static_bytes(rank_parameters(config, layers, stage_rank, r),
                                              parallel.data, config.training.zero_stage);
  }
  table.stage_weight_bytes.resize(config.num_stages());
  for (int s = 0; s < config.num_stages(); ++s) {
    table.stage_weight_bytes[s] =
        ceil_div(stage_parameters(config, layers, stage_rank, s), parallel.tensor) *
        dtype_bytes(model.dtype);
  }
}

}  // namespace cost_model_internal

using cost_model_internal::ffn_of;
using cost_model_internal::slice_activation_bytes;
using cost_model_internal::whole_sequence;

int64_t layer_parameters(const ModelSpec& model) {
  const int64_t h = model.hidden;
  const int64_t f = ffn_of(model);
  const int64_t qkv = 3 * h * h + 3 * h;
  const int64_t out_projection = h * h + h;
  const int64_t mlp = h * f + f + f * h + h;
  const int64_t layer_norms = 4 * h;
  return qkv + out_projection + mlp + layer_norms;
}

int64_t layer_activation_bytes(const ModelSpec& model, int micro_batch,
                               const ParallelSpec& parallel, Recompute recompute) {
  return slice_activation_bytes(model, micro_batch, parallel, recompute, whole_sequence(model));
}

}  // namespace ppsim
