// The op-level cost model's pricing (sim/cost/op_time.h): each kind of
// operation timed on the shipped a100-80gb preset against a hand calculation
// from its fields.
#include "sim/cost/op_time.h"

#include <gtest/gtest.h>

#include "sim/config/config.h"
#include "sim/cost/layer_ops.h"

namespace ppsim {
namespace op_time_test {
namespace {

// The shipped preset, as a config loads it.
HardwareSpec a100() {
  const Result<Config> config = parse_config(
      "model: {layers: 1, hidden: 64, heads: 1, seq_len: 8, vocab: 8}\n"
      "hardware: {preset: a100-80gb, gpus_per_node: 1}\n"
      "training: {global_batch: 1}\n",
      "a100.yaml");
  EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error().message);
  return *config->hardware;
}

// A bf16 GEMM whose result is written once.
Op gemm_of(double batch, double m, double n, double k) {
  return gemm_op("gemm", batch, m, n, k, 2, 2);
}

// Preset fields used below: 312 TFLOP/s, max_gemm_efficiency 0.82, 108 SMs,
// 256 x 128 tiles, a 128 x 128 tile at 0.85 of the efficiency,
// gemm_tile_k_overhead 50, HBM 2039 GB/s at 0.68, flash attention at 0.73
// forward and 0.63 backward with flash_key_overhead 160.
TEST(OpTime, LargeGemmRunsWavesOfTiles) {
  const HardwareSpec hw = a100();
  const OpTimer timer(hw, DType::kBf16, 1);
  // 8192^3: 32 x 64 = 2048 tiles of 256 x 128, ceil(2048 / 108) = 19 waves
  // of 108 tiles of 2 x 256 x 128 x (8192 + 50) FLOP, at 312e12 x 0.82 / 108
  // per SM: 19 x 540147712 x 108 / 255.84e12 = 4.3323292e-3 s (81.3% of
  // peak). The 128 x 128 tile's 38 waves of half the work run at 0.85 of it.
  EXPECT_NEAR(timer.seconds(gemm_of(1, 8192, 8192, 8192), GroupLinks{}), 4.3323292e-3, 1e-9);
}

// An FP8 GEMM (training.fp8) on the preset given twice its bf16 peak, as
// the H100's datasheet gives (1979 against 989): its main loop runs at the
// FP8 peak, its tile's fixed overhead takes the time it takes in bf16, 50
// steps of K there, 100 here. 8192^3: 19 waves of 108 tiles of 2 x 256 x
// 128 x (8192 + 100) FLOP at 624e12 x 0.82 / 108 per SM = 2.1793056e-3 s,
// a little more than half the bf16 GEMM's 4.3323292e-3 s; operands of one
// byte each.
TEST(OpTime, Fp8GemmRunsAtTheFp8PeakWithTheSameTileOverhead) {
  HardwareSpec hw = a100();
  hw.peak_tflops_fp8 = 624;
  Op gemm = gemm_op("gemm", 1, 8192, 8192, 8192, 1, 2);
  gemm.fp8 = true;
  EXPECT_NEAR(OpTimer(hw, DType::kBf16, 1).seconds(gemm, GroupLinks{}), 2.1793056e-3, 1e-9);
  EXPECT_DOUBLE_EQ(gemm.bytes, 2.0 * 8192 * 8192);
}

TEST(OpTime, ShortWideGemmIsMemoryBound) {
  const OpTimer timer(a100(), DType::kBf16, 1);
  // Attention scores of 512 heads, 2048 x 2048 over K = 128: 65536 tiles
  // (607 waves) of 2 x 256 x 128 x 178 FLOP = 2.98912e-3 s; its operands and
  // result, 2 x 512 x (2 x 2048 x 128 + 2048^2) = 4831838208 bytes at
  // 2039e9 x 0.68 B/s = 3.48487e-3 s: memory-bound.
  const Op scores = gemm_of(512, 2048, 2048, 128);
  EXPECT_NEAR(timer.gemm_compute_seconds(scores), 2.98912e-3, 1e-8);
  EXPECT_NEAR(timer.seconds(scores, GroupLinks{}), 3.48487e-3, 1e-8);
  // K = 512: 607 waves of 2 x 256 x 128 x 562 FLOP, 9.43757e-3 s, against
  // 6442450944 bytes, 4.38835e-3 s: compute-bound.
  EXPECT_NEAR(timer.seconds(gemm_of(512, 2048, 2048, 512), GroupLinks{}), 9.43757e-3, 1e-8);
}

TEST(OpTime, FewTilesSplitTheirK) {
  const OpTimer timer(a100(), DType::kBf16, 1);
  // 256 x 256 x 8192 in 128 x 128 tiles: 4 tiles on 108 SMs; split K in
  // floor(108 / 4) = 27 parts (each 303 >= 256 of K): 108 tiles, one wave
  // of 2 x 128^2 x (8192 / 27 + 50) FLOP = 1.15806e7 at 312e12 x 0.82 x
  // 0.85 / 108 per SM: 5.751246e-6 s. In 256 x 128 tiles: 2 tiles, K split
  // in 32 parts of 256 (no shorter), 64 tiles of 2 x 256 x 128 x 306 FLOP
  // at 312e12 x 0.82 / 108: 8.46553e-6 s, slower.
  EXPECT_NEAR(timer.gemm_compute_seconds(gemm_of(1, 256, 256, 8192)), 5.751246e-6, 1e-11);
}

TEST(OpTime, AHalfHeightTileTakesOverWhereItsWavesAreFiner) {
  HardwareSpec hw = a100();
  // 1024 x 5120 x 5120 (the attention output of one 1024-token sequence of
  // Zero Bubble's 14.6B model): 4 x 40 = 160 tiles of 256 x 128, 2 waves
  // for 1.48 waves of work; 8 x 40 = 320 tiles of 128 x 128, 3 waves for
  // 2.96. Half-height: 3 x 2 x 128^2 x 5170 x 108 / (312e12 x 0.82 x 0.85)
  // = 2.524051e-4 s; whole: 2 x 2 x 256 x 128 x 5170 x 108 / (312e12 x
  // 0.82) = 2.860591e-4 s.
  const Op gemm = gemm_of(1, 1024, 5120, 5120);
  EXPECT_NEAR(OpTimer(hw, DType::kBf16, 1).gemm_compute_seconds(gemm), 2.524051e-4, 1e-10);
  hw.gemm_half_tile_efficiency = 0;  // the one tile only
  EXPECT_NEAR(OpTimer(hw, DType::kBf16, 1).gemm_compute_seconds(gemm), 2.860591e-4, 1e-10);
}

TEST(OpTime, MemoryKernelAtAchievedBandwidth) {
  const OpTimer timer(a100(), DType::kBf16, 1);
  Op softmax;
  softmax.kind = OpKind::kMemory;
  softmax.bytes = 1e9;
  // 1e9 / (2039e9 x 0.68) = 7.21230e-4 s.
  EXPECT_NEAR(timer.seconds(softmax, GroupLinks{}), 7.212301e-4, 1e-9);
}

TEST(OpTime, DropoutAtTheSlowerOfItsBytesAndItsDraws) {
  const OpTimer timer(a100(), DType::kBf16, 1);
  // The preset draws 100e9 random numbers per second.
  Op dropout;
  dropout.kind = OpKind::kMemory;
  dropout.bytes = 5e9;  // fp16 in and out and a one-byte mask, 1e9 elements
  dropout.random_draws = 1e9;
  // Draws: 1e9 / 100e9 = 0.01 s, longer than the bytes' 5e9 / (2039e9 x
  // 0.68) = 3.60615e-3 s.
  EXPECT_NEAR(timer.seconds(dropout, GroupLinks{}), 0.01, 1e-12);
  // A tenth of the draws (1e-3 s) hides under the bytes.
  dropout.random_draws = 1e8;
  EXPECT_NEAR(timer.seconds(dropout, GroupLinks{}), 3.606151e-3, 1e-9);
  // Without a rate the draws are free.
  HardwareSpec unlimited = a100();
  unlimited.dropout_rng_gsamples_per_s = 0;
  dropout.random_draws = 1e9;
  EXPECT_NEAR(OpTimer(unlimited, DType::kBf16, 1).seconds(dropout, GroupLinks{}), 3.606151e-3,
              1e-9);
}

// A forward flash kernel of 1e12 FLOPs moving 1 MB (compute-bound).
Op flash_of(double keys_per_query) {
  Op flash;
  flash.kind = OpKind::kFlashAttention;
  flash.flops = 1e12;
  flash.bytes = 1e6;
  flash.keys_per_query = keys_per_query;
  return flash;
}

TEST(OpTime, FlashKernelAtItsEfficiency) {
  const OpTimer timer(a100(), DType::kBf16, 1);
  // Forward 1e12 / (312e12 x 0.73); backward at 0.63 (no keys given: no
  // tile overhead).
  Op flash = flash_of(0);
  EXPECT_NEAR(timer.seconds(flash, GroupLinks{}), 1e12 / (312e12 * 0.73), 1e-12);
  flash.backward = true;
  EXPECT_NEAR(timer.seconds(flash, GroupLinks{}), 1e12 / (312e12 * 0.63), 1e-12);
}

// flash_key_overhead 160: queries attending to 512 keys on average (a
// causal sequence of 1024) run at 512 / (512 + 160) of the efficiency; at
// 65,536 keys the overhead is 0.24 %.
TEST(OpTime, FlashKernelPaysItsTilesOverheadAsMoreKeys) {
  const OpTimer timer(a100(), DType::kBf16, 1);
  EXPECT_NEAR(timer.seconds(flash_of(512), GroupLinks{}), 1e12 / (312e12 * 0.73) * 672 / 512,
              1e-12);
  EXPECT_NEAR(timer.seconds(flash_of(65536), GroupLinks{}), 1e12 / (312e12 * 0.73) * 65696 / 65536,
              1e-12);
}

TEST(OpTime, CollectivesAtBusBandwidthForTheirSize) {
  // NVLink 300 GB/s at 0.78 efficiency, half of it at 25 MB, 3 us a step.
  const Link nvlink{3e-6, 300e9 * 0.78, 25e6};
  // An all-reduce of 100 MB on 8 GPUs: 14 steps of 1/8 of the buffer at
  // busbw(100 MB) = 234e9 x 100 / 125 = 187.2e9 B/s:
  // 14 x 3e-6 + 14 x 12.5e6 / 187.2e9 = 9.76829e-4 s.
  EXPECT_NEAR(collective_seconds(CollectiveKind::kAllReduce, 100e6, 8, nvlink), 9.768291e-4, 1e-9);
  // Reduce-scatter and all-gather: half the steps.
  EXPECT_NEAR(collective_seconds(CollectiveKind::kReduceScatter, 100e6, 8, nvlink), 9.768291e-4 / 2,
              1e-9);
  EXPECT_EQ(collective_seconds(CollectiveKind::kAllGather, 100e6, 1, nvlink), 0);
  // As an op of a tensor group of 8 it pays the same.
  const OpTimer timer(a100(), DType::kBf16, 8);
  Op all_reduce;
  all_reduce.kind = OpKind::kCollective;
  all_reduce.bytes = 100e6;
  GroupLinks links;
  links.tensor = nvlink;
  EXPECT_NEAR(timer.seconds(all_reduce, links), 9.768291e-4, 1e-9);
  // A transfer: one latency and the bytes at busbw.
  EXPECT_NEAR(transfer_seconds(100e6, nvlink), 3e-6 + 100e6 / 187.2e9, 1e-12);
}

// What an overlapped pair may hide of a list: its collectives as the list
// prices them, an all-gather overlapped with the GEMM after it only for what
// outlasts that GEMM.
TEST(OpTime, CommunicationIsWhatTheListLeavesOfItsCollectives) {
  const Link nvlink{3e-6, 300e9 * 0.78, 25e6};  // as above: 100 MB all-reduce 9.768291e-4 s
  GroupLinks links;
  links.tensor = nvlink;
  const OpTimer timer(a100(), DType::kBf16, 8);
  Op all_reduce;
  all_reduce.kind = OpKind::kCollective;
  all_reduce.bytes = 100e6;
  Op all_gather = all_reduce;
  all_gather.collective = CollectiveKind::kAllGather;  // half the steps: 4.8841455e-4 s
  all_gather.overlaps_gemm = true;
  const Op gemm = gemm_op("product", 1, 4096, 4096, 2048, 2, 2);
  const double gemm_s = timer.seconds(gemm, links);
  ASSERT_LT(gemm_s, 4.8841455e-4);  // the all-gather outlasts it
  OpList ops;
  ops.add(gemm);
  ops.add(all_reduce);
  ops.add(all_gather);
  ops.add(gemm);
  const double communication = 9.768291e-4 + (4.8841455e-4 - gemm_s);
  EXPECT_NEAR(timer.communication_seconds(ops, links), communication, 1e-9);
  EXPECT_NEAR(timer.seconds(ops, links), 2 * gemm_s + communication, 1e-9);
}

// A reduce-scatter beside the GEMM it drains, its kernels holding a fifth
// of the SMs (comm_sm_fraction 0.2): a GEMM of G alone takes G' = G / 0.8
// beside it. Cut into 4 chunks (the forward's userbuffers `pipeline`
// overlap), the pair takes max(G', C) + min(G', C) / 4 and the list charges
// the collective that less G; in one piece (`bulk`, and a collective
// beside Megatron's weight gradient) the GEMM is slowed only while the
// collective runs: G + 0.2 C, or C when C >= G'.
// A tensor group of 8 on the A100 NVLink link above, and a 100 MB
// reduce-scatter over it: 4.8841455e-4 s.
GroupLinks nvlink_tensor_group() {
  GroupLinks links;
  links.tensor = Link{3e-6, 300e9 * 0.78, 25e6};
  return links;
}
Op reduce_scatter_of_100mb() {
  Op op;
  op.kind = OpKind::kCollective;
  op.collective = CollectiveKind::kReduceScatter;
  op.bytes = 100e6;
  return op;
}
constexpr double kReduceScatterOf100MbSeconds = 4.8841455e-4;
// The A100 with a fifth of its SMs held by communication kernels.
OpTimer timer_with_sm_share() {
  HardwareSpec hw = a100();
  hw.comm_sm_fraction = 0.2;
  return OpTimer(hw, DType::kBf16, 8);
}

TEST(OpTime, AReduceScatterBesideItsGemmTakesItsSms) {
  const GroupLinks links = nvlink_tensor_group();
  const OpTimer timer = timer_with_sm_share();
  const Op gemm = gemm_op("product", 1, 8192, 8192, 8192, 2, 2);
  const double gemm_s = timer.seconds(gemm, links);
  Op reduce_scatter = reduce_scatter_of_100mb();
  reduce_scatter.overlaps_gemm = true;
  const double collective_s = kReduceScatterOf100MbSeconds;
  ASSERT_LT(collective_s, gemm_s);  // the collective is the shorter
  const auto pair_seconds = [&](int splits) {
    OpList ops;
    ops.add(gemm);
    Op op = reduce_scatter;
    op.overlap_splits = splits;
    ops.add(op);
    return timer.seconds(ops, links);
  };
  EXPECT_NEAR(pair_seconds(4), gemm_s / 0.8 + collective_s / 4, 1e-9);
  EXPECT_NEAR(pair_seconds(1), gemm_s + 0.2 * collective_s, 1e-9);
  // Without the SMs' share both hide the collective but for the chunk.
  const OpTimer free_sms(a100(), DType::kBf16, 8);
  OpList ops;
  ops.add(gemm);
  ops.add(reduce_scatter);
  EXPECT_NEAR(free_sms.seconds(ops, links), gemm_s, 1e-9);
}

// A whole backward's input-gradient collective beside its weight-gradient
// GEMM (Megatron's asynchronous column-parallel backward): it hides the
// shorter of the two, less what its kernels take of the GEMM's SMs. With
// comm_sm_fraction 0.2 and C < G / 0.8 the pair takes G + 0.2 C, so the
// backward saves C + G - (G + 0.2 C) = 0.8 C; with a collective longer than
// the slowed GEMM it takes C and saves G; with no share it saves C.
TEST(OpTime, BesideTheWeightGradientTheCollectiveTakesItsSms) {
  const GroupLinks links = nvlink_tensor_group();
  const OpTimer timer = timer_with_sm_share();
  const auto hidden_beside = [&](const OpTimer& t, double gemm_k) {
    OpList input_grad;
    Op reduce_scatter = reduce_scatter_of_100mb();
    reduce_scatter.weight_partner = 0;
    input_grad.add(reduce_scatter);
    OpList weight_grad;
    weight_grad.add(gemm_op("weight gradient", 1, 8192, 8192, gemm_k, 2, 2));
    return t.beside_weight_grad_seconds(input_grad, weight_grad, links);
  };
  const double collective_s = kReduceScatterOf100MbSeconds;
  const double long_gemm_s = timer.seconds(gemm_op("w", 1, 8192, 8192, 8192, 2, 2), links);
  ASSERT_LT(collective_s, long_gemm_s * 0.8);
  EXPECT_NEAR(hidden_beside(timer, 8192), 0.8 * collective_s, 1e-9);
  const double short_gemm_s = timer.seconds(gemm_op("w", 1, 8192, 8192, 256, 2, 2), links);
  ASSERT_GT(collective_s, short_gemm_s / 0.8);
  EXPECT_NEAR(hidden_beside(timer, 256), short_gemm_s, 1e-9);
  EXPECT_NEAR(hidden_beside(OpTimer(a100(), DType::kBf16, 8), 8192), collective_s, 1e-9);
}

TEST(OpTime, LaunchGapOnEveryKernel) {
  HardwareSpec hw = a100();
  hw.kernel_launch_us = 5;
  const OpTimer timer(hw, DType::kBf16, 1);
  Op copy;
  copy.kind = OpKind::kMemory;
  copy.bytes = 1e9;
  EXPECT_NEAR(timer.seconds(copy, GroupLinks{}), 7.212301e-4 + 5e-6, 1e-9);
}

// A memory-bound kernel of `us` microseconds on the preset (HBM 2039 GB/s
// at 0.68: 1386520 bytes a microsecond), launched `launches` times.
Op kernel_of(double us, double launches) {
  Op op;
  op.kind = OpKind::kMemory;
  op.bytes = us * 1386520;
  op.launches = launches;
  return op;
}

// Kernels of 100, 1 (launched 4 times) and 1 us, the host taking 10 us a
// launch (60 us for the list).
TEST(OpTime, TheGpuWaitsForTheHostsLaunchesOnlyWhereItCannotKeepAhead) {
  HardwareSpec hw = a100();
  hw.host_launch_us = 10;
  OpList ops;
  ops.add(kernel_of(100, 1));
  ops.add(kernel_of(1, 4));
  ops.add(kernel_of(1, 1));
  const OpTimer timer(hw, DType::kBf16, 1);
  EXPECT_NEAR(timer.device_seconds(ops, GroupLinks{}), 102e-6, 1e-12);
  EXPECT_NEAR(timer.host_seconds(ops), 60e-6, 1e-12);
  // Layer after layer the host runs ahead: the GPU's 102 us.
  EXPECT_NEAR(timer.seconds(ops, GroupLinks{}), 102e-6, 1e-12);
  // At 50 us a launch the host falls behind for good: its 300 us; a list
  // run once finds the host ahead.
  hw.host_launch_us = 50;
  EXPECT_NEAR(OpTimer(hw, DType::kBf16, 1).seconds(ops, GroupLinks{}), 300e-6, 1e-12);
  EXPECT_NEAR(OpTimer(hw, DType::kBf16, 1).with_launches(ops, 102e-6, GroupLinks{}, false), 102e-6,
              1e-12);
  // At 10 us, with the host waiting for the first kernel: from the second
  // kernel on, behind an idle GPU, launched at 40 us it ends at 41; the
  // third, launched at 50, ends at 51; the next layer's first, launched at
  // 60, ends at 160, and the host waits for it.
  ops.at(0).host_waits = true;
  EXPECT_NEAR(timer.seconds(ops, GroupLinks{}), 160e-6, 1e-12);
  EXPECT_NEAR(timer.with_launches(ops, 102e-6, GroupLinks{}, false), 160e-6, 1e-12);
  EXPECT_NEAR(timer.device_seconds(ops, GroupLinks{}), 102e-6, 1e-12);
  // Without a launch time the host is never waited for.
  hw.host_launch_us = 0;
  EXPECT_NEAR(OpTimer(hw, DType::kBf16, 1).seconds(ops, GroupLinks{}), 102e-6, 1e-12);
}

// A backward's input gradient and weight gradient as one list: 102 us of
// the GPU's (less 20 us hidden beside the weight gradient: 82) against 120
// us of launches at 10 us (12 launches).
TEST(OpTime, AWholeBackwardWaitsForTheLaunchesOfBothGradients) {
  HardwareSpec hw = a100();
  hw.host_launch_us = 10;
  OpList input_grad;
  input_grad.add(kernel_of(100, 1));
  OpList weight_grad;
  weight_grad.add(kernel_of(2, 11));
  const OpTimer timer(hw, DType::kBf16, 1);
  EXPECT_NEAR(timer.backward_seconds(input_grad, weight_grad, 82e-6, GroupLinks{}, true), 120e-6,
              1e-12);
  EXPECT_NEAR(timer.backward_seconds(input_grad, weight_grad, 82e-6, GroupLinks{}, false), 82e-6,
              1e-12);
  hw.host_launch_us = 5;  // 60 us of launches: the GPU's 82 us
  EXPECT_NEAR(OpTimer(hw, DType::kBf16, 1)
                  .backward_seconds(input_grad, weight_grad, 82e-6, GroupLinks{}, true),
              82e-6, 1e-12);
}

}  // namespace
}  // namespace op_time_test
}  // namespace ppsim
