// libFuzzer harness for the GEMM-timings reader: the input is the CSV text
// `ppsim calibrate --gemms` reads (m, n, k, seconds, batch, label, source),
// read by parse_gemm_timings (sim/fit/gemm_fit.h). Any Error is the expected
// answer to a bad file; only a crash, a sanitizer report, an uncaught
// exception or an abort is a finding. The fit is not run here (a grid of
// thousands of points a row); gemm_fit_test prices the largest shapes the
// reader admits. Seeds: configs/microbench/*.csv (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/fit/gemm_fit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ppsim::parse_gemm_timings(text, "fuzz/gemms.csv");
  return 0;
}
