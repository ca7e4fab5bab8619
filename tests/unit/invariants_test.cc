// Seeded random cases with uneven per-stage costs and nonzero p2p: whatever
// the numbers, a timeline must respect the rules of the machine it models.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "schedules/generators.h"
#include "schedules/validate.h"
#include "sim/config/config.h"
#include "sim/core/costs.h"
#include "sim/engine/engine.h"
#include "sim/plan/zb_auto.h"

namespace ppsim {
namespace invariants_test {
namespace {

struct Case {
  Schedule schedule;
  CostTable costs;
};

Case random_case(std::mt19937_64& rng, const std::string& kind) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const bool dualpipe = kind == "dualpipe";  // even p and m, m >= 2p
  const int p = dualpipe ? 2 * uniform(1, 4) : uniform(1, 8);
  // The pseudo-kinds below are 1F1B-shaped.
  const ScheduleKind named = schedule_kind_named(kind).value_or(ScheduleKind::k1f1b);
  const int v = fixed_virtual_stages(named).value_or(uniform(1, 3));
  const int m = kind == "interleaved-1f1b" || kind == "interleaved-zb" ? p * uniform(1, 4)
                : kind == "dualpipev" ? 2 * p + uniform(0, 8)  // at least one per stage
                : dualpipe            ? 2 * (p + uniform(0, 4))
                                      : uniform(1, 12);
  // "1f1b-split": 1F1B with each backward split into I then W right away,
  // mixing the split form into a schedule no generator makes.
  const bool split = kind == "1f1b-split";
  // zb-auto is built for the costs: start from 1F1B's shape, replace below.
  const bool automatic = kind == "zb-auto";
  const int slices = kind == "terapipe" ? uniform(1, 4) : 1;
  // pipedream-2bw steps once per batch of at least p microbatches.
  const int batch = p + uniform(0, 2);
  const int stream = kind == "pipedream-2bw" ? batch * uniform(1, 3) : m;
  Case c{*make_schedule(split || automatic ? ScheduleKind::k1f1b : named,
                        {p, stream, v, slices, batch}),
         {}};
  if (split) {
    for (auto& program : c.schedule.programs) {
      std::vector<Action> out;
      for (const Action& a : program) {
        if (a.kind != ActionKind::kBackward) {
          out.push_back(a);
          continue;
        }
        out.push_back({ActionKind::kBackwardInput, a.stage, a.microbatch});
        out.push_back({ActionKind::kBackwardWeight, a.stage, a.microbatch});
      }
      program = out;
    }
  }
  const int stages = p * v;
  c.costs = uniform_costs(stages, p, 0, 0, 0, 0, slices);
  for (StageCost& s : c.costs.stages) {
    s.forward = uniform(1, 1000) * 1000;
    s.backward = s.forward + uniform(0, 2000) * 1000;
    s.weight_grad = uniform(0, 10) * (s.backward / 20);
    s.activation_bytes = uniform(1, 100);
    // What I leaves for W: less or more than F took (the level may rise at I).
    s.weight_grad_bytes = uniform(0, 100);
    // What an overlapped pair (dualpipev's) may hide.
    s.forward_comm = uniform(0, 10) * (s.forward / 10);
    s.backward_comm = uniform(0, 10) * ((s.backward - s.weight_grad) / 10);
  }
  for (size_t b = 0; b < c.costs.p2p_forward.size(); ++b) {
    c.costs.p2p_forward[b] = uniform(0, 3000) * 100;
    c.costs.p2p_backward[b] = uniform(0, 3000) * 100;
  }
  for (int r = 0; r < p; ++r) {
    c.costs.grad_sync[r] = uniform(0, 5) * 1000;
    c.costs.optimizer_step[r] = uniform(0, 5) * 1000;
  }
  c.costs.pipeline_sync = uniform(0, 2) * 500;
  c.costs.comm_sm_fraction = uniform(0, 3) * 0.15;  // the SMs a pair's communication holds
  if (automatic) {
    c.schedule = *make_zb_auto(p, m, c.costs, 100LL * uniform(1, m));  // up to m microbatches
  }
  return c;
}

// An action's compute_time (costs.h: B whole, I the backward less W); S,
// the stage's optimizer step with its data-parallel gradient reduction
// (action.h). The asynchronous schedules hold one stage per rank (checked in
// check_invariants), so a stage's step is its rank's whole reduction and
// update: the same work, and the same time, that a synchronous schedule
// spends after its program.
Picos duration(const CostTable& costs, const Schedule& s, const ActionRecord& r) {
  if (r.action.kind == ActionKind::kStep) {
    return costs.grad_sync[r.rank] + costs.optimizer_step[r.rank];
  }
  return compute_time(costs.stages[r.action.stage * s.num_slices + r.action.slice], r.action.kind);
}

// An overlapped pair's time: overlapped_pair_time, whose formula the
// hand-worked cases of closed_form_test.cc (OverlappedPair) check; here only
// that the engine gives each pair of records that time.
Picos pair_duration(const CostTable& costs, const Schedule& s, const ActionRecord& f,
                    const ActionRecord& b) {
  const StageCost& forward = costs.stages[f.action.stage * s.num_slices + f.action.slice];
  const StageCost& backward = costs.stages[b.action.stage * s.num_slices + b.action.slice];
  return overlapped_pair_time(duration(costs, s, f), forward.forward_comm, duration(costs, s, b),
                              backward.backward_comm, costs.comm_sm_fraction);
}

void check_invariants(const Case& c, const Timeline& t, const RunOptions& options) {
  const Schedule& s = c.schedule;
  const size_t n = s.num_actions();
  ASSERT_EQ(t.actions.size(), n * options.iterations);
  ASSERT_EQ(t.iteration_end.size(), static_cast<size_t>(options.iterations));
  // duration() expects a step of a whole rank's weights: a schedule with S
  // actions and several stages on a rank needs an expectation of its own.
  for (const auto& program : s.programs) {
    for (const Action& a : program) {
      if (a.kind == ActionKind::kStep) {
        ASSERT_EQ(s.num_stages, s.num_ranks) << s.name;
      }
    }
  }
  // (iteration, kind, stage, mb, slice) -> record
  std::map<std::tuple<int, int, int, int, int>, size_t> where;
  std::vector<std::vector<std::pair<Picos, Picos>>> busy(s.num_ranks);
  size_t k = 0;
  for (int it = 0; it < options.iterations; ++it) {
    for (int rank = 0; rank < s.num_ranks; ++rank) {
      for (size_t pos = 0; pos < s.programs[rank].size(); ++pos, ++k) {
        const ActionRecord& r = t.actions[k];
        ASSERT_EQ(r.action, s.programs[rank][pos]);
        ASSERT_EQ(r.rank, rank);
        ASSERT_EQ(r.iteration, it);
        // Ran once, for exactly its cost; an overlapped pair's two records
        // follow each other and last the pair's time together.
        if (pos > 0 && s.programs[rank][pos - 1].overlaps_next) {
          const ActionRecord& f = t.actions[k - 1];
          EXPECT_EQ(f.end, r.start);
          EXPECT_EQ(r.end - f.start, pair_duration(c.costs, s, f, r));
        } else if (!r.action.overlaps_next) {
          EXPECT_EQ(r.end - r.start, duration(c.costs, s, r));
        }
        EXPECT_GE(r.start, 0);
        EXPECT_LE(r.end, t.makespan);
        where[{it, static_cast<int>(r.action.kind), r.action.stage, r.action.microbatch,
               r.action.slice}] = k;
        busy[rank].emplace_back(r.start, r.end);
      }
    }
  }
  for (const EpilogueRecord& e : t.epilogue) busy[e.rank].emplace_back(e.start, e.end);
  // No rank runs two things at once.
  for (auto& spans : busy) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
  }
  // Transfers: one at a time per directed link, each after its producer.
  std::map<std::pair<int, int>, std::vector<const TransferRecord*>> per_link;
  std::map<std::pair<int32_t, int32_t>, const TransferRecord*> transfer_of;
  for (const TransferRecord& x : t.transfers) {
    per_link[{t.src_rank(x), t.dst_rank(x)}].push_back(&x);
    transfer_of[{x.producer, x.consumer}] = &x;
    EXPECT_GE(x.start, t.ready(x));
    EXPECT_NE(t.src_rank(x), t.dst_rank(x));
    EXPECT_EQ(t.actions[x.producer].iteration, t.actions[x.consumer].iteration);
  }
  // Activation memory: what the engine saw as each rank's peak is the peak
  // of the memory events the timeline implies, and everything is given back.
  std::vector<int64_t> level(s.num_ranks, 0);
  std::vector<int64_t> peak(s.num_ranks, 0);
  Picos last = 0;
  for (const MemoryEvent& m : memory_events(t)) {
    EXPECT_GE(m.time, last);
    last = m.time;
    level[m.rank] += m.delta_bytes;
    peak[m.rank] = std::max(peak[m.rank], level[m.rank]);
  }
  EXPECT_EQ(peak, t.peak_activation_bytes);
  EXPECT_EQ(level, std::vector<int64_t>(s.num_ranks, 0));
  for (auto& [link, xs] : per_link) {
    for (size_t i = 1; i < xs.size(); ++i) EXPECT_LE(xs[i - 1]->end, xs[i]->start);
  }
  // When each rank may start iteration it: computed here from the rules, not
  // from the engine's epilogue records. Post-validation: after its own
  // gradient sync and step. Synchronous: after the last rank's gradient sync,
  // the pipeline all-reduce, then its own step.
  std::vector<std::vector<Picos>> program_end(options.iterations, std::vector<Picos>(s.num_ranks));
  for (const ActionRecord& r : t.actions) {
    program_end[r.iteration][r.rank] = std::max(program_end[r.iteration][r.rank], r.end);
  }
  // A schedule that steps inside its programs has nothing between iterations.
  bool steps_inside = false;
  for (const auto& program : s.programs) {
    for (const Action& a : program) steps_inside |= a.kind == ActionKind::kStep;
  }
  const auto iteration_ready = [&](int it, int rank) -> Picos {
    if (it == 0) return 0;
    if (steps_inside) {
      if (!options.synchronous_step) return program_end[it - 1][rank];
      Picos release = 0;
      for (int r = 0; r < s.num_ranks; ++r) release = std::max(release, program_end[it - 1][r]);
      return release + c.costs.pipeline_sync;
    }
    if (!options.synchronous_step) {
      return program_end[it - 1][rank] + c.costs.grad_sync[rank] + c.costs.optimizer_step[rank];
    }
    Picos release = 0;
    for (int r = 0; r < s.num_ranks; ++r) {
      release = std::max(release, program_end[it - 1][r] + c.costs.grad_sync[r]);
    }
    return release + c.costs.pipeline_sync + c.costs.optimizer_step[rank];
  };
  for (int it = 0; it < options.iterations; ++it) {
    Picos end = 0;
    for (int r = 0; r < s.num_ranks; ++r) end = std::max(end, iteration_ready(it + 1, r));
    EXPECT_EQ(t.iteration_end[it], end) << "iteration " << it;
  }
  // Every action starts exactly when the last of its inputs is there: its
  // predecessor in program order ended, and each dependency ended (same rank)
  // or arrived (another rank). Not before (causality), not after (no idling).
  k = 0;
  for (int it = 0; it < options.iterations; ++it) {
    const auto is_split = [&](int stage, int mb, int slice) {
      return where.count({it, static_cast<int>(ActionKind::kBackwardInput), stage, mb, slice}) > 0;
    };
    for (int rank = 0; rank < s.num_ranks; ++rank) {
      for (size_t pos = 0; pos < s.programs[rank].size(); ++pos, ++k) {
        const ActionRecord& r = t.actions[k];
        // When the inputs of the action recorded at `record` are there.
        const auto inputs_ready = [&](size_t record) {
          const Action& a = t.actions[record].action;
          Picos ready = 0;
          for_each_data_dependency(
              a, s.stages_per_chain(), s.num_slices, is_split, [&](const Action& dep) {
                const size_t d = where.at(
                    {it, static_cast<int>(dep.kind), dep.stage, dep.microbatch, dep.slice});
                if (t.actions[d].rank == rank) {
                  // A pair hands its outputs on at its end, its backward's.
                  const bool paired = t.actions[d].action.overlaps_next;
                  ready = std::max(ready, t.actions[paired ? d + 1 : d].end);
                  return;
                }
                const auto found =
                    transfer_of.find({static_cast<int32_t>(d), static_cast<int32_t>(record)});
                ASSERT_NE(found, transfer_of.end()) << "no transfer into " << to_string(a);
                const int boundary = std::min(dep.stage, a.stage) * s.num_slices + dep.slice;
                const Picos cost = dep.kind == ActionKind::kForward
                                       ? c.costs.p2p_forward[boundary]
                                       : c.costs.p2p_backward[boundary];
                EXPECT_EQ(found->second->end - found->second->start, cost);
                ready = std::max(ready, found->second->end);
              });
          return ready;
        };
        if (pos > 0 && s.programs[rank][pos - 1].overlaps_next) {
          // The pair's backward: its inputs were there when the pair began.
          EXPECT_LE(inputs_ready(k), t.actions[k - 1].start) << to_string(r.action);
          continue;
        }
        Picos ready = pos > 0 ? t.actions[k - 1].end : iteration_ready(it, rank);
        ready = std::max(ready, inputs_ready(k));
        if (r.action.overlaps_next) ready = std::max(ready, inputs_ready(k + 1));
        EXPECT_EQ(r.start, ready) << to_string(r.action) << " on rank " << rank << ", iteration "
                                  << it;
      }
    }
  }
}

class Invariants : public ::testing::TestWithParam<std::string> {};

TEST_P(Invariants, HoldOnSeededRandomCases) {
  std::mt19937_64 rng(20261129);
  for (int trial = 0; trial < 60; ++trial) {
    const Case c = random_case(rng, GetParam());
    ASSERT_TRUE(validate(c.schedule).ok());
    // One iteration, then several with each kind of optimizer step.
    const RunOptions options{1 + trial % 3, trial % 2 == 0};
    Timeline t;
    EXPECT_TRUE(Engine().run(c.schedule, c.costs, &t, options).ok());
    SCOPED_TRACE("trial " + std::to_string(trial) + ", " + std::to_string(options.iterations) +
                 (options.synchronous_step ? " synchronous" : " post-validated") + " iterations");
    check_invariants(c, t, options);
    if (HasFailure()) return;
  }
}

TEST_P(Invariants, EngineReuseGivesTheSameTimeline) {
  std::mt19937_64 rng(7);
  Engine engine;
  for (int trial = 0; trial < 10; ++trial) {
    const Case c = random_case(rng, GetParam());
    Timeline reused;
    Timeline fresh;
    EXPECT_TRUE(engine.run(c.schedule, c.costs, &reused).ok());
    EXPECT_TRUE(Engine().run(c.schedule, c.costs, &fresh).ok());
    EXPECT_EQ(reused.makespan, fresh.makespan);
    ASSERT_EQ(reused.actions.size(), fresh.actions.size());
    for (size_t i = 0; i < fresh.actions.size(); ++i) {
      EXPECT_EQ(reused.actions[i].start, fresh.actions[i].start);
    }
  }
}

// The epilogue records in one order: a run without records may keep them in
// another (ProgramOrderReplay).
std::vector<EpilogueRecord> sorted_epilogue(std::vector<EpilogueRecord> records) {
  std::sort(records.begin(), records.end(), [](const EpilogueRecord& a, const EpilogueRecord& b) {
    return std::tie(a.iteration, a.kind, a.rank) < std::tie(b.iteration, b.kind, b.rank);
  });
  return records;
}

// A run that keeps no records (RunOptions::record) tallies what a summary
// reads; the recorded run's records are the independent account of it. With
// a synchronous step it is ProgramOrderReplay's, the event engine's
// otherwise: the recorded run is the event engine's in both.
TEST_P(Invariants, ARunWithoutRecordsKeepsWhatTheSummaryReads) {
  std::mt19937_64 rng(11);
  Engine engine;  // shared: recording and not, in turns, on one engine
  for (int trial = 0; trial < 24; ++trial) {
    const Case c = random_case(rng, GetParam());
    RunOptions options{1 + trial % 3, trial % 2 == 0};
    options.blocking_sends = trial % 4 >= 2;
    Timeline recorded;
    EXPECT_TRUE(engine.run(c.schedule, c.costs, &recorded, options).ok());
    options.record = false;
    Timeline tallied;
    EXPECT_TRUE(engine.run(c.schedule, c.costs, &tallied, options).ok());
    SCOPED_TRACE("trial " + std::to_string(trial));
    EXPECT_TRUE(tallied.actions.empty());
    EXPECT_TRUE(tallied.transfers.empty());
    EXPECT_EQ(tallied.makespan, recorded.makespan);
    EXPECT_EQ(tallied.iteration_end, recorded.iteration_end);
    EXPECT_EQ(tallied.peak_activation_bytes, recorded.peak_activation_bytes);
    // The same durations added in the same order (a rank's program order).
    EXPECT_EQ(tallied.busy_per_iteration(), recorded.busy_per_iteration());
    const std::vector<EpilogueRecord> expected = sorted_epilogue(recorded.epilogue);
    const std::vector<EpilogueRecord> got = sorted_epilogue(tallied.epilogue);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(std::tie(got[i].kind, got[i].rank, got[i].iteration, got[i].start, got[i].end),
                std::tie(expected[i].kind, expected[i].rank, expected[i].iteration,
                         expected[i].start, expected[i].end));
    }
  }
}

// A pipeline whose stages zigzag over the ranks (stage s on rank s / 2 when
// s is even, p - 1 - s / 2 when odd): its one microbatch's forward hops from
// the lowest ranks to the highest and back, so the replay in program order
// would move it a hop or two per round of all p ranks, about p / 2 visits
// of a rank per action. The engine then gives that run to the events
// (ProgramOrderReplay::kMaxVisitsPerAction) after undoing what the replay
// began: the same timeline as recorded.
TEST(ProgramOrderReplay, AScheduleOfManyRoundsFallsBackToTheEvents) {
  constexpr int p = 64;
  Schedule s;
  s.name = "zigzag";
  s.num_ranks = p;
  s.num_stages = p;
  s.num_microbatches = 1;
  s.programs.resize(p);
  for (int stage = 0; stage < p; ++stage) {
    const int rank = stage % 2 == 0 ? stage / 2 : p - 1 - stage / 2;
    s.stage_rank.push_back(rank);
    s.programs[rank] = {{ActionKind::kForward, stage, 0}, {ActionKind::kBackward, stage, 0}};
  }
  ASSERT_TRUE(validate(s).ok());
  CostTable costs = uniform_costs(p, p, 1000, 2000, 300, 10);
  costs.grad_sync[3] = 500;
  costs.optimizer_step[5] = 700;
  Timeline recorded;
  ASSERT_TRUE(Engine().run(s, costs, &recorded).ok());
  RunOptions summary_only;
  summary_only.record = false;
  Timeline tallied;
  ASSERT_TRUE(Engine().run(s, costs, &tallied, summary_only).ok());
  // The forward chain and the backward chain back: 2p actions of 1000 and
  // 2000 ps, 2(p - 1) transfers of 300 ps, then rank 5's step.
  EXPECT_EQ(recorded.makespan, p * 3000 + 2 * (p - 1) * 300 + 700);
  EXPECT_EQ(tallied.makespan, recorded.makespan);
  EXPECT_EQ(tallied.peak_activation_bytes, recorded.peak_activation_bytes);
  EXPECT_EQ(tallied.busy_per_iteration(), recorded.busy_per_iteration());
  EXPECT_EQ(sorted_epilogue(tallied.epilogue).size(), recorded.epilogue.size());
}

// With a synchronous step and every rank's optimizer step as long, all ranks
// start the next iteration together, so one replay is the steady state
// (simulate() replays one then): the period of three iterations is the
// first's length, and each iteration's busy time and the peak are the same.
TEST_P(Invariants, OneSynchronousReplayIsTheSteadyStateWhenStepsAreEven) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 20; ++trial) {
    Case c = random_case(rng, GetParam());
    if (GetParam() == "pipedream" || GetParam() == "pipedream-2bw") return;  // no flush
    std::fill(c.costs.optimizer_step.begin(), c.costs.optimizer_step.end(), Picos{7000});
    Timeline one;
    Timeline three;
    ASSERT_TRUE(Engine().run(c.schedule, c.costs, &one, {1, true}).ok());
    ASSERT_TRUE(Engine().run(c.schedule, c.costs, &three, {3, true}).ok());
    SCOPED_TRACE("trial " + std::to_string(trial));
    EXPECT_EQ(one.period(), one.iteration_end[0]);
    EXPECT_EQ(three.period(), one.iteration_end[0]);
    EXPECT_EQ(three.iteration_end[0], one.iteration_end[0]);
    EXPECT_EQ(three.busy_per_iteration(), one.busy_per_iteration());
    EXPECT_EQ(three.peak_activation_bytes, one.peak_activation_bytes);
  }
}

std::vector<std::string> kinds_under_test() {
  std::vector<std::string> kinds;
  for (ScheduleKind kind : generated_schedule_kinds()) kinds.emplace_back(to_string(kind));
  kinds.push_back("zb-auto");
  kinds.push_back("1f1b-split");
  return kinds;
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, Invariants, ::testing::ValuesIn(kinds_under_test()),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return "k" + name;
                         });

}  // namespace
}  // namespace invariants_test
}  // namespace ppsim
