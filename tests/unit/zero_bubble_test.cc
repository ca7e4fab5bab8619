// Zero-bubble schedules: shape of the programs, the figures that hold when F,
// I and W each take T per rank and communication is free, and, with seeded
// random uneven costs and nonzero p2p, that they keep their memory bound.
#include "schedules/zero_bubble.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "schedules/validate.h"
#include "sim/core/costs.h"
#include "sim/engine/engine.h"

namespace ppsim {
namespace zero_bubble_test {
namespace {

using ::testing::HasSubstr;

// F, I and W of one microbatch over all of a rank's layers; even, so that
// ZB-V's half-rank stages take a whole number of picoseconds.
constexpr Picos kT = 6'000'002;
constexpr int64_t kStageActivation = 1'000'003;  // bytes of one stage, one microbatch

struct Kind {
  const char* name;
  Result<Schedule> (*make)(const ScheduleParams&);
  int v;
};
const Kind kH1{"zb-h1", make_zb_h1, 1};
const Kind kH2{"zb-h2", make_zb_h2, 1};
const Kind kV{"zb-v", make_zb_v, 2};

Schedule make(const Kind& kind, int p, int m) {
  Result<Schedule> s = kind.make({p, m, kind.v});
  EXPECT_TRUE(s.ok()) << s.error().message;
  const Status st = validate(*s);
  EXPECT_TRUE(st.ok()) << st.message();
  return *s;
}

// Each of a rank's v stages takes T/v for each of F, I and W. W needs
// `weight_grad_bytes` of the stage's activation after I: by default all of
// it, so that a microbatch counts until its W ends.
Timeline run_uniform(const Schedule& s, int64_t weight_grad_bytes = kStageActivation) {
  const Picos t = kT / (s.num_stages / s.num_ranks);
  CostTable costs = uniform_costs(s.num_stages, s.num_ranks, t, 2 * t, 0, kStageActivation);
  for (StageCost& c : costs.stages) {
    c.weight_grad = t;
    c.weight_grad_bytes = weight_grad_bytes;
  }
  Timeline timeline;
  EXPECT_TRUE(Engine().run(s, costs, &timeline).ok());
  return timeline;
}

// `iterations` copies of one iteration on each rank, with nothing between
// them: the optimizer step is validated afterwards (the paper's
// post-validation), so a rank goes on as soon as its own W's are done.
// Iteration n's microbatches are renumbered n*m .. n*m + m-1.
Schedule back_to_back(const Schedule& one, int iterations) {
  Schedule s = one;
  s.num_microbatches = one.num_microbatches * iterations;
  for (int rank = 0; rank < s.num_ranks; ++rank) {
    s.programs[rank].clear();
    for (int n = 0; n < iterations; ++n) {
      for (Action a : one.programs[rank]) {
        a.microbatch += n * one.num_microbatches;
        s.programs[rank].push_back(a);
      }
    }
  }
  return s;
}

// The lower bound of one iteration of any schedule with T_F = T_I = T_W = T
// and one stage per rank: rank p-1 cannot start before microbatch 0 has
// crossed p-1 ranks and then has 3mT of work; and its last I ends no earlier
// than (p-1+2m)T (m F's and m I's), after which that gradient crosses p-1
// more ranks and rank 0 still owes its W.
Picos one_stage_per_rank_bound(int p, int m) {
  return std::max(3 * m + p - 1, 2 * m + 2 * p - 1) * kT;
}

std::vector<std::tuple<int, int>> shapes() {
  return {{1, 1}, {1, 4}, {2, 1}, {2, 2}, {2, 3}, {3, 2},  {3, 5},  {4, 3}, {4, 4},  {4, 7},
          {4, 8}, {5, 7}, {5, 9}, {6, 1}, {6, 5}, {7, 13}, {7, 16}, {8, 8}, {8, 15}, {8, 20}};
}

class Shapes : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Shapes, EveryStageAndMicrobatchHasOneFIAndW) {
  const auto [p, m] = GetParam();
  for (const Kind& kind : {kH1, kH2, kV}) {
    SCOPED_TRACE(kind.name);
    const Schedule s = make(kind, p, m);
    EXPECT_EQ(s.name, kind.name);
    ASSERT_EQ(s.num_stages, kind.v * p);
    // count[kind][stage][mb]
    std::vector<int> count(kNumActionKinds * s.num_stages * m, 0);
    for (int rank = 0; rank < p; ++rank) {
      for (const Action& a : s.programs[rank]) {
        ASSERT_GE(a.stage, 0);
        ASSERT_LT(a.stage, s.num_stages);
        ASSERT_GE(a.microbatch, 0);
        ASSERT_LT(a.microbatch, m);
        EXPECT_EQ(s.stage_rank[a.stage], rank) << to_string(a);
        ++count[(static_cast<int>(a.kind) * s.num_stages + a.stage) * m + a.microbatch];
      }
    }
    for (int stage = 0; stage < s.num_stages; ++stage) {
      for (int mb = 0; mb < m; ++mb) {
        const auto n = [&, m = m](ActionKind k) {
          return count[(static_cast<int>(k) * s.num_stages + stage) * m + mb];
        };
        EXPECT_EQ(n(ActionKind::kForward), 1) << "stage " << stage << " mb " << mb;
        EXPECT_EQ(n(ActionKind::kBackward), 0) << "stage " << stage << " mb " << mb;
        EXPECT_EQ(n(ActionKind::kBackwardInput), 1) << "stage " << stage << " mb " << mb;
        EXPECT_EQ(n(ActionKind::kBackwardWeight), 1) << "stage " << stage << " mb " << mb;
      }
    }
  }
}

TEST_P(Shapes, BusyTimeIsAllTheWork) {
  const auto [p, m] = GetParam();
  for (const Kind& kind : {kH1, kH2, kV}) {
    const Timeline t = run_uniform(make(kind, p, m));
    const std::vector<double> busy = t.busy_per_iteration();
    for (int rank = 0; rank < p; ++rank) {
      EXPECT_EQ(busy[rank], 3 * m * kT) << kind.name << " rank " << rank;
    }
  }
}

TEST_P(Shapes, ZbH1MakespanIsTheLowerBound) {
  const auto [p, m] = GetParam();
  const Timeline t = run_uniform(make(kH1, p, m));
  EXPECT_EQ(t.makespan, one_stage_per_rank_bound(p, m));
  // The paper's figure, a third of 1F1B's 3(p-1)T bubble.
  if (m >= p) {
    EXPECT_EQ(t.makespan, 3 * m * kT + (p - 1) * kT);
  }
}

// ZB-H1 keeps 1F1B's min(p-i, m) microbatches between F and I on rank i, the
// activations the input gradient reads. Deferring W keeps min(p, m) between F
// and W on every rank: 1F1B's peak on rank 0, and on rank i the i deferred
// W's more. The paper counts those as cheap (W needs only the inputs of the
// linear layers): when W needs nothing, the peak is exactly 1F1B's.
TEST_P(Shapes, ZbH1Peaks) {
  const auto [p, m] = GetParam();
  const Schedule s = make(kH1, p, m);
  const Timeline t = run_uniform(s);
  const Timeline cheap_w = run_uniform(s, 0);
  for (int rank = 0; rank < p; ++rank) {
    EXPECT_EQ(t.peak_activation_bytes[rank], std::min(p, m) * kStageActivation) << "rank " << rank;
    EXPECT_EQ(cheap_w.peak_activation_bytes[rank], std::min(p - rank, m) * kStageActivation)
        << "rank " << rank;
    // A rank runs its actions one after another, so program order is the
    // order of its F starts and I ends.
    int live = 0;
    int peak = 0;
    for (const Action& a : s.programs[rank]) {
      if (a.kind == ActionKind::kForward) peak = std::max(peak, ++live);
      if (a.kind == ActionKind::kBackwardInput) --live;
    }
    EXPECT_EQ(peak, std::min(p - rank, m)) << "rank " << rank;
  }
  // When W needs more than F kept (G = 2A: I stashes gradients for W), the
  // level rises at every I. For m >= p rank i runs p-1-i warm-up F's, then
  // i (F, I) pairs whose W's it holds back, each raising the level by G,
  // then F, I, W: the peak is at that first I, (p-1-i) A + (i+1) G.
  if (m < p) return;
  const Timeline costly_w = run_uniform(s, 2 * kStageActivation);
  for (int rank = 0; rank < p; ++rank) {
    EXPECT_EQ(costly_w.peak_activation_bytes[rank],
              (p - 1 - rank) * kStageActivation + (rank + 1) * 2 * kStageActivation)
        << "rank " << rank;
  }
}

TEST_P(Shapes, ZbH2MakespanAndPeak) {
  const auto [p, m] = GetParam();
  const Timeline t = run_uniform(make(kH2, p, m));
  EXPECT_EQ(t.makespan, one_stage_per_rank_bound(p, m));
  // 2(p-1-i) + 1 warm-up forwards, then 2i more forwards at the end before
  // their W's: 2p-1 on every rank, or all m.
  for (int rank = 0; rank < p; ++rank) {
    EXPECT_EQ(t.peak_activation_bytes[rank], std::min(2 * p - 1, m) * kStageActivation)
        << "rank " << rank;
  }
}

// With m >= 2p-1, ZB-H2 and ZB-V run each rank's work as one block that
// starts when the rank's first forward can (iT, or i(T/2) for ZB-V) and then
// never waits, so the next iteration's block starts where this one ends:
// K iterations take K times 3mT plus the one-time start-up.
TEST(ZeroBubble, BackToBackHasNoSteadyBubble) {
  constexpr int kIterations = 3;
  for (const auto& [p, m] : std::vector<std::tuple<int, int>>{
           {1, 1}, {2, 3}, {3, 5}, {3, 8}, {4, 7}, {4, 8}, {5, 9}, {7, 13}, {8, 15}, {8, 20}}) {
    SCOPED_TRACE(fmt::format("p={} m={}", p, m));
    const Schedule h2 = back_to_back(make(kH2, p, m), kIterations);
    ASSERT_TRUE(validate(h2).ok()) << validate(h2).message();
    EXPECT_EQ(run_uniform(h2).makespan, 3 * m * kIterations * kT + (p - 1) * kT);
    const Schedule v = back_to_back(make(kV, p, m), kIterations);
    ASSERT_TRUE(validate(v).ok()) << validate(v).message();
    EXPECT_EQ(run_uniform(v).makespan, 3 * m * kIterations * kT + (p - 1) * kT / 2);
  }
}

TEST_P(Shapes, ZbVLayoutMakespanAndPeak) {
  const auto [p, m] = GetParam();
  const Schedule s = make(kV, p, m);
  for (int stage = 0; stage < 2 * p; ++stage) {
    EXPECT_EQ(s.stage_rank[stage], stage < p ? stage : 2 * p - 1 - stage) << "stage " << stage;
  }
  const Timeline t = run_uniform(s);
  // 1F1B on the same per-rank work (F = T, B = 2T per rank) takes
  // 3(m+p-1)T (closed_form_test.cc).
  if (p > 1) {
    EXPECT_LT(t.makespan, 3 * (m + p - 1) * kT);
  }
  if (m >= 2 * p - 1) {
    // The lower bound: rank p-1's first stage can start at (p-1)T/2, and
    // the rank has 3mT of work.
    EXPECT_EQ(t.makespan, 3 * m * kT + (p - 1) * kT / 2);
  }
  // 1F1B's rank 0 holds min(p, m) microbatches of a whole rank's layers,
  // two stages' worth each.
  for (int rank = 0; rank < p; ++rank) {
    EXPECT_LE(t.peak_activation_bytes[rank], 2 * std::min(p, m) * kStageActivation)
        << "rank " << rank;
    // 2(p-r)-1 + 2r forwards before the first W, plus one more up forward.
    if (m >= 2 * p - 1) {
      EXPECT_EQ(t.peak_activation_bytes[rank], 2 * p * kStageActivation) << "rank " << rank;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ZeroBubble, Shapes, ::testing::ValuesIn(shapes()));

TEST(ZeroBubble, RejectsBadParams) {
  for (const Kind& kind : {kH1, kH2, kV}) {
    SCOPED_TRACE(kind.name);
    const Result<Schedule> no_ranks = kind.make({0, 4, kind.v});
    ASSERT_FALSE(no_ranks.ok());
    EXPECT_THAT(no_ranks.error().message, HasSubstr("at least 1 pipeline rank, got 0"));
    const Result<Schedule> no_mbs = kind.make({4, 0, kind.v});
    ASSERT_FALSE(no_mbs.ok());
    EXPECT_THAT(no_mbs.error().message, HasSubstr("at least 1 microbatch, got 0"));
  }
  for (const Kind& kind : {kH1, kH2}) {
    const Result<Schedule> s = kind.make({4, 8, 2});
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error().message, HasSubstr("virtual_stages must be 1, got 2"));
  }
  for (int v : {1, 3}) {
    const Result<Schedule> s = make_zb_v({4, 8, v});
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error().message, HasSubstr(fmt::format("virtual_stages must be 2, got {}", v)));
  }
}

// ---- Seeded random uneven costs with nonzero communication. ----

CostTable random_costs(std::mt19937_64& rng, const Schedule& s) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  CostTable c = uniform_costs(s.num_stages, s.num_ranks, 0, 0);
  for (StageCost& st : c.stages) {
    st.forward = uniform(1, 1000) * 1000;
    st.weight_grad = uniform(0, 1000) * 1000;
    st.backward = st.weight_grad + uniform(1, 1000) * 1000;
    st.activation_bytes = uniform(1, 100);
    st.weight_grad_bytes = st.activation_bytes;
  }
  for (int b = 0; b + 1 < s.num_stages; ++b) {
    c.p2p_forward[b] = uniform(1, 3000) * 100;
    c.p2p_backward[b] = uniform(1, 3000) * 100;
  }
  for (int r = 0; r < s.num_ranks; ++r) {
    c.grad_sync[r] = uniform(0, 5) * 1000;
    c.optimizer_step[r] = uniform(0, 5) * 1000;
  }
  return c;
}

class RandomCosts : public ::testing::TestWithParam<Kind> {};

// Dependencies and timing under random costs are invariants_test.cc's job
// (it runs every kind); here, the memory bounds.
TEST_P(RandomCosts, MemoryStaysInBound) {
  const Kind kind = GetParam();
  std::mt19937_64 rng(20240117);
  for (int trial = 0; trial < 50; ++trial) {
    const int p = std::uniform_int_distribution<int>(1, 8)(rng);
    const int m = std::uniform_int_distribution<int>(1, 16)(rng);
    SCOPED_TRACE(fmt::format("trial {}: p={} m={}", trial, p, m));
    const Schedule s = make(kind, p, m);
    const CostTable c = random_costs(rng, s);
    Timeline t;
    EXPECT_TRUE(Engine().run(s, c, &t).ok());
    // Memory follows program order on each rank, whatever the timing, so
    // the uniform case's counts hold here too.
    for (int rank = 0; rank < p; ++rank) {
      if (kind.v == 1) {
        const int in_flight = kind.make == make_zb_h1 ? std::min(p, m) : std::min(2 * p - 1, m);
        EXPECT_EQ(t.peak_activation_bytes[rank], in_flight * c.stages[rank].activation_bytes)
            << "rank " << rank;
      } else {
        const int64_t largest =
            std::max(c.stages[rank].activation_bytes, c.stages[2 * p - 1 - rank].activation_bytes);
        EXPECT_LE(t.peak_activation_bytes[rank], 2 * std::min(p, m) * largest) << "rank " << rank;
      }
    }
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(ZeroBubble, RandomCosts, ::testing::Values(kH1, kH2, kV),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace zero_bubble_test
}  // namespace ppsim

namespace ppsim {
namespace zero_bubble_test {
namespace {

// The engine's post-validation mode (no barrier before the optimizer step)
// reaches the same steady state as the back-to-back programs above: ZB-H2 and
// ZB-V take 3mT per iteration once m >= 2p-1, while ZB-H1 and 1F1B keep
// their bubbles, and a synchronous step costs ZB-H2 its advantage over
// ZB-H1 (both then take 3mT + (p-1)T).
TEST(ZeroBubble, PostValidationSteadyState) {
  for (const auto& [p, m] : std::vector<std::tuple<int, int>>{{2, 3}, {4, 8}, {5, 9}, {8, 16}}) {
    SCOPED_TRACE(fmt::format("p={} m={}", p, m));
    const auto period = [&, p = p, m = m](const Kind& kind, bool synchronous) {
      const Schedule s = make(kind, p, m);
      const Picos t = kT / kind.v;
      CostTable costs = uniform_costs(s.num_stages, p, t, 2 * t, 0, kStageActivation);
      for (StageCost& c : costs.stages) c.weight_grad = t;
      Timeline timeline;
      EXPECT_TRUE(Engine().run(s, costs, &timeline, RunOptions{4, synchronous}).ok());
      return timeline.period();
    };
    EXPECT_EQ(period(kH2, false), 3 * m * kT);
    EXPECT_EQ(period(kV, false), 3 * m * kT);
    EXPECT_EQ(period(kH1, false), 3 * m * kT + (p - 1) * kT);
    EXPECT_EQ(period(kH2, true), 3 * m * kT + (p - 1) * kT);
  }
}

}  // namespace
}  // namespace zero_bubble_test
}  // namespace ppsim
