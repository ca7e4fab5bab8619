// The MPI backend of the real runtime (real_runtime/mpi.h), run by ctest as
// `mpirun -np 2 ppsim_mpi_tests`: every test runs on both ranks, each
// asserting on the whole run it got back. Pipelined training over MPI
// reproduces sequential training; the measured timeline has the threads
// backend's layout, transfers and memory figures; the checks before a run
// fail on every rank alike; the MPI link's ping-pong gives rank 0 one sample
// per size, which fit_link fits. The failure cases (a rank that throws, a rank
// that is killed) end the job, so fault_test.sh runs them through ppsim-run.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "real_runtime/mpi.h"
#include "tests/unit/runtime_checks.h"

namespace ppsim::runtime {
namespace {

// A failed run leaves the other rank waiting for this one: end the job.
RunResult run_or_abort(const Schedule& schedule, const RuntimeModel& model,
                       const RunSettings& settings) {
  Result<RunResult> run = run_mpi(schedule, model, settings);
  if (!run) {
    ADD_FAILURE() << run.error().message;
    mpi_abort(kRankFailedExitCode);
  }
  return std::move(*run);
}

class MpiEquivalenceTest : public testing::TestWithParam<Case> {};

TEST_P(MpiEquivalenceTest, PipelinedTrainingEqualsSequentialTraining) {
  const Case& c = GetParam();
  ASSERT_EQ(mpi_size(), c.p) << "run under mpirun -np " << c.p;
  const Schedule schedule = schedule_of(c.kind, c.p, c.m, c.v, c.slices);
  const RunResult piped = run_or_abort(schedule, tiny_model(), three_iterations());
  expect_trains_like_sequential(piped, c.m);
}

std::vector<Case> mpi_cases() {
  std::vector<Case> cases = two_rank_cases();
  cases.push_back(Case{"terapipe", 2, 4, 1, 3});  // uneven slices: 3, 3, 2 tokens
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Schedules, MpiEquivalenceTest, testing::ValuesIn(mpi_cases()), case_name);

TEST(MpiRuntimeTest, BroadcastTextGivesEveryRankTheRootsText) {
  const std::string mine = "rank " + std::to_string(mpi_rank());
  EXPECT_EQ(mpi_broadcast_text(mine, 1), "rank 1");
  EXPECT_EQ(mpi_broadcast_text(mpi_rank() == 0 ? std::string() : mine, 0), "");
  const std::string bytes("a\0b\nc", 5);  // any bytes, not just a C string
  EXPECT_EQ(mpi_broadcast_text(mpi_rank() == 0 ? bytes : std::string(), 0), bytes);
}

TEST(MpiRuntimeTest, FirstErrorIsEveryRanksOrNone) {
  EXPECT_EQ(mpi_first_error(""), "");
  EXPECT_EQ(mpi_first_error(mpi_rank() == 1 ? "rank 1 failed" : ""), "rank 1 failed");
  EXPECT_EQ(mpi_first_error("rank " + std::to_string(mpi_rank())), "rank 0");
}

TEST(MpiRuntimeTest, Float32RunEqualsTheThreadsRunBitForBit) {
  // The same executor computes the same sums in the same order whatever
  // carries the tensors.
  const Schedule schedule = schedule_of("zb-v", 2, 4, 2);
  const RuntimeModel model = tiny_model(Precision::kFloat32);
  const RunResult mpi = run_or_abort(schedule, model, three_iterations());
  Result<RunResult> threads = run_threads(schedule, model, three_iterations());
  ASSERT_TRUE(threads.ok()) << threads.error().message;
  EXPECT_EQ(*max_relative_error(mpi.weights, threads->weights), 0.0);
  EXPECT_EQ(mpi.losses, threads->losses);
}

TEST(MpiRuntimeTest, AsynchronousSchedulesTrainAsTheDelayedReference) {
  // No barrier between iterations: a key's message of the next iteration is
  // sent only after this one's was received (and MPI keeps a tag's order).
  for (const std::string kind : {"pipedream", "pipedream-2bw"}) {
    SCOPED_TRACE(kind);
    const Schedule schedule = schedule_of(kind, 2, 4);
    const RunResult mpi = run_or_abort(schedule, tiny_model(), three_iterations());
    Result<RunResult> reference = run_delayed_reference(schedule, tiny_model(), three_iterations());
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    EXPECT_LT(*max_relative_error(mpi.weights, reference->weights), 1e-10);
    EXPECT_EQ(mpi.weight_versions, (std::vector<int>{2, 1}));
    EXPECT_TRUE(mpi.timeline.epilogue.empty());
  }
}

// (producer, consumer) of each transfer, (kind, rank, iteration) of each
// epilogue record: what two runs of one schedule must share.
std::set<std::pair<int, int>> transfer_ends(const Timeline& t) {
  std::set<std::pair<int, int>> ends;
  for (const TransferRecord& x : t.transfers) ends.insert({x.producer, x.consumer});
  return ends;
}

std::vector<std::tuple<int, int, int>> epilogue_ids(const Timeline& t) {
  std::vector<std::tuple<int, int, int>> ids;
  for (const EpilogueRecord& e : t.epilogue) {
    ids.emplace_back(static_cast<int>(e.kind), e.rank, e.iteration);
  }
  return ids;
}

TEST(MpiRuntimeTest, MeasuredTimelineHasTheThreadsBackendsLayout) {
  for (const Case& c : {Case{"1f1b", 2, 4, 1, 1}, Case{"zb-v", 2, 4, 2, 1},
                        Case{"interleaved-1f1b", 2, 4, 2, 1}, Case{"terapipe", 2, 2, 1, 2}}) {
    SCOPED_TRACE(c.kind);
    const Schedule schedule = schedule_of(c.kind, c.p, c.m, c.v, c.slices);
    const RunResult mpi = run_or_abort(schedule, tiny_model(), three_iterations());
    // Times from one clock: dependencies and transfers in order across ranks.
    expect_well_formed(schedule, mpi.timeline, 3);
    Result<RunResult> threads = run_threads(schedule, tiny_model(), three_iterations());
    ASSERT_TRUE(threads.ok()) << threads.error().message;
    const Timeline& m = mpi.timeline;
    const Timeline& t = threads->timeline;
    ASSERT_EQ(m.actions.size(), t.actions.size());
    for (size_t i = 0; i < m.actions.size(); ++i) {
      EXPECT_EQ(m.actions[i].action, t.actions[i].action) << i;
      EXPECT_EQ(m.actions[i].rank, t.actions[i].rank) << i;
      EXPECT_EQ(m.actions[i].iteration, t.actions[i].iteration) << i;
    }
    EXPECT_FALSE(m.transfers.empty());
    EXPECT_EQ(transfer_ends(m), transfer_ends(t));
    EXPECT_EQ(epilogue_ids(m), epilogue_ids(t));
    // Held activation bytes follow from the schedule alone.
    EXPECT_EQ(m.peak_activation_bytes, t.peak_activation_bytes);
    EXPECT_GT(m.peak_activation_bytes[0], 0);
    ASSERT_EQ(m.stage_memory.size(), t.stage_memory.size());
    for (size_t k = 0; k < m.stage_memory.size(); ++k) {
      EXPECT_EQ(m.stage_memory[k].activation, t.stage_memory[k].activation);
      EXPECT_EQ(m.stage_memory[k].weight_grad, t.stage_memory[k].weight_grad);
    }
    EXPECT_EQ(m.p2p_bytes, t.p2p_bytes);
    EXPECT_EQ(m.num_slices, t.num_slices);
    EXPECT_EQ(m.iterations, 3);
    EXPECT_EQ(m.num_ranks, 2);
  }
}

TEST(MpiRuntimeTest, ChecksFailAlikeOnEveryRankBeforeAnyMessage) {
  // Four ranks in a job of two: no rank may start (it would wait forever).
  const Schedule four = schedule_of("1f1b", 4, 4);
  Result<RunResult> run = run_mpi(four, tiny_model(), three_iterations());
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message.find("mpirun -np 4"), std::string::npos) << run.error().message;
  EXPECT_FALSE(check_mpi_run(four, tiny_model(), three_iterations()).ok());

  RuntimeModel odd = tiny_model();
  odd.layers = 3;
  Result<RunResult> uneven = run_mpi(schedule_of("1f1b", 2, 4), odd, three_iterations());
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.error().message.find("split evenly"), std::string::npos);
  EXPECT_TRUE(check_mpi_run(schedule_of("1f1b", 2, 4), tiny_model(), three_iterations()).ok());
}

TEST(MpiLinkTest, PingPongGivesRankZeroOneSamplePerSizeThatFits) {
  // Large enough sizes that time grows with size despite noise; no bound
  // on the times themselves (the machines vary).
  const std::vector<int64_t> sizes = {1 << 20, 1 << 22, 1 << 24};
  Result<std::vector<LinkSample>> samples = mpi_ping_pong(sizes, 1, 5);
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  if (mpi_rank() != 0) {
    EXPECT_TRUE(samples->empty());
  } else {
    ASSERT_EQ(samples->size(), sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ((*samples)[i].bytes, sizes[i]);
      EXPECT_GT((*samples)[i].seconds, 0.0);
    }
    Result<LinkFit> fit = fit_link("mpi", *samples);
    EXPECT_TRUE(fit.ok()) << fit.error().message;
  }

  Result<LinkFit> link = measure_mpi_link("mpi", sizes, 1, 5);
  ASSERT_TRUE(link.ok()) << link.error().message;
  EXPECT_EQ(link->name, "mpi");
  if (mpi_rank() == 0) {
    EXPECT_EQ(link->samples.size(), sizes.size());
    EXPECT_GT(link->bandwidth_Bps, 0.0);
    EXPECT_GE(link->latency_s, 0.0);
  } else {
    EXPECT_TRUE(link->samples.empty());
  }
}

TEST(MpiLinkTest, BadArgumentsFailAlikeOnEveryRankBeforeAnyMessage) {
  Result<std::vector<LinkSample>> none = mpi_ping_pong({1024}, 1, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("repetitions"), std::string::npos);
  Result<std::vector<LinkSample>> huge = mpi_ping_pong({int64_t{1} << 40}, 1, 1);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("size"), std::string::npos);
}

}  // namespace
}  // namespace ppsim::runtime
