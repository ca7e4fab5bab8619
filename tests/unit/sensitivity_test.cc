// `ppsim simulate --sensitivity` (sim/fit/sensitivity.h): each fitted
// hardware parameter probed below and above its value, the others held.
#include "sim/fit/sensitivity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "sim/config/config.h"
#include "sim/core/json.h"
#include "sim/plan/simulate.h"

namespace ppsim {
namespace sensitivity_test {
namespace {

using ::testing::HasSubstr;

// A GPT-style model with standard attention (no flash kernel) on two A100
// nodes: tensor parallelism within a node, a pipeline across the two.
constexpr const char* kConfig = R"(
model: {layers: 8, hidden: 2048, heads: 16, seq_len: 2048, vocab: 32000, attention: standard}
hardware: {preset: a100-80gb, gpus_per_node: 8, nodes: 2}
parallel: {pipeline: 2, tensor: 8}
training: {global_batch: 16}
)";

Config config() {
  Result<Config> c = parse_config(kConfig, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.error().message;
  return *c;
}

const ParameterProbe& probe_of(const Sensitivity& s, std::string_view name) {
  return *std::find_if(s.probes.begin(), s.probes.end(),
                       [&](const ParameterProbe& p) { return p.parameter->name == name; });
}

TEST(Sensitivity, ProbesEachFittedParameterByATenthOfItsRangeWithinItsBounds) {
  const Config c = config();
  Result<Sensitivity> s = hardware_sensitivity(c);
  ASSERT_TRUE(s.ok()) << s.error().message;
  Result<Simulation> sim = simulate(c);
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  EXPECT_EQ(s->iteration_time_s, sim->summary.iteration_time_s);
  ASSERT_EQ(s->probes.size(), static_cast<size_t>(kNumFitParameters));
  for (int j = 0; j < kNumFitParameters; ++j) {
    const FitParameter& p = kFitParameters[j];
    const ParameterProbe& probe = s->probes[j];
    EXPECT_EQ(probe.parameter, &p);
    EXPECT_EQ(probe.value, (*c.hardware).*p.member) << p.name;
    EXPECT_DOUBLE_EQ(probe.lower, std::max(p.lower, probe.value - 0.1 * p.range())) << p.name;
    EXPECT_DOUBLE_EQ(probe.upper, std::min(p.upper, probe.value + 0.1 * p.range())) << p.name;
  }
  // The A100 preset prices no launch gap: its probe below is the bound itself.
  EXPECT_EQ(probe_of(*s, "kernel_launch_us").lower, 0);
  EXPECT_EQ(probe_of(*s, "kernel_launch_us").lower_time_s, s->iteration_time_s);
}

TEST(Sensitivity, FasterHardwareNeverSlowsTheRun) {
  Result<Sensitivity> s = hardware_sensitivity(config());
  ASSERT_TRUE(s.ok()) << s.error().message;
  const double base = s->iteration_time_s;
  for (const ParameterProbe& p : s->probes) {
    const std::string name = p.parameter->name;
    if (name.find("_efficiency") != std::string::npos) {
      EXPECT_GE(p.lower_time_s, base) << name;
      EXPECT_LE(p.upper_time_s, base) << name;
    }
  }
  // A longer gap between kernels only adds time.
  EXPECT_GT(probe_of(*s, "kernel_launch_us").upper_time_s, base);
  // Every layer's GEMMs are on the critical path: their efficiency moves the run both ways.
  const ParameterProbe& gemm = probe_of(*s, "max_gemm_efficiency");
  EXPECT_GT(gemm.lower_time_s, base);
  EXPECT_LT(gemm.upper_time_s, base);
  // Eight-way tensor parallelism runs its all-reduces over NVLink.
  EXPECT_GT(probe_of(*s, "intra_node_collective_efficiency").lower_time_s, base);
}

TEST(Sensitivity, AParameterTheConfigDoesNotUseMovesNothing) {
  // Standard attention runs no flash kernel.
  Result<Sensitivity> s = hardware_sensitivity(config());
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (const char* name : {"flash_forward_efficiency", "flash_backward_efficiency"}) {
    EXPECT_EQ(probe_of(*s, name).lower_time_s, s->iteration_time_s) << name;
    EXPECT_EQ(probe_of(*s, name).upper_time_s, s->iteration_time_s) << name;
  }
}

TEST(Sensitivity, NeedsTheAnalyticModel) {
  Result<Config> fixed = parse_config(R"(
parallel: {pipeline: 2}
training: {global_batch: 4}
costs: {fixed: {forward_s: 1, backward_s: 2}}
)",
                                      "fixed.yaml");
  ASSERT_TRUE(fixed.ok()) << fixed.error().message;
  Result<Sensitivity> s = hardware_sensitivity(*fixed);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("fixed.yaml: --sensitivity moves the analytic model"));
}

TEST(Sensitivity, TableHasALinePerParameter) {
  Result<Sensitivity> s = hardware_sensitivity(config());
  ASSERT_TRUE(s.ok()) << s.error().message;
  const std::string table = format_sensitivity(*s);
  for (const FitParameter& p : kFitParameters) EXPECT_THAT(table, HasSubstr(p.name));
  // The launch gap's probe below is its bound.
  EXPECT_THAT(table, HasSubstr("at bound"));
}

TEST(Sensitivity, JsonCarriesEachProbe) {
  // Two probes written by hand: the GEMM efficiency moved both ways, the
  // launch gap at its lower bound (the value itself, the config's time).
  Sensitivity s;
  s.iteration_time_s = 2;
  s.probes.push_back({&kFitParameters[0], 0.5, 0.25, 0.75, 2.5, 1.75});
  s.probes.push_back({&kFitParameters[2], 0, 0, 5, 2, 2.125});
  std::string json;
  JsonWriter w(&json);
  write_sensitivity(w, s);
  EXPECT_EQ(
      json,
      R"({"iteration_time_s":2,"parameters":[)"
      R"({"name":"max_gemm_efficiency","value":0.5,"lower":0.25,"lower_iteration_time_s":2.5,)"
      R"("upper":0.75,"upper_iteration_time_s":1.75},)"
      R"({"name":"kernel_launch_us","value":0,"lower":0,"lower_iteration_time_s":2,)"
      R"("upper":5,"upper_iteration_time_s":2.125}]})");
}

}  // namespace
}  // namespace sensitivity_test
}  // namespace ppsim
