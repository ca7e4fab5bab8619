// The cost model with token slices (TeraPipe): per-(stage, slice) times,
// bytes and transfers, and the slice cost function of the optimal cut.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "sim/cost/cost_model.h"
#include "tests/unit/cost_model_fixtures.h"

namespace ppsim {
namespace cost_model_slices_test {
namespace {

using ::testing::HasSubstr;

using namespace cost_model_test;  // NOLINT: the fixtures of this file

// ---------------------------------------------------------------- token slices

// Entry (stage, slice) of a table cut into `k` slices.
const StageCost& at(const CostTable& table, int stage, int slice) {
  return table.stages[stage * table.num_slices + slice];
}

TEST(Slices, NoLengthsIsOneSliceAsBefore) {
  const Config c = gpt3_three_stages(Recompute::kSelective);
  const CostTable whole = build_ok(c);
  EXPECT_EQ(whole.num_slices, 1);
  // One slice of the whole sequence is the whole sequence.
  const CostTable one = build_ok(c, {2048});
  ASSERT_EQ(one.num_slices, 1);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(one.stages[s].forward, whole.stages[s].forward);
    EXPECT_EQ(one.stages[s].backward, whole.stages[s].backward);
    EXPECT_EQ(one.stages[s].weight_grad, whole.stages[s].weight_grad);
    EXPECT_EQ(one.stages[s].activation_bytes, whole.stages[s].activation_bytes);
  }
  EXPECT_EQ(one.p2p_forward, whole.p2p_forward);
}

TEST(Slices, FixedCostsTakeTheSlicesShare) {
  // Lengths {1, 1, 2} of 4: a quarter, a quarter and a half of each figure.
  Config c = make_config(std::nullopt, 2, 1, 1);
  c.fixed.forward_s = {1.0};
  c.fixed.backward_s = {2.0, 3.0};
  c.fixed.weight_grad_s = {0.4};
  c.fixed.p2p_s = {0.25};
  c.fixed.activation_bytes = {1e9};
  const CostTable table = build_ok(c, {1, 1, 2});
  ASSERT_EQ(table.num_slices, 3);
  ASSERT_EQ(table.stages.size(), 6u);
  ASSERT_EQ(table.num_stages(), 2);
  EXPECT_EQ(at(table, 0, 0).forward, 250'000'000'000);
  EXPECT_EQ(at(table, 0, 1).forward, 250'000'000'000);
  EXPECT_EQ(at(table, 0, 2).forward, 500'000'000'000);
  EXPECT_EQ(at(table, 1, 2).forward, 500'000'000'000);
  EXPECT_EQ(at(table, 0, 2).backward, 1'000'000'000'000);
  EXPECT_EQ(at(table, 1, 0).backward, 750'000'000'000);
  EXPECT_EQ(at(table, 1, 2).backward, 1'500'000'000'000);
  EXPECT_EQ(at(table, 1, 1).weight_grad, 100'000'000'000);
  EXPECT_EQ(at(table, 1, 2).weight_grad, 200'000'000'000);
  EXPECT_EQ(at(table, 0, 0).activation_bytes, 250'000'000);
  EXPECT_EQ(at(table, 1, 2).activation_bytes, 500'000'000);
  // A transfer is a transfer: each slice's pays the whole p2p_s.
  EXPECT_EQ(table.p2p_forward, (std::vector<Picos>(3, 250'000'000'000)));
  EXPECT_EQ(table.p2p_backward, table.p2p_forward);
  // Per rank, nothing is cut.
  EXPECT_EQ(table.static_bytes.size(), 2u);
  EXPECT_EQ(table.grad_sync.size(), 2u);
}

TEST(Slices, FixedSharesRoundEachSliceOnItsOwn) {
  // 1 ps over lengths {1, 1} is half a picosecond each, which rounds away
  // from zero: the slices sum to 2 ps, not 1.
  Config c = make_config(std::nullopt, 1, 1, 1);
  c.fixed.forward_s = {1e-12};
  const CostTable table = build_ok(c, {1, 1});
  EXPECT_EQ(at(table, 0, 0).forward, 1);
  EXPECT_EQ(at(table, 0, 1).forward, 1);
}

TEST(Slices, LengthsMustCoverTheSequence) {
  Config c = gpt3_three_stages(Recompute::kNone);
  c.source = "x.yaml";
  const std::vector<int> stage_rank = interleaved_stage_rank(3, 3);
  Result<CostTable> short_cut = build_cost_table(c, stage_rank, {1024, 512});
  ASSERT_FALSE(short_cut.ok());
  EXPECT_THAT(short_cut.error().message, HasSubstr("x.yaml: "));
  EXPECT_THAT(short_cut.error().message, HasSubstr("schedule.slices"));
  EXPECT_THAT(short_cut.error().message, HasSubstr("1536"));
  EXPECT_THAT(short_cut.error().message, HasSubstr("2048"));

  Result<CostTable> empty_slice = build_cost_table(c, stage_rank, {2048, 0});
  ASSERT_FALSE(empty_slice.ok());
  EXPECT_THAT(empty_slice.error().message, HasSubstr("token slice 1 has 0 tokens"));
  // Without a model any positive lengths do; a negative one does not.
  Config fixed = make_config(std::nullopt, 1, 1, 1);
  fixed.fixed.forward_s = {1.0};
  EXPECT_TRUE(build_cost_table(fixed, {0}, {3, 5}).ok());
  const Result<CostTable> negative = build_cost_table(fixed, {0}, {3, -5});
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.error().message, HasSubstr("token slice 1 has -5 tokens"));
}

TEST(Slices, SmallSlicesPayTheWeightGradientBufferEachTime) {
  // Each slice's weight-gradient GEMMs read and write the fp32 gradient
  // buffer: for 256 tokens the QKV one moves 8 x 12288 x 36864 = 3.6e9
  // bytes, 3.6 ms at 1e12 B/s, more than its 2.3 ms of FLOPs at 1e14. So
  // the slices' W sum to more than the whole sequence's, which is
  // compute-bound.
  const Config c = gpt3_three_stages(Recompute::kNone);
  const CostTable whole = build_ok(c);
  const CostTable sliced = build_ok(c, {512, 1024, 256, 256});
  Picos weight_grad = 0;
  for (int j = 0; j < 4; ++j) weight_grad += at(sliced, 1, j).weight_grad;
  EXPECT_GT(weight_grad, whole.stages[1].weight_grad);
  // W does not see the context: the two slices of 256 tokens pay the same.
  EXPECT_EQ(at(sliced, 1, 2).weight_grad, at(sliced, 1, 3).weight_grad);
}

TEST(Slices, LaterSlicePaysForItsContext) {
  // Two halves of 1024: the second's attention core computes 1024 rows
  // against 2048 keys, the first's against 1024; every other operation of
  // the layer is the same for both. On round hardware the attention GEMMs
  // stay compute-bound: 2 x 2 b a l (c + l) d FLOP, 1024 x 1024 more pairs
  // = 51539607552 more FLOP, 5.1540e-4 s; softmax (2 x 2 bytes) and
  // dropout (5 bytes) over 96 x 1024 x 1024 more scores: 905969664 bytes,
  // 9.0597e-4 s.
  const CostTable table = build_ok(gpt3_three_stages(Recompute::kNone), {1024, 1024});
  EXPECT_NEAR(at(table, 1, 1).forward - at(table, 1, 0).forward, 1421365740, 2);
  EXPECT_EQ(at(table, 1, 1).weight_grad, at(table, 1, 0).weight_grad);
}

TEST(Slices, ActivationBytesByHand) {
  // tiny: h = 8, a = 2, b = 1, 16-bit, one layer a stage; lengths {1, 3}.
  // Slice 0 (l = 1, c = 0): l b h = 8; 34 * 8 + 5 a b l (c + l) = 272 + 10.
  // Slice 1 (l = 3, c = 1): l b h = 24; 34 * 24 + 5 * 2 * 3 * 4 = 816 + 120.
  const CostTable none = build_ok(make_config(tiny(3), 3, 1, 1), {1, 3});
  EXPECT_EQ(at(none, 0, 0).activation_bytes, 282);
  EXPECT_EQ(at(none, 1, 1).activation_bytes, 936);
  // The masked blocks above the diagonal are never kept: the slices hold
  // 5 a b (s^2 - 1 * 1 - 3 * 4) = 30 bytes less than the whole (1088 + 160).
  EXPECT_EQ(build_ok(make_config(tiny(3), 3, 1, 1)).stages[1].activation_bytes, 1248);

  // t = 2 with SP: (34 l b h + 5 a b l (c + l)) / 2 = (816 + 120) / 2.
  Config sp = make_config(tiny(3), 3, 2, 1);
  sp.parallel.sequence_parallel = true;
  EXPECT_EQ(at(build_ok(sp, {1, 3}), 1, 1).activation_bytes, 468);
  // Selective recompute drops the score term: 34 * 24; full keeps 2 l b h.
  Config selective = make_config(tiny(3), 3, 1, 1);
  selective.training.recompute = Recompute::kSelective;
  EXPECT_EQ(at(build_ok(selective, {1, 3}), 1, 1).activation_bytes, 816);
  Config full = make_config(tiny(3), 3, 1, 1);
  full.training.recompute = Recompute::kFull;
  EXPECT_EQ(at(build_ok(full, {1, 3}), 1, 1).activation_bytes, 48);
}

TEST(Slices, P2pBytesAndTimePerSlice) {
  // The placement of P2p.IntraOrInterNodeByPlacement: boundaries 0 and 2
  // inside a node (1 us, 100 GB/s), boundary 1 across (5 us, 10 GB/s).
  Config c = make_config(tiny(4), 4, 2, 2, round_hardware(8, 2));
  c.model->hidden = 1024;
  c.model->ffn_hidden = 4096;
  c.model->seq_len = 1024;
  const CostTable table = build_ok(c, {256, 768});
  // b l h * 2: 524288 and 1572864 bytes, per (boundary, slice).
  EXPECT_EQ(table.p2p_bytes,
            (std::vector<int64_t>{524288, 1572864, 524288, 1572864, 524288, 1572864}));
  const Picos intra0 = 6242880;    // 1e-6 + 524288 / 1e11 s
  const Picos intra1 = 16728640;   // 1e-6 + 1572864 / 1e11 s
  const Picos inter0 = 57428800;   // 5e-6 + 524288 / 1e10 s
  const Picos inter1 = 162286400;  // 5e-6 + 1572864 / 1e10 s
  EXPECT_EQ(table.p2p_forward,
            (std::vector<Picos>{intra0, intra1, inter0, inter1, intra0, intra1}));
  EXPECT_EQ(table.p2p_backward, table.p2p_forward);
  // Two slices pay the latency twice: one microsecond more than the whole.
  EXPECT_EQ(intra0 + intra1 - build_ok(c).p2p_forward[0], 1'000'000);

  c.parallel.sequence_parallel = true;
  EXPECT_EQ(build_ok(c, {256, 768}).p2p_bytes[1], 786432);  // / t
}

TEST(Slices, PerRankFiguresDoNotDependOnTheCut) {
  Config c = make_config(tiny(2), 2, 1, 2, round_hardware(8, 1));
  const CostTable whole = build_ok(c);
  const CostTable sliced = build_ok(c, {1, 2, 1});
  EXPECT_EQ(sliced.static_bytes, whole.static_bytes);
  EXPECT_EQ(sliced.grad_sync, whole.grad_sync);
  EXPECT_EQ(sliced.optimizer_step, whole.optimizer_step);
  EXPECT_EQ(sliced.pipeline_sync, whole.pipeline_sync);
}

std::function<double(int, int)> slice_cost_ok(const Config& c) {
  Result<std::function<double(int, int)>> fn = slice_cost_function(c);
  EXPECT_TRUE(fn.ok()) << fn.error().message;
  return fn.ok() ? *fn : [](int, int) { return 0.0; };
}

TEST(SliceCostFunction, WholeSequenceIsTheLargestStage) {
  // Layers {2, 3, 3, 2}: stages 1 and 2 have three layers and nothing else.
  const Config c = make_config(gpt3(10), 4, 1, 1, round_hardware(8, 1));
  const CostTable table = build_ok(c);
  const auto t = slice_cost_ok(c);
  EXPECT_EQ(t(2048, 0), picos_to_seconds(table.stages[1].forward + table.stages[1].backward));
  // Any slice is the (stage, slice) entry of build_cost_table.
  const CostTable sliced = build_ok(c, {512, 1536});
  EXPECT_EQ(t(1536, 512), picos_to_seconds(at(sliced, 1, 1).forward + at(sliced, 1, 1).backward));
  // Longer context, longer slice.
  EXPECT_GT(t(512, 1536), t(512, 0));
}

TEST(SliceCostFunction, EvenSplitTakesTheSlowestStage) {
  // One layer a stage: the last also computes the logits and is the bottleneck.
  const Config c = gpt3_three_stages(Recompute::kNone);
  const CostTable table = build_ok(c);
  ASSERT_GT(table.stages[2].forward, table.stages[0].forward);
  EXPECT_EQ(slice_cost_ok(c)(2048, 0),
            picos_to_seconds(table.stages[2].forward + table.stages[2].backward));
}

TEST(SliceCostFunction, TensorParallelLinkOfTheStagesRank) {
  // One GPU a node: t = 2 collectives cross the network, as in the table.
  const Config c = make_config(gpt3(3), 3, 2, 1, round_hardware(1, 6));
  const CostTable table = build_ok(c, {1024, 1024});
  EXPECT_EQ(slice_cost_ok(c)(1024, 1024),
            picos_to_seconds(at(table, 2, 1).forward + at(table, 2, 1).backward));
}

// A split written for other stages (an interleaved config's p * v entries,
// compared under a schedule of one stage per rank) is the user's error, named,
// as build_cost_table names it; not a failed check.
TEST(SliceCostFunction, SplitForOtherStagesIsAnError) {
  Config c = gpt3_three_stages(Recompute::kNone);
  c.source = "run.yaml";
  c.parallel.layers_per_stage = {1, 1, 1, 0, 0, 0};
  const Result<std::function<double(int, int)>> fn = slice_cost_function(c);
  ASSERT_FALSE(fn.ok());
  EXPECT_EQ(fn.error().message,
            "run.yaml: parallel.layers_per_stage has 6 entries; it needs one per stage, p * v = 3");
}

}  // namespace
}  // namespace cost_model_slices_test
}  // namespace ppsim
