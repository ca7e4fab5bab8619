// The threads backend of the real runtime (real_runtime/runtime.h): pipelined
// training reproduces sequential training, the measured timeline keeps the
// schedule's order and dependencies, failures end the run with an Error that
// names the rank and action, and held activation memory matches the kernels'
// documented bytes rule.
#include "real_runtime/runtime.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "schedules/generators.h"
#include "schedules/validate.h"

namespace ppsim::runtime {
namespace {

// Tiny, so that every schedule trains in milliseconds. fp64: a pipelined
// run may add gradients in another order than the sequential one (token
// slices add slice by slice), and double keeps that difference ~1e-16.
RuntimeModel tiny_model(Precision precision = Precision::kFloat64) {
  RuntimeModel m;
  m.layers = 4;
  m.hidden = 16;
  m.ffn = 32;
  m.heads = 2;
  m.seq_len = 8;
  m.vocab = 32;
  m.micro_batch = 2;
  m.seed = 7;
  m.precision = precision;
  return m;
}

RunSettings three_iterations() {
  RunSettings s;
  s.iterations = 3;
  s.learning_rate = 0.5;  // large, so that the three steps move the weights visibly
  return s;
}

Schedule schedule_of(const std::string& kind, int p, int m, int v = 1, int slices = 1) {
  ScheduleParams params;
  params.ranks = p;
  params.microbatches = m;
  params.virtual_stages = v;
  params.slices = slices;
  Result<Schedule> s = make_schedule(kind, params);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return *s;
}

struct Case {
  std::string kind;
  int p, m, v, slices;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string name =
      info.param.kind + "_p" + std::to_string(info.param.p) + "_m" + std::to_string(info.param.m);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

class RuntimeEquivalenceTest : public testing::TestWithParam<Case> {};

TEST_P(RuntimeEquivalenceTest, PipelinedTrainingEqualsSequentialTraining) {
  const Case& c = GetParam();
  const Schedule schedule = schedule_of(c.kind, c.p, c.m, c.v, c.slices);
  const RuntimeModel model = tiny_model();
  Result<RunResult> piped = run_threads(schedule, model, three_iterations());
  ASSERT_TRUE(piped.ok()) << piped.error().message;
  Result<RunResult> reference = run_sequential(model, c.m, three_iterations());
  ASSERT_TRUE(reference.ok()) << reference.error().message;

  Result<double> err = max_relative_error(piped->weights, reference->weights);
  ASSERT_TRUE(err.ok()) << err.error().message;
  EXPECT_LT(*err, 1e-10);
  ASSERT_EQ(piped->losses.size(), 3u);
  ASSERT_EQ(reference->losses.size(), 3u);
  for (int it = 0; it < 3; ++it) {
    EXPECT_NEAR(piped->losses[it], reference->losses[it], 1e-12) << "iteration " << it;
  }
  // The untrained model guesses about uniformly: its loss is near log(vocab).
  // (Three SGD steps on a model this small do not reliably lower it.)
  EXPECT_NEAR(reference->losses[0], std::log(32.0), 0.1);
  // And the weights moved: an untrained model differs by far more than the tolerance.
  RunSettings none = three_iterations();
  none.learning_rate = 0;
  Result<RunResult> untrained = run_sequential(model, c.m, none);
  ASSERT_TRUE(untrained.ok());
  EXPECT_GT(*max_relative_error(untrained->weights, reference->weights), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Schedules, RuntimeEquivalenceTest,
                         testing::Values(Case{"gpipe", 2, 4, 1, 1}, Case{"gpipe", 1, 2, 1, 1},
                                         Case{"1f1b", 2, 4, 1, 1}, Case{"1f1b", 4, 8, 1, 1},
                                         Case{"interleaved-1f1b", 2, 4, 2, 1},
                                         Case{"zb-h1", 2, 4, 1, 1}, Case{"zb-h1", 4, 6, 1, 1},
                                         Case{"zb-h2", 2, 4, 1, 1}, Case{"zb-v", 2, 4, 2, 1},
                                         Case{"terapipe", 2, 2, 1, 2}),
                         case_name);

TEST(RuntimeTest, Float32TrainingIsCloseToSequential) {
  // Token slices sum each microbatch's gradient slice by slice, so the float
  // run rounds differently from the whole-sequence reference (~4e-7 here);
  // unsliced schedules reproduce it bit for bit.
  const RuntimeModel model = tiny_model(Precision::kFloat32);
  Result<RunResult> piped =
      run_threads(schedule_of("terapipe", 2, 4, 1, 2), model, three_iterations());
  ASSERT_TRUE(piped.ok()) << piped.error().message;
  Result<RunResult> reference = run_sequential(model, 4, three_iterations());
  ASSERT_TRUE(reference.ok());
  const double err = *max_relative_error(piped->weights, reference->weights);
  EXPECT_GT(err, 0);
  EXPECT_LT(err, 1e-5);
}

// Every action once, in program order per rank; inputs received from
// another rank arrive (a TransferRecord) before the action starts.
void expect_well_formed(const Schedule& schedule, const Timeline& t, int iterations) {
  const size_t n = schedule.num_actions();
  ASSERT_EQ(t.actions.size(), iterations * n);
  ASSERT_EQ(t.num_ranks, schedule.num_ranks);
  ASSERT_EQ(t.iteration_end.size(), static_cast<size_t>(iterations));
  std::map<std::tuple<int, int, int, int, int>, int> index;  // (it, kind, stage, mb, slice)
  std::vector<Picos> busy(schedule.num_ranks, 0);
  size_t i = 0;
  for (int it = 0; it < iterations; ++it) {
    for (int r = 0; r < schedule.num_ranks; ++r) {
      for (size_t pos = 0; pos < schedule.programs[r].size(); ++pos, ++i) {
        const ActionRecord& rec = t.actions[i];
        const Action& a = schedule.programs[r][pos];
        ASSERT_EQ(rec.action, a) << i;
        EXPECT_EQ(rec.rank, r);
        EXPECT_EQ(rec.iteration, it);
        EXPECT_LE(rec.start, rec.end);
        EXPECT_LE(rec.end, t.makespan);
        if (pos > 0) {
          EXPECT_GE(rec.start, t.actions[i - 1].end) << to_string(a);
        }
        busy[r] += rec.end - rec.start;
        index[{it, static_cast<int>(a.kind), a.stage, a.microbatch, a.slice}] = static_cast<int>(i);
      }
    }
  }
  EXPECT_EQ(t.busy, busy);
  // Later iterations start after the rank's optimizer step of the one before.
  for (const EpilogueRecord& e : t.epilogue) {
    EXPECT_LE(e.end, t.iteration_end[e.iteration]);
    if (e.kind != EpilogueKind::kOptimizerStep || e.iteration + 1 == iterations) continue;
    const size_t first = (e.iteration + 1) * n + [&] {
      size_t off = 0;
      for (int r = 0; r < e.rank; ++r) off += schedule.programs[r].size();
      return off;
    }();
    if (!schedule.programs[e.rank].empty()) {
      EXPECT_GE(t.actions[first].start, e.end);
    }
  }
  EXPECT_EQ(t.epilogue.size(), 2u * schedule.num_ranks * iterations);

  std::map<std::pair<int, int>, const TransferRecord*> transfers;
  for (const TransferRecord& x : t.transfers) {
    EXPECT_TRUE(transfers.emplace(std::pair{x.producer, x.consumer}, &x).second);
    EXPECT_NE(t.src_rank(x), t.dst_rank(x));
    EXPECT_GE(x.start, t.ready(x));
    EXPECT_LE(x.start, x.end);
    EXPECT_GT(t.bytes(x), 0);
  }
  size_t cross_rank = 0;
  const auto is_split = [&](int stage, int mb, int slice) {
    return index.count({0, static_cast<int>(ActionKind::kBackwardInput), stage, mb, slice}) > 0;
  };
  for (size_t c = 0; c < t.actions.size(); ++c) {
    const ActionRecord& rec = t.actions[c];
    for_each_data_dependency(
        rec.action, schedule.num_stages, schedule.num_slices, is_split, [&](const Action& dep) {
          const int p = index.at(
              {rec.iteration, static_cast<int>(dep.kind), dep.stage, dep.microbatch, dep.slice});
          EXPECT_GE(rec.start, t.actions[p].end);
          if (t.actions[p].rank == rec.rank) return;
          ++cross_rank;
          auto x = transfers.find({p, static_cast<int>(c)});
          ASSERT_NE(x, transfers.end()) << to_string(dep) << " -> " << to_string(rec.action);
          EXPECT_GE(rec.start, x->second->end);
        });
  }
  EXPECT_EQ(cross_rank, t.transfers.size());
}

TEST(RuntimeTest, MeasuredTimelineFollowsTheSchedule) {
  for (const Case& c : {Case{"1f1b", 2, 4, 1, 1}, Case{"zb-v", 2, 4, 2, 1},
                        Case{"interleaved-1f1b", 2, 4, 2, 1}, Case{"terapipe", 2, 2, 1, 2}}) {
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
    EXPECT_EQ(run.error().message.rfind(expected, 0), 0u) << run.error().message;
    EXPECT_NE(run.error().message.find("injected failure"), std::string::npos);
    EXPECT_LT(seconds, 3.0);
  }
}

TEST(RuntimeTest, RejectsWhatItCannotRun) {
  RunSettings settings;
  Result<RunResult> async = run_threads(schedule_of("pipedream", 2, 4), tiny_model(), settings);
  ASSERT_FALSE(async.ok());
  EXPECT_NE(async.error().message.find("asynchronous"), std::string::npos);

  RuntimeModel odd = tiny_model();
  odd.layers = 3;
  Result<RunResult> uneven = run_threads(schedule_of("1f1b", 2, 4), odd, settings);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.error().message.find("split evenly"), std::string::npos);

  settings.fail_at = FailAt{0, "not an action", 0};
  EXPECT_FALSE(run_threads(schedule_of("1f1b", 2, 4), tiny_model(), settings).ok());
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
}  // namespace ppsim::runtime
