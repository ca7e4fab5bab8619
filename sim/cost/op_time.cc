#include "sim/cost/op_time.h"

#include <algorithm>
#include <cmath>

namespace ppsim {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr double kMicro = 1e-6;
// cuBLAS splits a short, wide product's K over several tiles (split-K) to
// fill the device; each part keeps at least this much of K.
constexpr double kMinSplitK = 256;
// NCCL's LL protocol writes 16-byte lines of 8 data bytes and two flags
// (union ncclLLFifoLine, src/include/device.h): half the link's bandwidth,
// with no handshake to wait for, so small messages take little more than
// the steps' latency.
constexpr double kLowLatencyShare = 0.5;

}  // namespace

double collective_seconds(CollectiveKind kind, double bytes, int n, const Link& link) {
  if (n <= 1 || bytes <= 0) return 0;
  const double steps = kind == CollectiveKind::kAllReduce ? 2.0 * (n - 1) : n - 1.0;
  // NCCL picks the faster protocol for the message: Simple, at the size
  // curve's bus bandwidth, or, with a size curve, LL at half the link's
  // bandwidth without Simple's fill (the two meet at half_bytes).
  const double bus_Bps = std::max(link.bus_bandwidth_Bps(bytes),
                                  link.half_bytes > 0 ? kLowLatencyShare * link.bandwidth_Bps : 0);
  return steps * link.latency_s + steps * bytes / n / bus_Bps;
}

double all_to_all_seconds(double bytes, const AllToAllLinks& group) {
  if (group.members <= 1 || bytes <= 0) return 0;
  const double local = bytes * group.shares.nvlink;
  const double remote = bytes * group.shares.network;
  const auto part = [](double part_bytes, const Link& link) {
    return part_bytes > 0 ? link.latency_s + part_bytes / link.bus_bandwidth_Bps(part_bytes) : 0;
  };
  return std::max(part(local, group.nvlink), part(remote, group.network));
}

double transfer_seconds(double bytes, const Link& link) {
  if (bytes <= 0) return 0;
  return link.latency_s + bytes / link.bus_bandwidth_Bps(bytes);
}

OpTimer::OpTimer(const HardwareSpec& hardware, DType dtype, int tensor, const CudaGraphs& graphs)
    : hw_(hardware),
      flops_per_s_(hardware.peak_tflops(dtype) * kTera),
      fp8_flops_per_s_(hardware.peak_tflops_fp8 * kTera),
      memory_Bps_(hardware.hbm_bandwidth_gbps * kGiga * hardware.hbm_efficiency),
      launch_s_(hardware.kernel_launch_us * kMicro),
      host_launch_s_(graphs.has(CudaGraphScope::kFullIteration) ? 0
                                                                : hardware.host_launch_us * kMicro),
      graphs_(graphs),
      draws_per_s_(hardware.dropout_rng_gsamples_per_s * kGiga),
      tensor_(tensor) {}

double OpTimer::memory_seconds(double bytes) const { return bytes / memory_Bps_; }

double OpTimer::draw_seconds(double elements) const {
  return draws_per_s_ > 0 ? elements / draws_per_s_ : 0;
}

// One wave runs sm_count tiles side by side; a tile of tile_m x tile_n
// outputs costs K + gemm_tile_k_overhead multiply-accumulate steps at
// `efficiency` of one SM's share of the peak. A product with fewer
// tiles than SMs splits its K to fill them. Without sm_count, no waves.
// An FP8 product runs its steps at the FP8 peak; its tile's overhead (the
// prologue's loads, the epilogue's stores) takes the same time, which is
// more steps of K in proportion.
GemmTiling OpTimer::tiled(const Op& op, double tile_m, double tile_n, double efficiency) const {
  PPSIM_CHECK(!op.fp8 || fp8_flops_per_s_ > 0);  // config_checks.cc: training.fp8
  const double peak = op.fp8 ? fp8_flops_per_s_ : flops_per_s_;
  const double steps_per_s = peak * efficiency;
  const double k_overhead = hw_.gemm_tile_k_overhead * peak / flops_per_s_;
  if (hw_.sm_count <= 0) {
    return {tile_m, tile_n, 0, 0, op.flops * (op.k + k_overhead) / op.k / steps_per_s};
  }
  const double tiles = op.batch * std::ceil(op.m / tile_m) * std::ceil(op.n / tile_n);
  const double sms = hw_.sm_count;
  const double split =
      tiles >= sms ? 1 : std::max(1.0, std::min(std::floor(sms / tiles), op.k / kMinSplitK));
  const double split_k = op.k / split;
  const double waves = std::ceil(tiles * split / sms);
  const double tile_flops = 2 * tile_m * tile_n * (split_k + k_overhead);
  return {tile_m, tile_n, waves, tiles * split / sms, waves * tile_flops * sms / steps_per_s};
}

// cuBLAS picks the kernel for the shape: the cheaper of the tile's two
// orientations and, with gemm_half_tile_efficiency, of the half-height tile
// (tile_m / 2 x tile_n), which fills the SMs in finer waves but reuses less
// of what it loads and so runs at that fraction of max_gemm_efficiency.
GemmTiling OpTimer::gemm_tiling(const Op& op) const {
  const auto faster = [](const GemmTiling& a, const GemmTiling& b) {
    return b.seconds < a.seconds ? b : a;
  };
  const auto best_of = [&](double tile_m, double tile_n, double efficiency) {
    return faster(tiled(op, tile_m, tile_n, efficiency), tiled(op, tile_n, tile_m, efficiency));
  };
  const GemmTiling whole = best_of(hw_.gemm_tile_m, hw_.gemm_tile_n, hw_.max_gemm_efficiency);
  if (hw_.gemm_half_tile_efficiency <= 0) return whole;
  return faster(whole, best_of(hw_.gemm_tile_m / 2, hw_.gemm_tile_n,
                               hw_.max_gemm_efficiency * hw_.gemm_half_tile_efficiency));
}

double OpTimer::flash_compute_seconds(const Op& op) const {
  const double efficiency =
      op.backward ? hw_.flash_backward_efficiency : hw_.flash_forward_efficiency;
  const double keys = op.keys_per_query;
  const double slowdown = keys > 0 ? (keys + hw_.flash_key_overhead) / keys : 1;
  return op.flops / (flops_per_s_ * efficiency) * slowdown;
}

double OpTimer::seconds(const Op& op, const GroupLinks& links) const {
  switch (op.kind) {
    case OpKind::kGemm:
      // Roofline: the tiles' compute, or moving the operands and the result,
      // whichever takes longer (adding the result's store instead predicts
      // Zero Bubble's weight-gradient GEMMs 20% long at K = 1024).
      if (op.flops <= 0) return 0;
      return std::max(gemm_compute_seconds(op), memory_seconds(op.bytes + op.result_bytes)) +
             launch_s_;
    case OpKind::kMemory:
      return std::max(memory_seconds(op.bytes), draw_seconds(op.random_draws)) + launch_s_;
    case OpKind::kFlashAttention:
      return std::max(flash_compute_seconds(op), memory_seconds(op.bytes)) + launch_s_;
    case OpKind::kCollective:
      if (op.collective == CollectiveKind::kAllToAll) {
        return all_to_all_seconds(op.bytes, links.expert) + launch_s_;
      }
      return collective_seconds(op.collective, op.bytes, tensor_, links.tensor) + launch_s_;
    case OpKind::kRingExchange:
      if (!op.beside_attention) {
        // One collective of the steps + 1 GPUs' chunks: NCCL's ring, at the
        // bus bandwidth of the whole buffer's size.
        const int group = static_cast<int>(op.steps) + 1;
        return collective_seconds(op.collective, op.bytes * group, group, links.context) +
               launch_s_;
      }
      return op.steps * ring_step_seconds(op, links.context_ring);
  }
  return 0;
}

// One transfer of the ring: the send and receive kernels' launch and the
// message over the ring's link.
double OpTimer::ring_step_seconds(const Op& op, const Link& ring_link) const {
  return transfer_seconds(op.bytes, ring_link) + launch_s_;
}

// A collective's kernels hold comm_sm_fraction of the SMs while they run
// beside a GEMM. Cut into n > 1 chunks (userbuffers' `pipeline` overlap,
// which launches the GEMM on the SMs the collective leaves it), the GEMM
// runs at (1 - f) throughout, each chunk's collective beside the next
// chunk's product and the last one after it: max(G', C) + min(G', C) / n
// with G' = G / (1 - f). In one piece (`bulk`, or NCCL's kernel beside
// Megatron's weight gradient) the GEMM loses f of its SMs only while the
// collective runs: G + f C, or C when the collective outlasts the slowed
// GEMM.
double OpTimer::beside_gemm_seconds(double gemm_s, double collective_s, int splits) const {
  const double slowed_gemm_s = gemm_s / (1 - hw_.comm_sm_fraction);
  if (splits > 1) {
    return std::max(slowed_gemm_s, collective_s) + std::min(slowed_gemm_s, collective_s) / splits;
  }
  if (collective_s >= slowed_gemm_s) return collective_s;
  return gemm_s + hw_.comm_sm_fraction * collective_s;
}

double OpTimer::in_list_seconds(const OpList& ops, int i, const GroupLinks& links) const {
  const Op* list = ops.begin();
  double op_s = seconds(list[i], links);
  if (list[i].overlaps_gemm) {
    const int partner = list[i].collective == CollectiveKind::kAllGather ? i + 1 : i - 1;
    if (partner >= 0 && partner < ops.size() && list[partner].kind == OpKind::kGemm) {
      const double gemm_s = seconds(list[partner], links);
      op_s = list[i].collective == CollectiveKind::kAllGather
                 ? std::max(0.0, op_s - gemm_s)
                 : beside_gemm_seconds(gemm_s, op_s, list[i].overlap_splits) - gemm_s;
    }
  }
  if (list[i].kind == OpKind::kRingExchange && list[i].beside_attention && i > 0 &&
      list[i - 1].kind == OpKind::kFlashAttention) {
    const double ring_step = seconds(list[i - 1], links) / (list[i].steps + 1);
    op_s =
        list[i].steps * std::max(0.0, ring_step_seconds(list[i], links.context_ring) - ring_step);
  }
  return op_s;
}

double OpTimer::device_seconds(const OpList& ops, const GroupLinks& links) const {
  double total = 0;
  for (int i = 0; i < ops.size(); ++i) total += in_list_seconds(ops, i, links);
  return total;
}

double OpTimer::launches(const OpList& ops, int i) const {
  const Op& op = ops.begin()[i];
  if (!graphs_.captures(op.graph)) return op.launches;
  return i > 0 && ops.begin()[i - 1].graph == op.graph ? 0 : 1;
}

double OpTimer::host_seconds(const OpList& ops) const {
  double total = 0;
  for (int i = 0; i < ops.size(); ++i) total += launches(ops, i) * host_launch_s_;
  return total;
}

double OpTimer::seconds(const OpList& ops, const GroupLinks& links) const {
  return with_launches(ops, device_seconds(ops, links), links, true);
}

namespace {

bool has_host_wait(const OpList& ops) {
  return std::any_of(ops.begin(), ops.end(), [](const Op& op) { return op.host_waits; });
}

}  // namespace

// The host launches the list's kernels one after another, host_launch_s
// each, and the GPU runs each once it is launched and the one before it is
// done. A layer's list repeats, layer after layer: without a wait the host
// keeps running ahead (the GPU's time) or falls behind for good (the
// host's), so a layer takes the longer of the two; a list run once among
// others finds the host ahead. With a wait, each stretch from one wait to
// the next starts with an idle GPU and the host launching; the stretch
// after the list's last wait runs round into the next layer's operations
// before its first, so every operation is in one stretch.
double OpTimer::with_launches(const OpList& ops, double device_s, const GroupLinks& links,
                              bool layer_after_layer) const {
  if (host_launch_s_ <= 0 || !has_host_wait(ops)) {
    return layer_after_layer ? std::max(device_s, host_seconds(ops)) : device_s;
  }
  const int n = ops.size();
  int last_wait = n - 1;
  while (!ops.begin()[last_wait].host_waits) --last_wait;
  double total = 0;
  double launched = 0;
  double gpu_free = 0;
  for (int step = 1; step <= n; ++step) {
    const int i = (last_wait + step) % n;
    launched += launches(ops, i) * host_launch_s_;
    gpu_free = std::max(gpu_free, launched) + in_list_seconds(ops, i, links);
    if (ops.begin()[i].host_waits) {
      total += gpu_free;
      launched = gpu_free = 0;
    }
  }
  return total;
}

double OpTimer::backward_seconds(const OpList& input_grad, const OpList& weight_grad,
                                 double device_s, const GroupLinks& links,
                                 bool layer_after_layer) const {
  if (!has_host_wait(input_grad) && !has_host_wait(weight_grad)) {
    return layer_after_layer
               ? std::max(device_s, host_seconds(input_grad) + host_seconds(weight_grad))
               : device_s;
  }
  const auto waited = [&](const OpList& ops) {
    const double list_device_s = device_seconds(ops, links);
    return with_launches(ops, list_device_s, links, layer_after_layer) - list_device_s;
  };
  return device_s + waited(input_grad) + waited(weight_grad);
}

double OpTimer::beside_weight_grad_seconds(const OpList& input_grad, const OpList& weight_grad,
                                           const GroupLinks& links) const {
  double hidden = 0;
  for (int i = 0; i < input_grad.size(); ++i) {
    const int partner = input_grad.begin()[i].weight_partner;
    if (partner < 0) continue;
    PPSIM_CHECK(partner < weight_grad.size());
    const double collective_s = in_list_seconds(input_grad, i, links);
    const double gemm_s = seconds(weight_grad.begin()[partner], links);
    hidden += collective_s + gemm_s - beside_gemm_seconds(gemm_s, collective_s, 1);
  }
  return hidden;
}

double OpTimer::communication_seconds(const OpList& ops, const GroupLinks& links) const {
  double total = 0;
  for (int i = 0; i < ops.size(); ++i) {
    const OpKind kind = ops.begin()[i].kind;
    if (kind == OpKind::kCollective || kind == OpKind::kRingExchange) {
      total += in_list_seconds(ops, i, links);
    }
  }
  return total;
}

}  // namespace ppsim
