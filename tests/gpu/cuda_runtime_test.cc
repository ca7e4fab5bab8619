// The CUDA backend (real_runtime/cuda.h) on a real GPU: pipelined training in
// bf16 and fp16 does what the CPU's fp32 sequential reference does, its
// measured timeline has the threads backend's records, transfers and
// epilogue, with device spans in place of the host brackets, each rank has
// its own SMs where green contexts exist, and the bytes a stage holds are
// the GPU block's and head's figures. Skips, saying why, without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "profiler/cupti_tracer.h"
#include "profiler/gpu_block.h"
#include "profiler/gpu_head.h"
#include "real_runtime/cuda.h"
#include "tests/gpu/training_checks.h"

namespace ppsim::runtime {
namespace {

class CudaRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (gpu::device_count(&why) == 0) GTEST_SKIP() << why;
  }
};

struct GpuCase {
  std::string kind;
  int p, m, v;
  DType dtype;
};

void PrintTo(const GpuCase& c, std::ostream* os) {
  *os << c.kind << " p=" << c.p << " m=" << c.m << " v=" << c.v << " " << to_string(c.dtype);
}

class CudaTraining : public CudaRuntime, public ::testing::WithParamInterface<GpuCase> {};

TEST_P(CudaTraining, PipelinedTrainingOnTheGpuDoesWhatTheCpuReferenceDoes) {
  const GpuCase& c = GetParam();
  const RuntimeModel model = gpu_model(c.dtype);
  const Schedule schedule = schedule_of(c.kind, c.p, c.m, c.v);
  CudaRunInfo info;
  Result<RunResult> run = run_cuda(schedule, model, settings(3, 0.5), {}, &info);
  ASSERT_TRUE(run.ok()) << run.error().message;
  Result<RunResult> reference = run_sequential(model, c.m, settings(3, 0.5));
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  Result<RunResult> initial = run_sequential(model, c.m, settings(1, 0.0));
  ASSERT_TRUE(initial.ok()) << initial.error().message;

  const double tolerance = c.dtype == DType::kBf16 ? kBf16UpdateTolerance : kFp16UpdateTolerance;
  EXPECT_LT(max_update_error(run->weights, reference->weights, initial->weights), tolerance);
  ASSERT_EQ(run->losses.size(), 3u);
  for (int it = 0; it < 3; ++it) {
    // A loss near log(64) = 4.16 from logits rounded to 16 bits.
    EXPECT_NEAR(run->losses[it], reference->losses[it], 4.16 * 4 * (1.0 / 256))
        << "iteration " << it;
  }
  expect_well_formed(schedule, run->timeline, 3);
  EXPECT_EQ(info.placements.size(), static_cast<size_t>(c.p));
}

INSTANTIATE_TEST_SUITE_P(Schedules, CudaTraining,
                         ::testing::Values(GpuCase{"gpipe", 1, 2, 1, DType::kBf16},
                                           GpuCase{"1f1b", 2, 4, 1, DType::kBf16},
                                           GpuCase{"interleaved-1f1b", 2, 4, 2, DType::kBf16},
                                           GpuCase{"zb-h1", 2, 4, 1, DType::kBf16},
                                           GpuCase{"1f1b", 4, 4, 1, DType::kFp16},
                                           GpuCase{"terapipe", 2, 2, 1, DType::kBf16}),
                         [](const ::testing::TestParamInfo<GpuCase>& info) {
                           std::string name = info.param.kind + "_p" +
                                              std::to_string(info.param.p) + "_" +
                                              to_string(info.param.dtype);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The measured timeline joins the threads backend's on every record.
TEST_F(CudaRuntime, RecordsTheThreadsBackendsActionsTransfersAndEpilogue) {
  const RuntimeModel model = gpu_model(DType::kBf16);
  const Schedule schedule = schedule_of("zb-h1", 2, 4);
  CudaRunInfo info;
  Result<RunResult> gpu = run_cuda(schedule, model, settings(2, 0.1), {}, &info);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  Result<RunResult> cpu = run_threads(schedule, model, settings(2, 0.1));
  ASSERT_TRUE(cpu.ok()) << cpu.error().message;
  const Timeline& g = gpu->timeline;
  const Timeline& t = cpu->timeline;
  ASSERT_EQ(g.actions.size(), t.actions.size());
  for (size_t i = 0; i < g.actions.size(); ++i) {
    EXPECT_EQ(g.actions[i].action, t.actions[i].action) << i;
    EXPECT_EQ(g.actions[i].rank, t.actions[i].rank) << i;
    EXPECT_EQ(g.actions[i].iteration, t.actions[i].iteration) << i;
  }
  EXPECT_EQ(transfer_pairs(g), transfer_pairs(t));
  EXPECT_EQ(g.epilogue.size(), t.epilogue.size());
  // bf16 transfers: b s h 2 bytes.
  EXPECT_EQ(g.p2p_bytes, std::vector<int64_t>{2 * 16 * 64 * 2});
  // The tracer's spans replaced the brackets (unless PPSIM_TRACER=events
  // was asked for, when events do).
  EXPECT_EQ(info.timing.rfind("host brackets", 0), std::string::npos) << info.timing;
}

TEST_F(CudaRuntime, EachRankRunsOnItsOwnSmsWhereGreenContextsExist) {
  Result<std::unique_ptr<gpu::SmPartition>> probe = gpu::SmPartition::create(0, 2);
  if (!probe) GTEST_SKIP() << "no green contexts here: " << probe.error().message;
  const int per_rank = (*probe)->sms_per_group();
  probe->reset();
  CudaRunInfo info;
  Result<RunResult> run =
      run_cuda(schedule_of("1f1b", 2, 2), gpu_model(DType::kBf16), settings(1, 0.1), {}, &info);
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_TRUE(info.green_contexts);
  EXPECT_EQ(info.sms_per_rank, per_rank);
  for (const std::string& p : info.placements) {
    EXPECT_NE(p.find("green context of " + std::to_string(per_rank)), std::string::npos) << p;
  }
  // Asked not to, the ranks share every SM.
  CudaRunOptions shared;
  shared.split_sms = false;
  run =
      run_cuda(schedule_of("1f1b", 2, 2), gpu_model(DType::kBf16), settings(1, 0.1), shared, &info);
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_FALSE(info.green_contexts);
  EXPECT_NE(info.sharing.find("plain streams"), std::string::npos) << info.sharing;
}

// What a stage holds is what the GPU block's and head's figures say:
// stage 0 its two blocks' after-forward bytes, plus, after I, the input
// gradient it keeps for the embedding's W; the last stage the loss's too.
TEST_F(CudaRuntime, StagesHoldTheBlockAndHeadFigures) {
  const RuntimeModel model = gpu_model(DType::kBf16);
  Result<RunResult> run = run_cuda(schedule_of("zb-h1", 2, 2), model, settings(1, 0.1));
  ASSERT_TRUE(run.ok()) << run.error().message;
  const gpu::SliceShape shape{model.micro_batch, model.seq_len, 0,
                              model.hidden,      model.ffn,     model.heads};
  const gpu::SavedFigures block = gpu::saved_figures(shape, DType::kBf16);
  const gpu::LossFigures loss =
      gpu::loss_figures(shape.rows(), model.hidden, model.vocab, DType::kBf16);
  const int64_t kept_dx = shape.rows() * model.hidden * 2;
  const std::vector<Timeline::StageMemory>& m = run->timeline.stage_memory;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].activation, 2 * block.after_forward);
  EXPECT_EQ(m[0].weight_grad, 2 * block.after_input() + kept_dx);
  EXPECT_EQ(m[1].activation, 2 * block.after_forward + loss.after_forward);
  EXPECT_EQ(m[1].weight_grad, 2 * block.after_input() + loss.after_input);
}

TEST_F(CudaRuntime, AsynchronousSchedulesAreRefusedSayingWhy) {
  Result<RunResult> run =
      run_cuda(schedule_of("pipedream", 2, 4), gpu_model(DType::kBf16), settings(1, 0.1));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message.find("S actions"), std::string::npos) << run.error().message;
}

TEST_F(CudaRuntime, AFailureOnARankComesBackNamingIt) {
  RunSettings s = settings(2, 0.1);
  s.fail_at = FailAt{1, "1B1", 1, false};
  Result<RunResult> run = run_cuda(schedule_of("1f1b", 2, 2), gpu_model(DType::kBf16), s);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error().message, "rank 1, 1B1: injected failure (RunSettings::fail_at)");
}

}  // namespace
}  // namespace ppsim::runtime
