#include "sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace ppsim {
namespace {

constexpr double kGiga = 1e9;
constexpr double kTera = 1e12;
constexpr double kMicro = 1e-6;
// Mixed-precision Adam touches fp32 master weight, m and v plus the 16-bit
// gradient and weight: 16 bytes read and 16 written per parameter.
constexpr double kAdamBytesPerParameter = 32;
// Softmax and cross-entropy over the logits run in fp32.
constexpr double kLossBytesPerLogit = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int ffn_of(const ModelSpec& model) {
  return model.ffn_hidden > 0 ? model.ffn_hidden : 4 * model.hidden;
}

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

Slice whole_sequence(const ModelSpec& model) { return Slice{model.seq_len, 0}; }

// Forward FLOPs of the six matrix products of one layer on one GPU for one
// slice. Each is timed on its own because GEMM efficiency depends on its size.
struct LayerGemms {
  double qkv = 0;
  double scores = 0;  // Q K^T
  double attention_values = 0;
  double out_projection = 0;
  double mlp_up = 0;
  double mlp_down = 0;

  double linear() const { return qkv + out_projection + mlp_up + mlp_down; }
  double attention() const { return scores + attention_values; }
};

LayerGemms layer_gemms(const ModelSpec& model, int micro_batch, int tensor, const Slice& slice) {
  const double b = micro_batch;
  const double bl = b * static_cast<double>(slice.tokens);
  const double pairs = static_cast<double>(slice.attention_pairs());
  const double h = model.hidden;
  const double f = ffn_of(model);
  const double t = tensor;
  return LayerGemms{2 * bl * h * 3 * h / t, 2 * b * pairs * h / t, 2 * b * pairs * h / t,
                    2 * bl * h * h / t,     2 * bl * h * f / t,    2 * bl * f * h / t};
}

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

// A link between two GPUs, in SI units.
struct Link {
  double latency_s = 0;
  double bandwidth_Bps = 0;
};

Link intra_node_link(const HardwareSpec& hw) {
  return Link{hw.intra_node_latency_us * kMicro, hw.intra_node_bandwidth_gbps * kGiga};
}
Link inter_node_link(const HardwareSpec& hw) {
  return Link{hw.inter_node_latency_us * kMicro, hw.inter_node_bandwidth_gbps * kGiga};
}

// GPU placement in Megatron's order (tensor fastest, then data, then
// pipeline): pipeline rank r owns GPUs [r t d, (r + 1) t d).
class Placement {
 public:
  Placement(const ParallelSpec& parallel, int gpus_per_node)
      : tensor_(parallel.tensor),
        gpus_per_rank_(parallel.tensor * parallel.data),
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
  // A data-parallel group is strided by t inside the rank's block, so the
  // groups stay in one node exactly when the whole block does.
  bool data_groups_in_node(int rank) const { return in_one_node(first_gpu(rank), gpus_per_rank_); }

 private:
  int first_gpu(int rank) const { return rank * gpus_per_rank_; }
  int node(int gpu) const { return gpu / gpus_per_node_; }
  bool in_one_node(int first, int count) const { return node(first) == node(first + count - 1); }

  int tensor_;
  int gpus_per_rank_;
  int gpus_per_node_;
};

// Forward, backward and the weight-gradient part of backward of one piece of
// a stage (a layer, the embedding, the logits). Summed in picoseconds so that
// the exact relationships (backward = 2 x forward without communication or
// recompute) survive rounding.
struct Block {
  Picos forward = 0;
  Picos backward = 0;
  Picos weight_grad = 0;

  Block& operator+=(const Block& other) {
    forward += other.forward;
    backward += other.backward;
    weight_grad += other.weight_grad;
    return *this;
  }
};

Block repeat(const Block& block, int64_t n) {
  return Block{block.forward * n, block.backward * n, block.weight_grad * n};
}

// Times the pieces of a stage for one slice of a microbatch. Holds copies of
// what it needs, so that a SliceCostFn can own one; the figures that do not
// depend on the slice are worked out once here, since slice_cost_function
// calls it millions of times.
class BlockTimer {
 public:
  explicit BlockTimer(const Config& config)
      : model_(*config.model),
        hw_(*config.hardware),
        parallel_(config.parallel),
        recompute_(config.training.recompute),
        micro_batch_(config.training.micro_batch),
        flops_per_s_(config.hardware->peak_tflops(config.model->dtype) * kTera),
        hbm_Bps_(config.hardware->hbm_bandwidth_gbps * kGiga),
        vocab_per_gpu_(static_cast<double>(model_.vocab) / parallel_.tensor) {}

  Block layer(const Slice& slice, const Link& tp_link) const {
    const LayerGemms gemms = layer_gemms(model_, micro_batch_, parallel_.tensor, slice);
    const double linear_s = gemm_s(gemms.qkv) + gemm_s(gemms.out_projection) +
                            gemm_s(gemms.mlp_up) + gemm_s(gemms.mlp_down);
    const double attention_s = gemm_s(gemms.scores) + gemm_s(gemms.attention_values);
    // Elementwise kernels (norms, softmax, GeLU, dropout, residuals) read and
    // write about what the layer keeps for backward.
    const double elementwise_s =
        2 * elementwise_bytes(model_, micro_batch_, parallel_, slice) / hbm_Bps_;
    const double softmax_s =
        2 * attention_score_bytes(model_, micro_batch_, parallel_.tensor, slice) / hbm_Bps_;
    // Two all-reduces (or reduce-scatter + all-gather pairs) each way.
    const double bytes = slice_bytes(slice);
    const Picos comm =
        seconds_to_picos(2 * (tp_gather_s(bytes, tp_link) + tp_scatter_s(bytes, tp_link)));

    const Picos compute = seconds_to_picos(linear_s + attention_s + elementwise_s);
    Block block{compute + comm, 2 * compute + comm, seconds_to_picos(linear_s)};
    if (recompute_ == Recompute::kFull) block.backward += block.forward;
    if (recompute_ == Recompute::kSelective) {
      block.backward += seconds_to_picos(attention_s + softmax_s);
    }
    return block;
  }

  // Vocabulary-parallel lookup: forward ends in an all-reduce (a
  // reduce-scatter with sequence parallelism) whose backward is an identity
  // (an all-gather). Backward moves the lookup's bytes twice: the gradient
  // arriving at the lookup, and its scatter-add into the table (W).
  Block embedding(const Slice& slice, const Link& tp_link) const {
    const double bytes = slice_bytes(slice);
    const Picos memory = seconds_to_picos(bytes / hbm_Bps_);
    const Picos forward_comm = seconds_to_picos(tp_scatter_s(bytes, tp_link));
    const Picos backward_comm = seconds_to_picos(tp_gather_s(bytes, tp_link));
    return Block{memory + forward_comm, 2 * memory + backward_comm, memory};
  }

  // Output layer and loss: the mirror of the embedding's collectives (an
  // identity forward whose backward is an all-reduce; all-gather forward and
  // reduce-scatter backward with sequence parallelism).
  Block logits(const Slice& slice, const Link& tp_link) const {
    const double tokens = static_cast<double>(micro_batch_) * static_cast<double>(slice.tokens);
    const double gemm = gemm_s(2 * tokens * model_.hidden * vocab_per_gpu_);
    const double loss = tokens * vocab_per_gpu_ * kLossBytesPerLogit / hbm_Bps_;
    const Picos compute = seconds_to_picos(gemm + loss);
    const double bytes = slice_bytes(slice);
    const Picos forward_comm = seconds_to_picos(tp_gather_s(bytes, tp_link));
    const Picos backward_comm = seconds_to_picos(tp_scatter_s(bytes, tp_link));
    return Block{compute + forward_comm, 2 * compute + backward_comm, seconds_to_picos(gemm)};
  }

 private:
  // GEMM time at peak * max_efficiency * x / (x + x_half), x in GFLOP.
  double gemm_s(double flops) const {
    if (flops <= 0) return 0;
    const double gflop = flops / kGiga;
    const double efficiency =
        hw_.max_gemm_efficiency * gflop / (gflop + hw_.gemm_half_efficiency_gflop);
    return flops / (flops_per_s_ * efficiency);
  }

  // Bytes of one slice's hidden states, b l h, unsplit.
  double slice_bytes(const Slice& slice) const {
    return static_cast<double>(micro_batch_) * static_cast<double>(slice.tokens) * model_.hidden *
           dtype_bytes(model_.dtype);
  }

  // The tensor-parallel collective that ends a row-parallel GEMM (all-reduce,
  // or reduce-scatter with sequence parallelism), and the one that starts a
  // column-parallel GEMM under sequence parallelism (all-gather; nothing
  // without it). Together they are one all-reduce's worth.
  double tp_scatter_s(double bytes, const Link& link) const {
    return tp_s(parallel_.sequence_parallel ? ring_reduce_scatter_s : ring_all_reduce_s, bytes,
                link);
  }
  double tp_gather_s(double bytes, const Link& link) const {
    return parallel_.sequence_parallel ? tp_s(ring_all_gather_s, bytes, link) : 0;
  }
  double tp_s(double (*collective)(double, int, double, double), double bytes,
              const Link& link) const {
    return collective(bytes, parallel_.tensor, link.latency_s, link.bandwidth_Bps);
  }

  ModelSpec model_;
  HardwareSpec hw_;
  ParallelSpec parallel_;
  Recompute recompute_;
  int micro_batch_;
  double flops_per_s_;
  double hbm_Bps_;
  double vocab_per_gpu_;
};

// What sets a stage's time apart from another's: its layers, whether it holds
// the embedding or the logits, and the link its tensor group talks over.
struct StagePieces {
  int layers = 0;
  bool embedding = false;
  bool logits = false;
  Link tp_link;
};

// Forward, backward and W of one slice of a microbatch on one stage: the one
// place both build_cost_table and slice_cost_function time a stage.
Block stage_block(const BlockTimer& timer, const StagePieces& stage, const Slice& slice) {
  Block block = repeat(timer.layer(slice, stage.tp_link), stage.layers);
  if (stage.embedding) block += timer.embedding(slice, stage.tp_link);
  if (stage.logits) block += timer.logits(slice, stage.tp_link);
  return block;
}

// Parameters one GPU of pipeline rank `rank` holds: its layers, the word and
// position embedding on the first stage, and the last stage's copy of the
// tied output embedding where it lives on another rank; all split over t.
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

int64_t rank_parameters(const Config& config, const std::vector<int>& layers,
                        const std::vector<int>& stage_rank, int rank) {
  int64_t total = 0;
  for (int stage = 0; stage < config.num_stages(); ++stage) {
    if (stage_rank[stage] == rank) total += stage_parameters(config, layers, stage_rank, stage);
  }
  return ceil_div(total, config.parallel.tensor);
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

Status check_positive(double value, const std::string& key) {
  if (value > 0 && std::isfinite(value)) return Status();
  return Error{key + " must be positive for the analytic cost model, got " + std::to_string(value)};
}

Status check_hardware(const Config& config) {
  const HardwareSpec& hw = *config.hardware;
  const std::string dtype = to_string(config.model->dtype);
  for (const auto& [value, key] : {
           std::pair{hw.peak_tflops(config.model->dtype), "hardware.peak_tflops_" + dtype},
           std::pair{hw.max_gemm_efficiency, std::string("hardware.max_gemm_efficiency")},
           std::pair{hw.hbm_bandwidth_gbps, std::string("hardware.hbm_bandwidth_gbps")},
           std::pair{static_cast<double>(hw.gpus_per_node), std::string("hardware.gpus_per_node")},
       }) {
    if (Status s = check_positive(value, key); !s.ok()) return s;
  }
  if (hw.gemm_half_efficiency_gflop < 0) {
    return Error{"hardware.gemm_half_efficiency_gflop must not be negative"};
  }
  return Status();
}

// The link between GPUs in one node or in two; one that is used must have a
// bandwidth.
Result<Link> used_link(const HardwareSpec& hw, bool same_node) {
  const Link link = same_node ? intra_node_link(hw) : inter_node_link(hw);
  const char* key =
      same_node ? "hardware.intra_node_bandwidth_gbps" : "hardware.inter_node_bandwidth_gbps";
  if (Status s = check_positive(link.bandwidth_Bps, key); !s.ok()) return Error{s.message()};
  return link;
}

// The link the tensor groups of pipeline rank `rank` talk over; none (and
// unused) without tensor parallelism.
Result<Link> tensor_link(const Config& config, const Placement& placement, int rank) {
  if (config.parallel.tensor <= 1) return Link{};
  return used_link(*config.hardware, placement.tensor_groups_in_node(rank));
}

// The pieces of stage `s`, with the link of its rank's tensor groups.
Result<StagePieces> stage_pieces(const Config& config, const std::vector<int>& layers,
                                 const std::vector<int>& stage_rank, const Placement& placement,
                                 int s) {
  StagePieces pieces;
  pieces.layers = layers[s];
  pieces.embedding = s == 0;
  pieces.logits = s == config.num_stages() - 1;
  const Result<Link> link = tensor_link(config, placement, stage_rank[s]);
  if (!link.ok()) return link.error();
  pieces.tp_link = *link;
  return pieces;
}

Status fill_stage_times(const Config& config, const std::vector<int>& layers,
                        const std::vector<int>& stage_rank, const Placement& placement,
                        const std::vector<Slice>& slices, CostTable& table) {
  const BlockTimer timer(config);
  const int k = static_cast<int>(slices.size());
  for (int s = 0; s < config.num_stages(); ++s) {
    const Result<StagePieces> pieces = stage_pieces(config, layers, stage_rank, placement, s);
    if (!pieces.ok()) return pieces.error();
    for (int j = 0; j < k; ++j) {
      const Block block = stage_block(timer, *pieces, slices[j]);
      StageCost& cost = table.stages[s * k + j];
      cost.forward = block.forward;
      cost.backward = block.backward;
      cost.weight_grad = block.weight_grad;
    }
  }
  return Status();
}

// Each slice's transfer pays the link's latency: k slices pay it k times.
Status fill_p2p_times(const Config& config, const std::vector<int>& stage_rank,
                      const Placement& placement, int num_slices, CostTable& table) {
  for (int s = 0; s + 1 < config.num_stages(); ++s) {
    // Stages on one rank hand over in memory; the engine ignores those boundaries.
    if (stage_rank[s] == stage_rank[s + 1]) continue;
    const Result<Link> link =
        used_link(*config.hardware, placement.ranks_share_nodes(stage_rank[s], stage_rank[s + 1]));
    if (!link.ok()) return link.error();
    for (int j = 0; j < num_slices; ++j) {
      const int i = s * num_slices + j;
      const Picos t = seconds_to_picos(link->latency_s + static_cast<double>(table.p2p_bytes[i]) /
                                                             link->bandwidth_Bps);
      table.p2p_forward[i] = t;
      table.p2p_backward[i] = t;
    }
  }
  return Status();
}

// Data-parallel reduction of `bytes` of gradients on each of d GPUs. ZeRO 1
// and 2 reduce-scatter and gather the updated weight shards back (a ring
// all-reduce's cost, like ZeRO 0); ZeRO 3 gathers weights layer by layer in
// the next forward, which is not modelled.
double data_parallel_sync_s(double bytes, int d, int zero_stage, const Link& link) {
  const double scatter_s = ring_reduce_scatter_s(bytes, d, link.latency_s, link.bandwidth_Bps);
  if (zero_stage == 0) return ring_all_reduce_s(bytes, d, link.latency_s, link.bandwidth_Bps);
  if (zero_stage < 3) {
    return scatter_s + ring_all_gather_s(bytes, d, link.latency_s, link.bandwidth_Bps);
  }
  return scatter_s;
}

// End-of-iteration work per rank: gradient reduction and the optimizer step.
Status fill_rank_times(const Config& config, const std::vector<int>& layers,
                       const std::vector<int>& stage_rank, const Placement& placement,
                       CostTable& table) {
  const ModelSpec& model = *config.model;
  const HardwareSpec& hw = *config.hardware;
  const int d = config.parallel.data;
  const int zero = config.training.zero_stage;
  const int first = stage_rank.front();
  const int last = stage_rank.back();
  for (int r = 0; r < config.parallel.pipeline; ++r) {
    const int64_t params = rank_parameters(config, layers, stage_rank, r);
    double sync_s = 0;
    if (d > 1) {
      const Result<Link> link = used_link(hw, placement.data_groups_in_node(r));
      if (!link.ok()) return link.error();
      sync_s += data_parallel_sync_s(static_cast<double>(params) * dtype_bytes(model.dtype), d,
                                     zero, *link);
    }
    // The tied word embedding's two copies sum their gradients.
    if (last != first && (r == first || r == last)) {
      const Result<Link> link = used_link(hw, placement.ranks_share_nodes(first, last));
      if (!link.ok()) return link.error();
      const int64_t copy =
          ceil_div(static_cast<int64_t>(model.vocab) * model.hidden, config.parallel.tensor);
      sync_s += ring_all_reduce_s(static_cast<double>(copy) * dtype_bytes(model.dtype), 2,
                                  link->latency_s, link->bandwidth_Bps);
    }
    table.grad_sync[r] = seconds_to_picos(sync_s);
    const int64_t updated = zero >= 1 ? ceil_div(params, d) : params;
    table.optimizer_step[r] = seconds_to_picos(
        static_cast<double>(updated) * kAdamBytesPerParameter / (hw.hbm_bandwidth_gbps * kGiga));
  }
  // A synchronous step all-reduces the gradient norm (one fp32) across the
  // pipeline ranks: latency-bound.
  const int p = config.parallel.pipeline;
  if (p > 1) {
    const Result<Link> link = used_link(hw, placement.ranks_share_nodes(0, p - 1));
    if (!link.ok()) return link.error();
    table.pipeline_sync =
        seconds_to_picos(ring_all_reduce_s(4.0, p, link->latency_s, link->bandwidth_Bps));
  }
  return Status();
}

// Figures that need the hardware too: every duration.
Status fill_times(const Config& config, const std::vector<int>& layers,
                  const std::vector<int>& stage_rank, const std::vector<Slice>& slices,
                  CostTable& table) {
  if (Status s = check_hardware(config); !s.ok()) return s;
  const Placement placement(config.parallel, config.hardware->gpus_per_node);
  if (Status s = fill_stage_times(config, layers, stage_rank, placement, slices, table); !s.ok()) {
    return s;
  }
  const int k = static_cast<int>(slices.size());
  if (Status s = fill_p2p_times(config, stage_rank, placement, k, table); !s.ok()) return s;
  return fill_rank_times(config, layers, stage_rank, placement, table);
}

// Replaces a field of `count` entries with the values of one costs.fixed list
// (one value for all, or one per entry).
Status override_field(const std::vector<double>& values, const std::string& key, int count,
                      bool allow_one_fewer, const std::function<void(int, double)>& assign) {
  if (values.empty()) return Status();
  const int n = static_cast<int>(values.size());
  const int stages = allow_one_fewer ? count + 1 : count;
  if (n != 1 && n != stages && !(allow_one_fewer && n == count)) {
    return Error{"costs.fixed." + key + " has " + std::to_string(n) +
                 " values; give one, or one per stage (" + std::to_string(stages) + ")"};
  }
  for (double v : values) {
    if (!(v >= 0) || !std::isfinite(v)) {
      return Error{"costs.fixed." + key + " must be finite and not negative, got " +
                   std::to_string(v)};
    }
  }
  for (int i = 0; i < count; ++i) assign(i, n == 1 ? values[0] : values[i]);
  return Status();
}

// Slice lengths as what share of a stage's fixed figures each slice takes:
// l / L of each, with L = sum of lengths.
struct SliceShares {
  std::vector<int> lengths;  // {1} when the microbatch is not cut
  int64_t total = 1;

  // `value` (per stage and microbatch) scaled to slice j; exact for the
  // whole, so an uncut table keeps the given figures to the bit.
  double share(double value, int j) const {
    if (lengths[j] == total) return value;
    return value * lengths[j] / static_cast<double>(total);
  }
};

Status apply_fixed(const FixedCosts& fixed, const SliceShares& shares, CostTable& table) {
  const int num_stages = table.num_stages();
  const int k = table.num_slices;
  // A per-stage figure is per microbatch: each slice takes its share,
  // rounded on its own.
  auto each_slice = [&](int stage, double v, auto&& assign) {
    for (int j = 0; j < k; ++j) assign(table.stages[stage * k + j], shares.share(v, j));
  };
  auto stage_field = [&](const std::vector<double>& values, const char* key, Picos StageCost::*f) {
    return override_field(values, key, num_stages, false, [&](int i, double v) {
      each_slice(i, v, [&](StageCost& cost, double x) { cost.*f = seconds_to_picos(x); });
    });
  };
  for (Status s : {stage_field(fixed.forward_s, "forward_s", &StageCost::forward),
                   stage_field(fixed.backward_s, "backward_s", &StageCost::backward),
                   stage_field(fixed.weight_grad_s, "weight_grad_s", &StageCost::weight_grad),
                   override_field(fixed.activation_bytes, "activation_bytes", num_stages, false,
                                  [&](int i, double v) {
                                    each_slice(i, v, [](StageCost& cost, double x) {
                                      cost.activation_bytes = std::llround(x);
                                    });
                                  }),
                   override_field(fixed.weight_grad_bytes, "weight_grad_bytes", num_stages, false,
                                  [&](int i, double v) {
                                    each_slice(i, v, [](StageCost& cost, double x) {
                                      cost.weight_grad_bytes = std::llround(x);
                                    });
                                  }),
                   // A list of one per stage gives boundary s its stage s entry.
                   // p2p_s is per transfer, so every slice's transfer takes all of it.
                   override_field(fixed.p2p_s, "p2p_s", num_stages - 1, true, [&](int i, double v) {
                     for (int j = 0; j < k; ++j) {
                       table.p2p_forward[i * k + j] = seconds_to_picos(v);
                       table.p2p_backward[i * k + j] = seconds_to_picos(v);
                     }
                   })}) {
    if (!s.ok()) return s;
  }
  for (StageCost& stage : table.stages) {
    if (stage.weight_grad_bytes > stage.activation_bytes) {
      // W reads part of what F kept: a fixed activation size caps the
      // analytic W part; a fixed W part above it is a contradiction.
      if (!fixed.weight_grad_bytes.empty()) {
        return Error{"costs.fixed.weight_grad_bytes exceeds activation_bytes; W reads part of it"};
      }
      stage.weight_grad_bytes = stage.activation_bytes;
    }
    if (stage.weight_grad <= stage.backward) continue;
    // The user's own W larger than the user's own B is a contradiction; an
    // analytic W under a fixed, shorter B is capped at B. (Shares keep W <= B
    // per slice: scaling and rounding are monotone.)
    if (!fixed.weight_grad_s.empty()) {
      return Error{"costs.fixed.weight_grad_s exceeds backward_s; W is part of B"};
    }
    stage.weight_grad = stage.backward;
  }
  return Status();
}

Error in_source(const Config& config, const Status& status) {
  if (config.source.empty()) return Error{status.message()};
  return Error{config.source + ": " + status.message()};
}

// The layers of each stage: the config's explicit split (checked again here:
// a Config need not come from the loader), else the even one.
// REQUIRES: config.model, with at least as many layers as stages.
Result<std::vector<int>> stage_layers(const Config& config) {
  const int num_stages = config.num_stages();
  const std::vector<int>& given = config.parallel.layers_per_stage;
  if (given.empty()) return layers_per_stage(config.model->layers, num_stages);
  if (static_cast<int>(given.size()) != num_stages) {
    return Error{"parallel.layers_per_stage has " + std::to_string(given.size()) +
                 " entries; it needs one per stage, p * v = " + std::to_string(num_stages)};
  }
  int64_t sum = 0;
  for (int layers : given) {
    if (layers < 1) {
      return Error{"parallel.layers_per_stage has a stage of " + std::to_string(layers) +
                   " layers; every stage needs at least one"};
    }
    sum += layers;
  }
  if (sum != config.model->layers) {
    return Error{"parallel.layers_per_stage sums to " + std::to_string(sum) +
                 " layers, but model.layers = " + std::to_string(config.model->layers)};
  }
  return given;
}

}  // namespace

std::vector<int> layers_per_stage(int layers, int stages) {
  PPSIM_CHECK(stages > 0 && layers >= stages);
  const int base = layers / stages;
  const int extra = layers % stages;
  std::vector<int> result(stages, base);
  // The middle stages take the remainder: stages 1..extra, or every stage but
  // the last when there are more extra layers than middle stages.
  const int first = extra <= stages - 2 ? 1 : 0;
  for (int s = first; s < first + extra; ++s) ++result[s];
  return result;
}

double layer_forward_flops(const ModelSpec& model, int micro_batch, int tensor) {
  const LayerGemms gemms = layer_gemms(model, micro_batch, tensor, whole_sequence(model));
  return gemms.linear() + gemms.attention();
}

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

double model_flops_per_iteration(const Config& config) {
  if (!config.model) return 0;
  const ModelSpec& model = *config.model;
  const double logits = 2.0 * model.seq_len * model.hidden * model.vocab;
  const double per_sequence = model.layers * layer_forward_flops(model, 1, 1) + logits;
  return static_cast<double>(config.training.global_batch) * 3 * per_sequence;
}

double ring_all_reduce_s(double bytes, int n, double latency_s, double bandwidth_Bps) {
  return 2 * ring_reduce_scatter_s(bytes, n, latency_s, bandwidth_Bps);
}

double ring_reduce_scatter_s(double bytes, int n, double latency_s, double bandwidth_Bps) {
  if (n <= 1) return 0;
  return (n - 1) * latency_s + (n - 1) * bytes / n / bandwidth_Bps;
}

double ring_all_gather_s(double bytes, int n, double latency_s, double bandwidth_Bps) {
  return ring_reduce_scatter_s(bytes, n, latency_s, bandwidth_Bps);
}

std::vector<int> interleaved_stage_rank(int num_stages, int ranks) {
  std::vector<int> stage_rank(num_stages);
  for (int s = 0; s < num_stages; ++s) stage_rank[s] = s % ranks;
  return stage_rank;
}

Result<CostTable> build_cost_table(const Config& config, const std::vector<int>& stage_rank,
                                   const std::vector<int>& slice_lengths) {
  const int num_stages = config.num_stages();
  PPSIM_CHECK(static_cast<int>(stage_rank.size()) == num_stages);
  SliceShares shares;
  if (slice_lengths.empty()) {
    shares.lengths = {1};
  } else {
    shares.lengths = slice_lengths;
    shares.total = 0;
    for (size_t j = 0; j < slice_lengths.size(); ++j) {
      if (slice_lengths[j] <= 0) {
        return in_source(config, Error{"token slice " + std::to_string(j) + " has " +
                                       std::to_string(slice_lengths[j]) +
                                       " tokens; every slice of schedule.slices needs at least "
                                       "one"});
      }
      shares.total += slice_lengths[j];
    }
  }
  const int k = static_cast<int>(shares.lengths.size());
  CostTable table = uniform_costs(num_stages, config.parallel.pipeline, 0, 0, 0, 0, k);
  if (config.model) {
    if (config.model->layers < num_stages) {
      return in_source(
          config, Error{"model.layers (" + std::to_string(config.model->layers) +
                        ") is fewer than the pipeline stages p * v (" + std::to_string(num_stages) +
                        "); every stage needs at least one layer"});
    }
    std::vector<Slice> slices;
    if (slice_lengths.empty()) {
      slices = {whole_sequence(*config.model)};
    } else {
      if (shares.total != config.model->seq_len) {
        return in_source(config, Error{"the token slices (schedule.slices) sum to " +
                                       std::to_string(shares.total) +
                                       " tokens, but a sequence has model.seq_len = " +
                                       std::to_string(config.model->seq_len)});
      }
      int64_t context = 0;
      for (int l : slice_lengths) {
        slices.push_back(Slice{l, context});
        context += l;
      }
    }
    const Result<std::vector<int>> split = stage_layers(config);
    if (!split.ok()) return in_source(config, split.error());
    const std::vector<int>& layers = *split;
    fill_memory(config, layers, stage_rank, slices, table);
    if (config.hardware) {
      if (Status s = fill_times(config, layers, stage_rank, slices, table); !s.ok()) {
        return in_source(config, s);
      }
    }
  }
  if (Status s = apply_fixed(config.fixed, shares, table); !s.ok()) return in_source(config, s);
  return table;
}

std::function<double(int length, int context)> slice_cost_function(const Config& config) {
  PPSIM_CHECK(config.model && config.hardware);
  PPSIM_CHECK(check_hardware(config).ok());
  const int num_stages = config.num_stages();
  const Result<std::vector<int>> split = stage_layers(config);
  PPSIM_CHECK(split.ok());
  const std::vector<int>& layers = *split;
  const std::vector<int> stage_rank = interleaved_stage_rank(num_stages, config.parallel.pipeline);
  const Placement placement(config.parallel, config.hardware->gpus_per_node);
  // What a call needs, worked out once and shared by the copies of the function.
  struct Bottleneck {
    BlockTimer timer;
    StagePieces stage;
  };
  auto bottleneck = std::make_shared<const Bottleneck>([&] {
    const BlockTimer timer(config);
    const int most = *std::max_element(layers.begin(), layers.end());
    // Among stages with the most layers, the slowest on a whole sequence: the
    // one that also holds the logits (or the embedding) when the layers split
    // evenly.
    std::optional<StagePieces> slowest;
    Picos slowest_time = -1;
    for (int s = 0; s < num_stages; ++s) {
      if (layers[s] != most) continue;
      const Result<StagePieces> pieces = stage_pieces(config, layers, stage_rank, placement, s);
      PPSIM_CHECK(pieces.ok());
      const Block block = stage_block(timer, *pieces, whole_sequence(*config.model));
      if (block.forward + block.backward > slowest_time) {
        slowest = *pieces;
        slowest_time = block.forward + block.backward;
      }
    }
    return Bottleneck{timer, *slowest};
  }());
  return [bottleneck](int length, int context) {
    PPSIM_CHECK(length > 0 && context >= 0);
    const Block block = stage_block(bottleneck->timer, bottleneck->stage, Slice{length, context});
    return picos_to_seconds(block.forward + block.backward);
  };
}

Result<PieceTimes> piece_times(const Config& config) {
  PPSIM_CHECK(config.model && config.hardware);
  if (Status s = check_hardware(config); !s.ok()) return Error{s.message()};
  const Placement placement(config.parallel, config.hardware->gpus_per_node);
  const Result<Link> link = tensor_link(config, placement, 0);
  if (!link.ok()) return link.error();
  const BlockTimer timer(config);
  const Slice whole = whole_sequence(*config.model);
  auto seconds = [](const Block& block) {
    return picos_to_seconds(block.forward + block.backward);
  };
  return PieceTimes{seconds(timer.layer(whole, *link)), seconds(timer.embedding(whole, *link)),
                    seconds(timer.logits(whole, *link))};
}

}  // namespace ppsim
