// A profile's calibration section: read and written exactly, malformed ones
// named by file:line:column and key, and applied by the simulator (a GPipe
// closed form; the split-backward figures of the cost table).
#include "sim/cost/calibration.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "schedules/generators.h"
#include "sim/config/config.h"
#include "sim/cost/cost_profile.h"
#include "sim/plan/simulate.h"
#include "tests/unit/calibration_fixtures.h"

namespace ppsim {
namespace calibration_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

namespace fs = std::filesystem;

std::string error_of(std::string_view text) {
  const Result<CostProfile> profile = parse_profile(text, "p.yaml");
  return profile.ok() ? "(no error)" : profile.error().message;
}

Calibration sample_calibration() {
  Calibration c;
  c.forward = KindCalibration{1.0 / 3.0, 1.2345e-5};
  c.backward_input = KindCalibration{0, 0};
  c.backward_weight = KindCalibration{2.5, 3e-300};
  c.optimizer_step = KindCalibration{0.125, 7e-4};
  c.link = LinkCalibration{2.5e-6, 1.5e11};
  return c;
}

TEST(CalibrationSection, RoundTripIsExact) {
  CostProfile profile;
  profile.calibration = sample_calibration();
  const Result<CostProfile> read = parse_profile(profile_to_yaml(profile), "p.yaml");
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read, profile);
  EXPECT_FALSE(read->calibration->backward);  // absent entries stay absent

  profile.calibration = Calibration{};  // a section with nothing in it
  const Result<CostProfile> empty = parse_profile(profile_to_yaml(profile), "p.yaml");
  ASSERT_TRUE(empty.ok()) << empty.error().message;
  EXPECT_EQ(empty->calibration, Calibration{});

  profile.calibration.reset();
  EXPECT_THAT(profile_to_yaml(profile), Not(HasSubstr("calibration")));
}

TEST(CalibrationSection, WritesOneEntryPerLine) {
  CostProfile profile;
  profile.calibration = Calibration{};
  profile.calibration->backward = KindCalibration{0.5, 0.25};
  profile.calibration->link = LinkCalibration{1e-6, 2e9};
  const std::string text = profile_to_yaml(profile);
  EXPECT_THAT(text, HasSubstr("calibration:\n"
                              "  backward: {scale: 0.5, overhead_s: 0.25}\n"
                              "  link: {latency_s: 1.0e-06, bandwidth_Bps: 2000000000.0}\n"));
}

TEST(CalibrationSection, MalformedEntriesNameTheirPlace) {
  EXPECT_EQ(error_of("version: 2\ncalibration:\n  forward: {scale: -1.0, overhead_s: 0.0}\n"),
            "p.yaml:3:20: calibration.forward.scale: expected a number >= 0, got \"-1.0\"");
  EXPECT_EQ(error_of("version: 2\ncalibration:\n  backward: {scale: 1.0}\n"),
            "p.yaml:3:13: calibration.backward.overhead_s: missing");
  EXPECT_EQ(error_of("version: 2\ncalibration:\n  forwrd: {scale: 1.0, overhead_s: 0.0}\n"),
            "p.yaml:3:3: calibration.forwrd: unknown key, expected one of forward, backward, "
            "backward_input, backward_weight, optimizer_step, link");
  EXPECT_EQ(error_of("version: 2\ncalibration:\n  link: {latency_s: 0.0, bandwidth_Bps: 0.0}\n"),
            "p.yaml:3:41: calibration.link.bandwidth_Bps: expected a positive number, got \"0.0\"");
  EXPECT_EQ(error_of("version: 2\ncalibration:\n  link: {latency_s: 1.0, bw: 2.0}\n"),
            "p.yaml:3:26: calibration.link.bw: unknown key, expected one of latency_s, "
            "bandwidth_Bps");
  EXPECT_EQ(error_of("version: 2\ncalibration: [1, 2]\n"),
            "p.yaml:2:14: calibration: expected a map with keys forward, backward, "
            "backward_input, backward_weight, optimizer_step, link, got \"[1, 2]\"");
  // Version 1 has no such section.
  EXPECT_EQ(error_of("version: 1\ncalibration: {}\n"),
            "p.yaml:2:1: calibration: unknown key, expected one of version, provenance, kernels, "
            "links");
}

TEST(CalibrationSection, ComposeChainsTheKindsAndReplacesTheLink) {
  Calibration inner, outer;
  inner.forward = KindCalibration{2, 1e-3};
  inner.backward = KindCalibration{3, 0};
  inner.link = LinkCalibration{1e-6, 1e9};
  outer.forward = KindCalibration{0.5, 2e-3};
  outer.backward_weight = KindCalibration{4, 1e-4};
  outer.link = LinkCalibration{2e-6, 5e8};
  const Calibration c = compose(outer, inner);
  // 0.5 (2 t + 1e-3) + 2e-3 = t + 2.5e-3
  EXPECT_DOUBLE_EQ(c.forward->scale, 1.0);
  EXPECT_DOUBLE_EQ(c.forward->overhead_s, 2.5e-3);
  EXPECT_EQ(c.backward, inner.backward);
  EXPECT_EQ(c.backward_weight, outer.backward_weight);
  EXPECT_FALSE(c.backward_input);
  EXPECT_EQ(c.link, outer.link);
  EXPECT_EQ(compose(Calibration{}, inner).link, inner.link);
}

// ---- Applying it ----

// A table of whole-picosecond figures: F 1 ms, B 2 ms of which W 0.8 ms.
CostTable table(int stages) {
  CostTable t = uniform_costs(stages, stages, 1'000'000'000, 2'000'000'000);
  for (StageCost& c : t.stages) c.weight_grad = 800'000'000;
  for (int64_t& b : t.p2p_bytes) b = 1'000'000;
  return t;
}

TEST(ApplyCalibration, WholeAndSplitBackwards) {
  Calibration c;
  c.forward = KindCalibration{1.5, 1e-4};
  c.backward = KindCalibration{0.5, 2e-4};
  c.backward_input = KindCalibration{2, 1e-4};
  c.backward_weight = KindCalibration{0.25, 3e-4};
  c.optimizer_step = KindCalibration{0.5, 1e-3};
  c.link = LinkCalibration{1e-5, 1e9};
  CostTable t = table(3);
  t.optimizer_step = {4'000'000'000, 0, 2'000'000'000};
  apply_calibration(c, {0, 1, 1},
                    {BackwardForm::kWhole, BackwardForm::kSplit, BackwardForm::kWhole},
                    FixedCosts{}, t);
  for (const StageCost& s : t.stages) EXPECT_EQ(s.forward, 1'600'000'000);  // 1.5 ms + 0.1 ms
  // Whole: B' = 0.5 * 2 ms + 0.2 ms; W keeps its share, 0.5 * 0.8 ms.
  EXPECT_EQ(t.stages[0].backward, 1'200'000'000);
  EXPECT_EQ(t.stages[0].weight_grad, 400'000'000);
  // Split: I' = 2 * 1.2 ms + 0.1 ms, W' = 0.25 * 0.8 ms + 0.3 ms, B = I' + W'.
  EXPECT_EQ(t.stages[1].weight_grad, 500'000'000);
  EXPECT_EQ(t.stages[1].backward, 2'500'000'000 + 500'000'000);
  // Ranks 0 -> 1: 10 us + 1 MB / 1 GB/s; stages 1 and 2 share rank 1: untouched.
  EXPECT_EQ(t.p2p_forward[0], 1'010'000'000);
  EXPECT_EQ(t.p2p_backward[0], 1'010'000'000);
  EXPECT_EQ(t.p2p_forward[1], 0);
  // Steps: 0.5 * 4 ms + 1 ms, 0 + 1 ms, 0.5 * 2 ms + 1 ms.
  EXPECT_EQ(t.optimizer_step, (std::vector<Picos>{3'000'000'000, 1'000'000'000, 2'000'000'000}));
}

TEST(ApplyCalibration, AnOverlappedBackwardKeepsItsInputGradientAlone) {
  // B 2 ms = I 1.5 ms + W 0.8 ms - 0.3 ms hidden beside W, 0.5 ms of I
  // communicating.
  Calibration c;
  c.backward = KindCalibration{0.5, 2e-4};
  c.backward_input = KindCalibration{2, 1e-4};
  c.backward_weight = KindCalibration{0.25, 3e-4};
  CostTable t = table(2);
  for (StageCost& s : t.stages) {
    s.backward_comm = 500'000'000;
    s.backward_overlap = 300'000'000;
  }
  ASSERT_EQ(input_grad_time(t.stages[0]), 1'500'000'000);
  apply_calibration(c, {0, 1}, {BackwardForm::kWhole, BackwardForm::kSplit}, FixedCosts{}, t);
  // Whole: B' = 0.5 * 2 ms + 0.2 ms, W and the overlap their shares
  // (0.4 and 0.15 ms), so that I alone is 0.5 * 1.5 ms + 0.2 ms.
  EXPECT_EQ(t.stages[0].backward, 1'200'000'000);
  EXPECT_EQ(t.stages[0].backward_overlap, 150'000'000);
  EXPECT_EQ(input_grad_time(t.stages[0]), 950'000'000);
  // Split: I' = 2 * 1.5 ms + 0.1 ms and W' = 0.25 * 0.8 ms + 0.3 ms each as
  // measured alone; B = I' + W' less the 0.3 ms beside W.
  EXPECT_EQ(input_grad_time(t.stages[1]), 3'100'000'000);
  EXPECT_EQ(t.stages[1].weight_grad, 500'000'000);
  EXPECT_EQ(t.stages[1].backward, 3'100'000'000 + 500'000'000 - 300'000'000);
}

TEST(ApplyCalibration, FixedCostsAndAbsentEntriesAreLeftAlone) {
  Calibration c;
  c.forward = KindCalibration{2, 0};
  c.backward = KindCalibration{2, 0};
  c.link = LinkCalibration{1e-3, 1e9};
  FixedCosts fixed;
  fixed.forward_s = {1e-3};
  fixed.p2p_s = {0};
  CostTable t = table(2);
  apply_calibration(c, {0, 1}, uniform_forms(2, BackwardForm::kSplit), fixed, t);
  EXPECT_EQ(t.stages[0].forward, 1'000'000'000);   // costs.fixed.forward_s
  EXPECT_EQ(t.stages[0].backward, 2'000'000'000);  // split, and no I or W entry
  EXPECT_EQ(t.p2p_forward[0], 0);                  // costs.fixed.p2p_s
  CostTable same = table(2);
  apply_calibration(Calibration{}, {0, 1}, uniform_forms(2, BackwardForm::kWhole), {}, same);
  EXPECT_EQ(same.stages[1].backward, table(2).stages[1].backward);
  EXPECT_EQ(same.p2p_forward, table(2).p2p_forward);
}

TEST(ApplyCalibration, BackwardFormsFollowTheSchedule) {
  const Schedule one = *make_schedule(ScheduleKind::k1f1b, {2, 4, 1});
  EXPECT_EQ(backward_forms(one), uniform_forms(2, BackwardForm::kWhole));
  const Schedule zb = *make_schedule(ScheduleKind::kZbH1, {2, 4, 1});
  EXPECT_EQ(backward_forms(zb), uniform_forms(2, BackwardForm::kSplit));
}

// simulate() applies the profile's section. Per layer the profile times F at
// 1 ms and B at 2 ms; p = 4 stages of one layer, m = 8, no hardware, so no
// end-of-iteration work: GPipe takes (m + p - 1)(tf + tb) + 2 (p - 1) c with
// c the time of one transfer (c <= tf: no transfer waits for another).
class CalibratedSimulation : public calibration_test::TestFolder {
 protected:
  Config config(const std::string& kind, const std::string& calibration) {
    std::ofstream(dir_ / "prof.yaml")
        << calibration_test::block_kernels(
               16, 8, 16, 2, {{"forward", 1e-3}, {"backward", 2e-3}, {"backward_weight", 0.5e-3}})
        << calibration;
    Result<Config> c = parse_config(
        "model: {layers: 4, hidden: 8, ffn_hidden: 16, heads: 2, seq_len: 16, vocab: 32}\n"
        "parallel: {pipeline: 4}\ntraining: {global_batch: 8, micro_batch: 1}\n"
        "schedule: {kind: " +
            kind + "}\ncosts: {profile: prof.yaml}\n",
        (dir_ / "c.yaml").string());
    EXPECT_TRUE(c.ok()) << c.error().message;
    return *c;
  }
};

TEST_F(CalibratedSimulation, GpipeClosedFormWithScaledCostsAndLink) {
  const Result<Simulation> plain = simulate(config("gpipe", ""));
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_NEAR(plain->summary.iteration_time_s, 11 * 3e-3, 1e-12);  // no link in the profile

  const Result<Simulation> sim =
      simulate(config("gpipe",
                      "calibration:\n  forward: {scale: 2.0, overhead_s: 0.0005}\n"
                      "  backward: {scale: 0.5, overhead_s: 0.00025}\n"
                      "  link: {latency_s: 0.0001, bandwidth_Bps: 1.0e9}\n"));
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  // tf = 2 ms + 0.5 ms, tb = 1 ms + 0.25 ms, c = 0.1 ms + bytes / 1 GB/s.
  const double c = 1e-4 + static_cast<double>(sim->costs.p2p_bytes[0]) / 1e9;
  EXPECT_GT(sim->costs.p2p_bytes[0], 0);
  EXPECT_NEAR(sim->summary.iteration_time_s, 11 * (2.5e-3 + 1.25e-3) + 6 * c, 1e-12);

  // The same calibration given directly replaces the profile's.
  Calibration given;
  given.forward = KindCalibration{1, 1e-3};
  const Result<Simulation> replaced =
      simulate(config("gpipe", "calibration:\n  backward: {scale: 9.0, overhead_s: 0.0}\n"),
               nullptr, &given);
  ASSERT_TRUE(replaced.ok());
  EXPECT_NEAR(replaced->summary.iteration_time_s, 11 * (2e-3 + 2e-3), 1e-12);
}

TEST_F(CalibratedSimulation, SplitBackwardsTakeTheirOwnEntries) {
  const Result<Simulation> sim =
      simulate(config("zb-h1",
                      "calibration:\n  backward: {scale: 9.0, overhead_s: 0.0}\n"
                      "  backward_input: {scale: 2.0, overhead_s: 0.0001}\n"
                      "  backward_weight: {scale: 3.0, overhead_s: 0.0002}\n"));
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  for (const StageCost& s : sim->costs.stages) {
    // I = 2 ms - 0.5 ms -> 3.1 ms; W = 0.5 ms -> 1.7 ms. B's entry is not used.
    EXPECT_EQ(s.weight_grad, 1'700'000'000);
    EXPECT_EQ(s.backward, 3'100'000'000 + 1'700'000'000);
  }
}

}  // namespace
}  // namespace calibration_test
}  // namespace ppsim
