// DualPipe (bidirectional): its order against DeepSeek's reference
// implementation, its two chains of stages in the validator and the engine,
// and its idle time against the README's bubble.
#include "schedules/dualpipe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "schedules/csv.h"
#include "schedules/validate.h"
#include "sim/config/config.h"
#include "sim/core/costs.h"
#include "sim/engine/engine.h"
#include "sim/plan/simulate.h"

namespace ppsim {
namespace dualpipe_test {
namespace {

using ::testing::HasSubstr;

// The per-rank lines of tests/data/dualpipe/<name>, comments skipped.
std::vector<std::string> reference_order(const std::string& name) {
  std::ifstream in(std::string(PPSIM_SOURCE_DIR "/tests/data/dualpipe/") + name);
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') rows.push_back(line);
  }
  return rows;
}

// The reference's step() transcribed compute call by compute call
// (tests/data/dualpipe/transcribe.py): 8 ranks and 20 microbatches, the
// README's figure, and 4 and 10.
TEST(DualPipe, BuildsTheReferenceImplementationsOrder) {
  for (const auto& [p, m] : {std::pair{8, 20}, std::pair{4, 10}}) {
    const std::string name =
        "dualpipe_" + std::to_string(p) + "rank_" + std::to_string(m) + "mb.txt";
    const std::vector<std::string> expected = reference_order(name);
    ASSERT_EQ(expected.size(), static_cast<size_t>(p)) << name;
    const Result<Schedule> s = make_dualpipe({p, m, 2});
    ASSERT_TRUE(s.ok()) << s.error().message;
    for (int rank = 0; rank < p; ++rank) {
      EXPECT_EQ(program_to_string(s->programs[rank]), expected[rank]) << name << " rank " << rank;
    }
    EXPECT_TRUE(validate(*s).ok()) << validate(*s).message();
  }
}

// Rank r holds stage r of the direction entering at rank 0 and stage p-1-r
// of the other (ppsim's stage 2p-1-r); microbatches 0..m/2-1 take the first
// chain, m/2..m-1 the second.
TEST(DualPipe, RunsHalfTheMicrobatchesThroughEachChain) {
  const Schedule s = *make_dualpipe({4, 8, 2});
  EXPECT_EQ(s.num_chains, 2);
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  for (const auto& program : s.programs) {
    for (const Action& a : program) {
      EXPECT_EQ(a.stage < 4, a.microbatch < 4) << to_string(a);
    }
    // 4 microbatches through each of its 2 stages: a forward and a backward
    // (B, or I and W) each.
    EXPECT_GE(program.size(), 16u);
  }
}

TEST(DualPipe, NamesWhatItNeeds) {
  for (const ScheduleParams& bad :
       {ScheduleParams{3, 12, 2}, ScheduleParams{4, 9, 2}, ScheduleParams{4, 6, 2}}) {
    const Result<Schedule> s = make_dualpipe(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error().message,
                HasSubstr("needs an even number of ranks and an even number of microbatches, at "
                          "least twice the ranks"));
  }
  EXPECT_FALSE(make_dualpipe({4, 8, 1}).ok());
}

// A microbatch of the first chain on a stage of the second is an error
// naming the stages it may visit.
TEST(DualPipe, ValidatorKeepsEachMicrobatchOnItsChain) {
  Schedule s = *make_dualpipe({2, 4, 2});
  s.programs[0][0].microbatch = 2;  // 0F0 -> 0F2: microbatch 2 enters at rank 1
  const Status st = validate(s);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("rank 0 runs 0F2, but microbatch 2 passes through stages "
                                      "2..3 only (chain 1 of 2)"));
}

// Written out and read back, the file's microbatches stay on their halves of
// the stages: the reader finds the two chains.
TEST(DualPipe, CsvRoundTripFindsTheChains) {
  const Schedule s = *make_dualpipe({4, 8, 2});
  const Result<Schedule> back = schedule_from_csv(schedule_to_csv(s), "dualpipe.csv");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->num_chains, 2);
  EXPECT_EQ(back->programs, s.programs);
  EXPECT_TRUE(validate(*back).ok()) << validate(*back).message();
}

// DeepSeek's README gives DualPipe's bubble as (PP/2 - 1)(F&B + B - 3W)
// for PP ranks. With nothing to hide (F&B = F + B) and no transfer time,
// a rank's idle time (the makespan less its m forwards and backwards: m/2
// microbatches through each of its two stages) is at most that.
TEST(DualPipe, IdlesNoMoreThanTheReadmesBubble) {
  const Picos f = 1'000'000;
  const Picos b = 2'000'000;
  for (const int p : {2, 4, 8}) {
    for (const Picos w : {Picos{0}, b / 4, b / 2}) {
      const int m = 3 * p;  // even, at least 2p
      const Schedule s = *make_dualpipe({p, m, 2});
      CostTable costs = uniform_costs(2 * p, p, f, b);
      for (StageCost& stage : costs.stages) stage.weight_grad = w;
      Timeline t;
      ASSERT_TRUE(Engine().run(s, costs, &t).ok());
      const Picos readme = (p / 2 - 1) * ((f + b) + b - 3 * w);
      const Picos busy = m * (f + b);
      EXPECT_LE(t.makespan - busy, readme) << "p=" << p << " W=" << w;
      EXPECT_GE(t.makespan - busy, readme - f) << "p=" << p << " W=" << w;
    }
  }
}

// The README's memory column: PP + 1 chunks of activations on every rank
// (each chunk one microbatch's through one of a rank's stages), and twice
// the parameters (cost_model_test.cc, DualPipeCosts).
TEST(DualPipe, HoldsTheReadmesActivations) {
  for (const int p : {2, 4, 8}) {
    const Schedule s = *make_dualpipe({p, 4 * p, 2});
    const CostTable costs = uniform_costs(2 * p, p, 1'000'000, 2'000'000, 0, 1000);
    Timeline t;
    ASSERT_TRUE(Engine().run(s, costs, &t).ok());
    EXPECT_EQ(t.peak_activation_bytes, std::vector<int64_t>(p, (p + 1) * 1000)) << "p=" << p;
  }
}

// From a config: the layout's keys name what DualPipe needs; written to a
// file, its two chains are not priced as a custom schedule (the cost model
// would cut the model over all 2p stages).
TEST(DualPipe, ConfigsNameWhatIsMissing) {
  const std::string costs = "costs:\n  fixed: {forward_s: 1.0, backward_s: 2.0}\n";
  const auto simulated = [&](int p, int m, const std::string& schedule) {
    const std::string yaml = "parallel: {pipeline: " + std::to_string(p) +
                             ", virtual_stages: 2}\ntraining: {global_batch: " + std::to_string(m) +
                             "}\nschedule: " + schedule + "\n" + costs;
    const Result<Config> config = parse_config(yaml, "dualpipe.yaml");
    EXPECT_TRUE(config.ok()) << config.error().message;
    return simulate(*config);
  };
  const Result<Simulation> ok = simulated(4, 8, "{kind: dualpipe}");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  // 4 microbatches through each of a rank's 2 stages, 3 s each, and the
  // README's bubble (PP/2 - 1)(F&B + B - 3W) = 1 x (3 + 2) = 5 s at most.
  EXPECT_GE(ok->summary.iteration_time_s, 24.0);
  EXPECT_LE(ok->summary.iteration_time_s, 29.0);
  const Result<Simulation> odd = simulated(3, 8, "{kind: dualpipe}");
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(odd.error().message, HasSubstr("dualpipe.yaml: schedule dualpipe: needs an even "
                                             "number of ranks"));

  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / "ppsim_dualpipe_test.csv";
  std::ofstream(file) << schedule_to_csv(*make_dualpipe({4, 8, 2}));
  const Result<Simulation> custom = simulated(4, 8, "{kind: custom, file: " + file.string() + "}");
  std::filesystem::remove(file);
  ASSERT_FALSE(custom.ok());
  EXPECT_THAT(custom.error().message,
              HasSubstr("runs its microbatches through 2 chains of stages (DualPipe's shape); "
                        "ppsim prices two chains only for schedule.kind: dualpipe"));
}

}  // namespace
}  // namespace dualpipe_test
}  // namespace ppsim
