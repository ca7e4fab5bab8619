// Compute time in the analytic cost model: the GEMMs of a layer, the time of
// each piece of a stage (a layer, the embedding, the logits) for one token
// slice with its tensor-parallel collectives, and the stage times that
// build_cost_table, slice_cost_function and piece_times use.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/cost/cost_model_internal.h"

namespace ppsim {
namespace cost_model_internal {
namespace {

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
// place both build_cost_table and slice_cost_function time a stage. With
// `measured` (costs.profile, slice j) each piece the profile timed (the
// layers always, the embedding and the logits and loss where it has them)
// takes the measured times instead of the analytic ones.
Block stage_block(const BlockTimer& timer, const StagePieces& stage, const Slice& slice,
                  const ProfiledLayers* measured = nullptr, int j = 0) {
  const auto piece = [](const MeasuredPiece* m, auto analytic) {
    return m != nullptr ? Block{m->forward, m->backward, m->weight_grad} : analytic();
  };
  const Link& link = stage.tp_link;
  Block block = repeat(piece(measured != nullptr ? &measured->layer[j] : nullptr,
                             [&] { return timer.layer(slice, link); }),
                       stage.layers);
  if (stage.embedding) {
    block += piece(measured != nullptr ? measured->embedding_at(j) : nullptr,
                   [&] { return timer.embedding(slice, link); });
  }
  if (stage.logits) {
    block += piece(measured != nullptr ? measured->head_at(j) : nullptr,
                   [&] { return timer.logits(slice, link); });
  }
  return block;
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
                        const std::vector<Slice>& slices, const ProfiledLayers* measured,
                        CostTable& table) {
  const BlockTimer timer(config);
  const int k = static_cast<int>(slices.size());
  for (int s = 0; s < config.num_stages(); ++s) {
    const Result<StagePieces> pieces = stage_pieces(config, layers, stage_rank, placement, s);
    if (!pieces.ok()) return pieces.error();
    for (int j = 0; j < k; ++j) {
      const Block block = stage_block(timer, *pieces, slices[j], measured, j);
      StageCost& cost = table.stages[s * k + j];
      cost.forward = block.forward;
      cost.backward = block.backward;
      cost.weight_grad = block.weight_grad;
    }
  }
  return Status();
}

}  // namespace

// Figures that need the hardware too: every duration.
Status fill_times(const Config& config, const std::vector<int>& layers,
                  const std::vector<int>& stage_rank, const std::vector<Slice>& slices,
                  CostTable& table, const ProfiledLayers* measured) {
  if (Status s = check_hardware(config); !s.ok()) return s;
  const Placement placement(config.parallel, config.hardware->gpus_per_node);
  if (Status s = fill_stage_times(config, layers, stage_rank, placement, slices, measured, table);
      !s.ok()) {
    return s;
  }
  const int k = static_cast<int>(slices.size());
  if (Status s = fill_p2p_times(config, stage_rank, placement, k, table); !s.ok()) return s;
  return fill_rank_times(config, layers, stage_rank, placement, table);
}

}  // namespace cost_model_internal

using cost_model_internal::Block;
using cost_model_internal::BlockTimer;
using cost_model_internal::check_hardware;
using cost_model_internal::layer_gemms;
using cost_model_internal::LayerGemms;
using cost_model_internal::Link;
using cost_model_internal::Placement;
using cost_model_internal::Slice;
using cost_model_internal::stage_block;
using cost_model_internal::stage_layers;
using cost_model_internal::stage_pieces;
using cost_model_internal::StagePieces;
using cost_model_internal::tensor_link;
using cost_model_internal::whole_sequence;

double layer_forward_flops(const ModelSpec& model, int micro_batch, int tensor) {
  const LayerGemms gemms = layer_gemms(model, micro_batch, tensor, whole_sequence(model));
  return gemms.linear() + gemms.attention();
}

double model_flops_per_iteration(const Config& config) {
  if (!config.model) return 0;
  const ModelSpec& model = *config.model;
  const double logits = 2.0 * model.seq_len * model.hidden * model.vocab;
  const double per_sequence = model.layers * layer_forward_flops(model, 1, 1) + logits;
  return static_cast<double>(config.training.global_batch) * 3 * per_sequence;
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
