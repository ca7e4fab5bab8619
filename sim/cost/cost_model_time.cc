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
#include "sim/cost/layer_ops.h"
#include "sim/cost/op_time.h"

namespace ppsim {
namespace cost_model_internal {
namespace {

// Forward, backward and the weight-gradient part of backward of one piece of
// a stage (a layer, the embedding, the logits). Summed in picoseconds so that
// the exact relationships (backward = 2 x forward without communication or
// recompute) survive rounding.
struct Block {
  Picos forward = 0;
  Picos backward = 0;
  Picos weight_grad = 0;
  // The communication in forward and in the input-gradient part of backward
  // (StageCost::forward_comm, backward_comm).
  Picos forward_comm = 0;
  Picos backward_comm = 0;
  Picos backward_overlap = 0;  // StageCost::backward_overlap

  Block& operator+=(const Block& other) {
    forward = duration_plus(forward, other.forward);
    backward = duration_plus(backward, other.backward);
    weight_grad = duration_plus(weight_grad, other.weight_grad);
    forward_comm = duration_plus(forward_comm, other.forward_comm);
    backward_comm = duration_plus(backward_comm, other.backward_comm);
    backward_overlap = duration_plus(backward_overlap, other.backward_overlap);
    return *this;
  }
  // The input gradient on its own, as input_grad_time (costs.h).
  Picos input_grad() const { return backward - weight_grad + backward_overlap; }
};

Block repeat(const Block& block, int64_t n) {
  return Block{duration_times(block.forward, n),       duration_times(block.backward, n),
               duration_times(block.weight_grad, n),   duration_times(block.forward_comm, n),
               duration_times(block.backward_comm, n), duration_times(block.backward_overlap, n)};
}

// The config's kernels' timer: its hardware and its CUDA graphs.
OpTimer op_timer(const Config& config) {
  return OpTimer(*config.hardware, config.model->dtype, config.parallel.tensor,
                 config.training.cuda_graphs);
}

// Times the pieces of a stage for one slice of a microbatch by pricing
// their operations (layer_ops.h) on the hardware (op_time.h). Holds copies
// of what it needs, so that a SliceCostFn can own one.
class BlockTimer {
 public:
  explicit BlockTimer(const Config& config)
      : shape_(OpShape::of(config)),
        timer_(op_timer(config)),
        recompute_(config.training.recompute) {}

  // B = I + W; recompute runs before I: the whole forward again (full), or
  // the attention core's (selective; nothing with flash attention, whose
  // backward recomputes the scores inside its kernel).
  Block layer(const Slice& slice, const GroupLinks& links) const {
    return with_recompute(layer_ops(shape_, TokenSlice{slice.tokens, slice.context}), slice, links);
  }

  // REQUIRES: model.moe.
  Block moe_layer(const Slice& slice, const GroupLinks& links) const {
    return with_recompute(moe_layer_ops(shape_, TokenSlice{slice.tokens, slice.context}), slice,
                          links);
  }

  Block embedding(const Slice& slice, const GroupLinks& links) const {
    return priced(embedding_ops(shape_, TokenSlice{slice.tokens, slice.context}), links, false);
  }

  Block logits(const Slice& slice, const GroupLinks& links) const {
    return priced(head_ops(shape_, TokenSlice{slice.tokens, slice.context}), links, false);
  }

 private:
  Block with_recompute(const PieceOps& ops, const Slice& slice, const GroupLinks& links) const {
    const TokenSlice token_slice{slice.tokens, slice.context};
    Block block = priced(ops, links, true);
    if (recompute_ == Recompute::kFull) {
      block.backward = duration_plus(block.backward, block.forward);
      block.backward_comm = duration_plus(block.backward_comm, block.forward_comm);
    }
    // Selective recompute reruns the attention core's forward, the flash
    // kernel too (Megatron-Core checkpoints the core attention whatever
    // its kernel, checkpoint_core_attention).
    if (recompute_ == Recompute::kSelective) {
      block.backward = duration_plus(
          block.backward,
          seconds_to_picos(timer_.seconds(attention_core_forward(shape_, token_slice), links)));
    }
    return block;
  }

  // `layer`: a layer's lists, run layer after layer; else a piece the
  // stage runs once (OpTimer::with_launches).
  Block priced(const PieceOps& ops, const GroupLinks& links, bool layer) const {
    const double weight_grad_s = timer_.device_seconds(ops.weight_grad, links);
    const double input_grad_s = timer_.device_seconds(ops.input_grad, links);
    const auto seconds = [&](const OpList& list, double device_s) {
      return seconds_to_picos(timer_.with_launches(list, device_s, links, layer));
    };
    const Picos weight_grad = seconds(ops.weight_grad, weight_grad_s);
    const Picos forward = seconds(ops.forward, timer_.device_seconds(ops.forward, links));
    const Picos input_grad = seconds(ops.input_grad, input_grad_s);
    // Each within the time it is part of, whatever the rounding.
    const Picos backward_comm =
        std::min(input_grad, seconds_to_picos(timer_.communication_seconds(ops.input_grad, links)));
    const Picos overlap = std::min({backward_comm, weight_grad,
                                    seconds_to_picos(timer_.beside_weight_grad_seconds(
                                        ops.input_grad, ops.weight_grad, links))});
    const double device_backward_s = input_grad_s + weight_grad_s - picos_to_seconds(overlap);
    // At least the weight gradient, and its input gradient's overlap with it.
    const Picos backward = std::max(
        weight_grad, seconds_to_picos(timer_.backward_seconds(ops.input_grad, ops.weight_grad,
                                                              device_backward_s, links, layer)));
    return Block{
        forward,
        backward,
        weight_grad,
        std::min(forward, seconds_to_picos(timer_.communication_seconds(ops.forward, links))),
        backward_comm,
        overlap};
  }

  OpShape shape_;
  OpTimer timer_;
  Recompute recompute_;
};

// What sets a stage's time apart from another's: its layers, whether it holds
// the embedding or the logits, and the links its tensor group and context
// ring talk over.
struct StagePieces {
  int layers = 0;  // dense and mixture-of-experts
  int moe_layers = 0;
  bool embedding = false;
  bool logits = false;
  GroupLinks links;
  ShardedWeightTraffic sharded;  // ZeRO 2's and 3's, per microbatch (slice)
};

// ZeRO 2's and 3's collectives beside the stage's compute: each runs on its
// own stream while the compute before it goes on (ZeRO 3's gather ahead of
// the forward and again ahead of the input gradient, the reduce-scatter
// behind the weight gradient), and only what outlasts that compute adds to
// its phase. The compute is the phase less its own communication.
void add_sharded_weight_traffic(const ShardedWeightTraffic& traffic, Block& block) {
  const auto outlasting = [](double comm_s, Picos compute) {
    return std::max(Picos{0}, seconds_to_picos(comm_s) - compute);
  };
  const Picos forward = outlasting(traffic.gather_s, block.forward - block.forward_comm);
  const Picos input_grad = outlasting(traffic.gather_s, block.input_grad() - block.backward_comm);
  const Picos weight_grad = outlasting(traffic.scatter_s, block.weight_grad);
  block.forward = duration_plus(block.forward, forward);
  block.forward_comm = duration_plus(block.forward_comm, forward);
  block.backward = duration_plus(block.backward, duration_plus(input_grad, weight_grad));
  block.weight_grad = duration_plus(block.weight_grad, weight_grad);
  block.backward_comm = duration_plus(block.backward_comm, input_grad);
}

// Forward, backward and W of one slice of a microbatch on one stage: the one
// place both build_cost_table and slice_cost_function time a stage. With
// `measured` (costs.profile, slice j) each piece the profile timed (the
// layers always, the embedding and the logits and loss where it has them)
// takes the measured times instead of the analytic ones; a measured piece
// does not tell its communication apart, so an overlapped pair hides none of it.
Block stage_block(const BlockTimer& timer, const StagePieces& stage, const Slice& slice,
                  const ProfiledLayers* measured = nullptr, int j = 0) {
  const auto piece = [](const MeasuredPiece* m, auto analytic) {
    return m != nullptr ? Block{m->forward, m->backward, m->weight_grad} : analytic();
  };
  const GroupLinks& link = stage.links;
  Block block = repeat(piece(measured != nullptr ? &measured->layer[j] : nullptr,
                             [&] { return timer.layer(slice, link); }),
                       stage.layers - stage.moe_layers);
  if (stage.moe_layers > 0) block += repeat(timer.moe_layer(slice, link), stage.moe_layers);
  if (stage.embedding) {
    block += piece(measured != nullptr ? measured->embedding_at(j) : nullptr,
                   [&] { return timer.embedding(slice, link); });
  }
  if (stage.logits) {
    block += piece(measured != nullptr ? measured->head_at(j) : nullptr,
                   [&] { return timer.logits(slice, link); });
  }
  add_sharded_weight_traffic(stage.sharded, block);
  return block;
}

// The pieces of stage `s`, with the links of its rank's tensor groups and
// context rings.
Result<StagePieces> stage_pieces(const Config& config, const std::vector<int>& layers,
                                 const std::vector<int>& stage_rank, const Placement& placement,
                                 int s) {
  StagePieces pieces;
  pieces.layers = layers[s];
  pieces.moe_layers = stage_moe_layers(*config.model, layers, s);
  pieces.embedding = config.first_of_chain(s);
  pieces.logits = config.last_of_chain(s);
  const Result<GroupLinks> links = group_links(config, placement, stage_rank[s]);
  if (!links.ok()) return links.error();
  pieces.links = *links;
  const Result<ShardedWeightTraffic> sharded = sharded_weight_traffic(
      config, placement, stage_gpu_parameters(config, layers, stage_rank, s), stage_rank[s]);
  if (!sharded.ok()) return sharded.error();
  pieces.sharded = *sharded;
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
      cost.forward_comm = block.forward_comm;
      cost.backward_comm = block.backward_comm;
      cost.backward_overlap = block.backward_overlap;
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
  table.comm_sm_fraction = config.hardware->comm_sm_fraction;
  if (Status s = fill_p2p_times(config, stage_rank, placement, k, table); !s.ok()) return s;
  return fill_rank_times(config, layers, stage_rank, placement, table);
}

}  // namespace cost_model_internal

using cost_model_internal::Block;
using cost_model_internal::BlockTimer;
using cost_model_internal::ceil_div;
using cost_model_internal::check_hardware;
using cost_model_internal::group_links;
using cost_model_internal::in_source;
using cost_model_internal::layer_gpu_parameters;
using cost_model_internal::Placement;
using cost_model_internal::rank_sequence;
using cost_model_internal::RankParameters;
using cost_model_internal::sharded_weight_traffic;
using cost_model_internal::ShardedWeightTraffic;
using cost_model_internal::Slice;
using cost_model_internal::stage_block;
using cost_model_internal::stage_layers;
using cost_model_internal::stage_pieces;
using cost_model_internal::StagePieces;

namespace {

double forward_flops(const PieceOps& ops) {
  double flops = 0;
  for (const Op& op : ops.forward) flops += op.flops;
  return flops;
}

double forward_attention_flops(const PieceOps& ops) {
  double flops = 0;
  for (const Op& op : ops.forward) {
    if (op.kind == OpKind::kFlashAttention) flops += op.flops;
  }
  return flops;
}

// One GPU of t = 1, one sequence, experts at their mean load.
OpShape mean_load_shape(const ModelSpec& model) {
  OpShape shape;
  shape.model = model;
  if (shape.model.moe) {
    shape.model.moe->imbalance = 1;
    shape.model.moe->capacity_factor = 0;
  }
  return shape;
}

// One sequence's forward over every layer and the logits, and what of it
// runs in the fused attention kernel.
struct SequenceFlops {
  double total = 0;
  double attention = 0;
};

SequenceFlops sequence_forward_flops(const ModelSpec& model) {
  const OpShape shape = mean_load_shape(model);
  const TokenSlice whole{model.seq_len, 0};
  SequenceFlops flops;
  const auto add = [&flops](const PieceOps& ops, int layers) {
    flops.total += layers * forward_flops(ops);
    flops.attention += layers * forward_attention_flops(ops);
  };
  const int moe = model.moe_layers();
  add(layer_ops(shape, whole), model.layers - moe);
  if (moe > 0) add(moe_layer_ops(shape, whole), moe);
  flops.total += 2.0 * model.seq_len * model.hidden * model.vocab;  // the logits
  return flops;
}

}  // namespace

double layer_forward_flops(const ModelSpec& model, int micro_batch, int tensor) {
  OpShape shape;
  shape.model = model;
  shape.micro_batch = micro_batch;
  shape.tensor = tensor;
  return forward_flops(layer_ops(shape, TokenSlice{model.seq_len, 0}));
}

double moe_layer_forward_flops(const ModelSpec& model) {
  PPSIM_CHECK(model.moe.has_value());
  return forward_flops(moe_layer_ops(mean_load_shape(model), TokenSlice{model.seq_len, 0}));
}

double attention_flop_share(const ModelSpec& model) {
  if (model.attention != Attention::kFlash) return 0;
  const SequenceFlops flops = sequence_forward_flops(model);
  return flops.total > 0 ? flops.attention / flops.total : 0;
}

double model_flops_per_iteration(const Config& config) {
  if (!config.model) return 0;
  // Attention counted as the full s x s products whatever the kernel, as
  // Megatron-LM counts model FLOPs: the MFU of two kernels stays comparable.
  ModelSpec model = *config.model;
  model.attention = Attention::kStandard;
  return static_cast<double>(config.training.global_batch) * 3 *
         sequence_forward_flops(model).total;
}

Result<std::function<double(int length, int context)>> slice_cost_function(const Config& config) {
  PPSIM_CHECK(config.model && config.hardware);
  if (Status s = check_hardware(config); !s.ok()) return in_source(config, s);
  const int num_stages = config.num_stages();
  const Result<std::vector<int>> split = stage_layers(config);
  if (!split.ok()) return in_source(config, split.error());
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
      const Block block =
          stage_block(timer, *pieces, rank_sequence(*config.model, config.parallel));
      if (block.forward + block.backward > slowest_time) {
        slowest = *pieces;
        slowest_time = block.forward + block.backward;
      }
    }
    return Bottleneck{timer, *slowest};
  }());
  return std::function<double(int, int)>([bottleneck](int length, int context) {
    PPSIM_CHECK(length > 0 && context >= 0);
    const Block block = stage_block(bottleneck->timer, bottleneck->stage, Slice{length, context});
    return picos_to_seconds(block.forward + block.backward);
  });
}

namespace {

// The links of pipeline rank 0's groups, which piece_times and
// priced_pieces price every piece over (cost_model.h says why), after the
// hardware check. REQUIRES: config.model and config.hardware.
Result<GroupLinks> first_rank_links(const Config& config) {
  PPSIM_CHECK(config.model && config.hardware);
  if (Status s = check_hardware(config); !s.ok()) return Error{s.message()};
  return group_links(config, Placement(config.parallel, config.hardware->gpus_per_node), 0);
}

}  // namespace

Result<PieceTimes> piece_times(const Config& config) {
  const Result<GroupLinks> link = first_rank_links(config);
  if (!link.ok()) return link.error();
  const BlockTimer timer(config);
  const Slice whole = rank_sequence(*config.model, config.parallel);
  auto seconds = [](const Block& block) {
    return picos_to_seconds(block.forward + block.backward);
  };
  const double moe = config.model->moe ? seconds(timer.moe_layer(whole, *link)) : 0;
  return PieceTimes{seconds(timer.layer(whole, *link)), moe, seconds(timer.embedding(whole, *link)),
                    seconds(timer.logits(whole, *link))};
}

namespace {

PricedPhase priced_phase(const char* name, const OpList& ops, const OpTimer& timer,
                         const GroupLinks& links, bool layer) {
  const double device_s = timer.device_seconds(ops, links);
  const double seconds = timer.with_launches(ops, device_s, links, layer);
  PricedPhase phase{name, {}, seconds, seconds - device_s};
  for (const Op& op : ops) {
    const bool gemm = op.kind == OpKind::kGemm && op.flops > 0;
    phase.ops.push_back(
        {op, timer.seconds(op, links), gemm ? timer.gemm_tiling(op) : GemmTiling{}});
  }
  return phase;
}

PricedPiece priced_piece(const char* name, const PieceOps& ops, const OpTimer& timer,
                         const GroupLinks& links, bool layer) {
  return {name,
          {priced_phase("forward", ops.forward, timer, links, layer),
           priced_phase("input gradient", ops.input_grad, timer, links, layer),
           priced_phase("weight gradient", ops.weight_grad, timer, links, layer)},
          timer.beside_weight_grad_seconds(ops.input_grad, ops.weight_grad, links)};
}

}  // namespace

Result<std::vector<PricedPiece>> priced_pieces(const Config& config) {
  const Result<GroupLinks> links = first_rank_links(config);
  if (!links.ok()) return links.error();
  const OpShape shape = OpShape::of(config);
  const OpTimer timer = cost_model_internal::op_timer(config);
  const Slice whole = rank_sequence(*config.model, config.parallel);
  const TokenSlice slice{whole.tokens, whole.context};
  // Each piece's weights on one GPU of rank 0, for ZeRO 2's and 3's
  // collectives; the output matrix is the embedding's when p = 1.
  const int t = config.parallel.tensor;
  const ModelSpec& model = *config.model;
  std::vector<std::pair<PricedPiece, RankParameters>> pieces;
  if (model.moe_layers() < model.layers) {
    pieces.emplace_back(priced_piece("dense layer", layer_ops(shape, slice), timer, *links, true),
                        layer_gpu_parameters(config, false));
  }
  if (model.moe) {
    pieces.emplace_back(priced_piece("MoE layer", moe_layer_ops(shape, slice), timer, *links, true),
                        layer_gpu_parameters(config, true));
  }
  pieces.emplace_back(priced_piece("embedding", embedding_ops(shape, slice), timer, *links, false),
                      RankParameters{ceil_div(input_embedding_parameters(model), t), 0});
  pieces.emplace_back(
      priced_piece("logits and loss", head_ops(shape, slice), timer, *links, false),
      RankParameters{ceil_div(output_parameters(model, config.parallel.pipeline > 1), t), 0});
  const Placement placement(config.parallel, config.hardware->gpus_per_node);
  std::vector<PricedPiece> priced;
  for (auto& [piece, held] : pieces) {
    const Result<ShardedWeightTraffic> traffic = sharded_weight_traffic(config, placement, held, 0);
    if (!traffic.ok()) return traffic.error();
    piece.gather_seconds = traffic->gather_s;
    piece.scatter_seconds = traffic->scatter_s;
    priced.push_back(std::move(piece));
  }
  return priced;
}

}  // namespace ppsim
