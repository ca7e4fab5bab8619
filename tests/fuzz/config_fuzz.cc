// libFuzzer harness for the config loader: the input is the text of a YAML
// config (or sweep) file, read by parse_config and parse_sweep
// (sim/config/config.h). Any Error they return is the expected answer to bad
// input; only a crash, a sanitizer report, an uncaught exception or an abort
// is a finding. Seeds: configs/**/*.yaml and tests/cli/*.yaml
// (scripts/fuzz.sh).
//
// Presets (`hardware.preset: a100-80gb`) resolve against the source tree's
// configs/, and relative paths (schedule.file, costs.profile) against the
// working directory, as they would for a file named "fuzz.yaml" there.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ppsim::parse_config(text, "fuzz.yaml");
  // The same text as a sweep file: the loader with its `search:` section.
  (void)ppsim::parse_sweep(text, "fuzz.yaml");
  return 0;
}
