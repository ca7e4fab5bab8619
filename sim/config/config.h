// YAML config loading: the one place where YAML becomes the structs of
// workload.h. The contract is DESIGN.md's "Config" section: unknown keys are
// errors, and every error names the file, line, column and key path, e.g.
//   configs/x.yaml:7:11: parallel.pipeline: expected a positive integer, got "eight"
// Values given with --set have no line; their errors name the --set flag.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/status.h"
#include "sim/core/workload.h"

namespace ppsim {

// One `--set key.path=value` from the command line. The value is read as YAML
// ("8", "bf16", "[1, 2]").
struct ConfigOverride {
  std::string path;
  std::string value;
};
Result<ConfigOverride> parse_override(std::string_view text);
// Every flag of a command line's --set list; the first bad one is the error.
Result<std::vector<ConfigOverride>> parse_overrides(const std::vector<std::string>& flags);

// Reads, applies overrides, checks, fills in ffn_hidden's and kv_heads'
// defaults and resolves the model and hardware presets (the section's own
// keys override its preset's). Cross-field checks:
// p * t * d equals the GPU count (when hardware is given), global_batch
// divisible by micro_batch * data, the schedule kind is known, costs.fixed
// lists have 1 or p * v entries, model and hardware present unless
// costs.fixed gives forward_s and backward_s (hardware may also be left out
// when costs.profile is given, which needs a model), and costs.profile an
// existing file (resolved like schedule.file; read by build_cost_table).
Result<Config> load_config(const std::string& path,
                           const std::vector<ConfigOverride>& overrides = {});
// Same, from text; `source` stands for the file name in messages.
Result<Config> parse_config(std::string_view yaml_text, std::string_view source,
                            const std::vector<ConfigOverride>& overrides = {});

// A sweep file: a config whose `search:` section lists the values `ppsim
// explore` tries. Its parallel layout and batch divisibility are checked per
// candidate, not here; it needs a model and hardware.
struct Sweep {
  Config base;
  SearchSpace search;
};
Result<Sweep> load_sweep(const std::string& path,
                         const std::vector<ConfigOverride>& overrides = {});
Result<Sweep> parse_sweep(std::string_view yaml_text, std::string_view source,
                          const std::vector<ConfigOverride>& overrides = {});

// Where `hardware.preset: NAME` looks for NAME.yaml: $PPSIM_HARDWARE_DIR if
// set, else the source tree's configs/hardware. A value with a '/' or ending
// in .yaml is instead the path of a preset file, relative to the config's
// folder (to the working directory when given with --set).
std::string hardware_preset_dir();
// Where `model.preset: NAME` looks for NAME.yaml, likewise: $PPSIM_MODEL_DIR
// if set, else the source tree's configs/models.
std::string model_preset_dir();

// The numeric fields a hardware preset file holds, in HardwareSpec's order,
// as the loader reads them (the name, and gpus_per_node and nodes, which
// belong to each config, are not among them): for writers of presets and
// for comparing two clusters' figures.
struct HardwarePresetNumber {
  const char* key;
  double HardwareSpec::*member;
};
struct HardwarePresetInteger {
  const char* key;
  int HardwareSpec::*member;
};
std::vector<HardwarePresetNumber> hardware_preset_numbers();
std::vector<HardwarePresetInteger> hardware_preset_integers();

}  // namespace ppsim
