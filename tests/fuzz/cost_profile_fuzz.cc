// libFuzzer harness for the cost-profile reader: the input is the YAML text
// of a profile (`costs.profile: FILE`), read by parse_profile
// (sim/cost/cost_profile.h). Any Error is the expected answer to a bad
// profile; only a crash, a sanitizer report, an uncaught exception or an
// abort is a finding. Seeds: the example of docs/cost_profile.md and the
// profiles fuzz_seeds.cc writes (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/cost/cost_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ppsim::parse_profile(text, "fuzz.yaml");
  return 0;
}
