// Mixture-of-experts layers (model.moe, parallel.expert): their parameters,
// all and per token, worked by hand for Mixtral 8x7B; and the config's
// checks (moe_cost_test.cc prices them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/config/config.h"
#include "sim/cost/cost_model.h"
#include "sim/plan/simulate.h"
#include "tests/unit/config_fixtures.h"
#include "tests/unit/cost_model_fixtures.h"

namespace ppsim {
namespace moe_test {
namespace {

using config_test::error_of;
using config_test::kModel;
using cost_model_test::mixtral_8x7b;
using ::testing::HasSubstr;

TEST(MoeParameters, MixtralLayerByHand) {
  // Attention: Q and O 4096^2 each, K and V 4096 x 1024 each = 41943040;
  // router 4096 x 8 = 32768; two RMSNorms 8192; one expert 3 x 4096 x
  // 14336 = 176160768.
  const int64_t shared_part = 41943040 + 32768 + 8192;
  EXPECT_EQ(moe_layer_parameters(mixtral_8x7b(), false), shared_part + 8 * int64_t{176160768});
  EXPECT_EQ(moe_layer_parameters(mixtral_8x7b(), true), shared_part + 2 * int64_t{176160768});
}

TEST(MoeParameters, MixtralModelByHand) {
  // 32 layers, the input and output embeddings 2 x 32000 x 4096, the final
  // norm 4096: 46702792704 (Hugging Face's count of the released weights),
  // 12879925248 active.
  EXPECT_EQ(model_parameters(mixtral_8x7b()), 46702792704);
  EXPECT_EQ(model_active_parameters(mixtral_8x7b()), 12879925248);
}

TEST(MoeParameters, DenseLayersAndSharedExpertsCount) {
  ModelSpec m = mixtral_8x7b();
  m.moe->dense_layers = 2;
  m.moe->shared_experts = 1;
  m.ffn_hidden = 14336;
  // Two layers keep the dense MLP (one expert's size here); the other 30
  // gain a shared expert, used by every token.
  const int64_t dense = 41943040 + 8192 + 176160768;
  const int64_t moe_all = 41943040 + 32768 + 8192 + 9 * int64_t{176160768};
  const int64_t moe_active = 41943040 + 32768 + 8192 + 3 * int64_t{176160768};
  const int64_t rest = 2 * int64_t{32000} * 4096 + 4096;
  EXPECT_EQ(model_parameters(m), 2 * dense + 30 * moe_all + rest);
  EXPECT_EQ(model_active_parameters(m), 2 * dense + 30 * moe_active + rest);
}

// ---------------------------------------------------------------- config

// The fixtures' model (p 4 t 2 d 1) with 8 experts, and the sequence
// parallelism MoE layers need under tensor parallelism.
std::vector<ConfigOverride> with_moe(std::vector<ConfigOverride> more = {}) {
  std::vector<ConfigOverride> all = {{"model.moe.experts", "8"},
                                     {"model.moe.top_k", "2"},
                                     {"model.moe.expert_ffn_hidden", "1024"},
                                     {"parallel.sequence_parallel", "true"}};
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

TEST(MoeConfig, ReadsEveryKey) {
  const Result<Config> config = parse_config(config_test::yaml(kModel), "test.yaml",
                                             with_moe({{"model.moe.shared_experts", "1"},
                                                       {"model.moe.dense_layers", "3"},
                                                       {"model.moe.capacity_factor", "1.25"},
                                                       {"model.moe.imbalance", "1.5"},
                                                       {"parallel.pipeline", "1"},
                                                       {"parallel.data", "4"},
                                                       {"parallel.expert", "4"}}));
  ASSERT_TRUE(config.ok()) << config.error().message;
  const MoeSpec& moe = *config->model->moe;
  EXPECT_EQ(moe.experts, 8);
  EXPECT_EQ(moe.top_k, 2);
  EXPECT_EQ(moe.expert_ffn_hidden, 1024);
  EXPECT_EQ(moe.shared_experts, 1);
  EXPECT_EQ(moe.dense_layers, 3);
  EXPECT_DOUBLE_EQ(moe.capacity_factor, 1.25);
  EXPECT_DOUBLE_EQ(moe.imbalance, 1.5);
  EXPECT_EQ(config->model->moe_layers(), 21);
  EXPECT_EQ(config->parallel.expert, 4);
}

TEST(MoeConfig, RequiredKeysAndRanges) {
  EXPECT_THAT(error_of(kModel, {{"model.moe.top_k", "2"}, {"model.moe.expert_ffn_hidden", "8"}}),
              HasSubstr("model.moe.experts"));
  EXPECT_THAT(error_of(kModel, with_moe({{"model.moe.top_k", "9"}})),
              HasSubstr("model.moe.top_k: expected an integer from 1 to 8"));
  EXPECT_THAT(error_of(kModel, with_moe({{"model.moe.dense_layers", "24"}})),
              HasSubstr("model.moe.dense_layers: expected an integer from 0 to 23"));
  EXPECT_THAT(error_of(kModel, with_moe({{"model.moe.imbalance", "0.5"}})),
              HasSubstr("model.moe.imbalance: expected 1 to experts (8)"));
  EXPECT_THAT(error_of(kModel, with_moe({{"model.moe.capacity_factor", "0"}})),
              HasSubstr("model.moe.capacity_factor"));
  EXPECT_THAT(error_of(kModel, with_moe({{"model.moe.expertz", "8"}})),
              HasSubstr("model.moe.expertz: unknown key"));
}

TEST(MoeConfig, ExpertParallelismSplitsExpertsOverDataRanks) {
  // kModel: p 4 t 2 d 1 on 8 GPUs.
  EXPECT_THAT(error_of(kModel, {{"parallel.expert", "2"}}),
              HasSubstr("parallel.expert: needs model.moe"));
  EXPECT_THAT(error_of(kModel, with_moe({{"parallel.expert", "2"}})),
              HasSubstr("parallel.expert: 2 must divide data x context (1 x 1)"));
  EXPECT_THAT(error_of(kModel, with_moe({{"parallel.pipeline", "1"},
                                         {"parallel.data", "4"},
                                         {"model.moe.experts", "6"},
                                         {"parallel.expert", "4"}})),
              HasSubstr("parallel.expert: 4 must divide model.moe.experts (6)"));
}

TEST(MoeConfig, SimulatesWithSequenceParallelismUnderTensorParallelism) {
  // kModel: p 4 t 2 d 1. Megatron-Core runs MoE layers under tensor
  // parallelism only with sequence parallelism; the loader says so, naming
  // the key and its place.
  EXPECT_THAT(error_of(kModel, with_moe({{"parallel.sequence_parallel", "false"}})),
              HasSubstr("parallel.tensor: 2 with model.moe needs parallel.sequence_parallel: "
                        "true"));
  const Result<Config> config = parse_config(config_test::yaml(kModel), "test.yaml", with_moe());
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Result<Simulation> sim = simulate(*config);
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  ASSERT_TRUE(sim->summary.throughput.mfu.has_value());
  EXPECT_GT(*sim->summary.throughput.mfu, 0);
  EXPECT_LE(*sim->summary.throughput.mfu, 1);
}

}  // namespace
}  // namespace moe_test
}  // namespace ppsim
