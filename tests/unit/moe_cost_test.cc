// What the cost model charges for mixture-of-experts layers: the all-to-all
// exchange and its links, the bytes each exchange moves, the busiest expert
// pacing the layer, the parameters, optimizer state and gradient reduction
// split between dense weights and experts, and the model FLOPs. Every
// expected figure is worked by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/cost/layer_ops.h"
#include "sim/cost/op_time.h"
#include "sim/cost/partition.h"
#include "tests/unit/cost_model_fixtures.h"

namespace ppsim {
namespace moe_cost_test {
namespace {

using cost_model_test::build_ok;
using cost_model_test::make_config;
using cost_model_test::round_hardware;
using cost_model_test::tiny;
using ::testing::HasSubstr;

// ---------------------------------------------------------------- the exchange

TEST(AllToAll, TheSlowerOfNvlinkAndTheNetworkSetsTheTime) {
  // 8 members, 4 per node, each receiving 8e6 bytes from the all-to-all
  // dispatcher: 3/8 of them from its node (1 us + 3e6 / 1e11 = 31 us), 4/8
  // from the other (5 us + 4e6 / 1e10 = 405 us); its own 1/8 does not move.
  const MoeSpec moe = *cost_model_test::mixtral_8x7b().moe;
  AllToAllLinks group{8, 4, Link{1e-6, 100e9, 0}, Link{5e-6, 10e9, 0},
                      exchange_shares(moe, MoeDispatcher::kAllToAll, 8, 4)};
  EXPECT_NEAR(all_to_all_seconds(8e6, group), 405e-6, 1e-15);
  // All 8 in one node: 7/8 over NVLink, 1 us + 7e6 / 1e11 = 71 us.
  group.per_node = 8;
  group.shares = exchange_shares(moe, MoeDispatcher::kAllToAll, 8, 8);
  EXPECT_NEAR(all_to_all_seconds(8e6, group), 71e-6, 1e-15);
  // A group of one exchanges nothing.
  EXPECT_EQ(all_to_all_seconds(8e6, AllToAllLinks{}), 0);
}

TEST(AllToAll, DeepEpSendsATokenOncePerGpuAndOncePerRemoteNode) {
  // Mixtral's 8 experts, top 2, one per GPU of an expert group of 8 in two
  // nodes of 4. A token's 2 experts are on 2 distinct GPUs, always; the
  // other node holds neither with probability C(4,2)/C(8,2) = 6/28, so the
  // token crosses to it with 22/28. Per routed row: NVLink (2/2) x 3/4 = 0.75
  // (each row relayed to its GPU, unless that GPU took it itself), the
  // network (22/28) / 2 = 11/28 (a token crosses once to the other node).
  const MoeSpec mixtral = *cost_model_test::mixtral_8x7b().moe;
  const ExchangeShares two_nodes = exchange_shares(mixtral, MoeDispatcher::kDeepEp, 8, 4);
  EXPECT_NEAR(two_nodes.nvlink, 0.75, 1e-12);
  EXPECT_NEAR(two_nodes.network, 11.0 / 28, 1e-12);
  // The all-to-all dispatcher moves both rows: 4/8 of them across nodes.
  EXPECT_NEAR(exchange_shares(mixtral, MoeDispatcher::kAllToAll, 8, 4).network, 0.5, 1e-12);

  // DeepSeek-V3's routing (256 experts, top 8, at most 4 nodes) over 64
  // GPUs in 8 nodes of 8: unlimited, a token would reach 8 (1 - C(224,8) /
  // C(256,8)) = 5.3 nodes; the limit makes it 4, 3.5 of them remote: 3.5 / 8
  // = 0.4375 of the rows cross the network, where the all-to-all dispatcher
  // sends 56/64 = 0.875. Its 8 experts among the 4 nodes' 128 on 32 GPUs
  // of 4 each: 32 (1 - C(124,8) / C(128,8)) distinct GPUs, 7/8 of them
  // reached over NVLink.
  MoeSpec deepseek;
  deepseek.experts = 256;
  deepseek.top_k = 8;
  deepseek.max_nodes_per_token = 4;
  const ExchangeShares limited = exchange_shares(deepseek, MoeDispatcher::kDeepEp, 64, 8);
  EXPECT_NEAR(limited.network, 0.4375, 1e-12);
  double none_on_a_gpu = 1;  // C(124,8) / C(128,8)
  for (int i = 0; i < 8; ++i) none_on_a_gpu *= (124.0 - i) / (128.0 - i);
  EXPECT_NEAR(limited.nvlink, 32 * (1 - none_on_a_gpu) / 8 * 7 / 8, 1e-12);
  // Without the limit: 5.3 nodes, 7/8 of them remote.
  deepseek.max_nodes_per_token = 0;
  double none_on_a_node = 1;  // C(224,8) / C(256,8)
  for (int i = 0; i < 8; ++i) none_on_a_node *= (224.0 - i) / (256.0 - i);
  EXPECT_NEAR(exchange_shares(deepseek, MoeDispatcher::kDeepEp, 64, 8).network,
              8 * (1 - none_on_a_node) * 7 / 8 / 8, 1e-12);
}

// Mixtral 8x7B on t GPUs (with sequence parallelism) of an expert group of EP.
OpShape mixtral_shape(int tensor, int expert) {
  OpShape shape;
  shape.model = cost_model_test::mixtral_8x7b();
  shape.tensor = tensor;
  shape.sequence_parallel = tensor > 1;
  shape.expert = expert;
  return shape;
}

std::vector<double> bytes_of(const OpList& ops, CollectiveKind kind) {
  std::vector<double> bytes;
  for (const Op& op : ops) {
    if (op.kind == OpKind::kCollective && op.collective == kind) bytes.push_back(op.bytes);
  }
  return bytes;
}

// The bytes of the memory-bound kernel called `name` in `ops`; 0 if none.
double memory_bytes(const OpList& ops, std::string_view name) {
  for (const Op& op : ops) {
    if (op.kind == OpKind::kMemory && op.name == name) return op.bytes;
  }
  return 0;
}

TEST(MoeExchange, DeepEpReadsTheTokensAsTheyAreAndSumsThemInItsCombine) {
  // Mixtral, EP 8, 4096 tokens of 4096 bf16 values, top 2. The all-to-all
  // dispatcher copies each row twice in expert order first (read and write:
  // 2 x 4096 x 2 x 4096 x 2 = 134217728 bytes) and after the combine reads
  // both rows and writes their weighted sum (3 x 4096 x 4096 x 2 =
  // 100663296); backward, the gradient copied to both rows and the rows read
  // again ((2 x 2 + 1) x 33554432 = 167772160), then the two rows summed
  // (100663296).
  OpShape shape = mixtral_shape(1, 8);
  const PieceOps alltoall = moe_layer_ops(shape, TokenSlice{4096, 0});
  EXPECT_EQ(memory_bytes(alltoall.forward, "token permutation"), 134217728);
  EXPECT_EQ(memory_bytes(alltoall.forward, "token unpermutation"), 100663296);
  EXPECT_EQ(memory_bytes(alltoall.input_grad, "token unpermutation backward"), 167772160);
  EXPECT_EQ(memory_bytes(alltoall.input_grad, "token permutation backward"), 100663296);
  // DeepEP's dispatch reads each token's row where it is, and its combine
  // sums the rows coming back: none of the four. Its exchanges carry the
  // same rows (their shares of the links differ, exchange_shares).
  shape.moe_dispatcher = MoeDispatcher::kDeepEp;
  const PieceOps deepep = moe_layer_ops(shape, TokenSlice{4096, 0});
  for (const char* name : {"token permutation", "token unpermutation"}) {
    EXPECT_EQ(memory_bytes(deepep.forward, name), 0) << name;
  }
  for (const char* name : {"token unpermutation backward", "token permutation backward"}) {
    EXPECT_EQ(memory_bytes(deepep.input_grad, name), 0) << name;
  }
  EXPECT_EQ(bytes_of(deepep.forward, CollectiveKind::kAllToAll),
            bytes_of(alltoall.forward, CollectiveKind::kAllToAll));
  // Without expert parallelism there is nothing to dispatch: the grouped
  // GEMMs still need the rows in expert order.
  shape.expert = 1;
  EXPECT_EQ(memory_bytes(moe_layer_ops(shape, TokenSlice{4096, 0}).forward, "token permutation"),
            134217728);
}

// The operation called `name` in `ops`.
const Op& op_named(const OpList& ops, std::string_view name) {
  for (const Op& op : ops) {
    if (op.name == name) return op;
  }
  ADD_FAILURE() << "no operation " << name;
  return *ops.begin();
}

TEST(MoeLaunches, DroplessTheHostWaitsForTheTokenCountsBeforeTheDispatch) {
  // Megatron-Core's all-to-all dispatcher copies the counts to the host and
  // synchronizes before the exchange (cuda_sync_point before_ep_alltoall):
  // the last operation before it is waited for, nothing else is.
  OpShape shape = mixtral_shape(1, 2);
  const PieceOps alltoall = moe_layer_ops(shape, TokenSlice{4096, 0});
  int waits = 0;
  for (const Op& op : alltoall.forward) waits += op.host_waits ? 1 : 0;
  EXPECT_EQ(waits, 1);
  EXPECT_TRUE(op_named(alltoall.forward, "token permutation").host_waits);
  for (const OpList* list : {&alltoall.input_grad, &alltoall.weight_grad}) {
    for (const Op& op : *list) EXPECT_FALSE(op.host_waits) << op.name;
  }
  // DeepEP's dispatch sizes its buffers from the counts too: the router's
  // top-k is the last operation before it.
  shape.moe_dispatcher = MoeDispatcher::kDeepEp;
  EXPECT_TRUE(
      op_named(moe_layer_ops(shape, TokenSlice{4096, 0}).forward, "router softmax and top-k")
          .host_waits);
  // With a capacity the sizes are known on the host: no wait.
  shape.model.moe->capacity_factor = 1.25;
  for (const Op& op : moe_layer_ops(shape, TokenSlice{4096, 0}).forward) {
    EXPECT_FALSE(op.host_waits) << op.name;
  }
}

TEST(MoeLaunches, AGraphOfTheRouterIsOneLaunch) {
  // The router's GEMM and its softmax and top-k, two operations, are one
  // replay when a graph takes the router (cuda_graph_scope moe_router), and
  // the attention block's forward, from the input norm to its
  // bias-dropout-add, one when a graph takes it (attn): at 1 us a launch,
  // the forward's launches fall by 1 and then by the attention block's
  // operations less 1.
  const PieceOps ops = moe_layer_ops(mixtral_shape(1, 2), TokenSlice{4096, 0});
  HardwareSpec hw = round_hardware(8, 1);
  hw.host_launch_us = 1;
  int attention_ops = 0;
  for (const Op& op : ops.forward) attention_ops += op.graph == CudaGraphScope::kAttention ? 1 : 0;
  EXPECT_EQ(attention_ops, 6);  // norm, QKV, rotary, flash, output, bias-dropout-add (bf16)
  const double all = OpTimer(hw, DType::kBf16, 1).host_seconds(ops.forward);
  CudaGraphs router;
  router.add(CudaGraphScope::kMoeRouter);
  EXPECT_NEAR(all - OpTimer(hw, DType::kBf16, 1, router).host_seconds(ops.forward), 1e-6, 1e-15);
  CudaGraphs both = router;
  both.add(CudaGraphScope::kAttention);
  EXPECT_NEAR(all - OpTimer(hw, DType::kBf16, 1, both).host_seconds(ops.forward),
              (1 + attention_ops - 1) * 1e-6, 1e-15);
  // The token counting a graph of the dispatch's preprocessing takes is no
  // operation of the list: nothing changes.
  CudaGraphs preprocess;
  preprocess.add(CudaGraphScope::kMoePreprocess);
  EXPECT_EQ(OpTimer(hw, DType::kBf16, 1, preprocess).host_seconds(ops.forward), all);
}

TEST(MoeLaunches, EachLocalExpertsGemmIsLaunchedOnItsOwn) {
  // EP 2: 4 of Mixtral's 8 experts a GPU, each expert's GEMMs launched on
  // their own (Transformer Engine's GroupedLinear); the router's GEMM once.
  const PieceOps ops = moe_layer_ops(mixtral_shape(1, 2), TokenSlice{4096, 0});
  EXPECT_EQ(op_named(ops.forward, "MLP up").launches, 4);
  EXPECT_EQ(op_named(ops.forward, "MLP down").launches, 4);
  EXPECT_EQ(op_named(ops.input_grad, "MLP up input gradient").launches, 4);
  EXPECT_EQ(op_named(ops.weight_grad, "expert up weight gradient").launches, 4);
  EXPECT_EQ(op_named(ops.weight_grad, "expert down weight gradient").launches, 4);
  EXPECT_EQ(op_named(ops.forward, "router").launches, 1);
  EXPECT_EQ(op_named(ops.forward, "QKV").launches, 1);
}

TEST(MoeExchange, MixtralDispatchAndCombineBytesByHand) {
  // EP 8, t 1: 4096 tokens routed to 2 experts each; balanced, each GPU
  // receives 8192 rows of 4096 bf16 values = 67108864 bytes, in the
  // dispatch and the combine, and again in both backward.
  const PieceOps ep8 = moe_layer_ops(mixtral_shape(1, 8), TokenSlice{4096, 0});
  const std::vector<double> exchange = {67108864, 67108864};
  EXPECT_EQ(bytes_of(ep8.forward, CollectiveKind::kAllToAll), exchange);
  EXPECT_EQ(bytes_of(ep8.input_grad, CollectiveKind::kAllToAll), exchange);
  EXPECT_TRUE(bytes_of(ep8.weight_grad, CollectiveKind::kAllToAll).empty());
  // t 2 with sequence parallelism: each tensor rank routes its 2048 tokens
  // (33554432 bytes each way), then the tensor group gathers the 8192 rows
  // for its experts' shards: 67108864 bytes.
  const PieceOps tp2 = moe_layer_ops(mixtral_shape(2, 8), TokenSlice{4096, 0});
  EXPECT_EQ(bytes_of(tp2.forward, CollectiveKind::kAllToAll),
            (std::vector<double>{33554432, 33554432}));
  EXPECT_EQ(bytes_of(tp2.forward, CollectiveKind::kAllGather).back(), 67108864);
  // No expert parallelism, no exchange.
  EXPECT_TRUE(bytes_of(moe_layer_ops(mixtral_shape(1, 1), TokenSlice{4096, 0}).forward,
                       CollectiveKind::kAllToAll)
                  .empty());
}

TEST(MoeExchange, TheBusiestGpuReceivesItsBusiestExpertsRows) {
  // Imbalance 2 with one expert per GPU (EP 8): that GPU receives twice the
  // mean; with two per GPU (EP 4), (2 - 1 + 2) / 2 = 1.5 times.
  OpShape shape = mixtral_shape(1, 8);
  shape.model.moe->imbalance = 2;
  EXPECT_EQ(bytes_of(moe_layer_ops(shape, TokenSlice{4096, 0}).forward, CollectiveKind::kAllToAll),
            (std::vector<double>{134217728, 134217728}));
  shape.expert = 4;
  EXPECT_EQ(bytes_of(moe_layer_ops(shape, TokenSlice{4096, 0}).forward, CollectiveKind::kAllToAll),
            (std::vector<double>{100663296, 100663296}));
  // A capacity of 1.25 times the mean drops the busiest expert's excess.
  shape.model.moe->capacity_factor = 1.25;
  const ExpertLoad load = expert_load(*shape.model.moe, 4);
  EXPECT_DOUBLE_EQ(load.busiest_expert, 1.25);
  EXPECT_DOUBLE_EQ(load.busiest_gpu, 1.125);
}

// ---------------------------------------------------------------- pacing

// Mixtral's block narrowed to h 1024 and 8 heads, with 8 experts of 1024,
// top 2, s 4096, on one GPU (EP 1): 1024 tokens per expert at the mean,
// every expert GEMM compute-bound on round hardware (100 TFLOP/s, 1e12 B/s,
// no launch gap).
OpShape small_moe(double imbalance, double capacity_factor = 0) {
  OpShape shape;
  shape.model = cost_model_test::mixtral_8x7b();
  shape.model.hidden = 1024;
  shape.model.heads = 8;
  shape.model.moe->expert_ffn_hidden = 1024;
  shape.model.moe->capacity_factor = capacity_factor;
  shape.model.moe->imbalance = imbalance;
  return shape;
}

struct PhaseSeconds {
  double forward;
  double input_grad;
  double weight_grad;
};

PhaseSeconds priced(const OpShape& shape) {
  const OpTimer timer(round_hardware(8, 1), DType::kBf16, 1);
  const PieceOps ops = moe_layer_ops(shape, TokenSlice{4096, 0});
  return {timer.seconds(ops.forward, GroupLinks{}), timer.seconds(ops.input_grad, GroupLinks{}),
          timer.seconds(ops.weight_grad, GroupLinks{})};
}

TEST(MoePacing, TheBusiestExpertAddsItsExtraTokens) {
  // Imbalance 2: one expert takes 2048 tokens instead of 1024, so each phase
  // grows by one expert's work on 1024 more tokens.
  const PhaseSeconds even = priced(small_moe(1));
  const PhaseSeconds skewed = priced(small_moe(2));
  // Forward: up 2 x 1024 x 2048 x 1024 flops, SwiGLU 1024 x 3072 x 2
  // bytes, down 2 x 1024 x 1024 x 1024 flops.
  const double up = 2.0 * 1024 * 2048 * 1024 / 100e12;
  const double down = 2.0 * 1024 * 1024 * 1024 / 100e12;
  EXPECT_NEAR(skewed.forward - even.forward, up + 1024.0 * 3072 * 2 / 1e12 + down, 1e-12);
  // Input gradient: the same GEMMs transposed, SwiGLU's backward 5 x 1024
  // values per token.
  EXPECT_NEAR(skewed.input_grad - even.input_grad, up + 1024.0 * 5 * 1024 * 2 / 1e12 + down, 1e-12);
  // Weight gradient: the two expert weights over 1024 more tokens.
  EXPECT_NEAR(skewed.weight_grad - even.weight_grad, up + down, 1e-12);
}

TEST(MoePacing, ACapacityFactorCapsTheBusiestExpert) {
  // Capacity 1.5 at imbalance 2: the busiest expert takes 1536 tokens, half
  // the extra work of the uncapped imbalance (every term is linear in it).
  const PhaseSeconds even = priced(small_moe(1));
  const PhaseSeconds skewed = priced(small_moe(2));
  const PhaseSeconds capped = priced(small_moe(2, 1.5));
  EXPECT_NEAR(capped.forward - even.forward, (skewed.forward - even.forward) / 2, 1e-12);
}

TEST(MoeFlops, ALayerCountsTheRouterAndTopKExperts) {
  // At the mean load a MoE layer's forward is a dense layer's with an MLP of
  // top_k x expert_ffn_hidden, plus the router's 2 s h E; the imbalance adds
  // no model FLOPs.
  ModelSpec moe = small_moe(2).model;
  ModelSpec dense = moe;
  dense.moe.reset();
  dense.ffn_hidden = 2 * 1024;
  EXPECT_DOUBLE_EQ(moe_layer_forward_flops(moe),
                   layer_forward_flops(dense, 1, 1) + 2.0 * 4096 * 1024 * 8);
}

// ---------------------------------------------------------------- the cost table

// The tiny model (h 8, s 4, GeLU with biases, LayerNorm, learned positions,
// tied) with 4 experts of 8, top 2: a MoE layer has 288 attention, 32
// router, 4 x 144 = 576 expert and 32 norm parameters.
Config tiny_moe(int layers, int dense_layers, int p, int d, int expert, const HardwareSpec& hw) {
  ModelSpec model = tiny(layers);
  model.moe = MoeSpec{.experts = 4, .top_k = 2, .expert_ffn_hidden = 8};
  model.moe->dense_layers = dense_layers;
  Config c = make_config(model, p, 1, d, hw);
  c.parallel.expert = expert;
  return c;
}

TEST(MoeCostTable, ExpertsAreSplitOverTheExpertGroup) {
  // One stage, d 2, EP 2: dense 352 + embedding 160 + final norm 16 = 528
  // parameters on each GPU, and half the experts, 288; 18 bytes each in
  // bf16 (2 of weights, 4 of fp32 gradient, 12 of Adam's state).
  Config c = tiny_moe(1, 0, 1, 2, 2, round_hardware(2, 1));
  EXPECT_EQ(build_ok(c).static_bytes[0], 18 * (528 + 288));
  // ZeRO 1 shards the dense weights' state over their 2 copies, the
  // experts' over their 1: 6 x 528 + 12 x 528 / 2 + 18 x 288.
  c.training.zero_stage = 1;
  EXPECT_EQ(build_ok(c).static_bytes[0], 6 * 528 + 6 * 528 + 18 * 288);
}

TEST(MoeCostTable, OnlyReplicatedWeightsSumTheirGradients) {
  // d 2 in one node (1 us + 100 GB/s): EP 2 leaves each expert one copy, so
  // only the 528 dense parameters' fp32 gradients are all-reduced:
  // 2 x 1 us + 2 x 2112 / 2 / 1e11 s. With EP 1 the 576 expert parameters
  // have two copies too, all-reduced in a collective of their own (as
  // Megatron-Core keeps them in their own buffer): 2 us + 2304 / 1e11 s more.
  EXPECT_NEAR(build_ok(tiny_moe(1, 0, 1, 2, 2, round_hardware(2, 1))).grad_sync[0],
              (2e-6 + 2112 / 1e11) * 1e12, 1);
  EXPECT_NEAR(build_ok(tiny_moe(1, 0, 1, 2, 1, round_hardware(2, 1))).grad_sync[0],
              (2e-6 + 2112 / 1e11 + 2e-6 + 2304 / 1e11) * 1e12, 1);
}

TEST(MoeCostTable, DenseLayersComeFirst) {
  // Two stages of one layer, the first layer dense: stage 0 holds a dense
  // layer (872) and the embedding (160); stage 1 the MoE layer (928), the
  // final norm (16) and the tied embedding's copy (128).
  const CostTable table = build_ok(tiny_moe(2, 1, 2, 1, 1, round_hardware(2, 1)));
  EXPECT_EQ(table.static_bytes[0], 18 * (872 + 160));  // 18 bytes a parameter in bf16
  EXPECT_EQ(table.static_bytes[1], 18 * (928 + 16 + 128));
}

TEST(MoeCostTable, AnExpertGroupAcrossNodesPaysTheNetwork) {
  // d 4, EP 4: each GPU receives 4 tokens x 2 experts x 8 values x 2 bytes
  // = 128 bytes per exchange. In one 4-GPU node 3/4 come over NVLink (1 us
  // + 96 / 1e11 s); on 2-GPU nodes 1/4 do (1 us + 32 / 1e11 s) and 2/4 come
  // over the network (5 us + 64 / 1e10 s), which sets the time. The forward
  // has two exchanges (dispatch and combine), the backward two.
  const CostTable in_node = build_ok(tiny_moe(1, 0, 1, 4, 4, round_hardware(4, 1)));
  const CostTable across = build_ok(tiny_moe(1, 0, 1, 4, 4, round_hardware(2, 2)));
  const double per_exchange = (5e-6 + 64 / 1e10) - (1e-6 + 96 / 1e11);
  EXPECT_NEAR(static_cast<double>(across.stages[0].forward - in_node.stages[0].forward),
              2 * per_exchange * 1e12, 2);
  EXPECT_NEAR(static_cast<double>(across.stages[0].backward - in_node.stages[0].backward),
              2 * per_exchange * 1e12, 2);
}

TEST(MoeCostTable, AWholeIterationGraphLeavesNoLaunchesToWaitFor) {
  // The tiny MoE layer's kernels take nanoseconds; at 1 ms a launch its
  // forward, more than ten operations, waits for the host. Replayed as one
  // CUDA graph (experts at a capacity: fixed shapes), it is priced as
  // without launches.
  HardwareSpec hw = round_hardware(2, 1);
  hw.host_launch_us = 1000;
  Config launched = tiny_moe(1, 0, 1, 1, 1, hw);
  launched.model->moe->capacity_factor = 1;
  Config graphed = launched;
  graphed.training.cuda_graphs.add(CudaGraphScope::kFullIteration);
  Config no_host = launched;
  no_host.hardware->host_launch_us = 0;
  const StageCost with_launches = build_ok(launched).stages[0];
  const StageCost without = build_ok(no_host).stages[0];
  const StageCost replayed = build_ok(graphed).stages[0];
  EXPECT_EQ(replayed.forward, without.forward);
  EXPECT_EQ(replayed.backward, without.backward);
  EXPECT_GT(with_launches.forward, without.forward + seconds_to_picos(10e-3));
  EXPECT_GT(with_launches.backward, without.backward + seconds_to_picos(10e-3));
}

TEST(MoeCostTable, TensorParallelismNeedsSequenceParallelism) {
  Config c = tiny_moe(1, 0, 1, 1, 1, round_hardware(2, 1));
  c.parallel.tensor = 2;
  const Result<CostTable> table =
      build_cost_table(c, interleaved_stage_rank(1, 1), std::vector<int>{});
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.error().message,
              HasSubstr("model.moe with parallel.tensor 2 needs parallel.sequence_parallel: true"));
  c.parallel.sequence_parallel = true;
  EXPECT_TRUE(build_cost_table(c, interleaved_stage_rank(1, 1), std::vector<int>{}).ok());
}

TEST(MoeCostTable, TheBalancedSplitGivesTheCheaperDenseLayersToFewerStages) {
  // Mixtral's block with 8 layers, the first 4 dense with a narrow MLP (1024
  // against two experts of 14336 per token): a dense layer costs a fraction
  // of a MoE layer, so the even split {4, 4} is not the fastest on 2 stages
  // and the first stage takes more layers.
  ModelSpec model = cost_model_test::mixtral_8x7b();
  model.layers = 8;
  model.ffn_hidden = 1024;
  model.moe->dense_layers = 4;
  const Config c = make_config(model, 2, 1, 1, round_hardware(2, 1));
  const Result<PieceTimes> times = piece_times(c);
  ASSERT_TRUE(times.ok()) << times.error().message;
  EXPECT_LT(times->layer_s, times->moe_layer_s / 2);
  const Result<std::vector<int>> split = balanced_layers(c);
  ASSERT_TRUE(split.ok()) << split.error().message;
  EXPECT_GT((*split)[0], (*split)[1]);
  EXPECT_EQ((*split)[0] + (*split)[1], 8);
}

}  // namespace
}  // namespace moe_cost_test
}  // namespace ppsim
