// Reading each key of a config: unknown and duplicate keys, values of the
// wrong type, out of range or missing, malformed YAML. Every error names
// file:line:column and the key path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/config/config.h"
#include "tests/unit/config_fixtures.h"

namespace ppsim {
namespace config_values_test {
namespace {

using config_test::error_of;
using config_test::kIdeal;
using config_test::kModel;
using config_test::yaml;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ConfigTest, UnknownTopLevelKey) {
  EXPECT_EQ(error_of(std::string(kIdeal) + "modle:\n  layers: 2\n"),
            "test.yaml:12:1: modle: unknown key, expected one of model, hardware, parallel, "
            "training, schedule, costs");
}

TEST(ConfigTest, UnknownNestedKey) {
  EXPECT_EQ(error_of(R"(
parallel:
  pipeline: 4
  pipelines: 4
)"),
            "test.yaml:3:3: parallel.pipelines: unknown key, expected one of pipeline, tensor, "
            "data, context, cp_comm, expert, virtual_stages, sequence_parallel, tp_comm_overlap, "
            "tp_backward_overlap, "
            "p2p_scatter_gather, layers_per_stage");
}

TEST(ConfigTest, UnknownKeyInsideCostsFixed) {
  std::string error = error_of(std::string(kIdeal) + "    forward: 1\n");
  EXPECT_THAT(error, StartsWith("test.yaml:12:5: costs.fixed.forward: unknown key"));
  EXPECT_THAT(error, HasSubstr("forward_s, backward_s, weight_grad_s, p2p_s, activation_bytes, "
                               "weight_grad_bytes, forward_comm_s, backward_comm_s"));
}

TEST(ConfigTest, DuplicateKey) {
  EXPECT_EQ(error_of(R"(
training:
  global_batch: 8
  global_batch: 16
)"),
            "test.yaml:3:3: training.global_batch: duplicate key");
}

TEST(ConfigTest, StringWhereIntegerExpected) {
  EXPECT_EQ(
      error_of(R"(
parallel:
  pipeline: eight
)"),
      "test.yaml:2:13: parallel.pipeline: expected an integer from 1 to 16384, got \"eight\"");
}

TEST(ConfigTest, ZeroAndNegativeIntegers) {
  EXPECT_EQ(error_of(R"(
parallel:
  tensor: 0
)"),
            "test.yaml:2:11: parallel.tensor: expected an integer from 1 to 1048576, got \"0\"");
  EXPECT_EQ(
      error_of(R"(
training:
  global_batch: 8
  micro_batch: -2
)"),
      "test.yaml:3:16: training.micro_batch: expected an integer from 1 to 65536, got \"-2\"");
}

TEST(ConfigTest, FractionalInteger) {
  EXPECT_EQ(error_of("training:\n  global_batch: 8.5\n"),
            "test.yaml:2:17: training.global_batch: expected an integer from 1 to 1073741824, got "
            "\"8.5\"");
}

TEST(ConfigTest, ListWhereIntegerExpected) {
  EXPECT_EQ(error_of("parallel:\n  data: [1, 2]\n"),
            "test.yaml:2:9: parallel.data: expected an integer from 1 to 1048576, got \"[1, 2]\"");
}

TEST(ConfigTest, SectionMustBeAMap) {
  EXPECT_EQ(
      error_of("parallel: 4\n"),
      "test.yaml:1:11: parallel: expected a map with keys pipeline, tensor, data, context, "
      "cp_comm, expert, virtual_stages, sequence_parallel, tp_comm_overlap, tp_backward_overlap, "
      "p2p_scatter_gather, "
      "layers_per_stage, got \"4\"");
}

TEST(ConfigTest, DocumentMustBeAMap) {
  EXPECT_THAT(error_of("- 1\n- 2\n"),
              StartsWith("test.yaml:1:1: expected a map with keys model, hardware"));
}

TEST(ConfigTest, BoolExpected) {
  EXPECT_EQ(error_of("parallel:\n  sequence_parallel: maybe\n"),
            "test.yaml:2:22: parallel.sequence_parallel: expected true or false, got \"maybe\"");
}

TEST(ConfigTest, NegativeNumber) {
  std::string text = yaml(kIdeal);
  text.replace(text.find("2.0"), 3, "-2.0");
  EXPECT_EQ(error_of(text),
            "test.yaml:11:17: costs.fixed.backward_s: expected a number >= 0, got \"-2.0\"");
}

TEST(ConfigTest, BadEnums) {
  EXPECT_EQ(error_of(std::string(kModel) + "  recompute: some\n"),
            "test.yaml:16:14: training.recompute: expected one of none, selective, full, got "
            "\"some\"");
  EXPECT_EQ(error_of(std::string(kModel) + "  zero_stage: 4\n"),
            "test.yaml:16:15: training.zero_stage: expected an integer from 0 to 3, got \"4\"");
  EXPECT_EQ(error_of(kModel, {{"model.dtype", "int8"}}),
            "--set model.dtype=int8: model.dtype: expected one of bf16, fp16, fp32, got \"int8\"");
}

TEST(ConfigTest, BadListLength) {
  std::string text = yaml(kIdeal);
  text.replace(text.find("1.0"), 3, "[1, 2, 3]");
  EXPECT_EQ(error_of(text),
            "test.yaml:10:16: costs.fixed.forward_s: expected 1 value or 4 (one per stage: "
            "pipeline x virtual_stages), got 3");
}

TEST(ConfigTest, BadListElementNamesItsIndex) {
  std::string text = yaml(kIdeal);
  text.replace(text.find("1.0"), 3, "[1, 1, x, 1]");
  EXPECT_EQ(error_of(text),
            "test.yaml:10:23: costs.fixed.forward_s[2]: expected a number >= 0, got \"x\"");
}

TEST(ConfigTest, MissingRequiredFields) {
  EXPECT_EQ(error_of("parallel:\n  pipeline: 2\n"),
            "test.yaml:1:1: training.global_batch: expected an integer from 1 to 1073741824, got "
            "nothing");
  std::string text = yaml(kModel);
  text.erase(text.find("  heads: 16\n"), 12);
  EXPECT_EQ(error_of(text), "test.yaml:1:1: model.heads: expected a positive integer, got nothing");
}

TEST(ConfigTest, EmptyValueIsNotTheDefault) {
  EXPECT_EQ(error_of("parallel:\n  tensor:\n  data: 1\n"),
            "test.yaml:2:3: parallel.tensor: expected an integer from 1 to 1048576, got nothing");
}

TEST(ConfigTest, YamlSyntaxError) {
  EXPECT_EQ(error_of("parallel:\n  pipeline: 4\n   tensor: 2\n"),
            "test.yaml:3:10: invalid YAML: illegal map value");
}

}  // namespace
}  // namespace config_values_test
}  // namespace ppsim
