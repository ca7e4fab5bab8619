// Multi-head latent attention (model.mla): its parameters, FLOPs, kernels
// and kept activations, worked by hand for DeepSeek-V3's shape; the
// DeepSeek-V3 preset's counts; and the config's checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/config/config.h"
#include "sim/cost/cost_model.h"
#include "sim/cost/layer_ops.h"
#include "tests/unit/config_fixtures.h"
#include "tests/unit/cost_model_fixtures.h"

namespace ppsim {
namespace mla_test {
namespace {

using config_test::error_of;
using config_test::kModel;
using cost_model_test::deepseek_v3;
using ::testing::HasSubstr;

// DeepSeek-V3's attention, all heads: the query's down projection 7168 x
// 1536, its norm 1536 and up projection 1536 x 128 x (128 + 64); the keys'
// and values' down projection 7168 x (512 + 64), its norm 512 and up
// projection 512 x 128 x (128 + 128); the output 128 x 128 x 7168.
constexpr int64_t kAttention = 11010048 + 1536 + 37748736 + 4128768 + 512 + 16777216 + 117440512;

TEST(LatentAttentionParameters, DeepSeekV3ByHand) {
  EXPECT_EQ(kAttention, 187107328);
  // A dense layer: the attention, a SwiGLU MLP 3 x 7168 x 18432, two norms.
  ModelSpec dense = deepseek_v3();
  dense.moe.reset();
  EXPECT_EQ(layer_parameters(dense), kAttention + 396361728 + 2 * 7168);
  // A MoE layer: the router 7168 x 256 and 256 routed + 1 shared experts of
  // 3 x 7168 x 2048 = 44040192 each; per token 8 + 1 of them.
  EXPECT_EQ(moe_layer_parameters(deepseek_v3(), false),
            kAttention + 1835008 + 257 * int64_t{44040192} + 2 * 7168);
  EXPECT_EQ(moe_layer_parameters(deepseek_v3(), true),
            kAttention + 1835008 + 9 * int64_t{44040192} + 2 * 7168);
}

TEST(LatentAttentionParameters, DeepSeekV3ModelByHand) {
  // 3 dense layers of 583483392, 58 MoE layers of 11507286016 (585318400
  // per token), the input and output embeddings 2 x 129280 x 7168 and the
  // final norm 7168: 671.03 B and 37.55 B (the report: 671 B and 37 B).
  const int64_t rest = 2 * int64_t{129280} * 7168 + 7168;
  EXPECT_EQ(model_parameters(deepseek_v3()), 3 * int64_t{583483392} + 58 * 11507286016 + rest);
  EXPECT_EQ(model_parameters(deepseek_v3()), 671026404352);
  EXPECT_EQ(model_active_parameters(deepseek_v3()), 37552282624);
}

// Kimi K2 (configs/models/kimi-k2.yaml, from its config.json): DeepSeek-V3's
// attention with 64 heads, 384 routed experts and 1 shared, one dense layer,
// a vocabulary of 163840. The attention 7168 x 1536 + 1536 + 1536 x 64 x 192
// + 7168 x 576 + 512 + 512 x 64 x 256 + 64 x 128 x 7168 = 101124096; a dense
// layer adds 3 x 7168 x 18432 and two norms (497500160), a MoE layer the
// router 7168 x 384, two norms and 385 experts of 44040192 (17059364864; 9
// of them per token, 500252672). With the embeddings 2 x 163840 x 7168 and the final
// norm: 1026.41 B and 32.86 B, where the Kimi K2 report says 1.04 T and
// 32.6 B (the preset file says so).
TEST(LatentAttentionParameters, KimiK2ModelByHand) {
  const Result<Config> config = parse_config(
      "model: {preset: kimi-k2}\nhardware: {preset: h100-sxm, gpus_per_node: 1}\n"
      "training: {global_batch: 1}\n",
      "kimi.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const int64_t rest = 2 * int64_t{163840} * 7168 + 7168;
  EXPECT_EQ(model_parameters(*config->model), 497500160 + 60 * int64_t{17059364864} + rest);
  EXPECT_EQ(model_parameters(*config->model), 1026408209408);
  EXPECT_EQ(model_active_parameters(*config->model), 497500160 + 60 * int64_t{500252672} + rest);
}

TEST(LatentAttentionFlops, ADenseLayerByHand) {
  // One sequence of 4096 tokens, attention counted over the whole s x s
  // (as model FLOPs are): the five projections, Q K^T over 192 and P V over
  // 128 per head, the MLP.
  ModelSpec dense = deepseek_v3();
  dense.moe.reset();
  dense.attention = Attention::kStandard;
  const double s = 4096;
  const double h = 7168;
  const double projections = 2 * s * h * 1536 + 2 * s * 1536 * 128 * 192 + 2 * s * h * 576 +
                             2 * s * 512 * 128 * 256 + 2 * s * 128 * 128 * h;
  const double attention = 2 * s * s * 192 * 128 + 2 * s * s * 128 * 128;
  const double mlp = 2 * s * 3 * h * 18432;
  EXPECT_DOUBLE_EQ(layer_forward_flops(dense, 1, 1), projections + attention + mlp);
  EXPECT_DOUBLE_EQ(layer_forward_flops(dense, 1, 1), 6154151264256.0);
}

const Op* named(const OpList& ops, const std::string& name) {
  for (const Op& op : ops) {
    if (name == op.name) return &op;
  }
  return nullptr;
}

TEST(LatentAttentionOps, DownProjectionsRunWholeUpProjectionsSplitByHeads) {
  OpShape shape;
  shape.model = deepseek_v3();
  shape.model.moe.reset();
  shape.tensor = 8;
  const PieceOps ops = layer_ops(shape, TokenSlice{4096, 0});
  // The down projections keep their whole width on each of 8 tensor ranks;
  // the up projections and the output carry 16 of the 128 heads.
  EXPECT_EQ(named(ops.forward, "Q down")->n, 1536);
  EXPECT_EQ(named(ops.forward, "KV down")->n, 576);
  EXPECT_EQ(named(ops.forward, "Q up")->n, 16 * 192);
  EXPECT_EQ(named(ops.forward, "KV up")->n, 16 * 256);
  EXPECT_EQ(named(ops.forward, "attention output")->k, 16 * 128);
  // The flash kernel: 16 heads, s^2 / 2 causal pairs, 2 x (192 + 128) FLOPs
  // each; its backward 2.5 times that.
  const double flops = 2.0 * 16 * 4096.0 * 4096 / 2 * (192 + 128);
  EXPECT_DOUBLE_EQ(named(ops.forward, "flash attention")->flops, flops);
  EXPECT_DOUBLE_EQ(named(ops.input_grad, "flash attention backward")->flops, 2.5 * flops);
  EXPECT_NE(named(ops.weight_grad, "KV up weight gradient"), nullptr);
  EXPECT_EQ(named(ops.forward, "QKV"), nullptr);
}

// The longest lists a layer makes: DeepSeek-V3's mixture-of-experts layer
// with latent attention, tensor, sequence and expert parallelism and FP8
// (each linear product's operand cast first) stays within an OpList.
TEST(LatentAttentionOps, AnFp8MixtureOfExpertsLayerFitsTheList) {
  OpShape shape;
  shape.model = deepseek_v3();
  shape.tensor = 2;
  shape.sequence_parallel = true;
  shape.expert = 8;
  shape.fp8 = Fp8Recipe::kCurrent;
  const PieceOps ops = moe_layer_ops(shape, TokenSlice{4096, 0});
  // 36 kernels in bf16 (balanced routing: the experts' products once) and
  // a cast before each of the 9 linear input gradients: the shared and the
  // routed experts' down and up, the attention output, KV up and down, Q
  // up and down; and current scaling's all-reduce of the maximum of each of
  // the two output gradients sequence parallelism gathers.
  EXPECT_EQ(ops.input_grad.size(), 47);
  EXPECT_LT(ops.input_grad.size(), OpList::kCapacity);
  EXPECT_LT(ops.forward.size(), OpList::kCapacity);
}

TEST(LatentAttentionMemory, ADenseLayerKeepsByHand) {
  // t 1, b 1, s 4096, bf16, flash, no dropout: the norms' and linear inputs
  // 4 x s h B; Q and K 128 x 192 each, V and the output 128 x 128 each;
  // the log-sum-exp 4 s heads; the MLP's 2f + f; and the latents (query
  // and key-value, before and after their norms, and the shared rotary
  // key: 2 x (1536 + 512) + 64).
  ModelSpec dense = deepseek_v3();
  dense.moe.reset();
  const double s = 4096;
  const double bytes = 4 * s * 7168 * 2 + s * 2 * (256 * 192 + 256 * 128) + 4 * s * 128 +
                       s * 2 * 3 * 18432 + s * 2 * (2 * (1536 + 512) + 64);
  EXPECT_EQ(layer_activation_bytes(dense, 1, ParallelSpec{}, Recompute::kNone),
            static_cast<int64_t>(bytes));
  EXPECT_EQ(static_cast<int64_t>(bytes), 1395130368);
}

// ---------------------------------------------------------------- config

std::vector<ConfigOverride> with_mla(std::vector<ConfigOverride> more = {}) {
  std::vector<ConfigOverride> all = {{"model.mla.kv_lora_rank", "64"},
                                     {"model.mla.qk_nope_head_dim", "32"},
                                     {"model.mla.qk_rope_head_dim", "16"},
                                     {"model.mla.v_head_dim", "32"}};
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

TEST(LatentAttentionConfig, ReadsEveryKey) {
  const Result<Config> config = parse_config(config_test::yaml(kModel), "test.yaml",
                                             with_mla({{"model.mla.q_lora_rank", "128"}}));
  ASSERT_TRUE(config.ok()) << config.error().message;
  const MlaSpec& mla = *config->model->mla;
  EXPECT_EQ(mla.q_lora_rank, 128);
  EXPECT_EQ(mla.kv_lora_rank, 64);
  EXPECT_EQ(mla.qk_nope_head_dim, 32);
  EXPECT_EQ(mla.qk_rope_head_dim, 16);
  EXPECT_EQ(mla.v_head_dim, 32);
  EXPECT_EQ(config->model->qk_head_dim(), 48);
  EXPECT_EQ(config->model->v_head_dim(), 32);
}

TEST(LatentAttentionConfig, RequiredKeysRangesAndHeads) {
  EXPECT_THAT(error_of(kModel, {{"model.mla.qk_nope_head_dim", "32"},
                                {"model.mla.qk_rope_head_dim", "16"},
                                {"model.mla.v_head_dim", "32"}}),
              HasSubstr("model.mla.kv_lora_rank"));
  EXPECT_THAT(error_of(kModel, with_mla({{"model.mla.v_head_dim", "0"}})),
              HasSubstr("model.mla.v_head_dim: expected an integer from 1 to 4096"));
  EXPECT_THAT(error_of(kModel, with_mla({{"model.mla.rank", "8"}})),
              HasSubstr("model.mla.rank: unknown key"));
  EXPECT_THAT(error_of(kModel, with_mla({{"model.kv_heads", "4"}})),
              HasSubstr("model.kv_heads: expected model.heads (16) with model.mla"));
}

}  // namespace
}  // namespace mla_test
}  // namespace ppsim
