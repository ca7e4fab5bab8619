#include "sim/timeline.h"

#include <algorithm>

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

int64_t Timeline::bytes(const TransferRecord& x) const {
  const Action& a = actions[x.producer].action;
  const int boundary = std::min(a.stage, actions[x.consumer].action.stage);
  return p2p_bytes.empty() ? 0 : p2p_bytes[boundary * num_slices + a.slice];
}

std::vector<MemoryEvent> memory_events(const Timeline& t) {
  std::vector<MemoryEvent> events;
  events.reserve(2 * t.actions.size());
  for (const ActionRecord& a : t.actions) {
    const int64_t bytes = t.stage_activation_bytes[a.action.stage * t.num_slices + a.action.slice];
    if (bytes == 0) continue;
    switch (a.action.kind) {
      case ActionKind::kForward:
        events.push_back({a.start, a.rank, bytes});
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardWeight:
        events.push_back({a.end, a.rank, -bytes});
        break;
      case ActionKind::kBackwardInput:
        break;
    }
  }
  std::sort(events.begin(), events.end(), [](const MemoryEvent& x, const MemoryEvent& y) {
    if (x.time != y.time) return x.time < y.time;
    if ((x.delta_bytes < 0) != (y.delta_bytes < 0)) return x.delta_bytes < 0;
    return x.rank < y.rank;
  });
  return events;
}

}  // namespace ppsim
