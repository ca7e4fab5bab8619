// libFuzzer harness for the runs-file reader: the input is the JSON text of a
// runs file (`ppsim validate --runs-out`, read by `ppsim calibrate`), read by
// parse_runs (sim/runs_file.h). Any Error is the expected answer to a bad
// file; only a crash, a sanitizer report, an uncaught exception or an abort
// is a finding. Seeds: the runs files fuzz_seeds.cc writes (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/fit/runs_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ppsim::parse_runs(text, "fuzz.json");
  return 0;
}
