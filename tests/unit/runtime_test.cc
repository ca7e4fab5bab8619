// The threads backend of the real runtime (real_runtime/runtime.h): pipelined
// training reproduces sequential training, the measured timeline keeps the
// schedule's order and dependencies, failures end the run with an Error that
// names the rank and action, and held activation memory matches the kernels'
// documented bytes rule.
#include "real_runtime/runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "schedules/generators.h"
#include "tests/unit/runtime_checks.h"

namespace ppsim::runtime {
namespace runtime_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Whether every weight is a float32 value (a float run's, converted to double).
bool all_float32(const std::vector<StageWeights>& weights) {
  for (const StageWeights& stage : weights) {
    for (const std::vector<double>& tensor : stage.tensors) {
      for (double w : tensor) {
        if (static_cast<double>(static_cast<float>(w)) != w) return false;
      }
    }
  }
  return true;
}

class RuntimeEquivalenceTest : public testing::TestWithParam<Case> {};

TEST_P(RuntimeEquivalenceTest, PipelinedTrainingEqualsSequentialTraining) {
  const Case& c = GetParam();
  const Schedule schedule = schedule_of(c.kind, c.p, c.m, c.v, c.slices);
  Result<RunResult> piped = run_threads(schedule, tiny_model(), three_iterations());
  ASSERT_TRUE(piped.ok()) << piped.error().message;
  expect_trains_like_sequential(*piped, c.m);
}

std::vector<Case> threads_cases() {
  std::vector<Case> cases = two_rank_cases();
  for (const Case& c :
       {Case{"gpipe", 1, 2, 1, 1}, Case{"1f1b", 4, 8, 1, 1}, Case{"zb-h1", 4, 6, 1, 1}}) {
    cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Schedules, RuntimeEquivalenceTest, testing::ValuesIn(threads_cases()),
                         case_name);

TEST(RuntimeTest, Float32TrainingIsCloseToSequential) {
  // Token slices sum each microbatch's gradient slice by slice, so the float
  // run may round differently from the whole-sequence reference: only in the
  // last bits, a few float32 epsilons after three steps (~4e-7 here). The
  // same runs in double differ by the same few epsilons of double: the
  // difference is rounding, not another computation. Unsliced schedules add
  // in the reference's order and reproduce it bit for bit.
  const auto error_of = [](const Schedule& schedule, Precision precision) {
    const RuntimeModel model = tiny_model(precision);
    Result<RunResult> piped = run_threads(schedule, model, three_iterations());
    EXPECT_TRUE(piped.ok()) << piped.error().message;
    Result<RunResult> reference =
        run_sequential(model, schedule.num_microbatches, three_iterations());
    EXPECT_TRUE(reference.ok()) << reference.error().message;
    if (!piped.ok() || !reference.ok()) return HUGE_VAL;
    if (precision == Precision::kFloat32) {
      // The runs train in float32: every weight is a float.
      EXPECT_TRUE(all_float32(piped->weights));
      EXPECT_TRUE(all_float32(reference->weights));
    }
    const Result<double> err = max_relative_error(piped->weights, reference->weights);
    EXPECT_TRUE(err.ok()) << err.error().message;
    return err.ok() ? *err : HUGE_VAL;
  };
  const double kUlps = 16;  // rounding, many times over; a wrong sum is off by far more
  const Schedule sliced = schedule_of("terapipe", 2, 4, 1, 2);
  EXPECT_LE(error_of(sliced, Precision::kFloat32), kUlps * std::numeric_limits<float>::epsilon());
  EXPECT_LE(error_of(sliced, Precision::kFloat64), kUlps * std::numeric_limits<double>::epsilon());
  EXPECT_EQ(error_of(schedule_of("1f1b", 2, 4), Precision::kFloat32), 0.0);
  // Overlapped pairs run their forward and backward in turn, each stage's
  // microbatches still in order.
  EXPECT_EQ(error_of(schedule_of("dualpipev", 2, 4, 2), Precision::kFloat32), 0.0);
}

TEST(RuntimeTest, MeasuredTimelineFollowsTheSchedule) {
  for (const Case& c :
       {Case{"1f1b", 2, 4, 1, 1}, Case{"zb-v", 2, 4, 2, 1}, Case{"interleaved-1f1b", 2, 4, 2, 1},
        Case{"terapipe", 2, 2, 1, 2}, Case{"pipedream", 2, 4, 1, 1},
        Case{"pipedream-2bw", 2, 4, 1, 1}, Case{"dualpipev", 2, 4, 2, 1}}) {
    SCOPED_TRACE(c.kind);
    const Schedule schedule = schedule_of(c.kind, c.p, c.m, c.v, c.slices);
    Result<RunResult> run = run_threads(schedule, tiny_model(), three_iterations());
    ASSERT_TRUE(run.ok()) << run.error().message;
    expect_well_formed(schedule, run->timeline, 3);
    EXPECT_FALSE(run->timeline.transfers.empty());
  }
}

TEST(RuntimeTest, FailureNamesRankAndActionWithoutHanging) {
  struct Fault {
    std::string kind;
    int p;
    FailAt at;
  };
  // A failing consumer (rank 1's F), a failing producer whose consumers block
  // on receives (rank 0), rank 0's last action while rank 1 waits at the
  // optimizer's barrier, and one in the middle of four ranks.
  for (const Fault& f :
       {Fault{"1f1b", 2, FailAt{1, "1F3", 1}}, Fault{"1f1b", 2, FailAt{0, "0F1", 0}},
        Fault{"1f1b", 2, FailAt{0, "0B3", 0}}, Fault{"zb-h1", 4, FailAt{2, "2I0", 2}}}) {
    RunSettings settings = three_iterations();
    settings.fail_at = f.at;
    const auto begin = std::chrono::steady_clock::now();
    Result<RunResult> run = run_threads(schedule_of(f.kind, f.p, 4), tiny_model(), settings);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    ASSERT_FALSE(run.ok());
    const std::string expected = "rank " + std::to_string(f.at.rank) + ", " + f.at.action + ": ";
    EXPECT_THAT(run.error().message, StartsWith(expected));
    EXPECT_THAT(run.error().message, HasSubstr("injected failure"));
    EXPECT_LT(seconds, 3.0);
  }
}

TEST(RuntimeTest, RejectsWhatItCannotRun) {
  RunSettings settings;
  // A stage that never steps while the others step in S actions.
  Schedule frozen = schedule_of("pipedream", 2, 4);
  std::erase_if(frozen.programs[0], [](const Action& a) { return a.kind == ActionKind::kStep; });
  Result<RunResult> async = run_threads(frozen, tiny_model(), settings);
  ASSERT_FALSE(async.ok());
  EXPECT_THAT(async.error().message, HasSubstr("stage 0 never steps"));

  RuntimeModel odd = tiny_model();
  odd.layers = 3;
  Result<RunResult> uneven = run_threads(schedule_of("1f1b", 2, 4), odd, settings);
  ASSERT_FALSE(uneven.ok());
  EXPECT_THAT(uneven.error().message, HasSubstr("split evenly"));

  // DualPipe's second chain would need the first's weights, kept equal.
  Result<RunResult> two_chains =
      run_threads(schedule_of("dualpipe", 2, 4, 2), tiny_model(), settings);
  ASSERT_FALSE(two_chains.ok());
  EXPECT_THAT(two_chains.error().message, HasSubstr("the runtime runs one chain of stages, not 2"));

  // A compute+comms file's posted transfers: simulated only.
  Schedule posted = schedule_of("1f1b", 2, 4);
  for (const auto& program : posted.programs) posted.comm_posts.emplace_back(program.size());
  Result<RunResult> with_posts = run_threads(posted, tiny_model(), settings);
  ASSERT_FALSE(with_posts.ok());
  EXPECT_THAT(with_posts.error().message, HasSubstr("does not follow a file's SEND/RECV cells"));

  settings.fail_at = FailAt{0, "not an action", 0};
  Result<RunResult> unknown = run_threads(schedule_of("1f1b", 2, 4), tiny_model(), settings);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.error().message, HasSubstr("\"not an action\" is not an action"));
}

// A fault hook that can never fire would let a fault test pass without its
// fault: a rank the schedule lacks, an action of another rank, an iteration
// past the run's (until 2026-12-05 each ran to the end, exit code 0), and a
// step size that is not a number, are errors before anything runs.
TEST(RuntimeTest, RejectsSettingsThatCannotTakeEffect) {
  const Schedule schedule = schedule_of("1f1b", 2, 4);
  const auto error_of = [&](const RunSettings& settings) {
    Result<RunResult> run = run_threads(schedule, tiny_model(), settings);
    return run.ok() ? std::string("ran") : run.error().message;
  };
  RunSettings settings = three_iterations();
  settings.fail_at = FailAt{2, "1F0", 0};
  EXPECT_THAT(error_of(settings), HasSubstr("rank 2: the schedule has ranks 0 to 1"));
  settings.fail_at = FailAt{0, "1F0", 0};  // stage 1 runs on rank 1
  EXPECT_THAT(error_of(settings), HasSubstr("rank 0 does not run 1F0 in schedule 1f1b"));
  settings.fail_at = FailAt{1, "1F0", 3};
  EXPECT_THAT(error_of(settings), HasSubstr("iteration 3: the run has iterations 0 to 2"));
  settings.fail_at.reset();
  settings.learning_rate = std::nan("");
  EXPECT_THAT(error_of(settings), HasSubstr("a finite number, 0 or more"));
  settings.learning_rate = -0.1;
  EXPECT_THAT(error_of(settings), HasSubstr("a finite number, 0 or more"));
}

TEST(RuntimeTest, PeakActivationBytesFollowTheKernelsBytesRule) {
  // GPipe, p = 2, m = 2: each rank holds both microbatches' activations
  // before the first backward. Per block after F (gpt_block.h), with b = 2
  // sequences, l = t = 8 tokens, n = b l = 16, h = 16, f = 32, a = 2 heads:
  // xhat1 + xhat2 + q + o + K/V rows 6 n h, rstd1 + rstd2 2 n, probs b a l t,
  // u n f scalars. The loss head (gpt_head.h) keeps xhat n h, the softmax n
  // vocab, rstd n scalars and n int32 targets.
  const int64_t b = 2, l = 8, n = b * l, h = 16, f = 32, a = 2, vocab = 32, scalar = 8;
  const int64_t block = (6 * n * h + 2 * n + b * a * l * l + n * f) * scalar;
  const int64_t loss = (n * h + n * vocab + n) * scalar + n * 4;
  ASSERT_EQ(block, 18688);
  Result<RunResult> run = run_threads(schedule_of("gpipe", 2, 2), tiny_model(), RunSettings{});
  ASSERT_TRUE(run.ok()) << run.error().message;
  const Timeline& t = run->timeline;
  EXPECT_EQ(t.peak_activation_bytes, (std::vector<int64_t>{2 * 2 * block, 2 * (2 * block + loss)}));
  // The per-stage figures the timeline reports for its memory events.
  ASSERT_EQ(t.stage_memory.size(), 2u);
  EXPECT_EQ(t.stage_memory[0].activation, 2 * block);
  EXPECT_EQ(t.stage_memory[1].activation, 2 * block + loss);
}

}  // namespace
}  // namespace runtime_test
}  // namespace ppsim::runtime
