// libFuzzer harness for the memory-timings reader: the input is the CSV
// text `ppsim calibrate --memory` reads (bytes, seconds, label, source),
// read by parse_memory_timings and, when it reads, fitted
// (sim/fit/memory_fit.h: closed form, cheap). Any Error is the expected
// answer to a bad file; only a crash, a sanitizer report, an uncaught
// exception or an abort is a finding. Seeds: what `ppsim profile-memory`
// writes (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/fit/memory_fit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ppsim::Result<ppsim::MemoryTimings> timings =
      ppsim::parse_memory_timings(text, "fuzz/memory.csv");
  if (!timings.ok()) return 0;
  ppsim::HardwareSpec hardware;
  hardware.hbm_bandwidth_gbps = 3350;
  (void)ppsim::fit_memory_timings(hardware, *timings);
  return 0;
}
