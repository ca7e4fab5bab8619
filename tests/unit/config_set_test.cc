// --set key.path=value: overrides and the sections they create, and errors
// that name the flag when the value came from it and the file otherwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config.h"
#include "tests/unit/config_fixtures.h"

namespace ppsim {
namespace config_set_test {
namespace {

using config_test::error_of;
using config_test::kIdeal;
using config_test::kModel;
using config_test::yaml;
using ::testing::StartsWith;

TEST(ConfigTest, SetOverridesAValue) {
  Result<Config> config = parse_config(yaml(kIdeal), "test.yaml",
                                       {{"parallel.pipeline", "2"}, {"schedule.kind", "gpipe"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->parallel.pipeline, 2);
  EXPECT_EQ(config->schedule.kind, ScheduleKind::kGpipe);
}

TEST(ConfigTest, SetCreatesMissingSections) {
  Result<Config> config = parse_config(
      yaml(kIdeal), "test.yaml",
      {{"training.recompute", "full"}, {"parallel.data", "2"}, {"costs.fixed.p2p_s", "0.25"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->training.recompute, Recompute::kFull);
  EXPECT_EQ(config->num_microbatches(), 4);
  EXPECT_EQ(config->fixed.p2p_s, std::vector<double>{0.25});

  Result<Config> model = parse_config(yaml(kIdeal), "test.yaml",
                                      {{"model",
                                        "{layers: 8, hidden: 64, heads: 4, "
                                        "seq_len: 16, vocab: 100, dtype: fp32}"},
                                       {"hardware.preset", "a100-80gb"},
                                       {"hardware.gpus_per_node", "4"}});
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ(model->model->ffn_hidden, 256);
  EXPECT_EQ(model->model->dtype, DType::kFp32);
  EXPECT_EQ(model->hardware->num_gpus(), 4);
}

TEST(ConfigTest, BadSetValueNamesTheFlag) {
  EXPECT_EQ(error_of(kIdeal, {{"parallel.pipeline", "0"}}),
            "--set parallel.pipeline=0: parallel.pipeline: expected an integer from 1 to 16384, "
            "got \"0\"");
  EXPECT_EQ(error_of(kIdeal, {{"costs.fixed.forward_s", "[1, -1]"}}),
            "--set costs.fixed.forward_s=[1, -1]: costs.fixed.forward_s: expected 1 value or 4 "
            "(one per stage: pipeline x virtual_stages), got 2");
  EXPECT_EQ(
      error_of(kIdeal, {{"parallel.pipline", "2"}}),
      "--set parallel.pipline=2: parallel.pipline: unknown key, expected one of pipeline, "
      "tensor, data, context, cp_comm, expert, virtual_stages, sequence_parallel, tp_comm_overlap, "
      "tp_backward_overlap, "
      "p2p_scatter_gather, layers_per_stage");
}

TEST(ConfigTest, SetIntoAnEmptySection) {
  Result<Config> config = parse_config(yaml(kIdeal) + "model:\n", "test.yaml",
                                       {{"parallel.pipeline", "1"}, {"model.layers", "2"}});
  ASSERT_FALSE(config.ok());  // the set model still lacks hidden, heads, ...
  EXPECT_EQ(config.error().message,
            "test.yaml:12:1: model.hidden: expected an integer from 1 to 131072, got nothing");
}

TEST(ConfigTest, SetInASectionItCreatedNamesTheFlag) {
  EXPECT_EQ(
      error_of(kIdeal, {{"model.layers", "8"}}),
      "--set model.layers=8: model.hidden: expected an integer from 1 to 131072, got nothing");
}

TEST(ConfigTest, CrossFieldErrorAfterSetPointsAtTheFile) {
  EXPECT_EQ(error_of(kModel, {{"parallel.pipeline", "8"}}),
            "test.yaml:11:1: parallel: pipeline 8 x tensor 2 x data 1 = 16 GPUs, but hardware "
            "has 1 nodes x 8 = 8");
}

TEST(ConfigTest, SetValueThatIsNotYaml) {
  EXPECT_THAT(error_of(kIdeal, {{"parallel.pipeline", "[4,"}}),
              StartsWith("--set parallel.pipeline=[4,: invalid YAML value: "));
}

TEST(ConfigTest, SetThroughAScalar) {
  EXPECT_EQ(error_of(kIdeal, {{"parallel.pipeline.x", "1"}}),
            "--set parallel.pipeline.x=1: parallel.pipeline: expected a map to set \"x\" in, got "
            "\"4\"");
}

TEST(ConfigTest, SetOnEmptyDocument) {
  Result<Config> config = parse_config(
      "", "empty.yaml",
      {{"training.global_batch", "4"}, {"costs.fixed", "{forward_s: 1, backward_s: 1}"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->num_microbatches(), 4);
}

TEST(ParseOverrideTest, SplitsAtTheFirstEquals) {
  Result<ConfigOverride> plain = parse_override("model.layers=48");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->path, "model.layers");
  EXPECT_EQ(plain->value, "48");
  Result<ConfigOverride> with_equals = parse_override("schedule.kind=a=b");
  ASSERT_TRUE(with_equals.ok());
  EXPECT_EQ(with_equals->path, "schedule.kind");
  EXPECT_EQ(with_equals->value, "a=b");
  Result<ConfigOverride> empty_value = parse_override("model.dtype=");
  ASSERT_TRUE(empty_value.ok());
  EXPECT_EQ(empty_value->value, "");
}

TEST(ParseOverrideTest, RejectsMalformedOverrides) {
  for (std::string_view bad :
       {"model.layers", "=48", "model..layers=48", ".layers=1", "model.=1"}) {
    Result<ConfigOverride> result = parse_override(bad);
    ASSERT_FALSE(result.ok()) << bad;
    EXPECT_EQ(result.error().message,
              "--set " + std::string(bad) + ": expected key.path=value, e.g. parallel.pipeline=8");
  }
}

}  // namespace
}  // namespace config_set_test
}  // namespace ppsim
