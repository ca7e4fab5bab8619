// The model, schedules and checks of a measured run that every runtime
// backend's tests share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "real_runtime/runtime.h"
#include "schedules/generators.h"
#include "schedules/schedule.h"
#include "schedules/validate.h"
#include "sim/core/timeline.h"

namespace ppsim::runtime {

// Tiny, so that every schedule trains in milliseconds. fp64: a pipelined
// run may add gradients in another order than the sequential one (token
// slices add slice by slice), and double keeps that difference ~1e-16.
inline RuntimeModel tiny_model(Precision precision = Precision::kFloat64) {
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

inline RunSettings three_iterations() {
  RunSettings s;
  s.iterations = 3;
  s.learning_rate = 0.5;  // large, so that the three steps move the weights visibly
  return s;
}

inline Schedule schedule_of(const std::string& kind, int p, int m, int v = 1, int slices = 1) {
  ScheduleParams params;
  params.ranks = p;
  params.microbatches = m;
  params.virtual_stages = v;
  params.slices = slices;
  params.step_every = p;  // pipedream-2bw's smallest batch
  Result<Schedule> s = make_schedule(*schedule_kind_named(kind), params);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return *s;
}

struct Case {
  std::string kind;
  int p, m, v, slices;
};

// For test listings (without it, gtest prints the bytes, pointers included).
inline void PrintTo(const Case& c, std::ostream* os) {
  *os << c.kind << " p=" << c.p << " m=" << c.m << " v=" << c.v << " slices=" << c.slices;
}

// One schedule of each kind on two ranks (the MPI tests' job).
inline std::vector<Case> two_rank_cases() {
  return {
      Case{"gpipe", 2, 4, 1, 1},   Case{"1f1b", 2, 4, 1, 1},  Case{"interleaved-1f1b", 2, 4, 2, 1},
      Case{"zb-h1", 2, 4, 1, 1},   Case{"zb-h2", 2, 4, 1, 1}, Case{"zb-v", 2, 4, 2, 1},
      Case{"terapipe", 2, 2, 1, 2}};
}

inline std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string name =
      info.param.kind + "_p" + std::to_string(info.param.p) + "_m" + std::to_string(info.param.m);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

// `piped`, a run of a schedule with m microbatches on tiny_model() for
// three_iterations(), trained as the sequential reference does: the same
// weights (within 1e-10 relative, fp64) and losses, and weights that moved.
inline void expect_trains_like_sequential(const RunResult& piped, int m) {
  const RuntimeModel model = tiny_model();
  Result<RunResult> reference = run_sequential(model, m, three_iterations());
  ASSERT_TRUE(reference.ok()) << reference.error().message;

  Result<double> err = max_relative_error(piped.weights, reference->weights);
  ASSERT_TRUE(err.ok()) << err.error().message;
  EXPECT_LT(*err, 1e-10);
  ASSERT_EQ(piped.losses.size(), 3u);
  ASSERT_EQ(reference->losses.size(), 3u);
  for (int it = 0; it < 3; ++it) {
    EXPECT_NEAR(piped.losses[it], reference->losses[it], 1e-12) << "iteration " << it;
  }
  // The untrained model guesses about uniformly: its loss is near log(vocab).
  // (Three SGD steps on a model this small do not reliably lower it.)
  EXPECT_NEAR(reference->losses[0], std::log(32.0), 0.1);
  // And the weights moved: an untrained model differs by far more than the tolerance.
  RunSettings none = three_iterations();
  none.learning_rate = 0;
  Result<RunResult> untrained = run_sequential(model, m, none);
  ASSERT_TRUE(untrained.ok());
  EXPECT_GT(*max_relative_error(untrained->weights, reference->weights), 1e-3);
}

// Every action once, in program order per rank; inputs received from
// another rank arrive (a TransferRecord) before the action starts.
inline void expect_well_formed(const Schedule& schedule, const Timeline& t, int iterations) {
  const size_t n = schedule.num_actions();
  ASSERT_EQ(t.actions.size(), iterations * n);
  ASSERT_EQ(t.num_ranks, schedule.num_ranks);
  ASSERT_EQ(t.iteration_end.size(), static_cast<size_t>(iterations));
  std::map<std::tuple<int, int, int, int, int>, int> index;  // (it, kind, stage, mb, slice)
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
        index[{it, static_cast<int>(a.kind), a.stage, a.microbatch, a.slice}] = static_cast<int>(i);
      }
    }
  }
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
  // Asynchronous schedules step in their S actions (records like any
  // other): no barrier or step after the program, and an iteration ends
  // with its last action.
  const bool steps_inside = std::any_of(
      schedule.programs.begin(), schedule.programs.end(), [](const std::vector<Action>& program) {
        return std::any_of(program.begin(), program.end(),
                           [](const Action& a) { return a.kind == ActionKind::kStep; });
      });
  EXPECT_EQ(t.epilogue.size(), steps_inside ? 0u : 2u * schedule.num_ranks * iterations);
  for (const ActionRecord& rec : t.actions) EXPECT_LE(rec.end, t.iteration_end[rec.iteration]);

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
    for_each_data_dependency(rec.action, schedule.stages_per_chain(), schedule.num_slices, is_split,
                             [&](const Action& dep) {
                               const int p = index.at({rec.iteration, static_cast<int>(dep.kind),
                                                       dep.stage, dep.microbatch, dep.slice});
                               EXPECT_GE(rec.start, t.actions[p].end);
                               if (t.actions[p].rank == rec.rank) return;
                               ++cross_rank;
                               auto x = transfers.find({p, static_cast<int>(c)});
                               ASSERT_NE(x, transfers.end())
                                   << to_string(dep) << " -> " << to_string(rec.action);
                               EXPECT_GE(rec.start, x->second->end);
                             });
  }
  EXPECT_EQ(cross_rank, t.transfers.size());
}

}  // namespace ppsim::runtime
