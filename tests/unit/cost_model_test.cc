#include "sim/cost/cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "tests/unit/cost_model_fixtures.h"

namespace ppsim {
namespace cost_model_test {
namespace {

using ::testing::HasSubstr;

using namespace cost_model_test;  // NOLINT: the fixtures of this file

// ---------------------------------------------------------------- FLOPs, params

TEST(LayerForwardFlops, Gpt3LayerMatchesNarayanan) {
  // 24 * 2048 * 12288^2 + 4 * 2048^2 * 12288
  //   = 7421703487488 + 206158430208 = 7627861917696
  EXPECT_DOUBLE_EQ(layer_forward_flops(gpt3(1), 1, 1), 7627861917696.0);
  // Tensor parallelism splits every GEMM: 7627861917696 / 8.
  EXPECT_DOUBLE_EQ(layer_forward_flops(gpt3(1), 1, 8), 953482739712.0);
  // Linear in the microbatch size.
  EXPECT_DOUBLE_EQ(layer_forward_flops(gpt3(1), 4, 1), 4 * 7627861917696.0);
}

TEST(LayerForwardFlops, NonStandardFfnCountsEachGemm) {
  ModelSpec m = tiny(1);
  m.hidden = 4;
  m.ffn_hidden = 6;
  m.seq_len = 2;
  // b = 1, s = 2, h = 4, f = 6: QKV 2*2*4*12 = 192, scores 2*4*4 = 32,
  // values 32, out 2*2*4*4 = 64, MLP 2 * (2*2*4*6) = 192; total 512.
  EXPECT_DOUBLE_EQ(layer_forward_flops(m, 1, 1), 512.0);
}

TEST(LayerParameters, Gpt3Is12HSquaredPlus13H) {
  // 12 * 12288^2 + 13 * 12288 = 1811939328 + 159744
  EXPECT_EQ(layer_parameters(gpt3(1)), 1812099072);
}

TEST(LayerParameters, GeneralFfn) {
  ModelSpec m = tiny(1);
  m.hidden = 4;
  m.ffn_hidden = 6;
  // QKV 3*16 + 12 = 60, out 16 + 4 = 20, MLP 24 + 6 + 24 + 4 = 58, norms 16.
  EXPECT_EQ(layer_parameters(m), 154);
}

TEST(ModelFlops, ThreeForwardsOfLayersAndLogits) {
  Config c = make_config(tiny(2), 1, 1, 1);
  c.training.global_batch = 4;
  // Per sequence: layer 24*4*64 + 4*16*8 = 6656, twice, plus logits
  // 2*4*8*16 = 1024: 14336. Times 3 (F + B) and 4 sequences: 172032.
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(c), 172032.0);
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(make_config(std::nullopt, 1, 1, 1)), 0.0);
}

TEST(AttentionFlopShare, TheKernelOverEveryLayerAndTheLogits) {
  // tiny(2) with flash attention: each layer's GEMMs 24 s h^2 = 24*4*64 =
  // 6144, its kernel the causal half of the scores and values, 4 s (s/2) h
  // = 4*4*2*8 = 256; two layers 12800 and the logits 2 s h V = 1024:
  // 512 / 13824 = 1/27.
  ModelSpec m = tiny(2);
  m.attention = Attention::kFlash;
  EXPECT_DOUBLE_EQ(attention_flop_share(m), 512.0 / 13824.0);
  // s = 96: the kernel 4*96*48*8 = 147456 a layer, as much as the GEMMs
  // (24*96*64); the logits 2*96*8*16 = 24576: 294912 / 614400 = 0.48.
  m.seq_len = 96;
  EXPECT_DOUBLE_EQ(attention_flop_share(m), 0.48);
  // No fused kernel, no share: standard attention is GEMMs and softmax.
  m.attention = Attention::kStandard;
  EXPECT_EQ(attention_flop_share(m), 0.0);
}

// ---------------------------------------------------------------- activations

ParallelSpec tp(int t, bool sp) {
  ParallelSpec p;
  p.tensor = t;
  p.sequence_parallel = sp;
  return p;
}

// s b h = 2048 * 12288 = 25165824 throughout.
TEST(LayerActivationBytes, Gpt3TensorParallel) {
  // 5 a s / (h t) = 5 * 96 * 2048 / (12288 * 8) = 10: sbh (10 + 24/8 + 10).
  EXPECT_EQ(layer_activation_bytes(gpt3(1), 1, tp(8, false), Recompute::kNone), 578813952);
  // t = 1: sbh (10 + 24 + 80) = 25165824 * 114.
  EXPECT_EQ(layer_activation_bytes(gpt3(1), 1, tp(1, false), Recompute::kNone), 2868903936);
}

TEST(LayerActivationBytes, Gpt3SequenceParallel) {
  // sbh (34 + 5 a s / h) / t = 25165824 * (34 + 80) / 8.
  EXPECT_EQ(layer_activation_bytes(gpt3(1), 1, tp(8, true), Recompute::kNone), 358612992);
}

TEST(LayerActivationBytes, SelectiveDropsAttentionTerm) {
  // sbh (10 + 3) and sbh * 34 / 8.
  EXPECT_EQ(layer_activation_bytes(gpt3(1), 1, tp(8, false), Recompute::kSelective), 327155712);
  EXPECT_EQ(layer_activation_bytes(gpt3(1), 1, tp(8, true), Recompute::kSelective), 106954752);
}

TEST(LayerActivationBytes, FullKeepsOnlyTheInput) {
  // 2 sbh, and 2 sbh / 8 with sequence parallelism.
  EXPECT_EQ(layer_activation_bytes(gpt3(1), 1, tp(8, false), Recompute::kFull), 50331648);
  EXPECT_EQ(layer_activation_bytes(gpt3(1), 1, tp(8, true), Recompute::kFull), 6291456);
}

TEST(LayerActivationBytes, Fp32DoublesAllButTheMasks) {
  ModelSpec m = gpt3(1);
  m.dtype = DType::kFp32;
  // The 16-bit terms double, the one-byte dropout masks do not: whole
  // sbh (4 x 4 + 2) = 18 sbh, split 4 x 12 sbh / 8 = 6 sbh, scores a s^2 (4
  // + 4 + 1) / 8 = 452984832.
  EXPECT_EQ(layer_activation_bytes(m, 1, tp(8, false), Recompute::kNone),
            24 * 25165824LL + 452984832);
}

// ---------------------------------------------------------------- layer split

TEST(LayersPerStage, RemainderGoesToMiddleStages) {
  EXPECT_EQ(layers_per_stage(96, 8), std::vector<int>(8, 12));
  EXPECT_EQ(layers_per_stage(10, 4), (std::vector<int>{2, 3, 3, 2}));
  EXPECT_EQ(layers_per_stage(13, 5), (std::vector<int>{2, 3, 3, 3, 2}));
  // More extra layers than middle stages: every stage but the last.
  EXPECT_EQ(layers_per_stage(7, 4), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(layers_per_stage(5, 2), (std::vector<int>{3, 2}));
  EXPECT_EQ(layers_per_stage(3, 3), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(layers_per_stage(1, 1), (std::vector<int>{1}));
}

TEST(LayersPerStage, SumsToLayers) {
  for (int stages = 1; stages <= 16; ++stages) {
    for (int layers = stages; layers <= 3 * stages + 1; ++layers) {
      const std::vector<int> split = layers_per_stage(layers, stages);
      ASSERT_EQ(static_cast<int>(split.size()), stages);
      EXPECT_EQ(std::accumulate(split.begin(), split.end(), 0), layers);
      const auto [lo, hi] = std::minmax_element(split.begin(), split.end());
      EXPECT_LE(*hi - *lo, 1) << layers << " over " << stages;
    }
  }
}

TEST(LayersPerStageDeathTest, FewerLayersThanStages) {
  EXPECT_DEATH(static_cast<void>(layers_per_stage(3, 4)), "check failed");
}

TEST(BuildCostTable, FewerLayersThanStagesIsAnError) {
  Config c = make_config(tiny(3), 4, 1, 1);
  c.source = "x.yaml";
  Result<CostTable> table =
      build_cost_table(c, interleaved_stage_rank(c.num_stages(), c.parallel.pipeline));
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.error().message, HasSubstr("x.yaml: model.layers (3)"));
}

// ---------------------------------------------------------------- memory

TEST(StaticBytes, ZeroStagesOnAMiddleRank) {
  // Rank 1 of 3 holds one layer, Psi = 872; over d = 4. Per parameter: the
  // weights, the accumulated gradient and the optimizer's state, sharded
  // by ZeRO's stages in that order from the last (Megatron-LM's
  // distributed optimizer guide: bf16 with fp32 gradients 18 and 6 + 12/d,
  // fp32 16 and 8 + 8/d; fp16, Rajbhandari et al. 2020's K = 12).
  struct Case {
    DType dtype;
    int64_t expected[4];
  };
  const Case cases[] = {
      // bf16: 2 + 4 (fp32 gradient) + 12 (fp32 master, m, v).
      {DType::kBf16,
       {18 * 872,                // 15696
        6 * 872 + 12 * 872 / 4,  // 5232 + 2616 = 7848
        2 * 872 + 16 * 872 / 4,  // 1744 + 3488 = 5232
        18 * 872 / 4}},          // 3924
      // fp16: 2 + 2 + 12.
      {DType::kFp16,
       {16 * 872,                // 13952
        4 * 872 + 12 * 872 / 4,  // 3488 + 2616 = 6104
        2 * 872 + 14 * 872 / 4,  // 1744 + 3052 = 4796
        16 * 872 / 4}},          // 3488
      // fp32: 4 + 4 + 8 (m, v; no master copy).
      {DType::kFp32,
       {16 * 872,                // 13952
        8 * 872 + 8 * 872 / 4,   // 6976 + 1744 = 8720
        4 * 872 + 12 * 872 / 4,  // 3488 + 2616 = 6104
        16 * 872 / 4}},          // 3488
  };
  for (const Case& k : cases) {
    for (int zero = 0; zero <= 3; ++zero) {
      Config c = make_config(tiny(3), 3, 1, 4);
      c.model->dtype = k.dtype;
      c.training.zero_stage = zero;
      EXPECT_EQ(build_ok(c).static_bytes[1], k.expected[zero])
          << "dtype " << static_cast<int>(k.dtype) << " zero " << zero;
    }
  }
}

// Where the master weights live and what Adam's moments are kept in, bf16
// (training.master_weights, training.optimizer_moments), on the same rank of
// 872 parameters, ZeRO 0 and ZeRO 3 over d = 4: separate fp32 master weights
// 2 + 4 + 4 + 8 = 18 (above); fp32 parameters cast for compute, their
// gradients fp32 (FSDP2's mixed precision) 4 + 4 + 8 = 16; no master copy,
// weights and gradients in bf16, 2 + 2 + 8 = 12, and with Adam's m and v in
// bf16 too (PyTorch's Adam on bf16 parameters) 2 + 2 + 4 = 8; separate
// master weights with bf16 moments 2 + 4 + 4 + 4 = 14.
TEST(StaticBytes, WhereTheMasterWeightsLive) {
  struct Case {
    MasterWeights master;
    MomentDType moments;
    int64_t per_parameter;
  };
  const Case cases[] = {
      {MasterWeights::kSeparate, MomentDType::kFp32, 18},
      {MasterWeights::kParams, MomentDType::kFp32, 16},
      {MasterWeights::kNone, MomentDType::kFp32, 12},
      {MasterWeights::kNone, MomentDType::kModelDType, 8},
      {MasterWeights::kSeparate, MomentDType::kModelDType, 14},
  };
  for (const Case& k : cases) {
    Config c = make_config(tiny(3), 3, 1, 4);
    c.training.master_weights = k.master;
    c.training.optimizer_moments = k.moments;
    EXPECT_EQ(build_ok(c).static_bytes[1], k.per_parameter * 872)
        << to_string(k.master) << " " << to_string(k.moments);
    c.training.zero_stage = 3;
    EXPECT_EQ(build_ok(c).static_bytes[1], k.per_parameter * 872 / 4)
        << to_string(k.master) << " " << to_string(k.moments);
  }
}

// Gradients kept in bf16 beside the fp32 master weights
// (training.gradient_dtype: model_dtype): 2 + 2 + 4 + 8 = 16 bytes a
// parameter; fp32 gradients with no master copy: 2 + 4 + 8 = 14.
TEST(StaticBytes, TheGradientsDtype) {
  Config c = make_config(tiny(3), 3, 1, 4);
  c.training.gradient_dtype = GradientDType::kModelDType;
  EXPECT_EQ(build_ok(c).static_bytes[1], 16 * 872);
  c.training.master_weights = MasterWeights::kNone;
  c.training.gradient_dtype = GradientDType::kFp32;
  EXPECT_EQ(build_ok(c).static_bytes[1], 14 * 872);
}

TEST(StaticBytes, EmbeddingOnFirstAndTiedCopyOnLast) {
  const CostTable table = build_ok(make_config(tiny(3), 3, 1, 1));
  // First: 872 + V h + s h = 872 + 128 + 32 = 1032 parameters, 18 bytes each
  // in bf16 (ZeRO 0: 2 of weights, 4 of fp32 gradient, 12 of Adam's state).
  // Last: 872 + V h + the final layer norm's 2h = 1016.
  EXPECT_EQ(table.static_bytes, (std::vector<int64_t>{18 * 1032, 18 * 872, 18 * 1016}));
  // One rank holds both ends: one copy, 3 * 872 + 128 + 32 + 16 = 2792.
  EXPECT_EQ(build_ok(make_config(tiny(3), 1, 1, 1)).static_bytes,
            (std::vector<int64_t>{18 * 2792}));
  // Tensor parallelism splits it: 872 / 2 on the middle rank.
  EXPECT_EQ(build_ok(make_config(tiny(3), 3, 2, 1)).static_bytes[1], 18 * 436);
  // Untied, the last stage holds its own output matrix even on one rank.
  Config untied = make_config(tiny(3), 1, 1, 1);
  untied.model->tie_embeddings = false;
  EXPECT_EQ(build_ok(untied).static_bytes, (std::vector<int64_t>{18 * (2792 + 128)}));
}

// DualPipe holds the model twice, one chain of stages per direction: stage
// p+k is stage k of the same cut (its layers, times and bytes; the first
// stage of each chain takes the embedding, the last the logits), so each
// rank's static bytes are those of 1F1B's two ranks on the same cut: rank
// r holds stage r of one chain and stage p-1-r of the other.
TEST(DualPipeCosts, EachChainHoldsTheWholeModel) {
  const Config one = make_config(gpt3(4), 2, 1, 1, round_hardware(8, 1));
  Config dual = one;
  dual.schedule.kind = ScheduleKind::kDualPipe;
  dual.parallel.virtual_stages = 2;
  const Result<CostTable> single = build_cost_table(one, {0, 1});
  const Result<CostTable> both = build_cost_table(dual, {0, 1, 1, 0});
  ASSERT_TRUE(single.ok() && both.ok());
  for (int k = 0; k < 2; ++k) {
    for (const int stage : {k, 2 + k}) {
      const StageCost& got = both->stages[stage];
      const StageCost& cut = single->stages[k];
      EXPECT_EQ(got.forward, cut.forward) << "stage " << stage;
      EXPECT_EQ(got.backward, cut.backward) << "stage " << stage;
      EXPECT_EQ(got.weight_grad, cut.weight_grad) << "stage " << stage;
      EXPECT_EQ(got.activation_bytes, cut.activation_bytes) << "stage " << stage;
    }
  }
  // The ends differ from the middle: the embedding and the logits are priced.
  EXPECT_NE(single->stages[0].forward, single->stages[1].forward);
  const int64_t two_stages = single->static_bytes[0] + single->static_bytes[1];
  EXPECT_EQ(both->static_bytes, (std::vector<int64_t>{two_stages, two_stages}));
  // A split of the cut names its stages: p * v / 2 of them.
  dual.parallel.layers_per_stage = {1, 1, 1, 1};
  const Result<CostTable> bad = build_cost_table(dual, {0, 1, 1, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message,
              HasSubstr("it needs one per stage, p * v / 2 (DualPipe holds the model twice) = 2"));
  dual.parallel.layers_per_stage = {3, 1};
  const Result<CostTable> uneven = build_cost_table(dual, {0, 1, 1, 0});
  ASSERT_TRUE(uneven.ok()) << uneven.error().message;
  EXPECT_GT(uneven->stages[2].forward, uneven->stages[3].forward);  // 3 layers and the embedding
}

TEST(ActivationBytes, PerStageIsLayersTimesPerLayer) {
  Config c = make_config(gpt3(10), 4, 8, 1);
  const CostTable table = build_ok(c);
  // Layers {2, 3, 3, 2} at 578813952 bytes each.
  EXPECT_EQ(table.stages[0].activation_bytes, 2 * 578813952LL);
  EXPECT_EQ(table.stages[1].activation_bytes, 3 * 578813952LL);
  EXPECT_EQ(table.stages[3].activation_bytes, 2 * 578813952LL);
}

// What a rank holds for a while beyond its activations: with full
// recomputation, the layer being recomputed, whole (578813952 bytes at t = 8,
// the count of LayerActivationBytes.Gpt3TensorParallel); on the last stage,
// one microbatch's logits, s V / t = 2048 * 51200 / 8 = 13107200 values, in
// bf16 (2 bytes) with their fp32 softmax (4): 78643200 bytes. The larger of
// the two counts; peak memory adds it.
TEST(WorkingBytes, TheRecomputedLayerOrTheLogitsWhicheverIsLarger) {
  Config c = make_config(gpt3(10), 4, 8, 1);
  EXPECT_EQ(build_ok(c).working_bytes, (std::vector<int64_t>{0, 0, 0, 78643200}));
  c.training.recompute = Recompute::kFull;
  EXPECT_EQ(build_ok(c).working_bytes, (std::vector<int64_t>(4, 578813952)));
  c.training.recompute = Recompute::kSelective;  // recomputes the scores only: not counted
  EXPECT_EQ(build_ok(c).working_bytes, (std::vector<int64_t>{0, 0, 0, 78643200}));
}

// What the loss holds per logit beside the logits (cross_entropy_bytes): in
// bf16 PyTorch's F.cross_entropy keeps its bf16 output and, in the backward,
// its gradient, 2 + 2 + 2 = 6 bytes, as many as Megatron's logits with their
// fp32 softmax; cast to fp32 first, the logits 2 and the fp32 output and its
// gradient 4 + 4 = 10: 13107200 x 10 = 131072000 bytes on the last stage.
TEST(WorkingBytes, WhatTheLossHoldsBesideTheLogits) {
  Config c = make_config(gpt3(10), 4, 8, 1);
  c.training.cross_entropy = CrossEntropy::kTorch;
  EXPECT_EQ(build_ok(c).working_bytes, (std::vector<int64_t>{0, 0, 0, 78643200}));
  c.training.cross_entropy = CrossEntropy::kTorchFp32;
  EXPECT_EQ(build_ok(c).working_bytes, (std::vector<int64_t>{0, 0, 0, 131072000}));
  // Transformer Engine's fused kernel writes the gradient over the logits:
  // 2 bytes held a logit.
  c.training.cross_entropy = CrossEntropy::kFused;
  EXPECT_EQ(build_ok(c).working_bytes, (std::vector<int64_t>{0, 0, 0, 26214400}));
}

// W reads the inputs of the four linear layers: two layer-norm outputs
// (2sbh each, whole at t = 8 without sequence parallelism), the attention
// output (2sbh / t) and the GeLU output (2sbf / t = 8sbh / t):
// sbh (4 + 10 / 8) = 2048 * 12288 * 5.25 = 132120576 bytes per layer; with
// sequence parallelism all of it is split: sbh (4 + 10) / 8 = 44040192.
TEST(ActivationBytes, WeightGradientKeepsTheLinearInputs) {
  Config c = make_config(gpt3(10), 4, 8, 1);
  EXPECT_EQ(build_ok(c).stages[1].weight_grad_bytes, 3 * 132120576LL);
  c.parallel.sequence_parallel = true;
  EXPECT_EQ(build_ok(c).stages[1].weight_grad_bytes, 3 * 44040192LL);
  // Full recompute keeps only the layer input, 2sbh = 50331648 bytes: W's
  // part cannot be more than what the layer keeps.
  c.parallel.sequence_parallel = false;
  c.training.recompute = Recompute::kFull;
  const CostTable full = build_ok(c);
  EXPECT_EQ(full.stages[1].weight_grad_bytes, full.stages[1].activation_bytes);
  EXPECT_EQ(full.stages[1].activation_bytes, 3 * 50331648LL);
}

// ---------------------------------------------------------------- compute time

TEST(StageTime, Gpt3LayerForwardByHand) {
  const CostTable table = build_ok(gpt3_three_stages(Recompute::kNone));
  // Round hardware has no waves or tile overhead, so every GEMM here is
  // compute-bound: 24 b s h^2 + 4 b s^2 h = 7627861917696 FLOP / 1e14 s.
  // Memory-bound kernels, bytes: two norms 2 x 2 sbh, the QKV bias 2 x 2
  // x 3 sbh, the causal softmax 3 a s^2 (it reads the lower half of the
  // scores, 2 x a s^2 / 2, and writes them all), attention dropout 5 a s^2,
  // the context transpose 2 x 2 sbh, two bias-dropout-adds 2 x 7 sbh,
  // bias-GeLU 2 x 2 x 4 sbh (sbh = 25165824, a s^2 = 402653184):
  // 4580179968 / 1e12 s.
  EXPECT_NEAR(table.stages[1].forward, 80858799145, 1);
  // W: the four weight-gradient GEMMs, as many FLOPs as the linear forward,
  // 24 b s h^2 = 7421703487488 / 1e14 (each compute-bound: the largest
  // moves 5.08e9 bytes, 5.1 ms, in its 24.7 ms).
  EXPECT_NEAR(table.stages[1].weight_grad, 74217034875, 4);
}

TEST(StageTime, EmbeddingAndLogitsOnTheEnds) {
  const CostTable table = build_ok(gpt3_three_stages(Recompute::kNone));
  // Embedding forward, in bytes of 16 bits: lookup 2 x 2 sbh, learned
  // positions 3 x 2 sbh, dropout 5 sbh (sbh = 25165824): 377487360 / 1e12 s.
  // Its W: the dense gradient
  // of V h = 629145600 entries, zero-filled and accumulated (2 x 2 + 2 x 4
  // bytes each, fp32 gradients for bf16), plus the tokens' rows 2 x 2 sbh:
  // 7650410496 bytes.
  EXPECT_NEAR(table.stages[0].forward - table.stages[1].forward, 377487360, 2);
  EXPECT_NEAR(table.stages[0].weight_grad - table.stages[1].weight_grad, 7650410496, 4);
  // Head forward: final norm 2 x 2 sbh = 100663296 bytes, logits GEMM
  // 2 s h V = 2576980377600 FLOP / 1e14 s, cross-entropy 38 bytes x s V =
  // 3984588800 bytes: 0.025769803776 + 0.004085252096 s.
  EXPECT_NEAR(table.stages[2].forward - table.stages[1].forward, 29855055872, 2);
  // Its W: the logits' weight gradient, the same FLOPs.
  EXPECT_NEAR(table.stages[2].weight_grad - table.stages[1].weight_grad, 25769803776, 4);
}

// The loss's kernels, per logit (s V = 2048 x 51200 = 104857600 logits at
// 1e12 B/s: 104.8576 us a byte): Megatron's fp32 vocabulary-parallel loss
// moves 38 bytes forward and 14 backward; PyTorch's F.cross_entropy on bf16
// logits 4 x 2 (three reads of each row and the write of its log-softmax)
// and 5 x 2 (the zero-filled gradient, two reads of it, one of the saved
// output, the write); cast to fp32 first, 2 + 4 + 16 = 22 and 4 + 16 + 4 + 2
// = 26.
TEST(StageTime, TheLossKernelsBytes) {
  Config c = gpt3_three_stages(Recompute::kNone);
  const CostTable megatron = build_ok(c);
  c.training.cross_entropy = CrossEntropy::kTorch;
  const CostTable torch = build_ok(c);
  c.training.cross_entropy = CrossEntropy::kTorchFp32;
  const CostTable fp32 = build_ok(c);
  const double per_byte = 104857600;  // picoseconds per byte a logit
  EXPECT_NEAR(megatron.stages[2].forward - torch.stages[2].forward, (38 - 8) * per_byte, 2);
  EXPECT_NEAR(megatron.stages[2].forward - fp32.stages[2].forward, (38 - 22) * per_byte, 2);
  EXPECT_NEAR(megatron.stages[2].backward - torch.stages[2].backward, (14 - 10) * per_byte, 2);
  EXPECT_NEAR(fp32.stages[2].backward - megatron.stages[2].backward, (26 - 14) * per_byte, 2);
  // Transformer Engine's fused kernel: one read forward (2), a read and a
  // write backward (4).
  c.training.cross_entropy = CrossEntropy::kFused;
  const CostTable fused = build_ok(c);
  EXPECT_NEAR(megatron.stages[2].forward - fused.stages[2].forward, (38 - 2) * per_byte, 2);
  EXPECT_NEAR(megatron.stages[2].backward - fused.stages[2].backward, (14 - 4) * per_byte, 2);
  // Megatron-Core's compiled kernels: B + 20 = 22 forward, 8 + B = 10
  // backward.
  c.training.cross_entropy = CrossEntropy::kMegatronFused;
  const CostTable compiled = build_ok(c);
  EXPECT_NEAR(megatron.stages[2].forward - compiled.stages[2].forward, (38 - 22) * per_byte, 2);
  EXPECT_NEAR(megatron.stages[2].backward - compiled.stages[2].backward, (14 - 10) * per_byte, 2);
  // Only the last stage has the loss.
  EXPECT_EQ(torch.stages[1].forward, megatron.stages[1].forward);
}

TEST(StageTime, BackwardIsTheInputAndWeightGradients) {
  // B = I + W: a layer's input gradient repeats the forward's products (the
  // attention ones twice) with more memory traffic, so its I exceeds F; W
  // is the linear products alone, less than F. (Not the head's I: its
  // cross-entropy moves 38 bytes a logit forward, 14 back.)
  const CostTable table = build_ok(gpt3_three_stages(Recompute::kNone));
  const StageCost& layer = table.stages[1];
  EXPECT_GT(layer.backward - layer.weight_grad, layer.forward);
  EXPECT_LT(layer.weight_grad, layer.forward);
  for (const StageCost& stage : table.stages) EXPECT_LT(stage.weight_grad, stage.backward);
}

TEST(StageTime, FullRecomputeAddsAForward) {
  const CostTable none = build_ok(gpt3_three_stages(Recompute::kNone));
  const CostTable full = build_ok(gpt3_three_stages(Recompute::kFull));
  for (int s = 0; s < 3; ++s) {
    // The layers' forward again before I; the embedding and head are not recomputed.
    const Picos embedding_and_head = none.stages[s].forward - none.stages[1].forward;
    EXPECT_EQ(full.stages[s].backward - none.stages[s].backward,
              none.stages[s].forward - embedding_and_head)
        << "stage " << s;
    // Recompute is input-gradient work; W is unchanged.
    EXPECT_EQ(full.stages[s].weight_grad, none.stages[s].weight_grad);
  }
}

TEST(StageTime, SelectiveRecomputeRepaysAttentionCore) {
  const CostTable none = build_ok(gpt3_three_stages(Recompute::kNone));
  const CostTable selective = build_ok(gpt3_three_stages(Recompute::kSelective));
  // The two attention GEMMs, 4 b s^2 h = 206158430208 FLOP / 1e14 s, and
  // the causal softmax (3 a s^2), dropout (5 a s^2) and context transpose
  // (4 sbh) bytes, 3321888768 / 1e12 s.
  EXPECT_NEAR(selective.stages[1].backward - none.stages[1].backward, 5383473070, 2);
  EXPECT_EQ(selective.stages[1].forward, none.stages[1].forward);
}

TEST(StageTime, SelectiveRecomputeRerunsTheFlashKernel) {
  Config c = gpt3_three_stages(Recompute::kNone);
  c.model->attention = Attention::kFlash;
  c.hardware->flash_forward_efficiency = 0.5;
  c.hardware->flash_backward_efficiency = 0.5;
  const CostTable none = build_ok(c);
  c.training.recompute = Recompute::kSelective;
  const CostTable selective = build_ok(c);
  // The causal half of the scores, 2 b s^2 h = 103079215104 FLOP at half of
  // 1e14 (its 201326592 bytes would take a tenth of that).
  EXPECT_NEAR(selective.stages[1].backward - none.stages[1].backward, 2061584302, 2);
}

TEST(StageTime, TensorParallelAllReducesAreAdded) {
  // t = 2 on one node: each all-reduce of b s h * 2 = 50331648 bytes takes
  // 2 * 1e-6 + 50331648 / 1e11 = 5.0531648e-4 s; two each way, the
  // backward's after their weight gradients (no asynchronous backward).
  Config c = make_config(gpt3(3), 3, 2, 1, round_hardware(8, 1));
  c.parallel.tp_backward_overlap = false;
  const Picos all_reduce = 505316480;
  Config no_link = c;
  no_link.hardware->intra_node_bandwidth_gbps = 1e30;
  no_link.hardware->intra_node_latency_us = 0;
  const CostTable table = build_ok(c);
  const CostTable free_link = build_ok(no_link);
  EXPECT_NEAR(table.stages[1].forward - free_link.stages[1].forward, 2 * all_reduce, 2);
  EXPECT_NEAR(table.stages[1].backward - free_link.stages[1].backward, 2 * all_reduce, 2);
  // Sequence parallelism: reduce-scatter + all-gather cost one all-reduce.
  c.parallel.sequence_parallel = true;
  no_link.parallel.sequence_parallel = true;
  EXPECT_NEAR(build_ok(c).stages[1].forward - build_ok(no_link).stages[1].forward, 2 * all_reduce,
              4);
}

TEST(StageTime, TensorGroupAcrossNodesAndEndCollectives) {
  // One GPU a node: t = 2 all-reduces over the network, each
  // 2 * 5e-6 + 50331648 / 1e10 = 5.0431648e-3 s (AR below).
  Config c = make_config(gpt3(3), 3, 2, 1, round_hardware(1, 6));
  c.parallel.tp_backward_overlap = false;
  Config no_link = c;
  no_link.hardware->inter_node_bandwidth_gbps = 1e30;
  no_link.hardware->inter_node_latency_us = 0;
  const CostTable table = build_ok(c);
  const CostTable free_link = build_ok(no_link);
  const int64_t ar = 5043164800;
  auto comm = [&](int s, Picos StageCost::*f) {
    return table.stages[s].*f - free_link.stages[s].*f;
  };
  // A layer: two all-reduces forward, two backward. The embedding adds one
  // forward; the head one backward, and the loss's three all-reduces of
  // 4 bytes a token forward (2 * 5e-6 + 8192 / 1e10 each).
  EXPECT_NEAR(comm(1, &StageCost::forward), 2 * ar, 3);
  EXPECT_NEAR(comm(1, &StageCost::backward), 2 * ar, 3);
  EXPECT_NEAR(comm(0, &StageCost::forward), 3 * ar, 3);
  EXPECT_NEAR(comm(2, &StageCost::backward), 3 * ar, 3);
  EXPECT_NEAR(comm(2, &StageCost::forward), 2 * ar + 3 * 10819200, 6);
}

TEST(StageTime, ColumnParallelInputGradientsRunBesideTheirWeightGradients) {
  // t = 2 on one node, as above: the Q, K, V and the MLP up projections'
  // input-gradient all-reduces, 5.0531648e-4 s each, run beside their own
  // weight-gradient GEMMs: 2 h (3h / t) s = 927712935936 FLOP and
  // 2 h (4h / t) s = 1236950581248 FLOP at 1e14 FLOP/s, 9.28 and 12.37 ms,
  // so a whole backward hides both and an input gradient alone pays both.
  Config c = make_config(gpt3(3), 3, 2, 1, round_hardware(8, 1));
  Config no_link = c;
  no_link.hardware->intra_node_bandwidth_gbps = 1e30;
  no_link.hardware->intra_node_latency_us = 0;
  const Picos all_reduce = 505316480;
  const StageCost layer = build_ok(c).stages[1];
  const StageCost free_layer = build_ok(no_link).stages[1];
  EXPECT_EQ(layer.backward, free_layer.backward);
  EXPECT_NEAR(layer.backward_overlap, 2 * all_reduce, 2);
  EXPECT_NEAR(input_grad_time(layer) - input_grad_time(free_layer), 2 * all_reduce, 2);
  EXPECT_EQ(compute_time(layer, ActionKind::kBackwardInput), input_grad_time(layer));

  // At 1 GB/s each all-reduce (2 * 1e-6 + 50331648 / 1e9 s) outlasts its
  // GEMM: B hides the two GEMMs' times, 9277129359 + 12369505812 ps.
  c.hardware->intra_node_bandwidth_gbps = 1;
  const StageCost slow = build_ok(c).stages[1];
  EXPECT_NEAR(slow.backward_overlap, 9277129359 + 12369505812, 2);
  EXPECT_EQ(slow.backward, input_grad_time(slow) + slow.weight_grad - slow.backward_overlap);
}

// hardware.action_overhead_us reaches every stage, and every action pays it
// once: F, B, I and W each 250 us (250e6 ps) more than without it, so B
// (one action) 250 us less than its I and W (two).
TEST(StageTime, EveryActionPaysTheActionOverheadOnce) {
  Config c = make_config(gpt3(3), 3, 2, 1, round_hardware(8, 1));
  const CostTable none = build_ok(c);
  c.hardware->action_overhead_us = 250;
  const CostTable with = build_ok(c);
  ASSERT_EQ(with.stages.size(), none.stages.size());
  for (size_t s = 0; s < with.stages.size(); ++s) {
    EXPECT_EQ(with.stages[s].action_overhead, 250'000'000) << "stage " << s;
    for (const ActionKind kind : {ActionKind::kForward, ActionKind::kBackward,
                                  ActionKind::kBackwardInput, ActionKind::kBackwardWeight}) {
      EXPECT_EQ(compute_time(with.stages[s], kind) - compute_time(none.stages[s], kind),
                250'000'000)
          << "stage " << s << " " << action_kind_letter(kind);
    }
    EXPECT_EQ(compute_time(with.stages[s], ActionKind::kStep), 0);
  }
}

TEST(BuildCostTable, HardwareWithoutPeakIsAnError) {
  Config c = gpt3_three_stages(Recompute::kNone);
  c.hardware->peak_tflops_bf16 = 0;
  Result<CostTable> table =
      build_cost_table(c, interleaved_stage_rank(c.num_stages(), c.parallel.pipeline));
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.error().message, HasSubstr("hardware.peak_tflops_bf16"));
}

}  // namespace
}  // namespace cost_model_test
}  // namespace ppsim
