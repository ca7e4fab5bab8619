// libFuzzer harness for the `--set KEY=VALUE` flags: each line of the input
// is one flag. parse_overrides reads them (sim/config/config.h) and, when
// they parse, parse_config applies them to a fixed, valid config, so that
// the flags' keys and YAML values reach the loader's override code. Any Error
// is the expected answer to a bad flag; only a crash, a sanitizer report, an
// uncaught exception or an abort is a finding. Seeds: the --set flags quoted
// in README.md, docs/ and tests/cli/ (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config.h"

namespace {

// configs/examples/gpt3-1.3b-8gpu.yaml: every section a flag may change (a
// flag may add costs.fixed).
constexpr std::string_view kBase = R"(model:
  layers: 24
  hidden: 2048
  heads: 16
  seq_len: 2048
  vocab: 51200
  dtype: bf16
hardware:
  preset: a100-80gb
  gpus_per_node: 8
  nodes: 1
parallel:
  pipeline: 4
  tensor: 2
  data: 1
training:
  global_batch: 32
  micro_batch: 1
  recompute: none
schedule:
  kind: 1f1b
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> flags;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    flags.emplace_back(text.substr(0, eol));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
  }
  const ppsim::Result<std::vector<ppsim::ConfigOverride>> overrides = ppsim::parse_overrides(flags);
  if (!overrides.ok()) return 0;
  (void)ppsim::parse_config(kBase, "base.yaml", *overrides);
  return 0;
}
