// The CUDA backend over several GPUs (real_runtime/cuda_mpi.h), run by ctest
// as `mpirun -np 2 ppsim_cuda_mpi_tests`: every test runs on both ranks,
// each asserting on the whole run it got back. With a GPU per rank,
// pipelined training over NCCL does what the CPU's fp32 sequential
// reference does and the measured timeline joins the threads backend's;
// those tests skip, saying why, with fewer GPUs than ranks. Without a GPU
// for every rank (on any machine), every rank returns the same error and
// the job ends normally.
#include "real_runtime/cuda_mpi.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "real_runtime/mpi.h"
#include "tests/gpu/training_checks.h"

namespace ppsim::runtime {
namespace {

// A failed run leaves the other rank waiting for this one: end the job.
RunResult run_or_abort(const Schedule& schedule, const RuntimeModel& model,
                       const RunSettings& settings, CudaRunInfo* info = nullptr) {
  Result<RunResult> run = run_cuda_mpi(schedule, model, settings, {}, info);
  if (!run) {
    ADD_FAILURE() << run.error().message;
    mpi_abort(kRankFailedExitCode);
  }
  return std::move(*run);
}

class CudaMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(mpi_size(), 2) << "run under mpirun -np 2";
    std::string why;
    const int devices = gpu::device_count(&why);
    if (devices < mpi_size()) {
      GTEST_SKIP() << "needs a GPU per rank; this machine has " << devices
                   << (devices == 0 ? " (" + why + ")" : std::string());
    }
  }
};

struct MpiCase {
  std::string kind;
  int m, v;
};

void PrintTo(const MpiCase& c, std::ostream* os) { *os << c.kind << " m=" << c.m << " v=" << c.v; }

class CudaMpiTraining : public CudaMpi, public ::testing::WithParamInterface<MpiCase> {};

TEST_P(CudaMpiTraining, PipelinedTrainingOverNcclDoesWhatTheCpuReferenceDoes) {
  const MpiCase& c = GetParam();
  const RuntimeModel model = gpu_model(DType::kBf16);
  const RunResult run = run_or_abort(schedule_of(c.kind, 2, c.m, c.v), model, settings(3, 0.5));
  Result<RunResult> reference = run_sequential(model, c.m, settings(3, 0.5));
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  Result<RunResult> initial = run_sequential(model, c.m, settings(1, 0.0));
  ASSERT_TRUE(initial.ok()) << initial.error().message;
  EXPECT_LT(max_update_error(run.weights, reference->weights, initial->weights),
            kBf16UpdateTolerance);
  ASSERT_EQ(run.losses.size(), 3u);
  for (int it = 0; it < 3; ++it) {
    EXPECT_NEAR(run.losses[it], reference->losses[it], 4.16 * 4 * (1.0 / 256))
        << "iteration " << it;
  }
  expect_well_formed(schedule_of(c.kind, 2, c.m, c.v), run.timeline, 3);
}

// 1F1B: one order on each link; interleaved: two stages per rank share the
// links; zb-v: a hand-off within rank 1 and receives in another order than
// sent on the link 0 -> 1 (ordered_links_test.cc).
INSTANTIATE_TEST_SUITE_P(Schedules, CudaMpiTraining,
                         ::testing::Values(MpiCase{"1f1b", 4, 1}, MpiCase{"interleaved-1f1b", 4, 2},
                                           MpiCase{"zb-h1", 4, 1}, MpiCase{"zb-v", 4, 2}),
                         [](const ::testing::TestParamInfo<MpiCase>& info) {
                           std::string name = info.param.kind;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST_F(CudaMpi, RecordsTheThreadsBackendsActionsAndTransfersOnAGpuPerRank) {
  const RuntimeModel model = gpu_model(DType::kBf16);
  const Schedule schedule = schedule_of("zb-v", 2, 4, 2);
  CudaRunInfo info;
  const RunResult gpu = run_or_abort(schedule, model, settings(2, 0.1), &info);
  Result<RunResult> cpu = run_threads(schedule, model, settings(2, 0.1));
  ASSERT_TRUE(cpu.ok()) << cpu.error().message;
  const Timeline& g = gpu.timeline;
  const Timeline& t = cpu->timeline;
  ASSERT_EQ(g.actions.size(), t.actions.size());
  for (size_t i = 0; i < g.actions.size(); ++i) {
    EXPECT_EQ(g.actions[i].action, t.actions[i].action) << i;
    EXPECT_EQ(g.actions[i].rank, t.actions[i].rank) << i;
  }
  EXPECT_EQ(transfer_pairs(g), transfer_pairs(t));
  EXPECT_EQ(g.epilogue.size(), t.epilogue.size());
  for (const TransferRecord& r : g.transfers) EXPECT_LE(r.start, r.end);
  ASSERT_EQ(info.placements.size(), 2u);
  EXPECT_EQ(info.placements[0].rfind("device 0", 0), 0u) << info.placements[0];
  EXPECT_EQ(info.placements[1].rfind("device 1", 0), 0u) << info.placements[1];
  EXPECT_EQ(info.timing.rfind("host brackets", 0), std::string::npos) << info.timing;
}

// On any machine: the GPU of rank 1 does not exist (or no GPU does).
TEST(CudaMpiSetup, WithoutAGpuForEveryRankEveryRankSaysSoAndTheJobGoesOn) {
  ASSERT_EQ(mpi_size(), 2) << "run under mpirun -np 2";
  std::string why;
  const int devices = gpu::device_count(&why);
  CudaRunOptions options;
  options.device = devices > 0 ? devices - 1 : 0;  // rank 1 would need device `devices`
  CudaRunInfo info;
  Result<RunResult> run = run_cuda_mpi(schedule_of("1f1b", 2, 2), gpu_model(DType::kBf16),
                                       settings(1, 0.1), options, &info);
  ASSERT_FALSE(run.ok());
  EXPECT_TRUE(info.failed_on_every_rank);
  // The ranks that said the same are named together.
  const std::string who = devices > 0 ? "NCCL: rank 1: " : "NCCL: ranks 0, 1: ";
  EXPECT_NE(run.error().message.find(who), std::string::npos) << run.error().message;
  if (devices > 0) {
    EXPECT_NE(run.error().message.find("NCCL needs a GPU per rank"), std::string::npos)
        << run.error().message;
  }
  // The ranks are still in step: a collective goes through.
  EXPECT_EQ(mpi_size(), 2);
}

TEST(CudaMpiSetup, ChecksBeforeTheRunFailAlikeOnEveryRank) {
  ASSERT_EQ(mpi_size(), 2) << "run under mpirun -np 2";
  CudaRunInfo info;
  Result<RunResult> run = run_cuda_mpi(schedule_of("pipedream", 2, 4), gpu_model(DType::kBf16),
                                       settings(1, 0.1), {}, &info);
  ASSERT_FALSE(run.ok());
  EXPECT_TRUE(info.failed_on_every_rank);
  EXPECT_NE(run.error().message.find("S actions"), std::string::npos) << run.error().message;
  run =
      run_cuda_mpi(schedule_of("1f1b", 4, 4), gpu_model(DType::kBf16), settings(1, 0.1), {}, &info);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message.find("mpirun -np 4"), std::string::npos) << run.error().message;
}

}  // namespace
}  // namespace ppsim::runtime
