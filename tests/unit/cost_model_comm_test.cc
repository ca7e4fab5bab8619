// The cost table's communication between stages and at the end of the
// iteration (sim/cost/cost_model_comm.cc): pipeline transfers by placement,
// scatter/gather, the data-parallel gradient sync and the optimizer step,
// each against a hand calculation on round hardware.
#include <gtest/gtest.h>

#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/cost/cost_model_internal.h"
#include "tests/unit/cost_model_fixtures.h"

namespace ppsim {
namespace cost_model_comm_test {
namespace {

using namespace cost_model_test;  // NOLINT: the fixtures of the cost model's tests

// ---------------------------------------------------------------- transfers

TEST(P2p, IntraOrInterNodeByPlacement) {
  // p = 4, t = 2, d = 2, 8 GPUs a node: rank r starts at GPU 4r, so ranks 0
  // and 1 share node 0 and ranks 2 and 3 node 1.
  Config c = make_config(tiny(4), 4, 2, 2, round_hardware(8, 2));
  c.model->hidden = 1024;
  c.model->ffn_hidden = 4096;
  c.model->seq_len = 1024;
  const CostTable table = build_ok(c);
  // b s h * 2 = 2097152 bytes.
  EXPECT_EQ(table.p2p_bytes, (std::vector<int64_t>(3, 2097152)));
  const Picos intra = 21971520;   // 1e-6 + 2097152 / 1e11 s
  const Picos inter = 214715200;  // 5e-6 + 2097152 / 1e10 s
  EXPECT_EQ(table.p2p_forward, (std::vector<Picos>{intra, inter, intra}));
  EXPECT_EQ(table.p2p_backward, table.p2p_forward);

  c.parallel.sequence_parallel = true;
  const CostTable sp = build_ok(c);
  EXPECT_EQ(sp.p2p_bytes[0], 1048576);
  EXPECT_EQ(sp.p2p_forward[0], 11485760);  // 1e-6 + 1048576 / 1e11 s
}

TEST(P2p, OneStepAtThePairsOwnLatencyAndBandwidth) {
  // The placement above: boundaries 0 and 2 inside a node, 1 across.
  Config c = make_config(tiny(4), 4, 2, 2, round_hardware(8, 2));
  c.model->hidden = 1024;
  c.model->ffn_hidden = 4096;
  c.model->seq_len = 1024;
  // The collectives' size curve (half the bandwidth at 2 MB) is not a
  // transfer's: the times above hold with it.
  c.hardware->collective_half_mb = 2;
  const Picos intra = 21971520;   // 1e-6 + 2097152 / 1e11 s
  const Picos inter = 214715200;  // 5e-6 + 2097152 / 1e10 s
  EXPECT_EQ(build_ok(c).p2p_forward, (std::vector<Picos>{intra, inter, intra}));
  // A pair's own figures: 200 us for every transfer, 40 GB/s inside a node;
  // across nodes still the NIC's 10 GB/s.
  c.hardware->p2p_latency_us = 200;
  c.hardware->p2p_bandwidth_gbps = 40;
  const Picos pair_intra = 252428800;  // 2e-4 + 2097152 / 4e10 s
  const Picos pair_inter = 409715200;  // 2e-4 + 2097152 / 1e10 s
  const CostTable table = build_ok(c);
  EXPECT_EQ(table.p2p_forward, (std::vector<Picos>{pair_intra, pair_inter, pair_intra}));
  EXPECT_EQ(table.p2p_backward, table.p2p_forward);
}

TEST(P2p, ScatterGatherSendsAPieceAndGathersItOverTheTensorGroup) {
  // The placement above (t = 2): boundaries 0 and 2 inside a node, 1 across.
  Config c = make_config(tiny(4), 4, 2, 2, round_hardware(8, 2));
  c.model->hidden = 1024;
  c.model->ffn_hidden = 4096;
  c.model->seq_len = 1024;
  c.parallel.p2p_scatter_gather = true;
  // Half of the 2097152 bytes each, then the receivers' all-gather of the
  // whole over NVLink, one ring step: 1e-6 + 1048576 / 1e11 s.
  const Picos gather = 11485760;
  const Picos intra = 11485760 + gather;   // 1e-6 + 1048576 / 1e11 s, then the gather
  const Picos inter = 109857600 + gather;  // 5e-6 + 1048576 / 1e10 s, then the gather
  const CostTable table = build_ok(c);
  EXPECT_EQ(table.p2p_bytes, (std::vector<int64_t>(3, 2097152)));  // what arrives, whole
  EXPECT_EQ(table.p2p_forward, (std::vector<Picos>{intra, inter, intra}));
  EXPECT_EQ(table.p2p_backward, table.p2p_forward);
  // With sequence parallelism each GPU sends its own half anyway, and with
  // t = 1 there is nothing to split: as without the key.
  c.parallel.sequence_parallel = true;
  EXPECT_EQ(build_ok(c).p2p_forward[0], 11485760);
  Config one = make_config(tiny(4), 4, 1, 4, round_hardware(8, 2));
  one.parallel.p2p_scatter_gather = true;
  Config plain = one;
  plain.parallel.p2p_scatter_gather = false;
  EXPECT_EQ(build_ok(one).p2p_forward, build_ok(plain).p2p_forward);
}

TEST(P2p, EachDirectionGathersOverItsReceiversTensorGroup) {
  // t = 3 on nodes of 4 GPUs: rank 0's group (GPUs 0-2) sits in node 0,
  // rank 1's (GPUs 3-5) straddles nodes 0 and 1. An activation is
  // gathered by rank 1, over the network; a gradient by rank 0, over
  // NVLink (1 us + 100 GB/s against 5 us + 10 GB/s): the forward takes
  // longer, by what the gather pays more.
  Config c = make_config(tiny(2), 2, 3, 1, round_hardware(4, 2));
  c.model->heads = 3;
  c.model->hidden = 24;
  c.model->kv_heads = 3;
  c.parallel.p2p_scatter_gather = true;
  const CostTable table = build_ok(c);
  EXPECT_GT(table.p2p_forward[0], table.p2p_backward[0]);
  c.parallel.p2p_scatter_gather = false;
  EXPECT_EQ(build_ok(c).p2p_forward, build_ok(c).p2p_backward);
}

TEST(P2p, StagesOnOneRankHandOverForFree) {
  Config c = make_config(tiny(2), 1, 1, 1, round_hardware(1, 1));
  c.parallel.virtual_stages = 2;
  EXPECT_EQ(build_ok(c).p2p_forward, (std::vector<Picos>{0}));
}

// ---------------------------------------------------------------- end of iteration

TEST(GradSync, DataParallelRingInsideANode) {
  // p = 1, t = 2, d = 4: 8 GPUs, one node. Psi = (2 * 872 + 128 + 32 + 16)
  // / 2 = 960 per GPU; bf16 gradients are reduced in fp32: 3840 bytes.
  Config c = make_config(tiny(2), 1, 2, 4, round_hardware(8, 1));
  // All-reduce: 2*3*1e-6 + 1.5 * 3840 / 1e11 = 6.0576e-6 s.
  EXPECT_EQ(build_ok(c).grad_sync[0], 6057600);
  // ZeRO 1: reduce-scatter of the gradients, 3e-6 + 0.75 * 3840 / 1e11, then
  // all-gather of the new bf16 weights, 3e-6 + 0.75 * 1920 / 1e11.
  c.training.zero_stage = 1;
  EXPECT_EQ(build_ok(c).grad_sync[0], 6043200);
  // Overlapped with the last microbatch's backward and the first one's
  // forward, both longer: hidden.
  c.training.overlap_grad_reduce = true;
  c.training.overlap_param_gather = true;
  EXPECT_EQ(build_ok(c).grad_sync[0], 0);
  // The reduction hidden, the weights' gather after the optimizer step:
  // 3e-6 + 0.75 * 1920 / 1e11.
  c.training.overlap_param_gather = false;
  EXPECT_EQ(build_ok(c).grad_sync[0], 3014400);
  // ZeRO 2 and 3 reduced every microbatch's gradients in its backward
  // (below): ZeRO 2 gathers the new weights, 3e-6 + 0.75 * 1920 / 1e11;
  // ZeRO 3 has nothing left to do.
  c.training.overlap_grad_reduce = false;
  c.training.zero_stage = 2;
  EXPECT_EQ(build_ok(c).grad_sync[0], 3014400);
  c.training.zero_stage = 3;
  EXPECT_EQ(build_ok(c).grad_sync[0], 0);
}

// An overlapped weight all-gather of 8 s against 2 s of forward (one
// microbatch through all the rank's chunks). One chunk (1F1B, or any
// schedule but the interleaved one): 8 - 2 = 6 s exposed. Interleaved, p =
// 2, v = 4 (a chunk's gather g = 2, its forward f = 0.5): chunk 0's gather
// ends at 2, needed at 0.5, waits 1.5; chunk 1's (launched with it) ends at
// 4, needed at p f + f + 1.5 = 3, waits 1; chunk 2's, launched at chunk 1's
// first forward (1 + 2.5), ends at 6, needed at 2 p f + f + 2.5 = 5, waits
// 1; chunk 3's likewise 1: 4.5 s. With a gather of 4 s (g = 1) only chunk
// 0's 0.5 s is left: the others end as their chunks start.
TEST(GradSync, AnInterleavedPipelineGathersEachChunkBehindTheOneBefore) {
  using cost_model_internal::exposed_weight_gather;
  Config c;
  c.parallel.pipeline = 2;
  c.parallel.virtual_stages = 4;
  c.schedule.kind = ScheduleKind::kInterleaved1f1b;
  EXPECT_DOUBLE_EQ(exposed_weight_gather(c, 8, 2), 4.5);
  EXPECT_DOUBLE_EQ(exposed_weight_gather(c, 4, 2), 0.5);
  EXPECT_DOUBLE_EQ(exposed_weight_gather(c, 0.25, 2), 0);
  c.schedule.kind = ScheduleKind::kInterleavedZb;
  EXPECT_DOUBLE_EQ(exposed_weight_gather(c, 8, 2), 6);
  c.schedule.kind = ScheduleKind::k1f1b;
  c.parallel.virtual_stages = 1;
  EXPECT_DOUBLE_EQ(exposed_weight_gather(c, 8, 2), 6);
}

// ---------------------------------------------------------------- ZeRO 3

// Stage 0's costs under ZeRO stage `zero`.
StageCost stage_under_zero(Config c, int zero) {
  c.training.zero_stage = zero;
  return build_ok(c).stages[0];
}

// What ZeRO 2 and 3 change is measured against ZeRO 1, which moves nothing
// in the microbatches.
struct ZeroOneAndThree {
  StageCost base;
  StageCost sharded;
};

ZeroOneAndThree stage_under_zero_1_and_3(const Config& c) {
  return {stage_under_zero(c, 1), stage_under_zero(c, 3)};
}

// The tiny model on p = 1, t = 2, d = 4 (one node): 960 parameters per GPU
// (above), gathered in bf16 (1920 bytes: 3e-6 + 0.75 * 1920 / 1e11 s) for
// the forward and again for the input gradient, their fp32 gradients
// reduce-scattered after the weight gradient (3840 bytes: 3e-6 + 0.75 *
// 3840 / 1e11 s). Each outlasts the phase's nanoseconds of compute, so the
// phase takes its communication plus the collective.
TEST(ShardedWeights, GathersOutlastingTinyPhasesSetTheirTime) {
  const auto [base, sharded] =
      stage_under_zero_1_and_3(make_config(tiny(2), 1, 2, 4, round_hardware(8, 1)));
  const Picos gather = 3014400;
  const Picos scatter = 3028800;
  ASSERT_LT(base.forward - base.forward_comm, gather);
  ASSERT_LT(base.weight_grad, scatter);
  EXPECT_EQ(sharded.forward, base.forward_comm + gather);
  EXPECT_EQ(sharded.forward_comm, base.forward_comm + gather - (base.forward - base.forward_comm));
  EXPECT_EQ(input_grad_time(sharded), base.backward_comm + gather);
  EXPECT_EQ(sharded.weight_grad, scatter);
  // A whole backward pays both: B = I + W.
  EXPECT_EQ(sharded.backward, input_grad_time(sharded) + scatter - sharded.backward_overlap);
}

TEST(ShardedWeights, ZeroTwoReduceScattersEveryBackwardAndGathersNothing) {
  // The tiny model above: ZeRO 2 shards the gradients, not the weights.
  const Config c = make_config(tiny(2), 1, 2, 4, round_hardware(8, 1));
  const StageCost base = stage_under_zero(c, 1);
  const StageCost sharded = stage_under_zero(c, 2);
  EXPECT_EQ(sharded.forward, base.forward);
  EXPECT_EQ(input_grad_time(sharded), input_grad_time(base));
  EXPECT_EQ(sharded.weight_grad, 3028800);
}

TEST(ShardedWeights, GathersHideUnderLongCompute) {
  // Two GPT-3 layers with the embedding on d = 2 in one node: 4.25e9
  // parameters, whose bf16 weights (8.5 GB) gather in 0.5 * 8.5e9 / 1e11 =
  // 42.5 ms and fp32 gradients (17 GB) reduce-scatter in 85 ms, while a
  // forward of 2048 tokens takes at least 2 * 2048 * 4.25e9 / 1e14 = 174
  // ms, and the weight gradient as long: every collective hides.
  const auto [base, sharded] =
      stage_under_zero_1_and_3(make_config(gpt3(2), 1, 1, 2, round_hardware(8, 1)));
  EXPECT_EQ(sharded.forward, base.forward);
  EXPECT_EQ(sharded.backward, base.backward);
  EXPECT_EQ(sharded.weight_grad, base.weight_grad);
}

TEST(ShardedWeights, NothingToGatherWithoutDataParallelism) {
  const auto [base, sharded] =
      stage_under_zero_1_and_3(make_config(tiny(2), 1, 2, 1, round_hardware(8, 1)));
  EXPECT_EQ(sharded.forward, base.forward);
  EXPECT_EQ(sharded.backward, base.backward);
}

TEST(ShardedWeights, TheLargestGatheredUnitIsHeldBesideTheActivations) {
  // The stage's largest unit is a layer, 872 / 2 = 436 parameters per GPU
  // (the word embedding is 16 * 8 / 2 = 64): twice in bf16 (running and
  // gathered ahead) and its fp32 gradient, 436 * (2 * 2 + 4) = 3488 bytes.
  Config c = make_config(tiny(2), 1, 2, 4, round_hardware(8, 1));
  c.training.zero_stage = 1;
  const int64_t base = build_ok(c).working_bytes[0];
  c.training.zero_stage = 3;
  EXPECT_EQ(build_ok(c).working_bytes[0], base + 3488);
}

// training.gradient_dtype: model_dtype (Megatron-Core's grad_reduce_in_fp32:
// false) reduces the bf16 gradients as they are, 1920 bytes: 2 * 3 * 1e-6 +
// 1.5 * 1920 / 1e11 = 6.0288e-6 s; fp32, the default in bf16, 3840 bytes.
TEST(GradSync, Bf16GradientsReduceHalfTheBytes) {
  Config c = make_config(tiny(2), 1, 2, 4, round_hardware(8, 1));
  c.training.gradient_dtype = GradientDType::kModelDType;
  EXPECT_EQ(build_ok(c).grad_sync[0], 6028800);
  c.training.gradient_dtype = GradientDType::kFp32;
  EXPECT_EQ(build_ok(c).grad_sync[0], 6057600);
}

TEST(GradSync, DataParallelAcrossNodes) {
  // t d = 16 > 8 GPUs a node. Psi = 1920 / 4 = 480, 1920 bytes of fp32
  // gradients. The data-parallel group (GPUs 0, 4, 8, 12) has two members a
  // node, each with its own NIC: 2 x 10 GB/s.
  // 6 * 5e-6 + 1.5 * 1920 / 2e10 = 3.0144e-5 s.
  Config c = make_config(tiny(2), 1, 4, 4, round_hardware(8, 2));
  EXPECT_EQ(build_ok(c).grad_sync[0], 30144000);
  // Four NICs for eight GPUs: half a NIC each, 2 x 5 GB/s.
  c.hardware->nics_per_node = 4;
  EXPECT_EQ(build_ok(c).grad_sync[0], 30288000);
}

// A tensor group wider than a node (t = 16 on nodes of 8) spans two: its
// ring's hops between the nodes run on a node's eight NICs side by side, 8 x
// 10 GB/s, at the network's latency; t = 8 stays on NVLink.
TEST(GroupLinks, ATensorGroupWiderThanANodeRunsOverItsNodesNics) {
  using cost_model_internal::group_links;
  using cost_model_internal::Placement;
  Config c = make_config(tiny(2), 1, 16, 1, round_hardware(8, 2));
  const Result<GroupLinks> wide = group_links(c, Placement(c.parallel, 8), 0);
  ASSERT_TRUE(wide.ok()) << wide.error().message;
  EXPECT_DOUBLE_EQ(wide->tensor.bandwidth_Bps, 8e10);
  EXPECT_DOUBLE_EQ(wide->tensor.latency_s, 5e-6);
  c.parallel.tensor = 8;
  c.parallel.data = 2;
  const Result<GroupLinks> node = group_links(c, Placement(c.parallel, 8), 0);
  ASSERT_TRUE(node.ok()) << node.error().message;
  EXPECT_DOUBLE_EQ(node->tensor.bandwidth_Bps, 1e11);
  EXPECT_DOUBLE_EQ(node->tensor.latency_s, 1e-6);
}

TEST(GradSync, NoDataParallelismNothingToSync) {
  EXPECT_EQ(build_ok(make_config(tiny(2), 1, 2, 1, round_hardware(8, 1))).grad_sync[0], 0);
}

TEST(GradSync, TiedEmbeddingBetweenFirstAndLastRank) {
  // V h = 128 fp32 gradients, 512 bytes, all-reduced by two ranks: 2 alpha + 512 / beta.
  Config c = make_config(tiny(2), 2, 1, 1, round_hardware(8, 1));
  EXPECT_EQ(build_ok(c).grad_sync, (std::vector<Picos>{2005120, 2005120}));  // NVLink
  c.hardware = round_hardware(1, 2);
  EXPECT_EQ(build_ok(c).grad_sync, (std::vector<Picos>{10051200, 10051200}));  // network
  // Untied embeddings have nothing to sum.
  c.model->tie_embeddings = false;
  EXPECT_EQ(build_ok(c).grad_sync, (std::vector<Picos>{0, 0}));
}

// DualPipe holds the model twice: rank 0's stages 0 and 3 are rank 1's
// stages 2 and 1 of the other chain, and the two copies sum their
// gradients. Each rank holds a layer with the embedding (872 + 128 + 32)
// and a layer with the final norm and the tied copy (872 + 128 + 16): 2048
// fp32 gradients, 8192 bytes, all-reduced by two ranks: 2 alpha + 8192 / beta.
TEST(GradSync, DualPipesCopiesSumTheirGradients) {
  Config c = make_config(tiny(2), 2, 1, 1, round_hardware(8, 1));
  c.schedule.kind = ScheduleKind::kDualPipe;
  c.parallel.virtual_stages = 2;
  const Result<CostTable> table = build_cost_table(c, {0, 1, 1, 0});
  ASSERT_TRUE(table.ok()) << table.error().message;
  // Two copies of 1024 parameters per rank, 18 bytes each in bf16.
  EXPECT_EQ(table->static_bytes, (std::vector<int64_t>{18 * 2048, 18 * 2048}));
  EXPECT_EQ(table->grad_sync, (std::vector<Picos>{2081920, 2081920}));
}

TEST(OptimizerStep, AdamBytesOverHbm) {
  // 960 parameters per GPU, bf16 with fp32 gradients: per parameter updated,
  // the norm's read 4, Adam 28, the master copy 4 + 2; per parameter, the
  // gradient zeroed, 4. At 1e12 B/s: 960 * 42 bytes.
  Config c = make_config(tiny(2), 1, 2, 4, round_hardware(8, 1));
  EXPECT_EQ(build_ok(c).optimizer_step[0], 40320);
  // ZeRO 1 updates a quarter: 240 * 38 + 960 * 4.
  c.training.zero_stage = 1;
  EXPECT_EQ(build_ok(c).optimizer_step[0], 12960);
  // fp16 gradients are 2 bytes and are unscaled first (read and write):
  // 960 * (2 + 4 + 28 + 4 + 2 + 2).
  c.model->dtype = DType::kFp16;
  c.hardware->peak_tflops_fp16 = 100;
  c.training.zero_stage = 0;
  EXPECT_EQ(build_ok(c).optimizer_step[0], 960 * 42);
}

// Without a separate master copy the step updates the weights themselves
// (training.master_weights; 960 parameters, bf16, at 1e12 B/s): FSDP2's
// fp32 parameters, the norm's read 4, Adam 4 + 2 x (4 + 8), no copy, the
// gradient zeroed 4: 960 * 36; bf16 parameters with bf16 moments (PyTorch's
// Adam on them), the norm's read 2, Adam 2 + 2 x (2 + 4), zeroing 2: 960 * 18.
TEST(OptimizerStep, AdamUpdatesTheWeightsItKeeps) {
  Config c = make_config(tiny(2), 1, 2, 4, round_hardware(8, 1));
  c.training.master_weights = MasterWeights::kParams;
  EXPECT_EQ(build_ok(c).optimizer_step[0], 960 * 36);
  c.training.master_weights = MasterWeights::kNone;
  c.training.optimizer_moments = MomentDType::kModelDType;
  EXPECT_EQ(build_ok(c).optimizer_step[0], 960 * 18);
}

// With FP8 each weight's FP8 copy and its transpose are made once an
// iteration: the bf16 weight read, two bytes written, over every parameter
// the GPU holds: 960 x (42 + 4) bytes at 1e12 B/s.
TEST(OptimizerStep, Fp8CastsEachWeightOnceAnIteration) {
  Config c = make_config(tiny(2), 1, 2, 4, round_hardware(8, 1));
  c.hardware->peak_tflops_fp8 = 200;
  c.training.fp8 = Fp8Recipe::kDelayed;
  EXPECT_EQ(build_ok(c).optimizer_step[0], 960 * 46);
}

}  // namespace
}  // namespace cost_model_comm_test
}  // namespace ppsim
