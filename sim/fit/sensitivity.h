// How an analytic prediction moves with the hardware model's efficiency
// parameters (`ppsim simulate --sensitivity`): each parameter `ppsim
// calibrate --measured -o` may fit (kFitParameters) moved down and up by
// kProbeFraction of its range, within its bounds, the others held: the
// probe the fit's identifiability test makes (hardware_fit.h), on one
// config. A preset figure that is assumed rather than measured (the B200's
// efficiencies, say) then shows how much of the prediction rests on it.
#pragma once

#include <string>
#include <vector>

#include "schedules/status.h"
#include "sim/config/config.h"
#include "sim/fit/hardware_fit.h"

namespace ppsim {

class JsonWriter;

struct ParameterProbe {
  const FitParameter* parameter;
  double value;         // the config's
  double lower;         // the value probed below it (the value itself at the lower bound)
  double upper;         // the value probed above it (the value itself at the upper bound)
  double lower_time_s;  // the iteration time with the parameter at `lower`
  double upper_time_s;  // ... at `upper`
};

struct Sensitivity {
  double iteration_time_s = 0;         // at the config's values
  std::vector<ParameterProbe> probes;  // one per kFitParameters entry, in its order
};

// An error naming the config when it has no model or hardware section, or
// reads a cost profile (its times are measured, not priced by the model).
Result<Sensitivity> hardware_sensitivity(const Config& config, int threads = 0);

// One line per parameter: its value, each probe with the iteration time
// there and the change from the config's.
std::string format_sensitivity(const Sensitivity& sensitivity);
// The same as one JSON object: `iteration_time_s` and `parameters[]`
// {`name`, `value`, `lower`, `lower_iteration_time_s`, `upper`,
// `upper_iteration_time_s`}; a probe at its bound has the value itself and
// the config's iteration time.
void write_sensitivity(JsonWriter& writer, const Sensitivity& sensitivity);

}  // namespace ppsim
