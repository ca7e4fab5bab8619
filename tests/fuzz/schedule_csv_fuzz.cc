// libFuzzer harness for the schedule CSV reader: the input is the text of a
// `schedule.file` CSV, read by schedule_from_csv (schedules/csv.h) and, when
// it parses, checked by validate (schedules/validate.h): coverage and the
// deadlock search. Any Error is the expected answer to a bad schedule; only a
// crash, a sanitizer report, an uncaught exception or an abort is a finding.
// Seeds: configs/**/*.csv and every generator's schedule as CSV
// (fuzz_seeds.cc, run by scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "schedules/csv.h"
#include "schedules/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ppsim::Result<ppsim::Schedule> schedule = ppsim::schedule_from_csv(text, "fuzz.csv");
  if (schedule.ok()) (void)ppsim::validate(*schedule);
  return 0;
}
