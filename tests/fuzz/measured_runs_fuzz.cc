// libFuzzer harness for the measured-runs reader: the input is the CSV text
// `ppsim calibrate --measured` reads (config, iteration_time_s, label,
// source, group, series; quoted fields that may span lines), read by
// parse_measured_runs (sim/fit/measured_runs.h). Any Error is the expected
// answer to a bad file; only a crash, a sanitizer report, an uncaught
// exception or an abort is a finding. Seeds: configs/published/*/measured.csv
// (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/fit/measured_runs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ppsim::parse_measured_runs(text, "fuzz/measured.csv");
  return 0;
}
