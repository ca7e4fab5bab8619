// Chrome trace event JSON of a Timeline, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open: a process per rank with a compute track and one
// track per outgoing link direction, a flow arrow from each transfer to the
// action that receives it, and a memory counter per rank.
#pragma once

#include <string>
#include <vector>

#include "sim/core/timeline.h"

namespace ppsim {

std::string chrome_trace_json(const Timeline& timeline);

// Several runs in one trace, one above the other (e.g. predicted and
// measured): each run's ranks are processes named "<label> rank r".
struct TraceRun {
  std::string label;
  const Timeline* timeline;
};
std::string chrome_trace_json(const std::vector<TraceRun>& runs);

}  // namespace ppsim
