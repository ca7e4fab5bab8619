// The rules that tie a config's keys together: costs or a model, the GPUs
// the parallel layout needs against the hardware's, and the divisibility of
// the batch, the heads and the layers. Each error names the key it points at.
#include <gtest/gtest.h>

#include <string>

#include "sim/config/config.h"
#include "tests/unit/config_fixtures.h"

namespace ppsim {
namespace config_consistency_test {
namespace {

using config_test::error_of;
using config_test::kIdeal;
using config_test::kModel;
using config_test::yaml;

TEST(ConfigTest, WeightGradMayNotExceedBackward) {
  EXPECT_EQ(error_of(std::string(kIdeal) + "    weight_grad_s: [1, 1, 2.5, 1]\n"),
            "test.yaml:12:20: costs.fixed.weight_grad_s: stage 2: weight_grad_s 2.5 is more than "
            "backward_s 2, of which it is a part");
}

TEST(ConfigTest, MissingModelWithoutFixedCosts) {
  EXPECT_EQ(error_of("training:\n  global_batch: 8\n"),
            "test.yaml:1:1: model: required unless costs.fixed gives forward_s and backward_s");
  EXPECT_EQ(error_of(R"(
training:
  global_batch: 8
costs:
  fixed:
    forward_s: 1
)"),
            "test.yaml:4:3: model: required unless costs.fixed gives forward_s and backward_s");
}

TEST(ConfigTest, GpuCountMismatch) {
  EXPECT_EQ(error_of(kModel, {{"parallel.data", "2"}}),
            "test.yaml:11:1: parallel: pipeline 4 x tensor 2 x data 2 = 16 GPUs, but hardware "
            "has 1 nodes x 8 = 8");
}

// A tensor group may span nodes (SC21's t = 16 and 32 on nodes of 8): its
// collectives then run over the network (cost_model_comm_test).
TEST(ConfigTest, TensorMaySpanNodes) {
  EXPECT_EQ(
      error_of(kModel,
               {{"parallel.pipeline", "1"}, {"parallel.tensor", "16"}, {"hardware.nodes", "2"}}),
      "(no error)");
}

TEST(ConfigTest, GlobalBatchNotDivisible) {
  EXPECT_EQ(error_of(R"(
training:
  global_batch: 30
  micro_batch: 4
costs:
  fixed: {forward_s: 1, backward_s: 2}
)"),
            "test.yaml:2:17: training.global_batch: 30 is not divisible by micro_batch 4 x data 1");
}

TEST(ConfigTest, HiddenDivisibleByHeads) {
  EXPECT_EQ(error_of(kModel, {{"model.heads", "15"}}),
            "--set model.heads=15: model.heads: expected a divisor of model.hidden (2048), or a "
            "model.head_dim to say each head's width, got \"15\"");
}

// schedule.flushes divides the iteration's microbatches into passes.
TEST(ConfigTest, FlushesDivideTheMicrobatches) {
  const Result<Config> config =
      parse_config(yaml(kModel), "test.yaml", {{"schedule.flushes", "4"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->schedule.flushes, 4);
  EXPECT_EQ(error_of(kModel, {{"schedule.flushes", "3"}}),
            "--set schedule.flushes=3: schedule.flushes: 3 does not divide the iteration's 32 "
            "microbatches (global_batch / (micro_batch x data))");
  EXPECT_EQ(error_of(kModel, {{"schedule.flushes", "0"}}),
            "--set schedule.flushes=0: schedule.flushes: expected an integer from 1 to "
            "1073741824, got \"0\"");
  EXPECT_EQ(error_of(kModel, {{"schedule.flushes", "2"}, {"schedule.kind", "zb-auto"}}),
            "--set schedule.flushes=2: schedule.flushes: cannot be combined with schedule.kind "
            "zb-auto, whose search places all the iteration's microbatches in one pass");
}

// model.head_dim: each head's width when it is not hidden / heads; then any
// head count that divides among the tensor ranks goes (14 of 2048).
TEST(ConfigTest, AHeadDimSaysEachHeadsWidth) {
  const Result<Config> config =
      parse_config(yaml(kModel), "test.yaml", {{"model.heads", "14"}, {"model.head_dim", "64"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->model->head_dim(), 64);
  EXPECT_EQ(config->model->qk_head_dim(), 64);
  EXPECT_EQ(error_of(kModel, {{"model.head_dim", "0"}}),
            "--set model.head_dim=0: model.head_dim: expected an integer from 1 to 4096, got "
            "\"0\"");
  // Multi-head latent attention gives its heads' widths itself.
  EXPECT_EQ(error_of(kModel, {{"model.head_dim", "64"},
                              {"model.mla.kv_lora_rank", "512"},
                              {"model.mla.qk_nope_head_dim", "128"},
                              {"model.mla.qk_rope_head_dim", "64"},
                              {"model.mla.v_head_dim", "128"}}),
            "--set model.head_dim=64: model.head_dim: expected no model.head_dim with model.mla: "
            "its qk_nope_head_dim, qk_rope_head_dim and v_head_dim give the heads' widths, got "
            "\"64\"");
}

TEST(ConfigTest, HeadsDivisibleByTensor) {
  std::string text = yaml(kModel);
  text.replace(text.find("heads: 16"), 9, "heads: 1");
  EXPECT_EQ(error_of(text),
            "test.yaml:4:10: model.heads: expected a multiple of parallel.tensor (2), got \"1\"");
}

TEST(ConfigTest, LayersCoverEveryStage) {
  std::string text = yaml(kModel);
  text.replace(text.find("layers: 24"), 10, "layers: 3");
  EXPECT_EQ(error_of(text),
            "test.yaml:2:11: model.layers: expected at least pipeline x virtual_stages = 4 (a "
            "layer per stage; parallel.layers_per_stage may leave stages empty), got \"3\"");
}

}  // namespace
}  // namespace config_consistency_test
}  // namespace ppsim
