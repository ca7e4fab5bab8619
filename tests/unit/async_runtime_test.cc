// Asynchronous schedules in the real runtime: PipeDream and PipeDream-2BW
// step at their S actions, each microbatch computing its backward on the
// weight version its forward used. The threads backend must train exactly
// as the delayed sequential reference (run_delayed_reference), which reads
// the delays off the programs and never runs the schedule; that reference
// in turn must differ from synchronous training (else the comparison proves
// nothing) and equal it for a schedule without S actions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "real_runtime/runtime.h"
#include "real_runtime/stage_compute.h"
#include "sim/plan/metrics.h"
#include "tests/unit/runtime_checks.h"

namespace ppsim::runtime {
namespace async_runtime_test {
namespace {

using ::testing::HasSubstr;

class AsyncRuntimeTest : public testing::TestWithParam<Case> {};

TEST_P(AsyncRuntimeTest, TrainsAsTheDelayedReference) {
  const Case& c = GetParam();
  const Schedule schedule = schedule_of(c.kind, c.p, c.m);
  const RuntimeModel model = tiny_model();
  Result<RunResult> piped = run_threads(schedule, model, three_iterations());
  ASSERT_TRUE(piped.ok()) << piped.error().message;
  Result<RunResult> reference = run_delayed_reference(schedule, model, three_iterations());
  ASSERT_TRUE(reference.ok()) << reference.error().message;

  // fp64: the two add a step's gradients in other orders (~1e-16 apart).
  Result<double> err = max_relative_error(piped->weights, reference->weights);
  ASSERT_TRUE(err.ok()) << err.error().message;
  EXPECT_LT(*err, 1e-10);
  ASSERT_EQ(piped->losses.size(), 3u);
  ASSERT_EQ(reference->losses.size(), 3u);
  for (int it = 0; it < 3; ++it) {
    EXPECT_NEAR(piped->losses[it], reference->losses[it], 1e-12) << "iteration " << it;
  }

  // The delays matter: synchronous training on the same data ends elsewhere,
  // by far more than the tolerance above (2 to 9 here: the tiny model is
  // stiff, and its biases start at zero). So does stashing: B on the newest
  // weights instead of the stashed ones misses the reference by 0.09 to 0.5.
  Result<RunResult> synchronous = run_sequential(model, c.m, three_iterations());
  ASSERT_TRUE(synchronous.ok());
  EXPECT_GT(*max_relative_error(synchronous->weights, reference->weights), 1e-3);
}

TEST_P(AsyncRuntimeTest, KeepsTheWeightVersionsTheSimulatorCounts) {
  const Case& c = GetParam();
  const Schedule schedule = schedule_of(c.kind, c.p, c.m);
  Result<RunResult> run = run_threads(schedule, tiny_model(), three_iterations());
  ASSERT_TRUE(run.ok()) << run.error().message;
  ASSERT_EQ(run->weight_versions.size(), static_cast<size_t>(c.p));
  // The simulator's count, from the measured records alone.
  const std::vector<ppsim::StageWeights> counted = weight_versions(run->timeline, {});
  ASSERT_EQ(counted.size(), static_cast<size_t>(c.p));
  for (int s = 0; s < c.p; ++s) {
    SCOPED_TRACE(s);
    EXPECT_EQ(run->weight_versions[s], counted[s].versions);
    EXPECT_GT(run->weight_bytes[s], 0);
    if (c.kind == "pipedream") {
      // One version per microbatch in flight: p - s on stage s.
      EXPECT_EQ(run->weight_versions[s], c.p - s);
    } else {
      // 2BW: the last stage steps with nothing in flight; the others keep two.
      EXPECT_EQ(run->weight_versions[s], s + 1 == c.p ? 1 : 2);
    }
  }
  // Every S action is a record, as in the simulator's timeline.
  size_t steps = 0;
  for (const ActionRecord& r : run->timeline.actions) steps += r.action.kind == ActionKind::kStep;
  size_t expected = 0;
  for (const auto& program : schedule.programs) {
    for (const Action& a : program) expected += a.kind == ActionKind::kStep;
  }
  EXPECT_EQ(steps, 3 * expected);
}

INSTANTIATE_TEST_SUITE_P(Schedules, AsyncRuntimeTest,
                         // pipedream-2bw in batches of p microbatches (schedule_of).
                         testing::Values(Case{"pipedream", 2, 6, 1, 1},
                                         Case{"pipedream", 4, 8, 1, 1},
                                         Case{"pipedream-2bw", 2, 8, 1, 1},
                                         Case{"pipedream-2bw", 4, 8, 1, 1}),
                         case_name);

TEST(DelayedReferenceTest, EqualsSequentialTrainingWithoutStepActions) {
  // No S actions: every stage steps once after its program, no delays.
  const RuntimeModel model = tiny_model();
  for (const Case& c : {Case{"1f1b", 4, 8, 1, 1}, Case{"terapipe", 2, 2, 1, 2}}) {
    SCOPED_TRACE(c.kind);
    Result<RunResult> reference = run_delayed_reference(
        schedule_of(c.kind, c.p, c.m, c.v, c.slices), model, three_iterations());
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    Result<RunResult> sequential = run_sequential(model, c.m, three_iterations());
    ASSERT_TRUE(sequential.ok());
    EXPECT_LT(*max_relative_error(reference->weights, sequential->weights), 1e-12);
    for (int it = 0; it < 3; ++it) {
      EXPECT_NEAR(reference->losses[it], sequential->losses[it], 1e-12);
    }
  }
}

TEST(DelayedReferenceTest, RejectsAStageThatNeverSteps) {
  Schedule s = schedule_of("pipedream", 2, 4);
  std::erase_if(s.programs[1], [](const Action& a) { return a.kind == ActionKind::kStep; });
  Result<RunResult> reference = run_delayed_reference(s, tiny_model(), three_iterations());
  ASSERT_FALSE(reference.ok());
  EXPECT_THAT(reference.error().message, HasSubstr("stage 1 never steps"));
}

TEST(StageComputeTest, StashesTheVersionOfEachForwardAndReleasesIt) {
  // The whole model on one stage, driven by hand: F0 B0 F1 | step | F2 | step | B1 B2.
  const RuntimeModel model = tiny_model();
  StageCompute<double> stage(model, 0, 1, 3, {model.seq_len});
  double loss = 0;
  stage.forward(0, 0, 0, {}, &loss);
  stage.backward(0, 0, 0, {});
  EXPECT_EQ(stage.weight_versions(), 1);
  stage.forward(0, 1, 0, {}, &loss);  // pins version 0
  const StageWeights version0 = stage.weights();
  stage.sgd_step(1.0);  // microbatch 1 is in flight: steps a copy
  EXPECT_EQ(stage.weight_versions(), 2);
  stage.forward(0, 2, 0, {}, &loss);  // pins version 1
  stage.sgd_step(1.0);
  EXPECT_EQ(stage.weight_versions(), 3);
  const StageWeights version2 = stage.weights();
  stage.backward(0, 1, 0, {});  // the last user of version 0: freed
  EXPECT_EQ(stage.weight_versions(), 2);
  const StageWeights gradient1 = stage.take_gradients();
  stage.backward(0, 2, 0, {});
  EXPECT_EQ(stage.weight_versions(), 1);
  EXPECT_EQ(stage.max_weight_versions(), 3);
  EXPECT_EQ(*max_relative_error({stage.weights()}, {version2}), 0.0);
  // Nothing in flight: a step updates in place.
  stage.sgd_step(1.0);
  EXPECT_EQ(stage.weight_versions(), 1);

  // Microbatch 1's gradient is the one version 0 gives, not the newest's.
  StageCompute<double> fresh(model, 0, 1, 3, {model.seq_len});
  fresh.set_weights(version0);
  fresh.forward(0, 1, 0, {}, &loss);
  fresh.backward(0, 1, 0, {});
  EXPECT_EQ(*max_relative_error({fresh.take_gradients()}, {gradient1}), 0.0);
  fresh.set_weights(version2);
  fresh.forward(0, 1, 0, {}, &loss);
  fresh.backward(0, 1, 0, {});
  EXPECT_GT(*max_relative_error({fresh.take_gradients()}, {gradient1}), 1e-6);
}

}  // namespace
}  // namespace async_runtime_test
}  // namespace ppsim::runtime
