// `ppsim validate` end to end on a tiny model: profile, predict, run, join.
// Timing figures depend on the machine; what is checked is what must hold
// whatever they are.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "profiler/cpu_profiler.h"
#include "real_runtime/validate.h"
#include "sim/config.h"
#include "sim/cost_profile.h"

namespace ppsim::runtime {
namespace {

TEST(ValidateRuntime, PredictsRunsAndJoinsEverySchedule) {
  Result<Config> config = parse_config(
      "model: {layers: 4, hidden: 16, ffn_hidden: 32, heads: 2, seq_len: 8, vocab: 32, "
      "dtype: fp32}\n"
      "hardware: {preset: cpu-2core, gpus_per_node: 2, nodes: 1}\n"
      "parallel: {pipeline: 2}\ntraining: {global_batch: 8, micro_batch: 2}\n",
      "tiny.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  ProfileRequest request = *request_for(*config);
  request.repetitions = 3;
  request.warmup = 1;
  request.link_sizes = {1 << 20, 1 << 22};
  const Result<CostProfile> profile = profile_cpu(request);
  ASSERT_TRUE(profile.ok()) << profile.error().message;
  const std::string path = ::testing::TempDir() + "/validate_tiny.profile.yaml";
  std::ofstream(path) << profile_to_yaml(*profile);
  config->profile_path = path;

  ValidateOptions options;
  options.schedules = {"1f1b", "zb-h1", "pipedream"};
  options.warmup = 1;
  options.iterations = 2;
  const std::vector<ScheduleValidation> results = validate(*config, options);
  ASSERT_EQ(results.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    const ScheduleValidation& v = results[i];
    ASSERT_TRUE(v.ok()) << v.schedule << ": " << v.reason;
    EXPECT_GT(v.predicted_iteration_s, 0);
    EXPECT_GT(v.measured_iteration_s, 0);
    // The two timelines hold the same actions in the same order.
    const size_t n = v.predicted.actions.size() / v.predicted.iterations;
    ASSERT_EQ(v.measured.actions.size(), n * 3);  // warm-up + 2 measured iterations
    for (size_t k = 0; k < n; ++k) {
      EXPECT_EQ(v.measured.actions[n + k].action, v.predicted.actions[k].action);
    }
    EXPECT_EQ(v.predicted_peak_activation_bytes.size(), 2u);
    EXPECT_EQ(v.measured_peak_activation_bytes.size(), 2u);
    EXPECT_FALSE(v.kinds.empty());
  }
  // 1F1B: the profile's per-block bytes times the blocks a rank holds at
  // once on rank 0 (which has no loss head) are what the run keeps there.
  EXPECT_EQ(results[0].predicted_peak_activation_bytes[0],
            results[0].measured_peak_activation_bytes[0]);
  // The asynchronous schedules are not run by the threads backend yet.
  EXPECT_FALSE(results[2].ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ppsim::runtime
