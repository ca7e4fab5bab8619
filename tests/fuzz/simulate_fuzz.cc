// libFuzzer harness for everything a config reaches after the loader: the
// input is the text of a YAML config; when parse_config accepts it, simulate
// (sim/plan/simulate.h) generates its schedule, prices it (the analytic cost
// model for a model and a cluster, costs.fixed, or a profile) and replays it.
// Any Error is the expected answer to a config the model cannot price; only
// a crash, a sanitizer report, an uncaught exception or an abort is a
// finding, and so is simulate's internal error, its answer to a run whose
// figures cannot be right (implausible_figure, sim/plan/metrics.h; issue
// 14, "no confident nonsense"). Seeds: configs/**/*.yaml and
// tests/cli/*.yaml (scripts/fuzz.sh).
//
// Presets and relative paths resolve as for config_fuzz.cc.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sim/config/config.h"
#include "sim/plan/simulate.h"

namespace {

// Configs past this many compute actions per iteration are only loaded: the
// replay is for finding wrong figures, which small pipelines reach as well,
// fast (the published configs' thousands of microbatches would take the
// fuzzer's time).
constexpr int64_t kMaxSimulatedActions = 4096;

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
  if (!run.ok() && run.error().message.find(": internal error: ") != std::string::npos) {
    std::abort();
  }
  return 0;
}
