// `ppsim compare`: one workload under several schedules, side by side. A
// schedule that cannot run the config (a constraint of its generator, a
// layout the model does not split into, or a peak over the device memory) is
// kept in the list with the reason, never dropped.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "schedules/status.h"
#include "sim/core/workload.h"
#include "sim/plan/metrics.h"

namespace ppsim {

struct ComparedSchedule {
  std::string entry;  // as asked for, e.g. "interleaved-1f1b:2"
  bool feasible = false;
  std::string reason;                // why not feasible
  std::optional<Summary> summary;    // when it ran (also when over memory)
  std::optional<Timeline> timeline;  // when it ran and timelines were asked for
};

// Parses "gpipe,1f1b,interleaved-1f1b:2,terapipe:8": a kind, optionally with
// ":N" for its virtual stages per rank (or, for terapipe, its token slices).
Result<std::vector<std::string>> parse_schedule_list(const std::string& text);

// `config` set up for one entry of a schedule list (the rules below).
// REQUIRES: an entry parse_schedule_list accepted.
Config config_for_entry(const Config& config, const std::string& entry);

// Runs `config` under each entry. Kinds that run one stage per rank use
// v = 1; others keep the config's virtual_stages (2 when it is 1) unless the
// entry gives ":V".
std::vector<ComparedSchedule> compare_schedules(const Config& config,
                                                const std::vector<std::string>& entries,
                                                bool keep_timelines = false);

}  // namespace ppsim
