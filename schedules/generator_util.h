// What every schedule generator starts with: the checks of its parameters
// and the empty schedule it fills. Internal to schedules/ generators.
#pragma once

#include <string>
#include <string_view>

#include "schedules/generators.h"

namespace ppsim::generator_util {

// p, m and v at least 1, and, when `required_v` > 0, v == required_v (with
// `why` saying why, e.g. "runs one stage per rank").
Status check_params(std::string_view kind, const ScheduleParams& params, int required_v,
                    std::string_view why);

// No actions yet; the interleaved stage layout, stage = chunk * p + rank.
Schedule make_empty(std::string name, const ScheduleParams& params);

}  // namespace ppsim::generator_util
