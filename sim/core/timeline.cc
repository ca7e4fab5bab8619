#include "sim/core/timeline.h"

#include <algorithm>

#include "sim/core/costs.h"

namespace ppsim {

const char* to_string(EpilogueKind kind) {
  switch (kind) {
    case EpilogueKind::kGradSync:
      return "grad-sync";
    case EpilogueKind::kPipelineSync:
      return "pipeline-sync";
    case EpilogueKind::kOptimizerStep:
      return "optimizer-step";
  }
  return "?";
}

Picos Timeline::period() const {
  const size_t n = iteration_end.size();
  if (n < 2) return makespan;
  return iteration_end[n - 1] - iteration_end[n - 2];
}

std::vector<double> Timeline::busy_per_iteration() const {
  if (actions.empty() && !busy_tally.empty()) return busy_tally;
  std::vector<double> per_iteration(num_ranks, 0.0);
  if (actions.empty()) return per_iteration;
  // Records are iteration-major: the last run's are the tail.
  const size_t runs = static_cast<size_t>(actions.back().iteration) + 1;
  const size_t per_run = actions.size() / runs;
  const double iterations_per_run = static_cast<double>(iterations) / static_cast<double>(runs);
  for (size_t i = actions.size() - per_run; i < actions.size(); ++i) {
    const ActionRecord& a = actions[i];
    per_iteration[a.rank] += static_cast<double>(a.end - a.start) / iterations_per_run;
  }
  return per_iteration;
}

int64_t Timeline::bytes(const TransferRecord& x) const {
  const Action& a = actions[x.producer].action;
  const int boundary = std::min(a.stage, actions[x.consumer].action.stage);
  return p2p_bytes.empty() ? 0 : p2p_bytes[boundary * num_slices + a.slice];
}

std::vector<MemoryEvent> memory_events(const Timeline& t) {
  std::vector<MemoryEvent> events;
  events.reserve(2 * t.actions.size());
  for (const ActionRecord& a : t.actions) {
    const Timeline::StageMemory& m = t.stage_memory[a.action.stage * t.num_slices + a.action.slice];
    const StageCost cost{0, 0, 0, m.activation, m.weight_grad};
    if (a.action.kind == ActionKind::kForward) {
      if (m.activation != 0) events.push_back({a.start, a.rank, m.activation});
    } else if (const int64_t freed = freed_bytes(cost, a.action.kind); freed != 0) {
      events.push_back({a.end, a.rank, -freed});
    }
  }
  // A rank runs its actions one after another, so its events in program
  // order (the order of the records) are already in time order; at equal
  // times that order is the one that happened (an I that raises the level,
  // then a W of no duration that lowers it).
  std::stable_sort(events.begin(), events.end(), [](const MemoryEvent& x, const MemoryEvent& y) {
    return x.time != y.time ? x.time < y.time : x.rank < y.rank;
  });
  return events;
}

}  // namespace ppsim
