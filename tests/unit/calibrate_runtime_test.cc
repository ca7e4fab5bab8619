// Calibration on real CPU runs of a tiny model. The profile is taken on this
// machine and then distorted, every kernel made 10^6 times slower (a
// profile of a far slower machine), so that the error calibration must
// remove is known and far larger than anything a loaded machine can add or
// take away. On a tiny model a loaded machine's iteration is mostly threads
// waiting to be scheduled, tens or hundreds of times its compute (one run
// under ctest -j2 took 98x), so the margin has to be that large: the
// assertions hold unless a run takes 10^5 times its compute, or its actions
// slow down more than 50x against the profiler's (docs/calibration.md,
// "Tests").
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "profiler/cpu_profiler.h"
#include "real_runtime/validate.h"
#include "sim/config/config.h"
#include "sim/cost/cost_profile.h"
#include "sim/fit/calibrate.h"
#include "sim/fit/runs_file.h"

namespace ppsim::runtime {
namespace calibrate_runtime_test {
namespace {

namespace fs = std::filesystem;

constexpr double kDistortion = 1e6;

TEST(CalibrateRuntime, UndoesADistortedProfileOnRealRuns) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ppsim_calibrate_rt_{}", getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "c.yaml")
      << "model: {layers: 4, hidden: 16, ffn_hidden: 32, heads: 2, seq_len: 8, vocab: 32, "
         "dtype: fp32}\n"
         "hardware: {preset: cpu-2core, gpus_per_node: 2, nodes: 1}\n"
         "parallel: {pipeline: 2}\ntraining: {global_batch: 8, micro_batch: 2}\n";
  Result<Config> config = load_config((dir / "c.yaml").string());
  ASSERT_TRUE(config.ok()) << config.error().message;

  ValidateOptions options;
  options.schedules = {"gpipe", "1f1b", "interleaved-1f1b:2", "zb-h1", "zb-v"};
  options.warmup = 1;
  options.iterations = 2;
  // One shape serves them all: the blocks are alike whatever a stage holds.
  ProfileRequest request = *request_for(*config);
  request.repetitions = 3;
  request.warmup = 1;
  request.link_sizes = {1 << 20, 1 << 22};
  Result<CostProfile> profile = profile_cpu(request);
  ASSERT_TRUE(profile.ok()) << profile.error().message;
  for (KernelSample& k : profile->kernels) {
    k.median_s *= kDistortion;
    k.min_s *= kDistortion;
    k.max_s *= kDistortion;
  }
  std::ofstream(dir / "prof.yaml") << profile_to_yaml(*profile);
  config->profile_path = (dir / "prof.yaml").string();

  RunsFile runs;
  runs.config = "c.yaml";
  runs.profile = "prof.yaml";
  for (const ScheduleValidation& v : validate(*config, options)) {
    ASSERT_TRUE(v.ok()) << v.schedule << ": " << v.reason;
    runs.runs.push_back(run_pair(v, options));
  }
  std::ofstream(dir / "runs.json") << runs_to_json(runs);
  const Result<RunsFile> read = load_runs((dir / "runs.json").string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  const Result<CalibrationResult> result = calibrate({*read}, {"runs.json"});
  ASSERT_TRUE(result.ok()) << result.error().message;

  // The fit finds the distortion: measured over predicted forwards is
  // 10^-6 on an idle machine, L 10^-6 when the runs' kernels are L times
  // slower than the profiler's.
  ASSERT_TRUE(result->calibration.forward);
  EXPECT_GT(result->calibration.forward->scale, 1e-7);
  EXPECT_LT(result->calibration.forward->scale, 5e-5);
  ASSERT_EQ(result->held_out.size(), options.schedules.size());
  for (const HeldOutRun& r : result->held_out) {
    SCOPED_TRACE(r.schedule);
    // Predicted far too slow: measured - predicted is many times measured
    // (this fails only for a run of over 10^5 times its compute).
    // Held out of the fit, the run is predicted much closer than before.
    EXPECT_LT(std::abs(r.after_error()), std::abs(r.before_error()) / 5);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace calibrate_runtime_test
}  // namespace ppsim::runtime
