#include "sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
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

// Forward FLOPs of the six matrix products of one layer on one GPU. Each is
// timed on its own because GEMM efficiency depends on its size.
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

LayerGemms layer_gemms(const ModelSpec& model, int micro_batch, int tensor) {
  const double bs = static_cast<double>(micro_batch) * model.seq_len;
  const double s = model.seq_len;
  const double h = model.hidden;
  const double f = ffn_of(model);
  const double t = tensor;
  return LayerGemms{2 * bs * h * 3 * h / t, 2 * bs * s * h / t, 2 * bs * s * h / t,
                    2 * bs * h * h / t,     2 * bs * h * f / t, 2 * bs * f * h / t};
}

// The attention-score term of Korthikanti et al. (softmax output, its dropout
// mask and output: 5 a s^2 b bytes at 16 bits), on one GPU.
double attention_score_bytes(const ModelSpec& model, int micro_batch, int tensor) {
  const double s = model.seq_len;
  return 5.0 * model.heads * s * s * micro_batch / tensor * dtype_bytes(model.dtype) / 2;
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

// Times the pieces of a stage. Holds references into the Config, which must
// outlive it.
class BlockTimer {
 public:
  explicit BlockTimer(const Config& config)
      : model_(*config.model),
        hw_(*config.hardware),
        parallel_(config.parallel),
        recompute_(config.training.recompute),
        micro_batch_(config.training.micro_batch),
        flops_per_s_(config.hardware->peak_tflops(config.model->dtype) * kTera),
        hbm_Bps_(config.hardware->hbm_bandwidth_gbps * kGiga) {}

  Block layer(const Link& tp_link) const {
    const LayerGemms gemms = layer_gemms(model_, micro_batch_, parallel_.tensor);
    const double linear_s = gemm_s(gemms.qkv) + gemm_s(gemms.out_projection) +
                            gemm_s(gemms.mlp_up) + gemm_s(gemms.mlp_down);
    const double attention_s = gemm_s(gemms.scores) + gemm_s(gemms.attention_values);
    // Elementwise kernels (norms, softmax, GeLU, dropout, residuals) read and
    // write about what the layer keeps for backward.
    const double activations = static_cast<double>(
        layer_activation_bytes(model_, micro_batch_, parallel_, Recompute::kNone));
    const double elementwise_s = 2 * activations / hbm_Bps_;
    const double softmax_s =
        2 * attention_score_bytes(model_, micro_batch_, parallel_.tensor) / hbm_Bps_;
    // Two all-reduces (or reduce-scatter + all-gather pairs) each way.
    const Picos comm = seconds_to_picos(2 * (tp_gather_s(tp_link) + tp_scatter_s(tp_link)));

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
  Block embedding(const Link& tp_link) const {
    const Picos memory = seconds_to_picos(sequence_bytes() / hbm_Bps_);
    const Picos forward_comm = seconds_to_picos(tp_scatter_s(tp_link));
    const Picos backward_comm = seconds_to_picos(tp_gather_s(tp_link));
    return Block{memory + forward_comm, 2 * memory + backward_comm, memory};
  }

  // Output layer and loss: the mirror of the embedding's collectives (an
  // identity forward whose backward is an all-reduce; all-gather forward and
  // reduce-scatter backward with sequence parallelism).
  Block logits(const Link& tp_link) const {
    const double tokens = static_cast<double>(micro_batch_) * model_.seq_len;
    const double vocab_per_gpu = static_cast<double>(model_.vocab) / parallel_.tensor;
    const double gemm = gemm_s(2 * tokens * model_.hidden * vocab_per_gpu);
    const double loss = tokens * vocab_per_gpu * kLossBytesPerLogit / hbm_Bps_;
    const Picos compute = seconds_to_picos(gemm + loss);
    const Picos forward_comm = seconds_to_picos(tp_gather_s(tp_link));
    const Picos backward_comm = seconds_to_picos(tp_scatter_s(tp_link));
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

  // Bytes of one microbatch's hidden states, b s h, unsplit.
  double sequence_bytes() const {
    return static_cast<double>(micro_batch_) * model_.seq_len * model_.hidden *
           dtype_bytes(model_.dtype);
  }

  // The tensor-parallel collective that ends a row-parallel GEMM (all-reduce,
  // or reduce-scatter with sequence parallelism), and the one that starts a
  // column-parallel GEMM under sequence parallelism (all-gather; nothing
  // without it). Together they are one all-reduce's worth.
  double tp_scatter_s(const Link& link) const {
    return tp_s(parallel_.sequence_parallel ? ring_reduce_scatter_s : ring_all_reduce_s, link);
  }
  double tp_gather_s(const Link& link) const {
    return parallel_.sequence_parallel ? tp_s(ring_all_gather_s, link) : 0;
  }
  double tp_s(double (*collective)(double, int, double, double), const Link& link) const {
    return collective(sequence_bytes(), parallel_.tensor, link.latency_s, link.bandwidth_Bps);
  }

  const ModelSpec& model_;
  const HardwareSpec& hw_;
  const ParallelSpec& parallel_;
  Recompute recompute_;
  int micro_batch_;
  double flops_per_s_;
  double hbm_Bps_;
};

// Parameters one GPU of pipeline rank `rank` holds: its layers, the word and
// position embedding on the first stage, and the last stage's copy of the
// tied output embedding where it lives on another rank; all split over t.
int64_t rank_parameters(const Config& config, const std::vector<int>& layers,
                        const std::vector<int>& stage_rank, int rank) {
  const ModelSpec& model = *config.model;
  int64_t total = 0;
  for (int stage = 0; stage < config.num_stages(); ++stage) {
    if (stage_rank[stage] == rank) total += layers[stage] * layer_parameters(model);
  }
  const int64_t word_embedding = static_cast<int64_t>(model.vocab) * model.hidden;
  const int first = stage_rank.front();
  const int last = stage_rank.back();
  if (rank == first) total += word_embedding + static_cast<int64_t>(model.seq_len) * model.hidden;
  if (rank == last && rank != first) total += word_embedding;
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
                 const std::vector<int>& stage_rank, CostTable& table) {
  const ModelSpec& model = *config.model;
  const ParallelSpec& parallel = config.parallel;
  const int64_t per_layer = layer_activation_bytes(model, config.training.micro_batch, parallel,
                                                   config.training.recompute);
  for (int s = 0; s < config.num_stages(); ++s) {
    table.stages[s].activation_bytes = layers[s] * per_layer;
  }
  const int64_t hidden_bytes = static_cast<int64_t>(config.training.micro_batch) * model.seq_len *
                               model.hidden * dtype_bytes(model.dtype);
  const int64_t p2p_bytes =
      parallel.sequence_parallel ? ceil_div(hidden_bytes, parallel.tensor) : hidden_bytes;
  std::fill(table.p2p_bytes.begin(), table.p2p_bytes.end(), p2p_bytes);
  for (int r = 0; r < parallel.pipeline; ++r) {
    table.static_bytes[r] = zero_static_bytes(rank_parameters(config, layers, stage_rank, r),
                                              parallel.data, config.training.zero_stage);
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

Status fill_stage_times(const Config& config, const std::vector<int>& layers,
                        const std::vector<int>& stage_rank, const Placement& placement,
                        CostTable& table) {
  const BlockTimer timer(config);
  const int num_stages = config.num_stages();
  for (int s = 0; s < num_stages; ++s) {
    Link tp_link;
    if (config.parallel.tensor > 1) {
      const Result<Link> link =
          used_link(*config.hardware, placement.tensor_groups_in_node(stage_rank[s]));
      if (!link.ok()) return link.error();
      tp_link = *link;
    }
    Block block = repeat(timer.layer(tp_link), layers[s]);
    if (s == 0) block += timer.embedding(tp_link);
    if (s == num_stages - 1) block += timer.logits(tp_link);
    table.stages[s].forward = block.forward;
    table.stages[s].backward = block.backward;
    table.stages[s].weight_grad = block.weight_grad;
  }
  return Status();
}

Status fill_p2p_times(const Config& config, const std::vector<int>& stage_rank,
                      const Placement& placement, CostTable& table) {
  for (int s = 0; s + 1 < config.num_stages(); ++s) {
    // Stages on one rank hand over in memory; the engine ignores those boundaries.
    if (stage_rank[s] == stage_rank[s + 1]) continue;
    const Result<Link> link =
        used_link(*config.hardware, placement.ranks_share_nodes(stage_rank[s], stage_rank[s + 1]));
    if (!link.ok()) return link.error();
    const Picos t = seconds_to_picos(link->latency_s +
                                     static_cast<double>(table.p2p_bytes[s]) / link->bandwidth_Bps);
    table.p2p_forward[s] = t;
    table.p2p_backward[s] = t;
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
                  const std::vector<int>& stage_rank, CostTable& table) {
  if (Status s = check_hardware(config); !s.ok()) return s;
  const Placement placement(config.parallel, config.hardware->gpus_per_node);
  if (Status s = fill_stage_times(config, layers, stage_rank, placement, table); !s.ok()) {
    return s;
  }
  if (Status s = fill_p2p_times(config, stage_rank, placement, table); !s.ok()) return s;
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

Status apply_fixed(const FixedCosts& fixed, CostTable& table) {
  const int num_stages = table.num_stages();
  auto stage_field = [&](const std::vector<double>& values, const char* key, Picos StageCost::*f) {
    return override_field(values, key, num_stages, false,
                          [&](int i, double v) { table.stages[i].*f = seconds_to_picos(v); });
  };
  for (Status s : {stage_field(fixed.forward_s, "forward_s", &StageCost::forward),
                   stage_field(fixed.backward_s, "backward_s", &StageCost::backward),
                   stage_field(fixed.weight_grad_s, "weight_grad_s", &StageCost::weight_grad),
                   override_field(fixed.activation_bytes, "activation_bytes", num_stages, false,
                                  [&](int i, double v) {
                                    table.stages[i].activation_bytes = std::llround(v);
                                  }),
                   // A list of one per stage gives boundary s its stage s entry.
                   override_field(fixed.p2p_s, "p2p_s", num_stages - 1, true, [&](int i, double v) {
                     table.p2p_forward[i] = seconds_to_picos(v);
                     table.p2p_backward[i] = seconds_to_picos(v);
                   })}) {
    if (!s.ok()) return s;
  }
  for (StageCost& stage : table.stages) {
    if (stage.weight_grad <= stage.backward) continue;
    // The user's own W larger than the user's own B is a contradiction; an
    // analytic W under a fixed, shorter B is capped at B.
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
  const LayerGemms gemms = layer_gemms(model, micro_batch, tensor);
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
  const int64_t sbh = static_cast<int64_t>(model.seq_len) * micro_batch * model.hidden;
  const int64_t attention = 5LL * model.heads * model.seq_len * model.seq_len * micro_batch;
  const bool sp = parallel.sequence_parallel;
  // Korthikanti et al. 2022, in 16-bit bytes: a part every tensor rank keeps
  // whole and a part split over t.
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

Result<CostTable> build_cost_table(const Config& config, const std::vector<int>& stage_rank) {
  const int num_stages = config.num_stages();
  PPSIM_CHECK(static_cast<int>(stage_rank.size()) == num_stages);
  CostTable table = uniform_costs(num_stages, config.parallel.pipeline, 0, 0);
  if (config.model) {
    if (config.model->layers < num_stages) {
      return in_source(
          config, Error{"model.layers (" + std::to_string(config.model->layers) +
                        ") is fewer than the pipeline stages p * v (" + std::to_string(num_stages) +
                        "); every stage needs at least one layer"});
    }
    const std::vector<int> layers = layers_per_stage(config.model->layers, num_stages);
    fill_memory(config, layers, stage_rank, table);
    if (config.hardware) {
      if (Status s = fill_times(config, layers, stage_rank, table); !s.ok()) {
        return in_source(config, s);
      }
    }
  }
  if (Status s = apply_fixed(config.fixed, table); !s.ok()) return in_source(config, s);
  return table;
}

}  // namespace ppsim
