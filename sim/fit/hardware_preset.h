// The hardware preset `ppsim calibrate --measured ... -o PRESET.yaml` writes:
// every field of the rows' hardware, as a preset file of configs/hardware/
// holds them, with the fitted ones replaced and commented, so that a config
// can name it (`hardware.preset: path/to/PRESET.yaml`). gpus_per_node and
// nodes are not written: they belong to each config.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sim/core/workload.h"
#include "sim/fit/hardware_fit.h"

namespace ppsim {

// The first field (by its YAML key) in which two hardware specs differ,
// gpus_per_node and nodes aside; nullopt when they are one hardware.
std::optional<std::string> hardware_difference(const HardwareSpec& a, const HardwareSpec& b);

// Where the fit came from, for the file's comments.
struct PresetProvenance {
  std::string measured_path;  // the measured-runs CSV, as given
  std::string date;           // YYYY-MM-DD
};

// The preset's YAML text: a header comment (what it is, the rows' preset,
// the errors before and after), then `name: NAME` and every field of
// fit.hardware; each fitted field with the comment "fitted by ppsim
// calibrate --measured FILE on DATE from N rows; preset value V", and each
// field of kFitParameters left alone with why.
std::string hardware_preset_yaml(const HardwareFitResult& fit, std::string_view name,
                                 const PresetProvenance& provenance);

}  // namespace ppsim
