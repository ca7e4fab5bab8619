// What a kernel costs on a HardwareSpec (docs/cost_model.md, "Pricing an
// operation"): a GEMM by its tiles, waves and operand traffic (roofline), a
// memory-bound kernel at the achieved HBM bandwidth (or, drawing a dropout
// mask, at the device's random-number rate if that is slower), the fused attention
// kernel at its own efficiency, and collectives and transfers at the bus
// bandwidth nccl-tests would report for their message size. Every kernel
// also pays the device's launch gap, and a layer's list the host's
// launches where the GPU cannot run ahead of them.
#pragma once

#include "sim/core/workload.h"
#include "sim/cost/layer_ops.h"

namespace ppsim {

// A link as collectives and transfers over it see it: the latency of one
// step, the bus bandwidth reached by large messages (bytes/s per GPU per
// direction, efficiency included), and the message size at which half of
// it is reached (nccl-tests' busbw rises with the message: busbw(M) =
// bandwidth * M / (M + half_bytes)).
struct Link {
  double latency_s = 0;
  double bandwidth_Bps = 0;
  double half_bytes = 0;

  double bus_bandwidth_Bps(double bytes) const {
    return half_bytes > 0 ? bandwidth_Bps * bytes / (bytes + half_bytes) : bandwidth_Bps;
  }
};

// How a GEMM is taken to run: the output tile of the kernel cuBLAS would
// pick (the fastest candidate), the waves of sm_count tiles it runs, the
// waves' worth of work they hold (waves / work - 1 is the wave
// quantization's cost), and the compute time. Without sm_count, no waves.
struct GemmTiling {
  double tile_m = 0;
  double tile_n = 0;
  double waves = 0;
  double work = 0;
  double seconds = 0;
};

// A collective of `bytes` (the buffer each GPU holds) on a ring of n GPUs:
// n - 1 steps for a reduce-scatter or an all-gather, 2 (n - 1) for an
// all-reduce, each moving 1 / n of the buffer at the link's bus bandwidth
// for that size, or at half the link's bandwidth if that is faster (NCCL's
// LL protocol, below half_bytes).
double collective_seconds(CollectiveKind kind, double bytes, int n, const Link& link);
// A point-to-point transfer of `bytes`.
double transfer_seconds(double bytes, const Link& link);

// An all-to-all group of `members` GPUs, `per_node` of which share each
// node: each GPU exchanges with the others of its node over NVLink and with
// the rest over its share of the NICs, both at once, `shares` of what it
// receives on each (exchange_shares).
struct AllToAllLinks {
  int members = 1;
  int per_node = 1;
  Link nvlink;
  Link network;
  ExchangeShares shares;
};

// An all-to-all in which each GPU receives `bytes`: shares.nvlink of them
// over NVLink and shares.network over the network, the slower of the two
// setting the time; nothing in a group of one.
double all_to_all_seconds(double bytes, const AllToAllLinks& group);

// The links one GPU's groups talk over: its tensor-parallel group's
// collectives, its context-parallel ring's transfers and its expert-parallel
// group's all-to-all exchanges.
struct GroupLinks {
  Link tensor;
  // A context group's collectives, and one send/recv pair of its ring.
  Link context;
  Link context_ring;
  AllToAllLinks expert;
};

// Prices the operations of one GPU of a tensor-parallel group of `tensor`
// GPUs, in the model's dtype.
class OpTimer {
 public:
  OpTimer(const HardwareSpec& hardware, DType dtype, int tensor, const CudaGraphs& graphs = {});

  // An operation alone: a ring exchange pays all of its transfers (a
  // context collective, Op::beside_attention false, as one collective).
  double seconds(const Op& op, const GroupLinks& links) const;
  // A layer's list, run layer after layer: its operations one after
  // another (device_seconds), or longer where the GPU waits for the host's
  // launches (HardwareSpec::host_launch_us): where the launches outlast the
  // kernels, or after the host waited for the GPU (Op::host_waits).
  double seconds(const OpList& ops, const GroupLinks& links) const;
  // The list's operations one after another, the host always ahead,
  // except that a collective that overlaps its GEMM (Op::overlaps_gemm)
  // pays only what outlasts it (a reduce-scatter also the SMs its kernels
  // take from the GEMM, and its last chunk: beside_gemm_seconds), and a
  // ring exchange only what outlasts the ring steps of the attention kernel
  // before it: with cp = steps + 1 steps of a kernel of time A, each
  // transfer X runs alongside a step of A / cp, so the exchange adds
  // steps x max(0, X - A / cp).
  double device_seconds(const OpList& ops, const GroupLinks& links) const;
  // The host's time to launch the list's kernels.
  double host_seconds(const OpList& ops) const;
  // seconds() of a list whose device_seconds() is `device_s`
  // (layer_after_layer), or of a list run once among the others of a stage
  // (the embedding, the logits and loss): the host is ahead when it starts,
  // so only a wait in it (Op::host_waits) can leave the GPU waiting.
  double with_launches(const OpList& ops, double device_s, const GroupLinks& links,
                       bool layer_after_layer) const;
  // A whole backward, its input gradient then its weight gradient, whose
  // GPU's time is `device_s` (less what its collectives hide beside the
  // weight gradient), with the host's launches: as seconds() prices one
  // list, the two as one (layer_after_layer), or run once (with_launches).
  double backward_seconds(const OpList& input_grad, const OpList& weight_grad, double device_s,
                          const GroupLinks& links, bool layer_after_layer) const;
  // The part of seconds(ops, links) spent communicating: its collectives and
  // ring exchanges, each as much of it as the list leaves exposed. What an
  // overlapped pair's other action can hide (sim/core/costs.h).
  double communication_seconds(const OpList& ops, const GroupLinks& links) const;
  // What a whole backward saves over its input gradient then its weight
  // gradient: each input-gradient collective with a weight partner
  // (Op::weight_partner) runs beside that GEMM, hiding the shorter of the
  // two less what its kernels take of the GEMM's SMs (comm_sm_fraction).
  double beside_weight_grad_seconds(const OpList& input_grad, const OpList& weight_grad,
                                    const GroupLinks& links) const;

  // The parts of seconds(op) for a GEMM, for tests and docs: its compute
  // time by tiles and waves (and the tiling that gives it), and its operand
  // traffic's.
  double gemm_compute_seconds(const Op& op) const { return gemm_tiling(op).seconds; }
  GemmTiling gemm_tiling(const Op& op) const;
  double memory_seconds(double bytes) const;
  // A FlashAttention kernel's compute: its FLOPs at its efficiency, slowed
  // by L / (L + flash_key_overhead) for L = Op::keys_per_query.
  double flash_compute_seconds(const Op& op) const;
  // Drawing a dropout mask's random numbers for `elements`.
  double draw_seconds(double elements) const;

 private:
  GemmTiling tiled(const Op& op, double tile_m, double tile_n, double efficiency) const;
  double ring_step_seconds(const Op& op, const Link& ring_link) const;

  // The host's launches for operation i of the list: its own, or one for
  // a run of a captured part's operations (the graph's replay).
  double launches(const OpList& ops, int i) const;
  // A GEMM of `gemm_s` and a collective of `collective_s` side by side, the
  // collective in `splits` chunks (Op::overlap_splits), its kernels holding
  // comm_sm_fraction of the SMs.
  double beside_gemm_seconds(double gemm_s, double collective_s, int splits) const;
  // Operation i of the list as seconds(ops, links) counts it.
  double in_list_seconds(const OpList& ops, int i, const GroupLinks& links) const;

  HardwareSpec hw_;
  double flops_per_s_;
  double fp8_flops_per_s_;  // 0 without FP8 tensor cores
  double memory_Bps_;
  double launch_s_;
  double host_launch_s_;  // 0 with a whole-iteration graph
  CudaGraphs graphs_;
  double draws_per_s_;
  int tensor_;
};

}  // namespace ppsim
