// The idealized cases have closed forms; the engine must reproduce them
// exactly. tf and tb are the forward and backward time of one microbatch
// over all of a rank's layers, so each of a rank's v stages takes tf/v and
// tb/v; communication is free.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

#include "schedules/csv.h"
#include "schedules/generators.h"
#include "schedules/schedule_kind.h"
#include "schedules/validate.h"
#include "sim/core/costs.h"
#include "sim/engine/engine.h"

namespace ppsim {
namespace closed_form_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Picoseconds chosen so that tf/v and tb/v are whole for v up to 4, and
// tb != 2 tf so that no formula holds by accident of the ratio.
constexpr Picos kTf = 12'000'000;
constexpr Picos kTb = 36'000'012;
constexpr int64_t kStageActivation = 1'000'003;  // bytes of one stage, one microbatch

Timeline run(const Schedule& s, Picos stage_f, Picos stage_b, Picos action_overhead = 0) {
  EXPECT_TRUE(validate(s).ok()) << validate(s).message();
  CostTable costs = uniform_costs(s.num_stages, s.num_ranks, stage_f, stage_b, 0, kStageActivation);
  for (StageCost& stage : costs.stages) stage.action_overhead = action_overhead;
  Timeline t;
  EXPECT_TRUE(Engine().run(s, costs, &t).ok());
  return t;
}

class OneStagePerRank : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(OneStagePerRank, GpipeMakespanAndPeak) {
  const auto [p, m] = GetParam();
  const Timeline t = run(*make_gpipe({p, m, 1}), kTf, kTb);
  EXPECT_EQ(t.makespan, (m + p - 1) * (kTf + kTb));
  for (int rank = 0; rank < p; ++rank) {
    EXPECT_EQ(t.peak_activation_bytes[rank], m * kStageActivation) << "rank " << rank;
  }
}

TEST_P(OneStagePerRank, OneFOneBMakespanAndPeak) {
  const auto [p, m] = GetParam();
  const Timeline t = run(*make_1f1b({p, m, 1}), kTf, kTb);
  EXPECT_EQ(t.makespan, (m + p - 1) * (kTf + kTb));
  for (int rank = 0; rank < p; ++rank) {
    EXPECT_EQ(t.peak_activation_bytes[rank], std::min(p - rank, m) * kStageActivation)
        << "rank " << rank;
  }
}

TEST_P(OneStagePerRank, BusyTimeIsAllTheWork) {
  const auto [p, m] = GetParam();
  const Timeline t = run(*make_1f1b({p, m, 1}), kTf, kTb);
  const std::vector<double> busy = t.busy_per_iteration();
  for (int rank = 0; rank < p; ++rank) EXPECT_EQ(busy[rank], m * (kTf + kTb));
}

INSTANTIATE_TEST_SUITE_P(Shapes, OneStagePerRank,
                         ::testing::Values(std::tuple{1, 1}, std::tuple{1, 4}, std::tuple{2, 1},
                                           std::tuple{2, 2}, std::tuple{3, 5}, std::tuple{4, 8},
                                           std::tuple{5, 3}, std::tuple{4, 2}, std::tuple{7, 7},
                                           std::tuple{8, 13}, std::tuple{6, 1}));

// Several flushes an iteration (schedule.flushes): F passes of m/F
// microbatches one after another, each with its own fill and drain, so F
// times the closed form of one pass, (m/F + p - 1)(tf + tb); the memory of
// one pass.
TEST_P(OneStagePerRank, PassesOneAfterAnotherEachFillAndDrain) {
  const auto [p, m] = GetParam();
  for (int passes : {2, 3}) {
    const Schedule pass = *make_1f1b({p, m, 1});
    const Schedule whole = repeat_passes(pass, passes);
    EXPECT_EQ(whole.num_microbatches, m * passes);
    const Timeline t = run(whole, kTf, kTb);
    EXPECT_EQ(t.makespan, passes * (m + p - 1) * (kTf + kTb)) << passes << " passes";
    for (int rank = 0; rank < p; ++rank) {
      EXPECT_EQ(t.peak_activation_bytes[rank], std::min(p - rank, m) * kStageActivation)
          << "rank " << rank;
      // Pass k's actions are pass 0's with the microbatches k m further on.
      ASSERT_EQ(whole.programs[rank].size(), passes * pass.programs[rank].size());
      Action shifted = pass.programs[rank].front();
      shifted.microbatch += m;
      EXPECT_EQ(whole.programs[rank][pass.programs[rank].size()], shifted);
    }
  }
}

class Interleaved : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(Interleaved, MakespanIsIdealPlusBubbleOverV) {
  const auto [p, m, v] = GetParam();
  const Timeline t = run(*make_interleaved_1f1b({p, m, v}), kTf / v, kTb / v);
  EXPECT_EQ(t.makespan, m * (kTf + kTb) + (p - 1) * (kTf + kTb) / v);
}

// A fixed time per action (HardwareSpec::action_overhead_us) makes each
// stage's F tf/v + o and its B tb/v + o: the same closed form, (m v + p -
// 1)(tf/v + tb/v + 2o), so a rank pays 2 o m v in its own actions and
// interleaving v times over pays v times the overhead of 1F1B (v = 1).
TEST_P(Interleaved, ActionOverheadIsPaidByEveryAction) {
  const auto [p, m, v] = GetParam();
  constexpr Picos kOverhead = 1'000'003;
  const Schedule s = v == 1 ? *make_1f1b({p, m, 1}) : *make_interleaved_1f1b({p, m, v});
  const Timeline t = run(s, kTf / v, kTb / v, kOverhead);
  EXPECT_EQ(t.makespan, (m * v + p - 1) * (kTf / v + kTb / v + 2 * kOverhead));
  const std::vector<double> busy = t.busy_per_iteration();
  for (int rank = 0; rank < p; ++rank) {
    EXPECT_EQ(busy[rank], m * v * (kTf / v + kTb / v + 2 * kOverhead)) << "rank " << rank;
  }
}

// The closed form holds for m > p.
class InterleavedPeak : public Interleaved {};

TEST_P(InterleavedPeak, PeakActivation) {
  const auto [p, m, v] = GetParam();
  ASSERT_GT(m, p);
  const Timeline t = run(*make_interleaved_1f1b({p, m, v}), kTf / v, kTb / v);
  for (int d = 0; d < p; ++d) {
    // (2(p-d-1) + (v-1)p + 1) / v microbatches of a rank's layers, each v
    // stages of kStageActivation.
    const int64_t chunks = 2 * (p - d - 1) + (v - 1) * p + 1;
    EXPECT_EQ(t.peak_activation_bytes[d], chunks * kStageActivation) << "rank " << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Interleaved,
                         ::testing::Values(std::tuple{2, 4, 2}, std::tuple{3, 6, 2},
                                           std::tuple{3, 9, 3}, std::tuple{4, 8, 3},
                                           std::tuple{4, 12, 2}, std::tuple{5, 15, 4},
                                           std::tuple{2, 2, 2}, std::tuple{3, 3, 2},
                                           std::tuple{4, 4, 4}, std::tuple{1, 3, 2},
                                           std::tuple{7, 21, 3}));
INSTANTIATE_TEST_SUITE_P(Shapes, InterleavedPeak,
                         ::testing::Values(std::tuple{2, 4, 2}, std::tuple{3, 6, 2},
                                           std::tuple{3, 9, 3}, std::tuple{4, 8, 3},
                                           std::tuple{4, 12, 2}, std::tuple{5, 15, 4},
                                           std::tuple{1, 3, 2}, std::tuple{7, 21, 3}));

TEST(Interleaved, RejectsMicrobatchesNotAMultipleOfP) {
  const Result<Schedule> s = make_interleaved_1f1b({4, 6, 2});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("(6) must be a multiple of the pipeline size (4)"));
}

TEST(OneStagePerRank, RejectsVirtualStages) {
  const Result<Schedule> one_f_one_b = make_1f1b({4, 8, 2});
  ASSERT_FALSE(one_f_one_b.ok());
  EXPECT_THAT(one_f_one_b.error().message, StartsWith("schedule 1f1b "));
  EXPECT_THAT(one_f_one_b.error().message, HasSubstr("virtual_stages must be 1, got 2"));
  const Result<Schedule> gpipe = make_gpipe({4, 8, 2});
  ASSERT_FALSE(gpipe.ok());
  EXPECT_THAT(gpipe.error().message, StartsWith("schedule gpipe "));
  EXPECT_THAT(gpipe.error().message, HasSubstr("virtual_stages must be 1, got 2"));
}

// TeraPipe: m microbatches of k equal slices, each slice taking tf/k and
// tb/k on a stage, are GPipe over m k units: (m k + p - 1)(tf + tb) / k.
class TokenSlices : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(TokenSlices, TeraPipeMakespan) {
  const auto [p, m, k] = GetParam();
  const Schedule s = *make_terapipe({p, m, 1, k});
  ASSERT_TRUE(validate(s).ok()) << validate(s).message();
  Timeline t;
  EXPECT_TRUE(Engine().run(s, uniform_costs(p, p, kTf / k, kTb / k, 0, 0, k), &t).ok());
  EXPECT_EQ(t.makespan, (m * k + p - 1) * (kTf + kTb) / k);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TokenSlices,
                         ::testing::Values(std::tuple{1, 1, 1}, std::tuple{4, 1, 4},
                                           std::tuple{4, 2, 3}, std::tuple{3, 5, 2},
                                           std::tuple{5, 3, 6}, std::tuple{8, 4, 4},
                                           std::tuple{2, 7, 1}));

// With a p2p time c per hop and no contention, a microbatch's forward
// crosses p-1 links and its gradient p-1 back: GPipe with one microbatch
// takes p(tf + tb) + 2(p-1)c.
TEST(Communication, SingleMicrobatchPaysEveryHopTwice) {
  const int p = 5;
  const Picos c = 777;
  const Schedule s = *make_gpipe({p, 1, 1});
  Timeline t;
  EXPECT_TRUE(Engine().run(s, uniform_costs(p, p, kTf, kTb, c, 0), &t).ok());
  EXPECT_EQ(t.makespan, p * (kTf + kTb) + 2 * (p - 1) * c);
}

}  // namespace
}  // namespace closed_form_test
}  // namespace ppsim

namespace ppsim {
namespace closed_form_test {
namespace {

// Consecutive 1F1B iterations with gradient sync g, pipeline all-reduce a and
// optimizer step o on every rank, T1 = (m + p - 1)(tf + tb). Synchronous: all
// ranks leave the barrier together, so each iteration takes T1 + g + a + o.
// Post-validation: rank 0 ends every iteration last and starts the next after
// its own g + o; the others are idle by the time its activations reach them,
// so each iteration takes T1 + g + o.
class Iterations : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Iterations, SynchronousAndPostValidatedPeriods) {
  const auto [p, m] = GetParam();
  const Picos g = 1'000'003;
  const Picos a = 70'001;
  const Picos o = 2'000'011;
  const Schedule s = *make_1f1b({p, m, 1});
  CostTable costs = uniform_costs(p, p, kTf, kTb);
  costs.grad_sync.assign(p, g);
  costs.optimizer_step.assign(p, o);
  costs.pipeline_sync = a;
  const Picos t1 = (m + p - 1) * (kTf + kTb);
  for (const bool synchronous : {true, false}) {
    Timeline t;
    EXPECT_TRUE(Engine().run(s, costs, &t, RunOptions{4, synchronous}).ok());
    const Picos period = synchronous ? t1 + g + a + o : t1 + g + o;
    ASSERT_EQ(t.iteration_end.size(), 4u);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(t.iteration_end[k], (k + 1) * period) << k;
    EXPECT_EQ(t.period(), period);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Iterations,
                         ::testing::Values(std::tuple{1, 3}, std::tuple{2, 5}, std::tuple{4, 8},
                                           std::tuple{5, 2}));

// Blocking sends (RunOptions::blocking_sends), worked by hand on 1F1B with
// p = 2, m = 2, forward f, backward b, transfer c (c < f < b). Rank 0 runs
// F0 F1 B0 B1, rank 1 F0 B0 F1 B1. Non-blocking, rank 0's F1 starts at f
// and rank 1's F1 right after its B0, at 2f + c + b: rank 0's B1 waits
// for the gradient of rank 1's B1, 3f + 2c + 2b, and ends at 3f + 2c + 3b.
// Blocking, rank 0's F1 waits for F0's send, [f + c, 2f + c]; rank 1's F1
// for its B0's send to arrive, [2f + 2c + b, 3f + 2c + b]; then its B1
// ends at 3f + 2c + 2b and its gradient arrives at 3f + 3c + 2b, so rank
// 0's B1 ends at 3f + 3c + 3b: one transfer more.
TEST(BlockingSends, ASenderWaitsForItsTransferToArrive) {
  const Picos f = kTf;
  const Picos b = kTb;
  const Picos c = 1'000'001;
  const Schedule s = *make_1f1b({2, 2, 1});
  const CostTable costs = uniform_costs(2, 2, f, b, c);
  const auto start_of = [](const Timeline& t, int rank, const char* action) {
    for (const ActionRecord& r : t.actions) {
      if (r.rank == rank && to_string(r.action) == action) return r.start;
    }
    ADD_FAILURE() << "no " << action << " on rank " << rank;
    return Picos{-1};
  };
  Timeline overlapped;
  ASSERT_TRUE(Engine().run(s, costs, &overlapped).ok());
  EXPECT_EQ(start_of(overlapped, 0, "0F1"), f);
  EXPECT_EQ(start_of(overlapped, 1, "1F1"), 2 * f + c + b);
  EXPECT_EQ(overlapped.makespan, 3 * f + 2 * c + 3 * b);
  Timeline blocking;
  RunOptions options;
  options.blocking_sends = true;
  ASSERT_TRUE(Engine().run(s, costs, &blocking, options).ok());
  EXPECT_EQ(start_of(blocking, 0, "0F1"), f + c);
  EXPECT_EQ(start_of(blocking, 1, "1F1"), 2 * f + 2 * c + b);
  EXPECT_EQ(blocking.makespan, 3 * f + 3 * c + 3 * b);
}

// A rank's end-of-iteration work waits for its last send too: rank 1's last
// action, B1, ends at 3f + 2c + 2b (above) and its gradient sync starts when
// the gradient has arrived, c later.
TEST(BlockingSends, TheGradientSyncWaitsForTheLastSend) {
  const Picos c = 1'000'001;
  const Picos g = 5'000'003;
  CostTable costs = uniform_costs(2, 2, kTf, kTb, c);
  costs.grad_sync.assign(2, g);
  RunOptions options;
  options.blocking_sends = true;
  Timeline t;
  ASSERT_TRUE(Engine().run(*make_1f1b({2, 2, 1}), costs, &t, options).ok());
  bool found = false;
  for (const EpilogueRecord& e : t.epilogue) {
    if (e.rank != 1 || e.kind != EpilogueKind::kGradSync) continue;
    EXPECT_EQ(e.start, 3 * kTf + 3 * c + 2 * kTb);
    found = true;
  }
  EXPECT_TRUE(found);
}

// Free transfers block nothing: every generated schedule runs the same.
TEST(BlockingSends, FreeTransfersChangeNothing) {
  for (const ScheduleKind kind : generated_schedule_kinds()) {
    const Result<Schedule> s = make_schedule(kind, {4, 8, 2});
    if (!s.ok()) continue;  // a kind that needs other shapes
    const CostTable costs = uniform_costs(s->num_stages, s->num_ranks, kTf, kTb);
    Timeline overlapped;
    Timeline blocking;
    RunOptions options;
    options.blocking_sends = true;
    ASSERT_TRUE(Engine().run(*s, costs, &overlapped).ok()) << kind;
    ASSERT_TRUE(Engine().run(*s, costs, &blocking, options).ok()) << kind;
    EXPECT_EQ(blocking.makespan, overlapped.makespan) << kind;
  }
}

// An overlapped pair (Action::overlaps_next) runs its forward F and its
// backward B together: F + B - min(Fc, B - Bc) - min(Bc, F - Fc) with Fc, Bc
// their communication (costs.h). One rank holds both stages, so nothing
// travels: 0F0, 1F0, the pair, 1F1, 1B1, 0B0, 0B1 take
// 10 + 10 + P + 10 + 20 + 20 + 20 = 90 + P.
TEST(OverlappedPair, HidesEachOnesCommunicationUnderTheOthersCompute) {
  constexpr Picos kUnit = 1'000'000;
  const Schedule s =
      *schedule_from_csv("0F0,1F0,(0F1;1B0)OVERLAP_F_B,1F1,1B1,0B0,0B1\n", "one-rank.csv");
  ASSERT_TRUE(validate(s).ok()) << validate(s).message();
  struct Case {
    Picos forward_comm, backward_comm, pair;
  };
  for (const Case& c : {Case{0, 0, 30},    // nothing to hide: F + B
                        Case{4, 3, 23},    // each hides whole: 30 - 4 - 3
                        Case{4, 18, 22}})  // each hides what the other's compute lasts:
                                           // 30 - min(4, 20 - 18) - min(18, 10 - 4)
  {
    CostTable costs = uniform_costs(2, 1, 10 * kUnit, 20 * kUnit, 0, kStageActivation);
    for (StageCost& stage : costs.stages) {
      stage.forward_comm = c.forward_comm * kUnit;
      stage.backward_comm = c.backward_comm * kUnit;
    }
    Timeline t;
    ASSERT_TRUE(Engine().run(s, costs, &t).ok());
    EXPECT_EQ(t.makespan, (90 + c.pair) * kUnit) << c.pair;
    // The pair's records: the forward from the pair's start, the backward to
    // its end, split in proportion to their own times (10 : 20).
    EXPECT_EQ(t.actions[2].start, 20 * kUnit);
    EXPECT_EQ(t.actions[2].end, t.actions[3].start);
    EXPECT_EQ(t.actions[3].end, (20 + c.pair) * kUnit);
    EXPECT_EQ(t.actions[2].end - t.actions[2].start, c.pair * kUnit / 3);
    // Three forwards' activations at once: 0F0's, 1F0's and the pair's, taken
    // when the pair starts and before its backward gives one back.
    EXPECT_EQ(t.peak_activation_bytes[0], 3 * kStageActivation);
  }
}

// Communication kernels hold a share s of the SMs (comm_sm_fraction), and
// the compute they overlap runs at 1 - s of its speed meanwhile: hiding c
// under compute C saves min((1 - s) c, C). The programs above with s = 1/4:
// Fc = 4, Bc = 3 give 30 - min(3, 17) - min(2.25, 6) = 24.75; Fc = 4,
// Bc = 18 still 30 - min(3, 2) - min(13.5, 6) = 22, the compute the limit.
TEST(OverlappedPair, CommunicationTakesItsShareOfTheSms) {
  constexpr Picos kUnit = 1'000'000;
  const Schedule s =
      *schedule_from_csv("0F0,1F0,(0F1;1B0)OVERLAP_F_B,1F1,1B1,0B0,0B1\n", "one-rank.csv");
  struct Case {
    Picos forward_comm, backward_comm, pair_in_quarters;
  };
  for (const Case& c : {Case{4, 3, 99}, Case{4, 18, 88}}) {
    CostTable costs = uniform_costs(2, 1, 10 * kUnit, 20 * kUnit, 0, kStageActivation);
    costs.comm_sm_fraction = 0.25;
    for (StageCost& stage : costs.stages) {
      stage.forward_comm = c.forward_comm * kUnit;
      stage.backward_comm = c.backward_comm * kUnit;
    }
    Timeline t;
    ASSERT_TRUE(Engine().run(s, costs, &t).ok());
    EXPECT_EQ(t.makespan, 90 * kUnit + c.pair_in_quarters * kUnit / 4) << c.pair_in_quarters;
  }
  EXPECT_EQ(overlapped_pair_time(10, 4, 20, 3, 0), 23);  // s = 0: the formula above
}

// The pair starts when its backward's input has arrived, and hands its
// forward's output on only at its end. Rank 0 pairs 0F1 with 0B0; 1B0's
// gradient arrives at 2f + b + 2c (rank 1 ran 1F0 and 1B0), the pair runs
// to 3f + 2b + 2c (P = f + b here: no communication to hide), and 0F1's
// activation reaches rank 1 c later: 1F1, 1B1 and the gradient back, then
// 0B1: 4f + 4b + 4c. Run one after the other the same programs end at
// 3f + 3b + 2c, earlier: pairing costs the forward's early hand-over.
TEST(OverlappedPair, WaitsForItsBackwardsInputAndHandsOnAtItsEnd) {
  const Picos f = kTf;
  const Picos b = kTb;
  const Picos c = 1'000'001;
  const CostTable costs = uniform_costs(2, 2, f, b, c);
  const std::string rank1 = "1F0,1B0,1F1,1B1\n";
  const Schedule paired = *schedule_from_csv("0F0,(0F1;0B0)OVERLAP_F_B,0B1\n" + rank1, "pair.csv");
  const Schedule in_turn = *schedule_from_csv("0F0,0F1,0B0,0B1\n" + rank1, "in-turn.csv");
  ASSERT_TRUE(validate(paired).ok()) << validate(paired).message();
  Timeline t;
  ASSERT_TRUE(Engine().run(paired, costs, &t).ok());
  EXPECT_EQ(t.actions[1].start, 2 * f + b + 2 * c);
  EXPECT_EQ(t.makespan, 4 * f + 4 * b + 4 * c);
  ASSERT_TRUE(Engine().run(in_turn, costs, &t).ok());
  EXPECT_EQ(t.makespan, 3 * f + 3 * b + 2 * c);
}

// A compute+comms file posts each transfer where its cells stand: it starts
// once the sender has posted the SEND and the receiver the RECV (each after
// the actions before it in its row). Here rank 1 posts the receive of 1F1's
// input only after 1B0. With f = 2, b = 4 and transfers of 1 (units):
// 0F0 0-2, its activation 2-3, 1F0 3-5, 1B0 5-9, its gradient 9-10, 0B0
// 10-14; 0F1 ends at 4 but its activation waits for rank 1's post at 9:
// 9-10, 1F1 10-12, 1B1 12-16, its gradient 16-17, 0B1 17-21. Without the
// cells the activation leaves at 4, 1F1 runs 9-11 and 0B1 ends at 20.
TEST(PostedTransfers, StartWhenBothSidesHavePostedThem) {
  constexpr Picos kUnit = 1'000'000;
  const std::string rank0 = "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n";
  const std::string rank1 = "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n";
  const Schedule posted = *schedule_from_csv(rank0 + rank1, "comms.csv");
  ASSERT_TRUE(validate(posted).ok()) << validate(posted).message();
  const CostTable costs = uniform_costs(2, 2, 2 * kUnit, 4 * kUnit, kUnit);
  Timeline t;
  ASSERT_TRUE(Engine().run(posted, costs, &t).ok());
  EXPECT_EQ(t.makespan, 21 * kUnit);
  Schedule compute_only = posted;
  compute_only.comm_posts.clear();
  ASSERT_TRUE(Engine().run(compute_only, costs, &t).ok());
  EXPECT_EQ(t.makespan, 20 * kUnit);
  // Two iterations, rank 1 stepping 5 after the barrier at 21 and rank 0 at
  // once: rank 0's 0F0 ends at 23, but rank 1 posts its receive only when
  // its iteration starts, at 26; the second iteration is then the first
  // from 26 on rank 1's side: 1F0 27-29, 1B0 29-33, 0B0 34-38, 0F1's
  // activation posted at 33, 1F1 34-36, 1B1 36-40, 0B1 41-45, and the
  // steps end at 45 and 50.
  CostTable stepping = costs;
  stepping.optimizer_step = {0, 5 * kUnit};
  ASSERT_TRUE(Engine().run(posted, stepping, &t, {2, true}).ok());
  EXPECT_EQ(t.iteration_end, (std::vector<Picos>{26 * kUnit, 50 * kUnit}));
  // Post-validated, no barrier, rank 1 stepping 6: its program ends at 16,
  // so it starts the second iteration at 22, rank 0 at 21. 0F0 21-23, its
  // activation 23-24 (rank 1 posted the receive at 22), 1F0 24-26, 1B0
  // 26-30, 0F1's activation posted at 30: 30-31, 0B0 31-35, 1F1 31-33, 1B1
  // 33-37, 0B1 38-42; rank 1 steps to 43.
  stepping.optimizer_step = {0, 6 * kUnit};
  ASSERT_TRUE(Engine().run(posted, stepping, &t, {2, false}).ok());
  EXPECT_EQ(t.iteration_end, (std::vector<Picos>{22 * kUnit, 43 * kUnit}));
  // A blocking send holds its sender until it arrives, from the action's
  // end: no such send waits for a later post. Refused, naming the key.
  RunOptions blocking;
  blocking.blocking_sends = true;
  const Status refused = Engine().run(posted, costs, &t, blocking);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("training.blocking_p2p: false"));
}

// A send posted after an action that needs what the sent activation leads
// to can never be posted: a deadlock, found before anything runs.
TEST(PostedTransfers, ASendPostedTooLateIsADeadlock) {
  const Schedule late =
      *schedule_from_csv("0F0,0RECV_B0,0B0,0SEND_F0\n1RECV_F0,1F0,1B0,1SEND_B0\n", "late.csv");
  const Status st = validate(late);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), ::testing::HasSubstr("deadlock in schedule custom"));
  Timeline t;
  EXPECT_FALSE(Engine().run(late, uniform_costs(2, 2, 1, 2, 1), &t).ok());
}

// Random posts on generated schedules: where the validator finds no
// deadlock the engine runs to the end, and where it finds one the engine
// reports one too (it searches for the cycle only when it stalls, and a
// stall without one is an internal error).
TEST(PostedTransfers, ValidatorAndEngineAgreeOnRandomPosts) {
  std::mt19937 rng(20261202);
  int valid = 0;
  int deadlocked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const ScheduleKind kind = trial % 3 == 0   ? ScheduleKind::kGpipe
                              : trial % 3 == 1 ? ScheduleKind::k1f1b
                                               : ScheduleKind::kZbH1;
    const int p = 2 + trial % 3;
    Schedule s = *make_schedule(kind, {p, 2 + trial % 5, 1});
    for (const auto& program : s.programs) s.comm_posts.emplace_back(program.size());
    for (int rank = 0; rank < p; ++rank) {
      const auto size = static_cast<int>(s.programs[rank].size());
      for (int pos = 0; pos < size; ++pos) {
        CommPosts& posts = s.comm_posts[rank][pos];
        if (rng() % 2 == 0) posts.send_after = pos + 1 + static_cast<int>(rng() % (size - pos));
        if (rng() % 2 == 0) posts.recv_after = static_cast<int>(rng() % (pos + 1));
      }
    }
    const bool ok = validate(s).ok();
    (ok ? valid : deadlocked) += 1;
    Timeline t;
    CostTable costs = uniform_costs(p, p, 1000, 2000, 300);
    costs.optimizer_step[0] = 500;            // ranks restart apart: posts span the barrier
    const bool synchronous = trial % 2 == 0;  // post-validated: ranks drift apart
    EXPECT_EQ(Engine().run(s, costs, &t, {3, synchronous}).ok(), ok) << "trial " << trial;
  }
  EXPECT_GT(valid, 30);  // both kinds of case were drawn
  EXPECT_GT(deadlocked, 30);
}

// DeepSeek's DualPipe README gives its bubble as (PP/2 - 1)(F&B + B - 3W) per
// rank; DualPipeV folds it into p ranks holding PP = 2p stages, so
// (p - 1)(F&B + B - 3W). With nothing to hide (F&B = F + B) ppsim's
// dualpipev, in PyTorch's order, idles no more than that and at most one
// forward chunk less (docs/cost_model.md has the table).
TEST(OverlappedPair, DualPipeVIdlesWithinAForwardOfTheReadmesBubble) {
  const Picos f = kTf;
  const Picos b = kTb;
  for (const int p : {2, 3, 4, 8}) {
    for (const Picos w : {Picos{0}, b / 4, b / 2}) {
      const Schedule s = *make_schedule(ScheduleKind::kDualPipeV, {p, 3 * p, 2});
      CostTable costs = uniform_costs(2 * p, p, f, b);
      for (StageCost& stage : costs.stages) stage.weight_grad = w;
      Timeline t;
      ASSERT_TRUE(Engine().run(s, costs, &t).ok());
      const Picos readme = (p - 1) * ((f + b) + b - 3 * w);
      const Picos busy = 2 * s.num_microbatches * (f + b);  // a rank's two stages' work
      EXPECT_LE(t.makespan - busy, readme) << "p=" << p << " W=" << w;
      EXPECT_GE(t.makespan - busy, readme - f) << "p=" << p << " W=" << w;
    }
  }
}

}  // namespace
}  // namespace closed_form_test
}  // namespace ppsim
