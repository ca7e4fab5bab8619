#include "sim/config/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace ppsim {
namespace {

// Plain gtest (the test target does not link gmock).
::testing::AssertionResult Contains(const std::string& text, std::string_view part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << part << "\"";
}

::testing::AssertionResult StartsWith(const std::string& text, std::string_view prefix) {
  if (text.starts_with(prefix)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\" does not start with \"" << prefix << "\"";
}

// Drops the newline after R"( so that line 1 is the first line of the text.
std::string yaml(std::string_view text) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return std::string(text);
}

std::string error_of(std::string_view text, const std::vector<ConfigOverride>& overrides = {}) {
  Result<Config> config = parse_config(yaml(text), "test.yaml", overrides);
  if (config.ok()) return "(no error)";
  return config.error().message;
}

// A valid idealized config; tests append to it or override it with --set.
constexpr std::string_view kIdeal = R"(
parallel:
  pipeline: 4
training:
  global_batch: 8
  micro_batch: 1
schedule:
  kind: 1f1b
costs:
  fixed:
    forward_s: 1.0
    backward_s: 2.0
)";

// A valid model config on one 8-GPU A100 node.
constexpr std::string_view kModel = R"(
model:
  layers: 24
  hidden: 2048
  heads: 16
  seq_len: 2048
  vocab: 51200
hardware:
  preset: a100-80gb
  gpus_per_node: 8
  nodes: 1
parallel:
  pipeline: 4
  tensor: 2
training:
  global_batch: 32
)";

std::string example(std::string_view name) {
  return std::string(PPSIM_SOURCE_DIR "/configs/examples/") + std::string(name);
}

TEST(ConfigTest, ParsesIdealizedConfig) {
  Result<Config> config = parse_config(yaml(kIdeal), "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->source, "test.yaml");
  EXPECT_FALSE(config->model.has_value());
  EXPECT_FALSE(config->hardware.has_value());
  EXPECT_EQ(config->parallel.pipeline, 4);
  EXPECT_EQ(config->parallel.virtual_stages, 1);
  EXPECT_EQ(config->num_microbatches(), 8);
  EXPECT_EQ(config->schedule.kind, "1f1b");
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

TEST(ConfigTest, InlineHardwareFieldOverridesPreset) {
  std::string text = yaml(kModel) + "schedule:\n  kind: gpipe\n";
  text.replace(text.find("  gpus_per_node"), 0, "  peak_tflops_bf16: 250\n");
  Result<Config> config = parse_config(text, "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_DOUBLE_EQ(config->hardware->peak_tflops_bf16, 250);
  EXPECT_DOUBLE_EQ(config->hardware->hbm_bandwidth_gbps, 2039);  // still the preset's
  EXPECT_EQ(config->schedule.kind, "gpipe");
}

TEST(ConfigTest, PresetsHoldDatasheetFigures) {
  Result<Config> h100 = parse_config(yaml(kModel), "test.yaml", {{"hardware.preset", "h100-sxm"}});
  ASSERT_TRUE(h100.ok()) << h100.error().message;
  EXPECT_DOUBLE_EQ(h100->hardware->peak_tflops_bf16, 989);
  EXPECT_DOUBLE_EQ(h100->hardware->intra_node_bandwidth_gbps, 450);
  EXPECT_DOUBLE_EQ(h100->hardware->inter_node_bandwidth_gbps, 50);
  Result<Config> h200 = parse_config(yaml(kModel), "test.yaml", {{"hardware.preset", "h200"}});
  ASSERT_TRUE(h200.ok()) << h200.error().message;
  EXPECT_DOUBLE_EQ(h200->hardware->memory_gib, 141);
  EXPECT_DOUBLE_EQ(h200->hardware->hbm_bandwidth_gbps, 4800);
  EXPECT_DOUBLE_EQ(h200->hardware->peak_tflops_bf16, h100->hardware->peak_tflops_bf16);
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
  EXPECT_EQ(config->schedule.kind, "interleaved-1f1b");
  EXPECT_EQ(config->training.recompute, Recompute::kFull);
  EXPECT_EQ(config->hardware->nodes, 8);
  EXPECT_EQ(config->num_microbatches(), 64);
}

TEST(ConfigTest, MissingFileIsAnError) {
  Result<Config> config = load_config("/nonexistent/x.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message, "/nonexistent/x.yaml: cannot read: No such file or directory");
}

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
            "data, virtual_stages, sequence_parallel, tp_comm_overlap, layers_per_stage");
}

TEST(ConfigTest, UnknownKeyInsideCostsFixed) {
  std::string error = error_of(std::string(kIdeal) + "    forward: 1\n");
  EXPECT_TRUE(StartsWith(error, "test.yaml:12:5: costs.fixed.forward: unknown key"));
  EXPECT_TRUE(Contains(error, "forward_s, backward_s, weight_grad_s, p2p_s, activation_bytes"));
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
  EXPECT_EQ(error_of("parallel: 4\n"),
            "test.yaml:1:11: parallel: expected a map with keys pipeline, tensor, data, "
            "virtual_stages, sequence_parallel, tp_comm_overlap, layers_per_stage, got \"4\"");
}

TEST(ConfigTest, DocumentMustBeAMap) {
  EXPECT_TRUE(StartsWith(error_of("- 1\n- 2\n"),
                         "test.yaml:1:1: expected a map with keys model, hardware"));
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

TEST(ConfigTest, UnknownScheduleKindListsTheKnownOnes) {
  std::string text = yaml(kIdeal);
  text.replace(text.find("kind: 1f1b"), 10, "kind: zb-h9");
  std::string error = error_of(text);
  EXPECT_TRUE(StartsWith(error, "test.yaml:7:9: schedule.kind: expected one of "));
  EXPECT_TRUE(Contains(error, "gpipe, 1f1b, interleaved-1f1b"));
  EXPECT_TRUE(Contains(error, "got \"zb-h9\""));
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

TEST(ConfigTest, MissingRequiredFields) {
  EXPECT_EQ(error_of("parallel:\n  pipeline: 2\n"),
            "test.yaml:1:1: training.global_batch: expected an integer from 1 to 1073741824, got "
            "nothing");
  std::string text = yaml(kModel);
  text.erase(text.find("  heads: 16\n"), 12);
  EXPECT_EQ(error_of(text), "test.yaml:1:1: model.heads: expected a positive integer, got nothing");
}

TEST(ConfigTest, ModelNeedsHardware) {
  std::string text = yaml(kModel);
  text.erase(text.find("hardware:"), text.find("parallel:") - text.find("hardware:"));
  EXPECT_EQ(error_of(text),
            "test.yaml:1:1: hardware: required when model is given, unless costs.profile gives "
            "the layer times");
}

TEST(ConfigTest, InlineHardwareNeedsEveryFigure) {
  std::string text = yaml(kModel);
  text.erase(text.find("  preset: a100-80gb\n"), 20);
  EXPECT_EQ(error_of(text),
            "test.yaml:7:1: hardware.memory_gib: expected a positive number (inline or from "
            "hardware.preset), got nothing");
}

TEST(ConfigTest, EmptyValueIsNotTheDefault) {
  EXPECT_EQ(error_of("parallel:\n  tensor:\n  data: 1\n"),
            "test.yaml:2:3: parallel.tensor: expected an integer from 1 to 1048576, got nothing");
}

TEST(ConfigTest, GpuCountMismatch) {
  EXPECT_EQ(error_of(kModel, {{"parallel.data", "2"}}),
            "test.yaml:11:1: parallel: pipeline 4 x tensor 2 x data 2 = 16 GPUs, but hardware "
            "has 1 nodes x 8 = 8");
}

TEST(ConfigTest, TensorWithinANode) {
  EXPECT_EQ(
      error_of(kModel,
               {{"parallel.pipeline", "1"}, {"parallel.tensor", "16"}, {"hardware.nodes", "2"}}),
      "--set parallel.tensor=16: parallel.tensor: expected at most hardware.gpus_per_node (8), got "
      "\"16\"");
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
            "--set model.heads=15: model.heads: expected a divisor of model.hidden (2048), got "
            "\"15\"");
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
            "layer per stage), got \"3\"");
}

TEST(ConfigTest, UnknownPresetListsTheAvailableOnes) {
  std::string text = yaml(kModel);
  text.replace(text.find("a100-80gb"), 9, "v100");
  std::string error = error_of(text);
  EXPECT_TRUE(
      StartsWith(error, "test.yaml:8:11: hardware.preset: expected one of the presets in "));
  EXPECT_TRUE(Contains(error, ": a100-80gb, cpu-2core, h100-sxm, h200, got \"v100\""));
}

TEST(ConfigTest, PresetNameCannotEscapeThePresetDirectory) {
  EXPECT_TRUE(Contains(error_of(kModel, {{"hardware.preset", "../examples/ideal"}}),
                       "got \"../examples/ideal\""));
}

TEST(ConfigTest, PresetDirectoryFromEnvironmentAndErrorsInPresets) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "ppsim_config_test_presets";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "good.yaml") << R"(name: tiny
memory_gib: 16
peak_tflops_bf16: 100
peak_tflops_fp16: 100
peak_tflops_fp32: 10
hbm_bandwidth_gbps: 900
intra_node_bandwidth_gbps: 100
inter_node_bandwidth_gbps: 10
)";
  std::ofstream(dir / "bad.yaml") << "name: bad\nmemory_gib: lots\n";
  setenv("PPSIM_HARDWARE_DIR", dir.c_str(), 1);
  EXPECT_EQ(hardware_preset_dir(), dir.string());
  Result<Config> good = parse_config(yaml(kModel), "test.yaml", {{"hardware.preset", "good"}});
  std::string bad = error_of(kModel, {{"hardware.preset", "bad"}});
  std::string missing = error_of(kModel);
  unsetenv("PPSIM_HARDWARE_DIR");
  std::filesystem::remove_all(dir);

  ASSERT_TRUE(good.ok()) << good.error().message;
  EXPECT_EQ(good->hardware->name, "tiny");
  EXPECT_DOUBLE_EQ(good->hardware->memory_gib, 16);
  EXPECT_DOUBLE_EQ(good->hardware->max_gemm_efficiency, 0.8);  // the documented default
  EXPECT_EQ(bad, (dir / "bad.yaml").string() +
                     ":2:13: hardware.memory_gib: expected a positive number, got \"lots\"");
  EXPECT_TRUE(Contains(missing, ": bad, good, got \"a100-80gb\""));
}

TEST(ConfigTest, YamlSyntaxError) {
  EXPECT_EQ(error_of("parallel:\n  pipeline: 4\n   tensor: 2\n"),
            "test.yaml:3:10: invalid YAML: illegal map value");
}

TEST(ConfigTest, SetOverridesAValue) {
  Result<Config> config = parse_config(yaml(kIdeal), "test.yaml",
                                       {{"parallel.pipeline", "2"}, {"schedule.kind", "gpipe"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->parallel.pipeline, 2);
  EXPECT_EQ(config->schedule.kind, "gpipe");
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
  EXPECT_EQ(error_of(kIdeal, {{"parallel.pipline", "2"}}),
            "--set parallel.pipline=2: parallel.pipline: unknown key, expected one of pipeline, "
            "tensor, data, virtual_stages, sequence_parallel, tp_comm_overlap, layers_per_stage");
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
  EXPECT_TRUE(StartsWith(error_of(kIdeal, {{"parallel.pipeline", "[4,"}}),
                         "--set parallel.pipeline=[4,: invalid YAML value: "));
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
}  // namespace ppsim

namespace ppsim {
namespace {

// kIdeal's schedule section is at lines 6-7; the custom tests replace the kind.
TEST(ConfigTest, CustomScheduleNeedsAFile) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.kind", "custom"}}),
            "test.yaml:6:1: schedule.file: expected the path of a CSV schedule, one row per rank "
            "(schedule.kind is custom), got nothing");
}

TEST(ConfigTest, CustomScheduleFileMustExist) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.kind", "custom"}, {"schedule.file", "no/such.csv"}}),
            "--set schedule.file=no/such.csv: schedule.file: cannot read no/such.csv: No such file "
            "or directory");
}

TEST(ConfigTest, FileOnlyForCustom) {
  std::string text(kIdeal);
  text.replace(text.find("kind: 1f1b"), 10, "kind: 1f1b\n  file: x.csv");
  EXPECT_EQ(error_of(text), "test.yaml:8:3: schedule.file: only for schedule.kind custom");
}

TEST(ConfigTest, CustomFileIsRelativeToTheConfig) {
  Result<Config> config = load_config(example("custom.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->schedule.kind, "custom");
  EXPECT_EQ(config->schedule.file, example("custom-2rank.csv"));
}

}  // namespace
}  // namespace ppsim

namespace ppsim {
namespace {

TEST(ConfigTest, SlicesOnlyForTerapipe) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.slices", "4"}}),
            "--set schedule.slices=4: schedule.slices: only for schedule.kind terapipe");
}

TEST(ConfigTest, TerapipeNeedsSlicesOrOptimal) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.kind", "terapipe"}}),
            "test.yaml:6:1: schedule.slices: expected a number of token slices per microbatch (or "
            "schedule.slicing: optimal), got nothing");
  Result<Config> config = parse_config(yaml(kIdeal), "test.yaml",
                                       {{"schedule.kind", "terapipe"}, {"schedule.slices", "4"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->schedule.slices, 4);
  EXPECT_EQ(config->schedule.slicing, SlicingMethod::kEven);
}

TEST(ConfigTest, OptimalSlicingNeedsTheModel) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.kind", "terapipe"}, {"schedule.slicing", "optimal"}}),
            "--set schedule.slicing=optimal: schedule.slicing: expected even when there is no "
            "model: the optimal cut needs the model's costs, got \"optimal\"");
}

TEST(ConfigTest, SlicesMustDivideTheSequence) {
  // kModel has seq_len 2048.
  EXPECT_EQ(error_of(kModel, {{"schedule.kind", "terapipe"}, {"schedule.slices", "3"}}),
            "--set schedule.slices=3: schedule.slices: expected a divisor of model.seq_len "
            "(2048), got \"3\"");
  EXPECT_EQ(error_of(kModel, {{"schedule.kind", "terapipe"},
                              {"schedule.slicing", "optimal"},
                              {"schedule.slice_granularity", "100"}}),
            "--set schedule.slice_granularity=100: schedule.slice_granularity: expected a divisor "
            "of model.seq_len (2048), got \"100\"");
  EXPECT_EQ(error_of(kModel, {{"schedule.kind", "terapipe"},
                              {"schedule.slicing", "optimal"},
                              {"schedule.slices", "4"}}),
            "--set schedule.slices=4: schedule.slices: not with schedule.slicing: optimal, which "
            "chooses the cut");
}

}  // namespace
}  // namespace ppsim

namespace ppsim {
namespace {

TEST(ConfigTest, MemoryLimitOnlyForZbAuto) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.memory_limit_gib", "40"}}),
            "--set schedule.memory_limit_gib=40: schedule.memory_limit_gib: only for "
            "schedule.kind zb-auto");
  Result<Config> config =
      parse_config(yaml(kIdeal), "test.yaml",
                   {{"schedule.kind", "zb-auto"}, {"schedule.memory_limit_gib", "40"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->schedule.memory_limit_gib, 40.0);
}

}  // namespace
}  // namespace ppsim
