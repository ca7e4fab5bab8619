// Shared by the config tests (config_*_test.cc): a valid idealized config
// and a valid model config to start from, and the error a text gives.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config.h"

namespace ppsim::config_test {

// Drops the newline after R"( so that line 1 is the first line of the text.
inline std::string yaml(std::string_view text) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return std::string(text);
}

// The error parsing `text` (as test.yaml) gives, or "(no error)".
inline std::string error_of(std::string_view text,
                            const std::vector<ConfigOverride>& overrides = {}) {
  Result<Config> config = parse_config(yaml(text), "test.yaml", overrides);
  if (config.ok()) return "(no error)";
  return config.error().message;
}

// A valid idealized config; tests append to it or override it with --set.
inline constexpr std::string_view kIdeal = R"(
parallel:
  pipeline: 4
training:
  global_batch: 8
  micro_batch: 1
schedule:
  kind: 1f1b
costs:
  fixed:
    forward_s: 1.0
    backward_s: 2.0
)";

// A valid model config on one 8-GPU A100 node.
inline constexpr std::string_view kModel = R"(
model:
  layers: 24
  hidden: 2048
  heads: 16
  seq_len: 2048
  vocab: 51200
hardware:
  preset: a100-80gb
  gpus_per_node: 8
  nodes: 1
parallel:
  pipeline: 4
  tensor: 2
training:
  global_batch: 32
)";

// The path of a shipped example config.
inline std::string example(std::string_view name) {
  return std::string(PPSIM_SOURCE_DIR "/configs/examples/") + std::string(name);
}

}  // namespace ppsim::config_test
