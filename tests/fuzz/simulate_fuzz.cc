// libFuzzer harness for everything a config reaches after the loader: the
// input is the text of a YAML config; when parse_config accepts it, simulate
// (sim/plan/simulate.h) generates its schedule, prices it (the analytic cost
// model for a model and a cluster, costs.fixed, or a profile) and replays it.
// Any Error is the expected answer to a config the model cannot price; only
// a crash, a sanitizer report, an uncaught exception or an abort is a
// finding, and so is a figure that cannot be right in a run that succeeded
// (issue 14, "no confident nonsense"): an iteration time that is not a
// positive finite number, a bubble outside [0, 1], a rank busy longer than
// the iteration, a negative or non-finite memory figure, or an MFU above 1
// without the warning that flags it. Seeds: configs/**/*.yaml and
// tests/cli/*.yaml (scripts/fuzz.sh).
//
// Presets and relative paths resolve as for config_fuzz.cc.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sim/config/config.h"
#include "sim/plan/metrics.h"
#include "sim/plan/simulate.h"

namespace {

// Configs past this many compute actions per iteration are only loaded: the
// replay is for finding wrong figures, which small pipelines reach as well,
// fast (the published configs' thousands of microbatches would take the
// fuzzer's time).
constexpr int64_t kMaxSimulatedActions = 4096;

bool finite_positive(double x) { return std::isfinite(x) && x > 0; }

bool physical(const ppsim::Summary& s) {
  if (!finite_positive(s.iteration_time_s)) return false;
  if (!(s.bubble_fraction >= 0 && s.bubble_fraction <= 1)) return false;
  // The busy time is summed in the iteration the period is taken from;
  // rounding to seconds leaves a picosecond or so.
  const double slack = 1e-9 * s.iteration_time_s;
  for (const ppsim::DeviceSummary& d : s.devices) {
    if (!(d.busy_s >= 0 && d.busy_s <= s.iteration_time_s + slack)) return false;
    if (d.static_bytes < 0 || d.peak_activation_bytes < 0 || d.peak_memory_bytes < 0) {
      return false;
    }
  }
  if (s.throughput.mfu) {
    const double mfu = *s.throughput.mfu;
    if (!std::isfinite(mfu) || mfu < 0) return false;
    if (mfu > 1 && s.warnings.empty()) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ppsim::Result<ppsim::Config> config = ppsim::parse_config(text, "fuzz.yaml");
  if (!config.ok()) return 0;
  // F, B, and W for the schedules that split the backward.
  const int64_t actions = int64_t{3} * config->num_stages() * config->num_microbatches();
  if (actions > kMaxSimulatedActions) return 0;
  const ppsim::Result<ppsim::Simulation> run =
      ppsim::simulate(*config, nullptr, nullptr, ppsim::Keep::kSummary);
  if (run.ok() && !physical(run->summary)) std::abort();
  return 0;
}
