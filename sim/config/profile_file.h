// Reading and writing cost profiles (sim/core/cost_profile.h): the versioned
// YAML of docs/cost_profile.md. This header is the only way in or out, so no
// YAML::Node reaches past it. Errors follow the config loader: bad input
// returns an Error naming file:line:col and the key path, unknown keys are
// errors, and a version this build does not read is an error naming the one
// it does.
#pragma once

#include <string>
#include <string_view>

#include "schedules/status.h"
#include "sim/core/cost_profile.h"

namespace ppsim {

// The YAML text of a profile: deterministic (fixed key order, samples in the
// order given) and exact (every double in its shortest form that reads back
// to the same bits). REQUIRES: every double is finite.
std::string profile_to_yaml(const CostProfile& profile);

// Reads and checks a profile; `source` stands for the file name in messages.
// Besides types and unknown or missing keys, it rejects: a version outside
// kOldestProfileVersion..kProfileVersion (checked first, so a newer file is
// told apart from a malformed one), an unknown kernel kind or part, a key the
// kernel's part does not have, non-positive shapes or repetitions,
// negative times, min_s <= median_s <= max_s broken, two kernels of the same
// kind and shape, two links of the same name, a negative latency and a
// non-positive bandwidth (of a link or of the calibration's link), a negative
// scale or overhead, and a calibration section in a version 1 file.
Result<CostProfile> parse_profile(std::string_view yaml, std::string_view source);
Result<CostProfile> load_profile(const std::string& path);

}  // namespace ppsim
