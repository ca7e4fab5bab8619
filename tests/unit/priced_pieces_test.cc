// priced_pieces (`ppsim simulate --ops`): which pieces it lists, and that
// its phases add up to the times the simulator uses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/report/ops_report.h"
#include "tests/unit/cost_model_fixtures.h"

namespace ppsim {
namespace priced_pieces_test {
namespace {

using cost_model_test::gpt3;
using cost_model_test::make_config;
using cost_model_test::mixtral_8x7b;
using cost_model_test::round_hardware;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<PricedPiece> priced_ok(const Config& config) {
  Result<std::vector<PricedPiece>> pieces = priced_pieces(config);
  EXPECT_TRUE(pieces.ok()) << (pieces.ok() ? "" : pieces.error().message);
  return pieces.ok() ? *pieces : std::vector<PricedPiece>{};
}

std::vector<std::string> names(const std::vector<PricedPiece>& pieces) {
  std::vector<std::string> out;
  for (const PricedPiece& piece : pieces) out.emplace_back(piece.name);
  return out;
}

double sum_of_ops(const PricedPhase& phase) {
  double seconds = 0;
  for (const PricedOp& p : phase.ops) seconds += p.seconds;
  return seconds;
}

double sum_of_phases(const PricedPiece& piece) {
  double seconds = 0;
  for (const PricedPhase& phase : piece.phases) seconds += phase.seconds;
  return seconds;
}

const PricedOp* find_op(const PricedPhase& phase, const std::string& name) {
  for (const PricedOp& p : phase.ops) {
    if (name == p.op.name) return &p;
  }
  return nullptr;
}

TEST(PricedPieces, ADenseModelHasItsLayerTheEmbeddingAndTheHeadInThreePhases) {
  const std::vector<PricedPiece> pieces =
      priced_ok(make_config(gpt3(3), 3, 1, 1, round_hardware(8, 1)));
  ASSERT_EQ(names(pieces),
            (std::vector<std::string>{"dense layer", "embedding", "logits and loss"}));
  for (const PricedPiece& piece : pieces) {
    ASSERT_EQ(piece.phases.size(), 3u);
    EXPECT_STREQ(piece.phases[0].name, "forward");
    EXPECT_STREQ(piece.phases[1].name, "input gradient");
    EXPECT_STREQ(piece.phases[2].name, "weight gradient");
  }
  // The QKV projection of one GPT-3 175B sequence, by hand: 2 s h 3h FLOPs
  // at the round hardware's 100 TFLOP/s (its operands, (s h + 3 h^2) x 2
  // bytes = 0.96 GB, take 0.96 ms at 1 TB/s: compute-bound).
  const PricedOp* qkv = find_op(pieces[0].phases[0], "QKV");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->op.kind, OpKind::kGemm);
  EXPECT_NEAR(qkv->seconds, 2.0 * 2048 * 12288 * (3 * 12288) / 100e12, 1e-12);
}

// Each GEMM says which tile it runs and how many waves: Zero Bubble's
// 14.6B layer (h 5120, one 1024-token sequence) on 108 SMs with 256 x 128
// tiles and a half-height tile at 0.85. The attention output, 1024 x 5120 x
// 5120: 160 whole tiles take 2 waves for 1.48 of work, 320 half tiles 3
// for 2.96, which is faster (op_model_test.cc works its time). The MLP up
// projection, 1024 x 20480 x 5120: 640 whole tiles, 6 waves for 5.93,
// faster than 12 half-tile waves at 0.85.
TEST(PricedPieces, AGemmNamesItsTileAndWaves) {
  ModelSpec model = gpt3(2);
  model.hidden = 5120;
  model.ffn_hidden = 20480;
  model.heads = 40;
  model.seq_len = 1024;
  HardwareSpec hw = round_hardware(8, 1);
  hw.sm_count = 108;
  hw.gemm_tile_m = 256;
  hw.gemm_tile_n = 128;
  hw.gemm_half_tile_efficiency = 0.85;
  const std::vector<PricedPiece> pieces = priced_ok(make_config(model, 2, 1, 1, hw));
  ASSERT_FALSE(pieces.empty());
  const PricedOp* out = find_op(pieces[0].phases[0], "attention output");
  const PricedOp* up = find_op(pieces[0].phases[0], "MLP up");
  ASSERT_NE(out, nullptr);
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(out->tiling.tile_m, 128);
  EXPECT_EQ(out->tiling.tile_n, 128);
  EXPECT_EQ(out->tiling.waves, 3);
  EXPECT_DOUBLE_EQ(out->tiling.work, 320.0 / 108);
  EXPECT_EQ(up->tiling.tile_m * up->tiling.tile_n, 256 * 128);
  EXPECT_EQ(up->tiling.waves, 6);
  EXPECT_DOUBLE_EQ(up->tiling.work, 640.0 / 108);
  const std::string table = format_op_table("ops", pieces);
  EXPECT_THAT(table, HasSubstr("128x128, 3 waves for 2.96"));
  // A memory-bound kernel has no tiles.
  const PricedOp* norm = find_op(pieces[0].phases[0], "input norm");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->tiling.waves, 0);
}

TEST(PricedPieces, PhasesAddUpToThePieceTimesTheLayerSplitBalances) {
  const Config config = make_config(gpt3(3), 3, 1, 1, round_hardware(8, 1));
  const std::vector<PricedPiece> pieces = priced_ok(config);
  const Result<PieceTimes> times = piece_times(config);
  ASSERT_TRUE(times.ok()) << times.error().message;
  ASSERT_EQ(pieces.size(), 3u);
  // piece_times rounds each phase to picoseconds.
  EXPECT_NEAR(sum_of_phases(pieces[0]), times->layer_s, 3e-12);
  EXPECT_NEAR(sum_of_phases(pieces[1]), times->embedding_s, 3e-12);
  EXPECT_NEAR(sum_of_phases(pieces[2]), times->logits_s, 3e-12);
}

TEST(PricedPieces, WithoutOverlapAPhaseTakesItsOperationsOneAfterAnother) {
  Config config = make_config(gpt3(2), 1, 2, 1, round_hardware(2, 1));
  for (const PricedPiece& piece : priced_ok(config)) {
    for (const PricedPhase& phase : piece.phases) {
      EXPECT_NEAR(phase.seconds, sum_of_ops(phase), 1e-9 * phase.seconds)
          << piece.name << " " << phase.name;
    }
  }
}

TEST(PricedPieces, AnOverlappedCollectivePaysOnlyWhatOutlastsItsGemm) {
  Config config = make_config(gpt3(2), 1, 2, 1, round_hardware(2, 1));
  config.parallel.sequence_parallel = true;
  config.parallel.tp_comm_overlap = true;
  const std::vector<PricedPiece> pieces = priced_ok(config);
  ASSERT_FALSE(pieces.empty());
  const PricedPhase& forward = pieces[0].phases[0];
  int overlapped = 0;
  for (const PricedOp& p : forward.ops) overlapped += p.op.overlaps_gemm ? 1 : 0;
  // Sequence parallelism's all-gather before QKV and MLP up, and
  // reduce-scatter after the attention output and MLP down.
  EXPECT_EQ(overlapped, 4);
  EXPECT_LT(forward.seconds, sum_of_ops(forward));
}

TEST(PricedPieces, ShardedDataParallelismListsEachPiecesGatherAndReduceScatter) {
  // The tiny model (h 8, ffn 32, V 16, s 4, learned positions) on t = 2, d =
  // 4 in one node. A layer's 872 parameters, 436 per GPU: its bf16 weights
  // (872 bytes) all-gather in 3e-6 + 0.75 * 872 / 1e11 s, its fp32
  // gradients (1744 bytes) reduce-scatter in 3e-6 + 0.75 * 1744 / 1e11 s.
  // The embedding: (128 + 32) / 2 = 80 per GPU, 160 bytes of weights.
  Config config = make_config(cost_model_test::tiny(2), 1, 2, 4, round_hardware(8, 1));
  config.training.zero_stage = 3;
  const std::vector<PricedPiece> pieces = priced_ok(config);
  ASSERT_EQ(names(pieces),
            (std::vector<std::string>{"dense layer", "embedding", "logits and loss"}));
  EXPECT_DOUBLE_EQ(pieces[0].gather_seconds, 3e-6 + 0.75 * 872 / 1e11);
  EXPECT_DOUBLE_EQ(pieces[0].scatter_seconds, 3e-6 + 0.75 * 1744 / 1e11);
  EXPECT_DOUBLE_EQ(pieces[1].gather_seconds, 3e-6 + 0.75 * 160 / 1e11);
  EXPECT_THAT(format_op_table("", pieces), HasSubstr("ZeRO 3, per microbatch: weights"));
  // ZeRO 2 shards only the gradients; ZeRO 1 reduces once per iteration.
  config.training.zero_stage = 2;
  const std::vector<PricedPiece> zero2 = priced_ok(config);
  EXPECT_EQ(zero2[0].gather_seconds, 0);
  EXPECT_DOUBLE_EQ(zero2[0].scatter_seconds, 3e-6 + 0.75 * 1744 / 1e11);
  EXPECT_THAT(format_op_table("", zero2), HasSubstr("ZeRO 2, per microbatch: gradients"));
  config.training.zero_stage = 1;
  const std::vector<PricedPiece> zero1 = priced_ok(config);
  EXPECT_EQ(zero1[0].scatter_seconds, 0);
  EXPECT_THAT(format_op_table("", zero1), Not(HasSubstr("ZeRO")));
}

TEST(PricedPieces, AMixtureOfExpertsModelListsTheLayerKindsItHas) {
  ModelSpec model = mixtral_8x7b();
  model.layers = 2;
  const Config all_moe = make_config(model, 1, 1, 1, round_hardware(1, 1));
  EXPECT_EQ(names(priced_ok(all_moe)),
            (std::vector<std::string>{"MoE layer", "embedding", "logits and loss"}));
  model.moe->dense_layers = 1;
  const Config one_dense = make_config(model, 1, 1, 1, round_hardware(1, 1));
  EXPECT_EQ(names(priced_ok(one_dense)),
            (std::vector<std::string>{"dense layer", "MoE layer", "embedding", "logits and loss"}));
}

// A piece whose phases take 4, 4 and 2 ms, of which the GPU waits for the
// host `forward_wait` and 1 ms in the forward and input gradient.
PricedPiece waiting_piece(const char* name, double forward_wait) {
  PricedPiece piece;
  piece.name = name;
  piece.phases = {PricedPhase{"forward", {}, 4e-3, forward_wait},
                  PricedPhase{"input gradient", {}, 4e-3, 1e-3},
                  PricedPhase{"weight gradient", {}, 2e-3, 0}};
  return piece;
}

TEST(HostWaitNote, NamesThePieceThatWaitsMostFromATenthOn) {
  // 3 of 10 ms (30 %) against 1.5 of 10 (15 %): the MoE layer's.
  const std::string note =
      host_wait_note({waiting_piece("dense layer", 0.5e-3), waiting_piece("MoE layer", 2e-3)});
  EXPECT_EQ(note,
            "The GPU waits for the host's launches 3.000 ms of each MoE layer's 10.000 ms a "
            "microbatch (30 %; simulate --ops shows where): CUDA graphs "
            "(training.cuda_graph_scope) or a larger micro-batch would hide them.\n");
  // 0.9 of 10 ms is under a tenth: nothing said.
  PricedPiece little = waiting_piece("dense layer", 0);
  little.phases[1].host_wait_seconds = 0.9e-3;
  EXPECT_EQ(host_wait_note({little}), "");
}

}  // namespace
}  // namespace priced_pieces_test
}  // namespace ppsim
