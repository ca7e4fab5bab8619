// Placement and communication in the analytic cost model: the link a group
// of GPUs talks over, ring collectives, pipeline transfers, and each rank's
// end-of-iteration work (gradient sync and optimizer step).
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

Link intra_node_link(const HardwareSpec& hw) {
  return Link{hw.intra_node_latency_us * kMicro, hw.intra_node_bandwidth_gbps * kGiga};
}
Link inter_node_link(const HardwareSpec& hw) {
  return Link{hw.inter_node_latency_us * kMicro, hw.inter_node_bandwidth_gbps * kGiga};
}

Status check_positive(double value, const std::string& key) {
  if (value > 0 && std::isfinite(value)) return Status();
  return Error{key + " must be positive for the analytic cost model, got " + std::to_string(value)};
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

}  // namespace

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

// The link the tensor groups of pipeline rank `rank` talk over; none (and
// unused) without tensor parallelism.
Result<Link> tensor_link(const Config& config, const Placement& placement, int rank) {
  if (config.parallel.tensor <= 1) return Link{};
  return used_link(*config.hardware, placement.tensor_groups_in_node(rank));
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

}  // namespace cost_model_internal

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

}  // namespace ppsim
