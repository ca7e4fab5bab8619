// Context parallelism (parallel.context): the config's checks, one context
// rank's share of the sequence and its ring exchange, what the exchange
// costs beside the attention kernel it overlaps, and what the cost table
// divides by cp (activations, transfers) or groups over d cp (gradients,
// optimizer state). Every expected figure is worked by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/config/config.h"
#include "sim/cost/cost_model.h"
#include "sim/cost/layer_ops.h"
#include "sim/cost/op_time.h"
#include "sim/plan/simulate.h"
#include "sim/report/summary.h"
#include "tests/unit/config_fixtures.h"
#include "tests/unit/cost_model_fixtures.h"

namespace ppsim {
namespace context_parallel_test {
namespace {

using config_test::error_of;
using config_test::kModel;
using cost_model_test::build_ok;
using cost_model_test::make_config;
using cost_model_test::round_hardware;
using cost_model_test::tiny;
using ::testing::HasSubstr;

// ---------------------------------------------------------------- config

// The fixtures' 24-layer model on one 8-GPU node with flash attention, laid
// out p 2 t 2 cp 2, and `more` overrides after those.
std::vector<ConfigOverride> with_context(std::vector<ConfigOverride> more = {}) {
  std::vector<ConfigOverride> all = {
      {"model.attention", "flash"}, {"parallel.pipeline", "2"}, {"parallel.context", "2"}};
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

Result<Config> context_config() {
  return parse_config(config_test::yaml(config_test::kModel), "test.yaml", with_context());
}

TEST(ContextConfig, AValidLayoutLoadsAndCountsItsGpus) {
  const Result<Config> config = context_config();
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->parallel.context, 2);
  EXPECT_EQ(config->parallel.gpus(), 8);
  EXPECT_EQ(config->parallel.weight_replicas(), 2);  // d 1 x cp 2
}

TEST(ContextConfig, TheCommunicationTypeIsRead) {
  const Result<Config> config = parse_config(config_test::yaml(kModel), "test.yaml",
                                             with_context({{"parallel.cp_comm", "all_gather"}}));
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->parallel.context_comm, ContextComm::kAllGather);
  EXPECT_EQ(context_config()->parallel.context_comm, ContextComm::kP2p);
  EXPECT_THAT(error_of(kModel, with_context({{"parallel.cp_comm", "a2a"}})),
              HasSubstr("parallel.cp_comm: expected one of p2p, all_gather, got \"a2a\""));
}

TEST(ContextConfig, DegreeMustBePositive) {
  EXPECT_THAT(error_of(kModel, with_context({{"parallel.context", "0"}})),
              HasSubstr("parallel.context: expected an integer"));
}

TEST(ContextConfig, CountsInTheGpuArithmetic) {
  // 2 x 2 x 2 x 2 = 16 GPUs on an 8-GPU node.
  EXPECT_THAT(error_of(kModel, with_context({{"parallel.data", "2"}})),
              HasSubstr("parallel: pipeline 2 x tensor 2 x context 2 x data 2 = 16 GPUs, but "
                        "hardware has 1 nodes x 8 = 8"));
}

TEST(ContextConfig, SequenceSplitsIntoTwoChunksPerRank) {
  // 2048 is not a multiple of 2 x 3 = 6; p 1 t 2 cp 3 would not fit 8 GPUs
  // either, so the hardware grows to match: 12 GPUs.
  EXPECT_THAT(error_of(kModel, with_context({{"parallel.context", "3"},
                                             {"parallel.pipeline", "1"},
                                             {"hardware.gpus_per_node", "6"}})),
              HasSubstr("parallel.context: 3 needs model.seq_len (2048) to be a multiple of 2 x 3 "
                        "= 6"));
}

TEST(ContextConfig, NeedsFlashAttention) {
  EXPECT_THAT(error_of(kModel, with_context({{"model.attention", "standard"}})),
              HasSubstr("parallel.context: 2 needs model.attention: flash"));
}

TEST(ContextConfig, RefusesTokenSlices) {
  EXPECT_THAT(
      error_of(kModel, with_context({{"schedule.kind", "terapipe"}, {"schedule.slices", "2"}})),
      HasSubstr("parallel.context: cannot be combined with schedule.kind terapipe"));
}

TEST(ContextConfig, SummaryCarriesTheDegree) {
  const Result<Config> config = context_config();
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<Simulation> sim = simulate(*config);
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  EXPECT_THAT(summary_to_json(sim->summary),
              HasSubstr(R"("tensor":2,"data":1,"context":2,"expert":1,"virtual_stages":1)"));
  EXPECT_THAT(format_summary_table(sim->summary), HasSubstr("(p=2 t=2 cp=2 d=1 v=1"));
}

// ---------------------------------------------------------------- one rank's share

TEST(ContextRankSlice, HoldsItsShareOfTheCausalPairs) {
  // cp 4 of s = 8192: chunks of 1024, rank 0 holding chunks 0 and 7. Its
  // queries attend to 0 + 7 x 1024 keys before them, plus each chunk's own
  // causal triangle: 1024 x 7168 + 2 x 1024^2 / 2 = 8388608 = s^2 / 8.
  const TokenSlice share = context_rank_slice(8192, 4);
  EXPECT_EQ(share.tokens, 2048);
  EXPECT_EQ(share.context, 3072);
  const double pairs = static_cast<double>(share.tokens) * share.context +
                       static_cast<double>(share.tokens) * share.tokens / 2;
  EXPECT_DOUBLE_EQ(pairs, 1024.0 * 7168 + 1024.0 * 1024);
  // Without context parallelism: the whole sequence.
  EXPECT_EQ(context_rank_slice(8192, 1).tokens, 8192);
  EXPECT_EQ(context_rank_slice(8192, 1).context, 0);
}

// Llama 3 70B's attention shape: 64 heads of 128, 8 KV heads, bf16.
OpShape llama3_70b_shape(int context) {
  OpShape shape;
  shape.model.layers = 80;
  shape.model.hidden = 8192;
  shape.model.ffn_hidden = 28672;
  shape.model.heads = 64;
  shape.model.kv_heads = 8;
  shape.model.seq_len = 8192;
  shape.model.vocab = 128256;
  shape.model.dtype = DType::kBf16;
  shape.model.mlp = Mlp::kSwiglu;
  shape.model.attention = Attention::kFlash;
  shape.context = context;
  return shape;
}

const Op* find(const OpList& ops, OpKind kind) {
  for (const Op& op : ops) {
    if (op.kind == kind) return &op;
  }
  return nullptr;
}

TEST(ContextRingOps, ForwardPassesKAndVBackwardAlsoTheirGradients) {
  const OpShape shape = llama3_70b_shape(4);
  const PieceOps ops = layer_ops(shape, context_rank_slice(8192, 4));
  // The flash kernel does a quarter of the whole sequence's causal work:
  // 4 a d s^2 / 2 / 4 = 1099511627776 / 4.
  EXPECT_DOUBLE_EQ(find(ops.forward, OpKind::kFlashAttention)->flops, 1099511627776.0 / 4);
  // Three ring steps, each handing on K and V of 2048 tokens x 8 heads x 128
  // in bf16: 2 x 2048 x 1024 x 2 = 8388608 bytes; the backward twice that.
  const Op* forward = find(ops.forward, OpKind::kRingExchange);
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->steps, 3);
  EXPECT_EQ(forward->bytes, 8388608);
  const Op* backward = find(ops.input_grad, OpKind::kRingExchange);
  ASSERT_NE(backward, nullptr);
  EXPECT_EQ(backward->steps, 3);
  EXPECT_EQ(backward->bytes, 2 * 8388608);
  EXPECT_EQ(find(ops.weight_grad, OpKind::kRingExchange), nullptr);
  // Without context parallelism there is no ring.
  EXPECT_EQ(
      find(layer_ops(llama3_70b_shape(1), TokenSlice{8192, 0}).forward, OpKind::kRingExchange),
      nullptr);
}

// Transformer Engine's copies and sums around the ring's kernels, at the
// ring's last GPU (cp 4, 2048 tokens a GPU): |KV| = 8388608 bytes (above),
// |Q| = |O| = 2048 x 64 heads x 128 x 2 = 33554432. Forward: 3 half-chunk
// copies of K and V (|KV| each) and 4 merges of a partial output (3 |O|
// each) into the zeroed result (|O|): 3 x 8388608 + 13 x 33554432.
// Backward: 3 x (3.5 |KV| + 3 |Q|) + 6 |KV| + 2 |Q|. Each right after its
// ring's exchange; none without the ring, or with the all-gather variant.
TEST(ContextRingOps, TheRingCopiesHalfChunksAndSumsThePartialResults) {
  const auto after_ring = [](const OpList& list) -> const Op* {
    for (int i = 0; i + 1 < list.size(); ++i) {
      if (list.begin()[i].kind == OpKind::kRingExchange) return &list.begin()[i + 1];
    }
    return nullptr;
  };
  const PieceOps ops = layer_ops(llama3_70b_shape(4), context_rank_slice(8192, 4));
  const Op* forward = after_ring(ops.forward);
  ASSERT_NE(forward, nullptr);
  EXPECT_STREQ(forward->name, "context-parallel copies and merge");
  EXPECT_EQ(forward->kind, OpKind::kMemory);
  EXPECT_DOUBLE_EQ(forward->bytes, 3 * 8388608.0 + 13 * 33554432.0);
  const Op* backward = after_ring(ops.input_grad);
  ASSERT_NE(backward, nullptr);
  EXPECT_STREQ(backward->name, "context-parallel copies and sums");
  EXPECT_DOUBLE_EQ(backward->bytes,
                   3 * (3.5 * 8388608.0 + 3 * 33554432.0) + 6 * 8388608.0 + 2 * 33554432.0);
  const auto named = [](const OpList& list, const std::string& name) {
    for (const Op& op : list) {
      if (name == op.name) return true;
    }
    return false;
  };
  const PieceOps alone = layer_ops(llama3_70b_shape(1), TokenSlice{8192, 0});
  EXPECT_FALSE(named(alone.forward, "context-parallel copies and merge"));
  OpShape gathered = llama3_70b_shape(4);
  gathered.context_comm = ContextComm::kAllGather;
  const PieceOps gather = layer_ops(gathered, context_rank_slice(8192, 4));
  EXPECT_FALSE(named(gather.forward, "context-parallel copies and merge"));
  EXPECT_FALSE(named(gather.input_grad, "context-parallel copies and sums"));
}

// A query of a causal sequence of 8192 attends to 4096 keys on average
// (sum over i of i / 8192 = 8191 / 2, plus its own: 8192 / 2); a rank's two
// chunks under cp 4 the same: 3072 before them, plus 2048 / 2 of their own.
TEST(ContextRingOps, TheKernelSeesHalfTheSequenceAsKeysWithOrWithoutTheRing) {
  for (const int cp : {1, 4}) {
    const PieceOps ops = layer_ops(llama3_70b_shape(cp), context_rank_slice(8192, cp));
    EXPECT_DOUBLE_EQ(find(ops.forward, OpKind::kFlashAttention)->keys_per_query, 4096) << cp;
    EXPECT_DOUBLE_EQ(find(ops.input_grad, OpKind::kFlashAttention)->keys_per_query, 4096) << cp;
  }
}

// Llama 3's all-gather variant (Transformer Engine's cp_comm_type
// all_gather): the group's K and V gathered before the forward kernel, again
// before the backward one, and their gradients reduce-scattered after it;
// on the same ring, 3 steps of 8388608 bytes each, none beside the kernel.
TEST(ContextRingOps, AllGatherComesBeforeTheKernelAndIsPaidInFull) {
  OpShape shape = llama3_70b_shape(4);
  shape.context_comm = ContextComm::kAllGather;
  const PieceOps ops = layer_ops(shape, context_rank_slice(8192, 4));
  const auto exchanges = [](const OpList& list) {
    std::vector<std::pair<std::string, int>> found;  // name, index
    for (int i = 0; i < list.size(); ++i) {
      const Op& op = list.begin()[i];
      if (op.kind != OpKind::kRingExchange) continue;
      EXPECT_FALSE(op.beside_attention) << op.name;
      EXPECT_EQ(op.steps, 3);
      EXPECT_EQ(op.bytes, 8388608);
      found.emplace_back(op.name, i);
    }
    return found;
  };
  const auto kernel_at = [](const OpList& list) {
    for (int i = 0; i < list.size(); ++i) {
      if (list.begin()[i].kind == OpKind::kFlashAttention) return i;
    }
    return -1;
  };
  const auto forward = exchanges(ops.forward);
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_EQ(forward[0].second, kernel_at(ops.forward) - 1);
  const auto backward = exchanges(ops.input_grad);
  ASSERT_EQ(backward.size(), 2u);
  EXPECT_EQ(backward[0].first, "context-parallel K, V all-gather");
  EXPECT_EQ(backward[0].second, kernel_at(ops.input_grad) - 1);
  EXPECT_EQ(backward[1].first, "context-parallel dK, dV reduce-scatter");
  EXPECT_EQ(backward[1].second, kernel_at(ops.input_grad) + 1);
}

// ---------------------------------------------------------------- pricing

// A forward attention kernel of 1 ms (round hardware: 100 TFLOP/s at
// flash_forward_efficiency 0.8) followed by cp - 1 = 3 ring transfers over
// a 100 GB/s link without latency; `beside` the kernel's steps (the p2p
// ring), or a context collective after the kernel.
OpList kernel_then_ring(double bytes_per_step, bool beside = true) {
  Op flash;
  flash.kind = OpKind::kFlashAttention;
  flash.flops = 1e-3 * 100e12 * 0.8;
  Op ring;
  ring.kind = OpKind::kRingExchange;
  ring.bytes = bytes_per_step;
  ring.steps = 3;
  ring.beside_attention = beside;
  ring.collective = CollectiveKind::kAllGather;
  OpList ops;
  ops.add(flash);
  ops.add(ring);
  return ops;
}

TEST(ContextRingPricing, TransfersHideBehindTheKernelsSteps) {
  const OpTimer timer(round_hardware(8, 1), DType::kBf16, 1);
  GroupLinks links;
  links.context_ring = Link{0, 100e9, 0};
  links.context = Link{0, 100e9, 0};
  // 1e7 bytes take 0.1 ms, less than a quarter of the kernel (0.25 ms):
  // hidden, the pair costs the kernel's 1 ms.
  EXPECT_NEAR(timer.seconds(kernel_then_ring(1e7), links), 1e-3, 1e-12);
  // 1e8 bytes take 1 ms: each of the 3 steps exposes 1 - 0.25 ms, so
  // 1 + 3 x 0.75 = 3.25 ms.
  EXPECT_NEAR(timer.seconds(kernel_then_ring(1e8), links), 3.25e-3, 1e-12);
  // Alone, a ring exchange pays all of its transfers: 3 ms.
  EXPECT_NEAR(timer.seconds(kernel_then_ring(1e8).begin()[1], links), 3e-3, 1e-12);
  // The same chunks as one all-gather of the four GPUs after the kernel
  // hide nothing: 1 ms + 3 steps of 1e7 bytes, 0.1 ms each.
  EXPECT_NEAR(timer.seconds(kernel_then_ring(1e7, false), links), 1.3e-3, 1e-12);
}

// ---------------------------------------------------------------- the cost table

Config tiny_context(int layers, int p, int t, int cp, int d, const HardwareSpec& hw) {
  ModelSpec model = tiny(layers);  // s = 4: a multiple of 2 cp for cp = 2
  model.attention = Attention::kFlash;
  Config c = make_config(model, p, t, d, hw);
  c.parallel.context = cp;
  return c;
}

TEST(ContextCostTable, TransfersAndActivationsCarryHalfTheTokens) {
  // p 2, cp 2: each GPU holds 2 of the 4 tokens of a sequence.
  const CostTable whole = build_ok(tiny_context(2, 2, 1, 1, 1, round_hardware(2, 1)));
  const CostTable half = build_ok(tiny_context(2, 2, 1, 2, 1, round_hardware(4, 1)));
  // b s h B = 1 x 4 x 8 x 2 = 64 bytes, and 32 with cp 2.
  EXPECT_EQ(whole.p2p_bytes[0], 64);
  EXPECT_EQ(half.p2p_bytes[0], 32);
  // Flash attention keeps no s^2 term: every kept byte scales with tokens.
  EXPECT_EQ(half.stages[0].activation_bytes * 2, whole.stages[0].activation_bytes);
}

TEST(ContextCostTable, GradientsAreSummedOverDataAndContextRanks) {
  // t 2, cp 2, d 2 on one 8-GPU node: the gradient group is the d cp = 4
  // GPUs 0, 2, 4, 6, the same ring and bytes as t 2, d 4 without context
  // parallelism (cost_model_test GradSync.DataParallelRingInsideANode:
  // 6.0576e-6 s).
  EXPECT_EQ(build_ok(tiny_context(2, 1, 2, 2, 2, round_hardware(8, 1))).grad_sync[0], 6057600);
}

TEST(ContextCostTable, ZeroShardsOverDataAndContextRanks) {
  // Rank 1 of 3 holds one layer, Psi = 872; ZeRO 1 over d cp = 2 x 2, in
  // bf16: 6 x 872 + 12 x 872 / 4 = 7848 (as d = 4 without context
  // parallelism).
  Config c = tiny_context(3, 3, 1, 2, 2, round_hardware(12, 1));
  c.training.zero_stage = 1;
  EXPECT_EQ(build_ok(c).static_bytes[1], 7848);
}

TEST(ContextCostTable, ARingAcrossNodesPaysTheNetwork) {
  // t 2, cp 2: on 4-GPU nodes the ring (GPUs 0 and 2) stays in a node; on
  // 2-GPU nodes it crosses (each tensor group still in its node). The tiny
  // model's attention takes picoseconds, so every transfer is exposed: the
  // forward grows by one step's difference, K and V of 2 tokens x 4 columns
  // in bf16 = 32 bytes: (5e-6 + 32 / 1e10) - (1e-6 + 32 / 1e11) s; the
  // backward by the same for 64 bytes.
  const CostTable in_node = build_ok(tiny_context(1, 1, 2, 2, 1, round_hardware(4, 1)));
  const CostTable across = build_ok(tiny_context(1, 1, 2, 2, 1, round_hardware(2, 2)));
  const double forward_s = (5e-6 + 32 / 1e10) - (1e-6 + 32 / 1e11);
  const double backward_s = (5e-6 + 64 / 1e10) - (1e-6 + 64 / 1e11);
  EXPECT_NEAR(static_cast<double>(across.stages[0].forward - in_node.stages[0].forward),
              forward_s * 1e12, 2);
  EXPECT_NEAR(static_cast<double>(across.stages[0].backward - in_node.stages[0].backward),
              backward_s * 1e12, 2);
}

TEST(ContextCostTable, ARingStepIsOneSendRecvPair) {
  // cp 2 on one 2-GPU node, t 1: each forward step hands on K and V of 2
  // tokens x 8 columns in bf16 = 64 bytes. As one NCCL send/recv pair: at
  // the pair's bandwidth (p2p_bandwidth_gbps 10), without the collectives'
  // size curve (collective_half_mb 1 would price 64 bytes at half the
  // link's bus bandwidth) and without a pipeline transfer's framework time
  // (p2p_latency_us 100), so the step takes 1e-6 + 64 / 1e10 s where the
  // node's link gives 1e-6 + 64 / 1e11. The tiny model's attention takes
  // picoseconds: the whole difference shows in the forward.
  HardwareSpec pair = round_hardware(2, 1);
  pair.p2p_bandwidth_gbps = 10;
  pair.p2p_latency_us = 100;
  pair.collective_half_mb = 1;
  const CostTable plain = build_ok(tiny_context(1, 1, 1, 2, 1, round_hardware(2, 1)));
  const CostTable paired = build_ok(tiny_context(1, 1, 1, 2, 1, pair));
  EXPECT_NEAR(static_cast<double>(paired.stages[0].forward - plain.stages[0].forward),
              (64 / 1e10 - 64 / 1e11) * 1e12, 2);
}

}  // namespace
}  // namespace context_parallel_test
}  // namespace ppsim
