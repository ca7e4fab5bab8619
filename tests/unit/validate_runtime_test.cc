// `ppsim validate` end to end on a tiny model: profile, predict, run, join.
// Timing figures depend on the machine; what is checked is what must hold
// whatever they are.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "profiler/cpu_profiler.h"
#include "real_runtime/validate.h"
#include "sim/config/config.h"
#include "sim/cost/cost_profile.h"
#include "sim/plan/compare.h"

namespace ppsim::runtime {
namespace validate_runtime_test {
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
  request.link_sizes.clear();  // the preset's link: a loaded machine can spoil a fit
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
    // The spread of the two measured iterations (after the warm-up one).
    const std::vector<Picos>& ends = v.measured.iteration_end;
    ASSERT_EQ(ends.size(), 3u);
    const double a = picos_to_seconds(ends[1] - ends[0]);
    const double b = picos_to_seconds(ends[2] - ends[1]);
    EXPECT_NEAR(v.measured_spread, std::abs(a - b) / v.measured_iteration_s, 1e-12);
  }
  // 1F1B: the profile's per-block bytes times the blocks a rank holds at
  // once on rank 0 (which has no loss head) are what the run keeps there.
  EXPECT_EQ(results[0].predicted_peak_activation_bytes[0],
            results[0].measured_peak_activation_bytes[0]);
  // PipeDream: the simulator predicts one run of a stream of batches, and
  // each measured iteration is a run of that stream, so the records join
  // one to one; both are timed by a steady batch in the stream's middle.
  const ScheduleValidation& async = results[2];
  ASSERT_TRUE(async.ok()) << async.reason;
  EXPECT_GT(async.predicted_iteration_s, 0);
  EXPECT_GT(async.measured_iteration_s, 0);
  const size_t n = async.predicted.actions.size();
  ASSERT_EQ(async.measured.actions.size(), n * 3);
  for (size_t k = 0; k < n; ++k) {
    EXPECT_EQ(async.measured.actions[n + k].action, async.predicted.actions[k].action);
  }
  // Busy time per batch against the batch's period (timing noise aside): a
  // run's busy time against a batch's period would make it about -3.
  EXPECT_GT(async.measured_bubble, -1.0);
  std::remove(path.c_str());
}

// What a rank holds for backward is deterministic: per rank, the peak the
// threads runtime measures (the blocks' Saved, the loss head's LossSaved on
// the last stage, the embedding's kept input gradient on the first, summed
// after each action) is the simulator's prediction from the bytes the CPU
// profiler measured, exactly, for every schedule kind the runtime
// runs: F holding less than I leaves for W (the blocks' gradient stash, the
// first stage's input gradient) is what split backwards show.
TEST(ValidateRuntime, PeakActivationBytesArePredictedExactly) {
  const std::vector<std::string> schedules = {"gpipe",      "1f1b",      "interleaved-1f1b:2",
                                              "zb-h1",      "zb-h2",     "zb-v",
                                              "terapipe:2", "pipedream", "pipedream-2bw"};
  for (int p : {2, 4}) {
    SCOPED_TRACE(testing::Message() << "p = " << p);
    // 8 layers split over p or 2p stages.
    const std::string ranks = std::to_string(p);
    Result<Config> config = parse_config(
        "model: {layers: 8, hidden: 16, ffn_hidden: 32, heads: 2, seq_len: 8, vocab: 32, "
        "dtype: fp32}\n"
        "hardware: {preset: cpu-2core, gpus_per_node: " +
            ranks + ", nodes: 1}\nparallel: {pipeline: " + ranks +
            "}\ntraining: {global_batch: 16, micro_batch: 2}\n",
        "tiny.yaml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    // One profile for every schedule: the shapes each of them needs (the
    // whole sequence, and terapipe's slices at their contexts).
    ProfileRequest request = *request_for(*config);
    for (const std::string& entry : schedules) {
      const Result<ProfileRequest> needs = request_for(config_for_entry(*config, entry));
      ASSERT_TRUE(needs.ok()) << needs.error().message;
      for (const auto& shape : needs->shapes) {
        if (std::find(request.shapes.begin(), request.shapes.end(), shape) ==
            request.shapes.end()) {
          request.shapes.push_back(shape);
        }
      }
    }
    ASSERT_EQ(request.vocab, 32);  // the embedding and head are profiled too
    request.repetitions = 1;
    request.warmup = 0;
    // Bytes do not depend on the link, whose fit a loaded machine can
    // spoil: kernels only.
    request.link_sizes.clear();
    const Result<CostProfile> profile = profile_cpu(request);
    ASSERT_TRUE(profile.ok()) << profile.error().message;
    const std::string path =
        ::testing::TempDir() + "/validate_bytes_p" + std::to_string(p) + ".profile.yaml";
    std::ofstream(path) << profile_to_yaml(*profile);
    config->profile_path = path;

    ValidateOptions options;
    options.schedules = schedules;
    options.warmup = 1;
    options.iterations = 1;
    const std::vector<ScheduleValidation> results = validate(*config, options);
    ASSERT_EQ(results.size(), schedules.size());
    for (const ScheduleValidation& v : results) {
      SCOPED_TRACE(v.schedule);
      ASSERT_TRUE(v.ok()) << v.reason;
      ASSERT_EQ(v.measured_peak_activation_bytes.size(), static_cast<size_t>(p));
      EXPECT_EQ(v.predicted_peak_activation_bytes, v.measured_peak_activation_bytes);
      for (int64_t bytes : v.measured_peak_activation_bytes) EXPECT_GT(bytes, 0);
    }
    std::remove(path.c_str());
  }
}

// Two ranks, three measured iterations: the first slow (each rank busy
// 95 of a 100 ps period: bubble 0.05), the other two fast (30 of 50: 0.4).
// Each iteration's own bubble, median 0.4; the busy time averaged over all
// three (310 / 3 ps per iteration) against the median period (50 ps) would
// give 1 - 310 / 3 / (2 x 50) = -0.033.
TEST(ValidateRuntime, MeasuredBubbleSetsEachIterationAgainstItsOwnPeriod) {
  Timeline t;
  t.num_ranks = 2;
  t.iterations = 3;
  const Picos start[] = {0, 100, 150};
  const Picos busy[] = {95, 30, 30};  // per rank
  for (int k = 0; k < 3; ++k) {
    for (int rank = 0; rank < 2; ++rank) {
      t.actions.push_back(
          {Action{ActionKind::kForward, rank, 0}, rank, k, start[k], start[k] + busy[k]});
    }
  }
  const double bubble = measured_bubble(t, {{0, 100e-12}, {1, 50e-12}, {2, 50e-12}});
  EXPECT_NEAR(bubble, 0.4, 1e-9);
}

// What the runtime does not execute would make validate compare a
// prediction with a run of another config (with training.recompute: full,
// cpu-small's 1F1B was predicted 38 % slow, until 2026-12-05): each such
// setting is an error naming its key, and the defaults pass.
TEST(ValidateRuntime, RefusesSettingsTheRuntimeDoesNotExecute) {
  const auto error_of = [](int data, const std::string& training,
                           const std::string& parallel = "") {
    Result<Config> config = parse_config(
        "model: {layers: 4, hidden: 16, ffn_hidden: 32, heads: 2, seq_len: 8, vocab: 32, "
        "dtype: fp32}\n"
        "hardware: {preset: cpu-2core, gpus_per_node: " +
            std::to_string(2 * data) +
            ", nodes: 1}\nparallel: {pipeline: 2, data: " + std::to_string(data) + parallel +
            "}\ntraining: {global_batch: 8, micro_batch: 2" + training + "}\n",
        "tiny.yaml");
    if (!config) return "config: " + config.error().message;
    const Status st = check_executable(*config, "ppsim validate");
    return st.ok() ? std::string("ok") : st.message();
  };
  EXPECT_EQ(error_of(1, ""), "ok");
  EXPECT_EQ(error_of(1, ", recompute: full"),
            "tiny.yaml: training.recompute: full: the runtime keeps every activation and does "
            "not recompute, so ppsim validate would measure a run other than the config's; set "
            "training.recompute=none");
  const auto starts = [](const std::string& text, const std::string& prefix) {
    return text.rfind(prefix, 0) == 0;
  };
  EXPECT_TRUE(starts(error_of(2, ""),
                     "tiny.yaml: parallel.data: 2: the runtime runs one "
                     "pipeline replica"))
      << error_of(2, "");
  EXPECT_TRUE(starts(error_of(1, ", blocking_p2p: true"), "tiny.yaml: training.blocking_p2p: "));
  EXPECT_EQ(error_of(1, "", ", layers_per_stage: [2, 2]"), "ok");  // the even split, written out
  EXPECT_TRUE(starts(error_of(1, "", ", layers_per_stage: [1, 3]"),
                     "tiny.yaml: parallel.layers_per_stage: [1, 3]: the runtime splits the "
                     "layers evenly over the stages"));
  EXPECT_TRUE(starts(error_of(1, ", optimizer_step: post_validation"),
                     "tiny.yaml: training.optimizer_step: post_validation: "));
}

// The first measured iteration is timed from the end of the one before it:
// with no warm-up and one iteration there is nothing to time it from (that
// ran, and crashed, until 2026-12-05), nor with no iteration at all.
TEST(ValidateRuntime, CountsNeedTwoIterationsInAll) {
  const auto counts = [](int warmup, int iterations) {
    ValidateOptions options;
    options.warmup = warmup;
    options.iterations = iterations;
    return check_counts(options);
  };
  EXPECT_TRUE(counts(1, 1).ok());
  EXPECT_TRUE(counts(0, 2).ok());
  const Status alone = counts(0, 1);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.message().find("--warmup 0 --iterations 1"), std::string::npos)
      << alone.message();
  EXPECT_NE(counts(1, 0).message().find("--iterations 0: at least 1"), std::string::npos);
  EXPECT_NE(counts(-2, 3).message().find("--warmup -2: at least 0"), std::string::npos);
}

}  // namespace
}  // namespace validate_runtime_test
}  // namespace ppsim::runtime
