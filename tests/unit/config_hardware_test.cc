// The hardware section: presets (configs/hardware/, $PPSIM_HARDWARE_DIR)
// and their datasheet figures, inline figures that override them, and the
// errors of a missing, unknown or malformed preset.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/config/config.h"
#include "tests/unit/config_fixtures.h"

namespace ppsim {
namespace config_hardware_test {
namespace {

using config_test::error_of;
using config_test::kModel;
using config_test::yaml;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ConfigTest, InlineHardwareFieldOverridesPreset) {
  std::string text = yaml(kModel) + "schedule:\n  kind: gpipe\n";
  text.replace(text.find("  gpus_per_node"), 0, "  peak_tflops_bf16: 250\n");
  Result<Config> config = parse_config(text, "test.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_DOUBLE_EQ(config->hardware->peak_tflops_bf16, 250);
  EXPECT_DOUBLE_EQ(config->hardware->hbm_bandwidth_gbps, 2039);  // still the preset's
  EXPECT_EQ(config->schedule.kind, ScheduleKind::kGpipe);
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
  // The A100 40GB: the 80GB part's chip with 40 GB of HBM2 at 1,555 GB/s (its datasheet).
  Result<Config> a40 = parse_config(yaml(kModel), "test.yaml", {{"hardware.preset", "a100-40gb"}});
  ASSERT_TRUE(a40.ok()) << a40.error().message;
  EXPECT_DOUBLE_EQ(a40->hardware->memory_gib, 40);
  EXPECT_DOUBLE_EQ(a40->hardware->hbm_bandwidth_gbps, 1555);
  EXPECT_DOUBLE_EQ(a40->hardware->peak_tflops_bf16, 312);
  // The H800: the H100's chip, memory and network with NVLink at 400 GB/s both ways (its
  // datasheet), 200 a direction.
  Result<Config> h800 = parse_config(yaml(kModel), "test.yaml", {{"hardware.preset", "h800"}});
  ASSERT_TRUE(h800.ok()) << h800.error().message;
  EXPECT_DOUBLE_EQ(h800->hardware->intra_node_bandwidth_gbps, 200);
  EXPECT_DOUBLE_EQ(h800->hardware->peak_tflops_bf16, h100->hardware->peak_tflops_bf16);
  EXPECT_DOUBLE_EQ(h800->hardware->hbm_bandwidth_gbps, h100->hardware->hbm_bandwidth_gbps);
  EXPECT_DOUBLE_EQ(h800->hardware->inter_node_bandwidth_gbps, 50);
  // The B200's datasheet figures: dense tensor peaks half the "with sparsity" ones.
  Result<Config> b200 = parse_config(yaml(kModel), "test.yaml", {{"hardware.preset", "b200"}});
  ASSERT_TRUE(b200.ok()) << b200.error().message;
  EXPECT_DOUBLE_EQ(b200->hardware->memory_gib, 180);
  EXPECT_DOUBLE_EQ(b200->hardware->peak_tflops_bf16, 4500.0 / 2);
  EXPECT_DOUBLE_EQ(b200->hardware->peak_tflops_fp8, 9000.0 / 2);
  EXPECT_DOUBLE_EQ(b200->hardware->hbm_bandwidth_gbps, 7700);
  EXPECT_DOUBLE_EQ(b200->hardware->intra_node_bandwidth_gbps, 1800.0 / 2);
  EXPECT_DOUBLE_EQ(b200->hardware->sm_count, 148);
  // Compute capability 10.0: FP8 GEMMs of any layout, no transposes; the H100's 9.0 needs them.
  EXPECT_FALSE(b200->hardware->fp8_gemm_needs_transposes());
  EXPECT_TRUE(h100->hardware->fp8_gemm_needs_transposes());
  // The GB200 is the same GPU at up to 1200 W: the datasheet's higher peaks, one NIC a GPU
  // of whatever part of an NVL72 rack a config's node is.
  Result<Config> gb200 = parse_config(yaml(kModel), "test.yaml", {{"hardware.preset", "gb200"}});
  ASSERT_TRUE(gb200.ok()) << gb200.error().message;
  EXPECT_DOUBLE_EQ(gb200->hardware->peak_tflops_bf16, 5000.0 / 2);
  EXPECT_DOUBLE_EQ(gb200->hardware->peak_tflops_fp8, 10000.0 / 2);
  EXPECT_DOUBLE_EQ(gb200->hardware->memory_gib, 186);
  EXPECT_EQ(gb200->hardware->nics_per_node, 0);
  EXPECT_DOUBLE_EQ(gb200->hardware->sm_count, b200->hardware->sm_count);
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

TEST(ConfigTest, UnknownPresetListsTheAvailableOnes) {
  std::string text = yaml(kModel);
  text.replace(text.find("a100-80gb"), 9, "v100");
  std::string error = error_of(text);
  EXPECT_THAT(error,
              StartsWith("test.yaml:8:11: hardware.preset: expected one of the presets in "));
  EXPECT_THAT(error,
              HasSubstr(": a100-40gb, a100-80gb, b200, cpu-2core, gb200, h100-sxm, h200, h800, got "
                        "\"v100\""));
}

TEST(ConfigTest, PresetNameCannotEscapeThePresetDirectory) {
  EXPECT_THAT(error_of(kModel, {{"hardware.preset", "../examples/ideal"}}),
              HasSubstr("got \"../examples/ideal\""));
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
  EXPECT_THAT(missing, HasSubstr(": bad, good, got \"a100-80gb\""));
}

}  // namespace
}  // namespace config_hardware_test
}  // namespace ppsim
