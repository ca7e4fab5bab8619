// Asynchronous pipelines (PipeDream, PipeDream-2BW): the steady state of the
// no-flush stream, and the weight versions and staleness that the simulated
// timeline implies, against the papers' closed forms; and their opposite,
// several flushes an iteration (schedule.flushes).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "schedules/generators.h"
#include "schedules/validate.h"
#include "sim/config/config.h"
#include "sim/plan/simulate.h"
#include "sim/report/summary.h"

namespace ppsim {
namespace async_test {
namespace {

using ::testing::HasSubstr;

// p ranks, m microbatches per batch, 1 s forward and 2 s backward per stage,
// free transfers and optimizer steps.
Simulation run(const std::string& kind, int p, int m) {
  const std::string yaml = "parallel: {pipeline: " + std::to_string(p) +
                           "}\ntraining: {global_batch: " + std::to_string(m) +
                           "}\nschedule: {kind: " + kind +
                           "}\ncosts:\n  fixed: {forward_s: 1.0, backward_s: 2.0}\n";
  const Result<Config> config = parse_config(yaml, "async.yaml");
  EXPECT_TRUE(config.ok()) << config.error().message;
  Result<Simulation> sim = simulate(*config);
  EXPECT_TRUE(sim.ok()) << sim.error().message;
  return std::move(*sim);
}

// The opposite of no flush: schedule.flushes runs the batch as passes of m /
// F microbatches, each filling and draining the pipeline, (m/F + p - 1)(tf +
// tb) each; a bubble of (p - 1) / (m/F + p - 1).
TEST(Flushes, EveryPassFillsAndDrainsThePipeline) {
  const int p = 4;
  const int m = 8;
  for (const auto& [flushes, pass_microbatches] : {std::pair{1, 8}, {2, 4}, {4, 2}, {8, 1}}) {
    const std::string yaml = "parallel: {pipeline: " + std::to_string(p) +
                             "}\ntraining: {global_batch: " + std::to_string(m) +
                             "}\nschedule: {kind: 1f1b, flushes: " + std::to_string(flushes) +
                             "}\ncosts:\n  fixed: {forward_s: 1.0, backward_s: 2.0}\n";
    const Result<Config> config = parse_config(yaml, "flushes.yaml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    const Result<Simulation> sim = simulate(*config);
    ASSERT_TRUE(sim.ok()) << sim.error().message;
    EXPECT_DOUBLE_EQ(sim->summary.iteration_time_s, flushes * (pass_microbatches + p - 1) * 3.0)
        << flushes;
    EXPECT_NEAR(sim->summary.bubble_fraction, (p - 1.0) / (pass_microbatches + p - 1.0), 1e-12)
        << flushes;
    if (flushes > 1) {
      EXPECT_THAT(
          format_summary_table(sim->summary),
          HasSubstr(fmt::format("8 microbatches in {} passes of {})", flushes, pass_microbatches)));
    }
  }
  // An asynchronous schedule has no pass to repeat.
  const Result<Config> async = parse_config(
      "parallel: {pipeline: 4}\ntraining: {global_batch: 8}\nschedule: {kind: pipedream, "
      "flushes: 2}\ncosts:\n  fixed: {forward_s: 1.0, backward_s: 2.0}\n",
      "flushes.yaml");
  ASSERT_FALSE(async.ok());
  EXPECT_EQ(async.error().message,
            "flushes.yaml:3:38: schedule.flushes: cannot be combined with schedule.kind "
            "pipedream, which never flushes: its optimizer steps inside the stream");
}

class Async : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Without a flush every rank is busy all the time once the stream flows: one
// microbatch per tf + tb on every rank, m (tf + tb) per batch, no bubble.
TEST_P(Async, SteadyStateHasNoBubble) {
  const auto [p, m] = GetParam();
  for (const char* kind : {"pipedream", "pipedream-2bw"}) {
    const Simulation sim = run(kind, p, m);
    EXPECT_DOUBLE_EQ(sim.summary.iteration_time_s, m * 3.0) << kind;
    EXPECT_NEAR(sim.summary.bubble_fraction, 0.0, 1e-12) << kind;
    // A synchronous 1F1B of the same batch pays the (p-1)(tf+tb) fill and drain.
    EXPECT_DOUBLE_EQ(run("1f1b", p, m).summary.iteration_time_s, (m + p - 1) * 3.0);
  }
}

// PipeDream: stage s stashes a version for each of its p-1-s warm-up
// microbatches plus the current one, p-s in all, and applies each gradient
// p-1-s updates late (Narayanan et al. 2019).
TEST_P(Async, PipeDreamVersionsAndStaleness) {
  const auto [p, m] = GetParam();
  const Simulation sim = run("pipedream", p, m);
  ASSERT_EQ(static_cast<int>(sim.summary.weights.size()), p);
  for (const StageWeights& w : sim.summary.weights) {
    EXPECT_EQ(w.versions, p - w.stage) << "stage " << w.stage;
    EXPECT_EQ(w.staleness, p - 1 - w.stage) << "stage " << w.stage;
  }
}

// PipeDream-2BW: one update per batch of m >= p microbatches. When a stage
// updates, the microbatches it has begun but not finished (its p-1-s warm-up
// ones) still need the old weights: two versions, and their gradients land
// one update late. The last stage finishes each microbatch before starting
// the next, so it never needs the old version (Narayanan et al. 2021 keep
// two buffers everywhere; the timeline shows the last stage uses one).
TEST_P(Async, TwoBufferedVersions) {
  const auto [p, m] = GetParam();
  const Simulation sim = run("pipedream-2bw", p, m);
  ASSERT_EQ(static_cast<int>(sim.summary.weights.size()), p);
  for (const StageWeights& w : sim.summary.weights) {
    const bool last = w.stage == p - 1;
    EXPECT_EQ(w.versions, last ? 1 : 2) << "stage " << w.stage;
    EXPECT_EQ(w.staleness, last ? 0 : 1) << "stage " << w.stage;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Async,
                         ::testing::Values(std::tuple{2, 2}, std::tuple{3, 5}, std::tuple{4, 4},
                                           std::tuple{4, 8}, std::tuple{6, 7}));

TEST(AsyncSchedules, StepPlacement) {
  const Schedule pd = *make_pipedream({3, 6, 1});
  const Schedule bw = *make_pipedream_2bw({3, 6, 1, 1, 3});
  for (int rank = 0; rank < 3; ++rank) {
    int steps = 0;
    for (size_t i = 0; i < pd.programs[rank].size(); ++i) {
      if (pd.programs[rank][i].kind != ActionKind::kStep) continue;
      ++steps;
      // Right after the backward of the same microbatch.
      EXPECT_EQ(pd.programs[rank][i - 1].kind, ActionKind::kBackward);
      EXPECT_EQ(pd.programs[rank][i - 1].microbatch, pd.programs[rank][i].microbatch);
    }
    EXPECT_EQ(steps, 6);
    std::vector<int> stepped;
    for (const Action& a : bw.programs[rank]) {
      if (a.kind == ActionKind::kStep) stepped.push_back(a.microbatch);
    }
    EXPECT_EQ(stepped, (std::vector<int>{2, 5}));  // after each batch of 3
  }
  EXPECT_TRUE(validate(pd).ok());
  EXPECT_TRUE(validate(bw).ok());
}

TEST(AsyncSchedules, TwoBwNeedsBatchesOfAtLeastP) {
  const Result<Schedule> s = make_pipedream_2bw({4, 12, 1, 1, 3});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("needs at least as many microbatches per batch (3) as "
                                           "pipeline ranks (4)"));
}

}  // namespace
}  // namespace async_test
}  // namespace ppsim
