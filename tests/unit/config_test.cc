// Reading a config: what a valid one becomes (the defaults it gets, the
// shipped examples) and a file that cannot be read. Errors are in
// config_values_test.cc (one key's value), config_consistency_test.cc
// (keys against each other), config_hardware_test.cc, config_set_test.cc
// (--set) and config_schedule_test.cc; the model keys in config_model_test.cc.
#include "sim/config/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/config_fixtures.h"

namespace ppsim {
namespace config_test {
namespace {

using config_test::example;
using config_test::kIdeal;
using config_test::kModel;
using config_test::yaml;

TEST(ConfigTest, ParsesIdealizedConfig) {
  Result<Config> config = parse_config(yaml(kIdeal), "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->source, "test.yaml");
  EXPECT_FALSE(config->model.has_value());
  EXPECT_FALSE(config->hardware.has_value());
  EXPECT_EQ(config->parallel.pipeline, 4);
  EXPECT_EQ(config->parallel.virtual_stages, 1);
  EXPECT_EQ(config->num_microbatches(), 8);
  EXPECT_EQ(config->schedule.kind, ScheduleKind::k1f1b);
  EXPECT_EQ(config->fixed.forward_s, std::vector<double>{1.0});
  EXPECT_EQ(config->fixed.backward_s, std::vector<double>{2.0});
  EXPECT_TRUE(config->fixed.p2p_s.empty());
}

TEST(ConfigTest, FillsModelDefaultsAndReadsPreset) {
  Result<Config> config = parse_config(yaml(kModel), "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  ASSERT_TRUE(config->model.has_value());
  EXPECT_EQ(config->model->ffn_hidden, 4 * 2048);
  EXPECT_EQ(config->model->dtype, DType::kBf16);
  EXPECT_EQ(config->training.micro_batch, 1);
  EXPECT_EQ(config->training.recompute, Recompute::kNone);
  EXPECT_EQ(config->num_microbatches(), 32);
  ASSERT_TRUE(config->hardware.has_value());
  EXPECT_EQ(config->hardware->name, "a100-80gb");
  EXPECT_DOUBLE_EQ(config->hardware->peak_tflops_bf16, 312);
  EXPECT_DOUBLE_EQ(config->hardware->peak_tflops_fp32, 19.5);
  EXPECT_DOUBLE_EQ(config->hardware->memory_gib, 80);
  EXPECT_DOUBLE_EQ(config->hardware->hbm_bandwidth_gbps, 2039);
  EXPECT_DOUBLE_EQ(config->hardware->intra_node_bandwidth_gbps, 300);
  EXPECT_DOUBLE_EQ(config->hardware->inter_node_bandwidth_gbps, 25);
  EXPECT_EQ(config->hardware->num_gpus(), 8);
}

TEST(ConfigTest, ExplicitFfnHiddenIsKept) {
  Result<Config> config = parse_config(yaml(kModel), "test.yaml", {{"model.ffn_hidden", "5461"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->model->ffn_hidden, 5461);
}

TEST(ConfigTest, LoadsIdealExample) {
  Result<Config> config = load_config(example("ideal.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->source, example("ideal.yaml"));
  EXPECT_FALSE(config->model.has_value());
  EXPECT_EQ(config->parallel.pipeline, 4);
  EXPECT_EQ(config->num_microbatches(), 8);
  EXPECT_EQ(config->fixed.forward_s, std::vector<double>{1.0});
  EXPECT_EQ(config->fixed.backward_s, std::vector<double>{2.0});
  EXPECT_EQ(config->fixed.p2p_s, std::vector<double>{0.0});
  EXPECT_EQ(config->fixed.activation_bytes, std::vector<double>{1.0e9});
}

TEST(ConfigTest, LoadsGpt3SmallExample) {
  Result<Config> config = load_config(example("gpt3-1.3b-8gpu.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  ASSERT_TRUE(config->model.has_value());
  EXPECT_EQ(config->model->layers, 24);
  EXPECT_EQ(config->model->ffn_hidden, 8192);
  EXPECT_EQ(config->model->heads, 16);
  EXPECT_EQ(config->parallel.pipeline, 4);
  EXPECT_EQ(config->parallel.tensor, 2);
  EXPECT_EQ(config->num_microbatches(), 32);
  EXPECT_DOUBLE_EQ(config->hardware->peak_tflops_bf16, 312);
  EXPECT_EQ(config->hardware->num_gpus(), 8);
}

TEST(ConfigTest, LoadsGpt3LargeExample) {
  Result<Config> config = load_config(example("gpt3-175b-64gpu.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->model->hidden, 12288);
  EXPECT_EQ(config->model->ffn_hidden, 49152);
  EXPECT_EQ(config->num_stages(), 24);
  EXPECT_EQ(config->schedule.kind, ScheduleKind::kInterleaved1f1b);
  EXPECT_EQ(config->training.recompute, Recompute::kFull);
  EXPECT_EQ(config->hardware->nodes, 8);
  EXPECT_EQ(config->num_microbatches(), 64);
}

// The FP8 example: the H100 preset's FP8 peak (the datasheet's 3958 with
// sparsity, halved) and NeMo's layout, 64 GPUs in 4 x 4 x 2 x 2.
TEST(ConfigTest, LoadsFp8Example) {
  Result<Config> config = load_config(example("llama3-70b-h100-fp8.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->training.fp8, Fp8Recipe::kDelayed);
  EXPECT_EQ(config->hardware->peak_tflops_fp8, 1979);
  EXPECT_EQ(config->num_stages(), 20);
  EXPECT_EQ(config->num_microbatches(), 64);
}

TEST(ConfigTest, MissingFileIsAnError) {
  Result<Config> config = load_config("/nonexistent/x.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message, "/nonexistent/x.yaml: cannot read: No such file or directory");
}

TEST(ConfigTest, PerStageLists) {
  Result<Config> config = parse_config(yaml(kIdeal), "test.yaml",
                                       {{"parallel.virtual_stages", "2"},
                                        {"costs.fixed.forward_s", "[1, 1, 1, 1, 2, 2, 2, 2]"},
                                        {"costs.fixed.weight_grad_s", "[0.5]"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->fixed.forward_s.size(), 8u);
  EXPECT_EQ(config->fixed.forward_s[4], 2.0);
  EXPECT_EQ(config->fixed.weight_grad_s, std::vector<double>{0.5});
}

}  // namespace
}  // namespace config_test
}  // namespace ppsim
