// Placement and communication in the analytic cost model: the link a group
// of GPUs talks over, ring collectives, pipeline transfers, and each rank's
// end-of-iteration work (gradient sync and optimizer step).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/cost/cost_model_internal.h"

namespace ppsim {
namespace cost_model_internal {
namespace {

Status check_positive(double value, const std::string& key) {
  if (value > 0 && std::isfinite(value)) return Status();
  return Error{key + " must be positive for the analytic cost model, got " + std::to_string(value)};
}

// The link of a group of GPUs `per_node` of which share a node (one node
// for all: `one_node`). Within a node: NVLink at its collective efficiency.
// Across nodes each GPU has its share of the node's NICs, the members in a
// node use theirs side by side (NCCL runs a ring per NIC), and they cannot
// go faster than NVLink between them.
Result<Link> group_link(const HardwareSpec& hw, bool one_node, int per_node) {
  const double half = hw.collective_half_mb * 1e6;
  const double nvlink = hw.intra_node_bandwidth_gbps * kGiga * hw.intra_node_collective_efficiency;
  if (one_node) {
    if (Status s =
            check_positive(hw.intra_node_bandwidth_gbps, "hardware.intra_node_bandwidth_gbps");
        !s.ok()) {
      return Error{s.message()};
    }
    return Link{hw.intra_node_latency_us * kMicro, nvlink, half};
  }
  if (Status s = check_positive(hw.inter_node_bandwidth_gbps, "hardware.inter_node_bandwidth_gbps");
      !s.ok()) {
    return Error{s.message()};
  }
  const int nics = hw.nics_per_node > 0 ? hw.nics_per_node : hw.gpus_per_node;
  const double nic_share = hw.inter_node_bandwidth_gbps * kGiga * nics / hw.gpus_per_node;
  double bandwidth = per_node * nic_share * hw.inter_node_collective_efficiency;
  if (per_node > 1 && nvlink > 0) bandwidth = std::min(bandwidth, nvlink);
  return Link{hw.inter_node_latency_us * kMicro, bandwidth, half};
}

// One NCCL send/recv pair between two GPUs (on one node: `one_node`): the
// link of a group of two without the collectives' message-size curve (one
// step, not a ring of them), at the bandwidth one pair reaches within a node
// (NCCL runs a pair on a few channels).
Result<Link> send_recv_link(const HardwareSpec& hw, bool one_node) {
  Result<Link> link = group_link(hw, one_node, 1);
  if (!link.ok()) return link;
  link->half_bytes = 0;
  if (one_node && hw.p2p_bandwidth_gbps > 0) link->bandwidth_Bps = hw.p2p_bandwidth_gbps * kGiga;
  return link;
}

// A pipeline's transfer between two ranks: a send/recv pair with the
// framework's fixed time per transfer.
Result<Link> p2p_link(const HardwareSpec& hw, bool one_node) {
  Result<Link> link = send_recv_link(hw, one_node);
  if (!link.ok()) return link;
  if (hw.p2p_latency_us > 0) link->latency_s = hw.p2p_latency_us * kMicro;
  return link;
}

// Data-parallel reduction of `grad_bytes` of gradients on each of d GPUs:
// the reduction, and for ZeRO 1 and 2 the updated weights' all-gather
// (`weight_bytes`). ZeRO 0 all-reduces; ZeRO 1 reduce-scatters; ZeRO 2 and
// 3 have reduced every microbatch's gradients in its backward, and ZeRO 3
// gathers its weights in every forward and backward
// (sharded_weight_traffic): ZeRO 2 only gathers the updated weights, ZeRO
// 3 does nothing at the end.
struct DataParallelSync {
  double reduce_s = 0;
  double gather_s = 0;
};

DataParallelSync data_parallel_sync(double grad_bytes, double weight_bytes, int d, int zero_stage,
                                    const Link& link) {
  if (zero_stage == 0) {
    return {collective_seconds(CollectiveKind::kAllReduce, grad_bytes, d, link), 0};
  }
  if (zero_stage == 3) return {};
  const double gather_s = collective_seconds(CollectiveKind::kAllGather, weight_bytes, d, link);
  if (zero_stage == 2) return {0, gather_s};
  return {collective_seconds(CollectiveKind::kReduceScatter, grad_bytes, d, link), gather_s};
}

// The links of rank r's data-parallel groups: the dense weights' (over d
// cp GPUs) and the routed experts' (over their d cp / EP copies).
struct DataLinks {
  Link dense;
  Link expert;
};

Result<DataLinks> data_links(const Config& config, const Placement& placement, int r) {
  const HardwareSpec& hw = *config.hardware;
  const bool one_node = placement.data_groups_in_node(r);
  const Result<Link> dense = group_link(hw, one_node, placement.data_members_per_node(r));
  if (!dense.ok()) return dense.error();
  const Result<Link> expert = group_link(hw, one_node, placement.expert_data_members_per_node(r));
  if (!expert.ok()) return expert.error();
  return DataLinks{*dense, *expert};
}

// Bytes per parameter of one optimizer step (docs/cost_model.md): the
// gradient norm's read, fp16's unscale and inf check, Adam (apex's FusedAdam,
// multi_tensor_adam.cu: it reads the gradient, the weight it updates, m and
// v and writes the last three; the gradient in fp32 beside fp32 master
// weights, as Megatron hands it over: 28 bytes), and a separate master
// weight's copy into the model's weights (the master read, the model's
// dtype written). Zeroing the gradient buffer for the next iteration,
// which touches every parameter even under ZeRO, is added by the caller.
double step_bytes_per_updated_parameter(const ParameterState& state, DType dtype) {
  const double g = state.grads;
  const double unscale = dtype == DType::kFp16 ? 2 * g : 0;
  const double adam_grad = state.master > 0 ? 4 : g;
  const double adam = adam_grad + 2.0 * (state.updated() + state.moments);
  const double copy = state.master > 0 ? state.master + dtype_bytes(dtype) : 0;
  return g + unscale + adam + copy;
}

// One microbatch's work of `phase` on rank `r`: what an overlapped
// reduction hides behind (the last microbatch's backward, bucket by
// bucket), or an overlapped weight all-gather (the first one's forward).
double rank_microbatch_s(const CostTable& table, const std::vector<int>& stage_rank, int r,
                         Picos StageCost::*phase) {
  Picos total = 0;
  for (int s = 0; s < table.num_stages(); ++s) {
    if (stage_rank[s] != r) continue;
    for (int j = 0; j < table.num_slices; ++j)
      total = duration_plus(total, table.stages[s * table.num_slices + j].*phase);
  }
  return picos_to_seconds(total);
}

// An expert group's all-to-all: NVLink among the members that share a node,
// and each GPU's own share of the NICs to the others.
Result<AllToAllLinks> expert_links(const Config& config, const Placement& placement, int rank) {
  AllToAllLinks group;
  group.members = config.parallel.expert;
  group.per_node = placement.expert_members_per_node(rank);
  if (config.model->moe) {
    group.shares = exchange_shares(*config.model->moe, config.training.moe_dispatcher,
                                   group.members, group.per_node);
  }
  const Result<Link> nvlink = group_link(*config.hardware, true, group.per_node);
  if (!nvlink.ok()) return nvlink.error();
  group.nvlink = *nvlink;
  if (group.per_node < group.members) {
    const Result<Link> network = group_link(*config.hardware, false, 1);
    if (!network.ok()) return network.error();
    group.network = *network;
  }
  return group;
}

}  // namespace

Status check_hardware(const Config& config) {
  const HardwareSpec& hw = *config.hardware;
  const std::string dtype = to_string(config.model->dtype);
  for (const auto& [value, key] : {
           std::pair{hw.peak_tflops(config.model->dtype), "hardware.peak_tflops_" + dtype},
           std::pair{hw.max_gemm_efficiency, std::string("hardware.max_gemm_efficiency")},
           std::pair{hw.hbm_bandwidth_gbps, std::string("hardware.hbm_bandwidth_gbps")},
           std::pair{hw.hbm_efficiency, std::string("hardware.hbm_efficiency")},
           std::pair{hw.flash_forward_efficiency, std::string("hardware.flash_forward_efficiency")},
           std::pair{hw.flash_backward_efficiency,
                     std::string("hardware.flash_backward_efficiency")},
           std::pair{hw.intra_node_collective_efficiency,
                     std::string("hardware.intra_node_collective_efficiency")},
           std::pair{hw.inter_node_collective_efficiency,
                     std::string("hardware.inter_node_collective_efficiency")},
           std::pair{hw.gemm_tile_m, std::string("hardware.gemm_tile_m")},
           std::pair{hw.gemm_tile_n, std::string("hardware.gemm_tile_n")},
           std::pair{static_cast<double>(hw.gpus_per_node), std::string("hardware.gpus_per_node")},
       }) {
    if (Status s = check_positive(value, key); !s.ok()) return s;
  }
  for (const auto& [value, key] :
       {std::pair{hw.sm_count, "hardware.sm_count"},
        std::pair{hw.gemm_tile_k_overhead, "hardware.gemm_tile_k_overhead"},
        std::pair{hw.flash_key_overhead, "hardware.flash_key_overhead"},
        std::pair{hw.kernel_launch_us, "hardware.kernel_launch_us"},
        std::pair{hw.collective_half_mb, "hardware.collective_half_mb"}}) {
    if (!(value >= 0) || !std::isfinite(value)) {
      return Error{std::string(key) + " must not be negative, got " + std::to_string(value)};
    }
  }
  return Status();
}

// A context ring's transfers go to the next GPU of the ring, every GPU
// sending at once: across nodes each over its own share of the NICs, each
// transfer one send/recv pair (without a pipeline's framework time: the
// attention waits for it on its stream, nothing synchronises the device);
// a context collective (cp_comm all_gather) runs over the same hops.
Result<GroupLinks> group_links(const Config& config, const Placement& placement, int rank) {
  GroupLinks links;
  if (config.parallel.tensor > 1) {
    const Result<Link> tensor = group_link(*config.hardware, placement.tensor_groups_in_node(rank),
                                           placement.tensor_members_per_node(rank));
    if (!tensor.ok()) return tensor.error();
    links.tensor = *tensor;
  }
  if (config.parallel.context > 1) {
    const bool one_node = placement.context_groups_in_node(rank);
    const Result<Link> context = group_link(*config.hardware, one_node, 1);
    if (!context.ok()) return context.error();
    links.context = *context;
    const Result<Link> ring = send_recv_link(*config.hardware, one_node);
    if (!ring.ok()) return ring.error();
    links.context_ring = *ring;
  }
  if (config.parallel.expert > 1) {
    const Result<AllToAllLinks> expert = expert_links(config, placement, rank);
    if (!expert.ok()) return expert.error();
    links.expert = *expert;
  }
  return links;
}

// Each slice's transfer pays the link's latency: k slices pay it k times.
// Every GPU of a rank sends to its counterpart at the same time, each over
// its share of the NICs (with scatter/gather, its 1/t of the activation,
// then the receivers' all-gather).
Status fill_p2p_times(const Config& config, const std::vector<int>& stage_rank,
                      const Placement& placement, int num_slices, CostTable& table) {
  const ParallelSpec& parallel = config.parallel;
  const bool scatter_gather =
      parallel.p2p_scatter_gather && parallel.tensor > 1 && !parallel.sequence_parallel;
  const int pieces = scatter_gather ? parallel.tensor : 1;
  for (int s = 0; s + 1 < config.num_stages(); ++s) {
    // Stages on one rank hand over in memory; the engine ignores those boundaries.
    if (stage_rank[s] == stage_rank[s + 1]) continue;
    const Result<Link> link =
        p2p_link(*config.hardware, placement.ranks_share_nodes(stage_rank[s], stage_rank[s + 1]));
    if (!link.ok()) return link.error();
    // Scatter/gather: the receivers all-gather the pieces over their tensor
    // group, stage s + 1's for an activation, stage s's for a gradient.
    Link gather_forward;
    Link gather_backward;
    if (scatter_gather) {
      const Result<GroupLinks> next = group_links(config, placement, stage_rank[s + 1]);
      if (!next.ok()) return next.error();
      const Result<GroupLinks> here = group_links(config, placement, stage_rank[s]);
      if (!here.ok()) return here.error();
      gather_forward = next->tensor;
      gather_backward = here->tensor;
    }
    const auto transfer_picos = [&](double bytes, const Link& gather) {
      const double gather_s =
          scatter_gather ? collective_seconds(CollectiveKind::kAllGather, bytes, pieces, gather)
                         : 0;
      return seconds_to_picos(transfer_seconds(bytes / pieces, *link) + gather_s);
    };
    for (int j = 0; j < num_slices; ++j) {
      const int i = s * num_slices + j;
      const auto bytes = static_cast<double>(table.p2p_bytes[i]);
      table.p2p_forward[i] = transfer_picos(bytes, gather_forward);
      table.p2p_backward[i] = transfer_picos(bytes, gather_backward);
    }
  }
  return Status();
}

// A rank's gradient reduction before any overlap: over its data-parallel
// group (the routed experts' over their own copies), and with DualPipe's
// two copies of the model (rank r's stages are rank p-1-r's of the other
// chain) the sum of each pair of copies, tied embedding included (both
// ends sit on ranks 0 and p-1): an all-reduce between the two ranks,
// bucketed into the backward as the data-parallel reduction is.
Result<DataParallelSync> rank_gradient_sync(const Config& config, const Placement& placement,
                                            const RankParameters& held, int r) {
  const HardwareSpec& hw = *config.hardware;
  const OpShape shape = OpShape::of(config);
  const int d = config.parallel.weight_replicas();
  const int expert_d = d / config.parallel.expert;
  const int zero = config.training.zero_stage;
  const auto dense = static_cast<double>(held.dense);
  const auto experts = static_cast<double>(held.expert);
  DataParallelSync sync;
  if (d > 1) {
    const Result<DataLinks> links = data_links(config, placement, r);
    if (!links.ok()) return links.error();
    sync = data_parallel_sync(dense * shape.grad_bytes, dense * dtype_bytes(config.model->dtype), d,
                              zero, links->dense);
    if (experts > 0 && expert_d > 1) {
      const DataParallelSync expert_sync =
          data_parallel_sync(experts * shape.grad_bytes, experts * dtype_bytes(config.model->dtype),
                             expert_d, zero, links->expert);
      sync.reduce_s += expert_sync.reduce_s;
      sync.gather_s += expert_sync.gather_s;
    }
  }
  if (config.num_chains() > 1) {
    const int mirror = config.parallel.pipeline - 1 - r;
    const Result<Link> link = group_link(hw, placement.ranks_share_nodes(r, mirror), 1);
    if (!link.ok()) return link.error();
    sync.reduce_s += collective_seconds(CollectiveKind::kAllReduce,
                                        (dense + experts) * shape.grad_bytes, 2, *link);
  }
  return sync;
}

// ZeRO 2 and 3 keep 1/(d cp) of the gradients on each GPU, so every
// microbatch's backward reduce-scatters the gradients it made; ZeRO 3
// (DeepSpeed's stage 3; FSDP's full sharding) keeps 1/(d cp) of the weights
// too: a stage's forward all-gathers its weights first, frees them, and its
// backward gathers them again (Rajbhandari et al. 2020, ZeRO, sections
// 5.2 and 7.2.2: 3 Psi of traffic against data parallelism's 2 Psi; Zhao et
// al. 2023, PyTorch FSDP, section 3.3).
Result<ShardedWeightTraffic> sharded_weight_traffic(const Config& config,
                                                    const Placement& placement,
                                                    const RankParameters& held, int rank) {
  const int d = config.parallel.weight_replicas();
  const int expert_d = d / config.parallel.expert;
  const int zero = config.training.zero_stage;
  if (zero < 2 || d == 1) return ShardedWeightTraffic{};
  const Result<DataLinks> links = data_links(config, placement, rank);
  if (!links.ok()) return links.error();
  const double weight_bytes = dtype_bytes(config.model->dtype);
  const double grad_bytes = gradient_bytes(config.training, config.model->dtype);
  ShardedWeightTraffic traffic;
  const auto add = [&](int64_t params, int group, const Link& link) {
    if (params == 0 || group == 1) return;
    const auto n = static_cast<double>(params);
    if (zero == 3) {
      traffic.gather_s +=
          collective_seconds(CollectiveKind::kAllGather, n * weight_bytes, group, link);
    }
    traffic.scatter_s +=
        collective_seconds(CollectiveKind::kReduceScatter, n * grad_bytes, group, link);
  };
  add(held.dense, d, links->dense);
  add(held.expert, expert_d, links->expert);
  return traffic;
}

// Each chunk's share is gathered bucket by bucket, the buckets one after
// another on the data-parallel link, and waited for at the chunk's first
// forward, whose own buckets hide all but the first: chunk c's gather is
// needed once that forward ends. In Megatron's interleaved 1F1B a chunk's
// first forward comes after p forwards of each earlier chunk (microbatches
// run p at a time per chunk); chunks 0 and 1's gathers are launched at once
// and chunk c's (c > 1) as chunk c - 1's first forward starts
// (param_sync_func in forward_backward_pipelining_with_interleaving). A
// wait delays every later chunk alike; the waits add up to what is exposed.
double exposed_weight_gather(const Config& config, double gather_s, double forward_s) {
  const bool interleaved = config.schedule.kind == ScheduleKind::kInterleaved1f1b;
  const int chunks = interleaved ? config.parallel.virtual_stages : 1;
  const double p = config.parallel.pipeline;
  const double g = gather_s / chunks;   // a chunk's gather
  const double f = forward_s / chunks;  // one microbatch's forward of a chunk
  double exposed = 0;
  double link_free = 0;
  for (int c = 0; c < chunks; ++c) {
    const double launch = c <= 1 ? 0 : (c - 1) * p * f + exposed;
    link_free = std::max(link_free, launch) + g;
    exposed += std::max(0.0, link_free - (c * p * f + f + exposed));
  }
  return exposed;
}

// End-of-iteration work per rank: gradient reduction (what of it the
// backward does not hide) and the optimizer step.
Status fill_rank_times(const Config& config, const std::vector<int>& layers,
                       const std::vector<int>& stage_rank, const Placement& placement,
                       CostTable& table) {
  const ModelSpec& model = *config.model;
  const HardwareSpec& hw = *config.hardware;
  const OpShape shape = OpShape::of(config);
  const int d = config.parallel.weight_replicas();
  const int expert_d = d / config.parallel.expert;
  const int zero = config.training.zero_stage;
  const int first = stage_rank.front();
  const int last = stage_rank.back();
  const double memory_Bps = hw.hbm_bandwidth_gbps * kGiga * hw.hbm_efficiency;
  const ParameterState state = parameter_state(config);
  for (int r = 0; r < config.parallel.pipeline; ++r) {
    const RankParameters held = rank_parameters(config, layers, stage_rank, r);
    const auto dense = static_cast<double>(held.dense);
    const auto experts = static_cast<double>(held.expert);
    Result<DataParallelSync> reduced = rank_gradient_sync(config, placement, held, r);
    if (!reduced.ok()) return reduced.error();
    DataParallelSync sync = *reduced;
    if (config.training.overlap_grad_reduce) {
      sync.reduce_s = std::max(
          0.0, sync.reduce_s - rank_microbatch_s(table, stage_rank, r, &StageCost::backward));
    }
    if (config.training.overlap_param_gather) {
      sync.gather_s = exposed_weight_gather(
          config, sync.gather_s, rank_microbatch_s(table, stage_rank, r, &StageCost::forward));
    }
    double sync_s = sync.reduce_s + sync.gather_s;
    // The tied word embedding's two copies sum their gradients.
    if (model.tie_embeddings && last != first && (r == first || r == last)) {
      const Result<Link> link = group_link(hw, placement.ranks_share_nodes(first, last), 1);
      if (!link.ok()) return link.error();
      const double copy = static_cast<double>(model.vocab) * model.hidden / config.parallel.tensor;
      sync_s += collective_seconds(CollectiveKind::kAllReduce, copy * shape.grad_bytes, 2, *link);
    }
    table.grad_sync[r] = seconds_to_picos(sync_s);
    const double updated = zero >= 1 ? dense / d + experts / expert_d : dense + experts;
    // With FP8, each weight's FP8 copy (and on Hopper its transpose) is made
    // once an iteration, on its first microbatch (Transformer Engine's
    // is_first_microbatch), over the embedding and head too (a small
    // excess).
    const double weight_cast = fp8_operand_bytes(config.training.fp8, Fp8Input::kCast, model.dtype,
                                                 1, hw.fp8_gemm_needs_transposes());
    const double step_bytes = updated * step_bytes_per_updated_parameter(state, model.dtype) +
                              (dense + experts) * (state.grads + weight_cast);
    table.optimizer_step[r] = seconds_to_picos(step_bytes / memory_Bps);
  }
  // A synchronous step all-reduces the gradient norm (one fp32) across the
  // pipeline ranks: latency-bound.
  const int p = config.parallel.pipeline;
  if (p > 1) {
    const Result<Link> link = group_link(hw, placement.ranks_share_nodes(0, p - 1), 1);
    if (!link.ok()) return link.error();
    table.pipeline_sync =
        seconds_to_picos(collective_seconds(CollectiveKind::kAllReduce, 4.0, p, *link));
  }
  return Status();
}

}  // namespace cost_model_internal
}  // namespace ppsim
