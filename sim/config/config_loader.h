// Internal to the config loader (sim/config/config.cc, config_loader.cc and
// sweep_config.cc); nothing else includes it, so that no YAML::Node
// reaches past the loader. The Loader reads a config's sections with sim/'s
// one YAML walker (yaml_reader.h), adding what configs have and
// machine-written files do not: --set flags, presets, and values per stage.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/config/config.h"
#include "sim/config/yaml_reader.h"

namespace ppsim {
namespace config_internal {

using yaml_util::Bound;
using yaml_util::got;
using yaml_util::Map;
using yaml_util::ReadError;
using yaml_util::Value;

inline constexpr std::array kDTypes = {DType::kBf16, DType::kFp16, DType::kFp32};
inline constexpr std::array kRecomputes = {Recompute::kNone, Recompute::kSelective,
                                           Recompute::kFull};
inline constexpr std::array kSlicings = {SlicingMethod::kEven, SlicingMethod::kOptimal};
inline constexpr std::array kOptimizerSteps = {OptimizerStep::kSynchronous,
                                               OptimizerStep::kPostValidation};
inline constexpr std::array kMoeDispatchers = {MoeDispatcher::kAllToAll, MoeDispatcher::kDeepEp};
inline constexpr std::array kCudaGraphScopes = {
    CudaGraphScope::kNone, CudaGraphScope::kFullIteration, CudaGraphScope::kAttention,
    CudaGraphScope::kMlp,  CudaGraphScope::kMoeRouter,     CudaGraphScope::kMoePreprocess};
inline constexpr std::array kMasterWeights = {MasterWeights::kSeparate, MasterWeights::kParams,
                                              MasterWeights::kNone};
inline constexpr std::array kMomentDTypes = {MomentDType::kFp32, MomentDType::kModelDType};
inline constexpr std::array kGradientDTypes = {GradientDType::kFp32, GradientDType::kModelDType};
inline constexpr std::array kCrossEntropies = {CrossEntropy::kMegatron,
                                               CrossEntropy::kMegatronFused, CrossEntropy::kTorch,
                                               CrossEntropy::kTorchFp32, CrossEntropy::kFused};
inline constexpr std::array kFp8Recipes = {Fp8Recipe::kNone, Fp8Recipe::kDelayed,
                                           Fp8Recipe::kCurrent, Fp8Recipe::kMxfp8};
inline constexpr std::array kContextComms = {ContextComm::kP2p, ContextComm::kAllGather};
inline constexpr std::array kMlps = {Mlp::kGelu, Mlp::kSwiglu, Mlp::kSquaredRelu};
inline constexpr std::array kNorms = {Norm::kLayerNorm, Norm::kRmsNorm};
inline constexpr std::array kAttentions = {Attention::kStandard, Attention::kFlash};
inline constexpr std::array kPositions = {Positions::kLearned, Positions::kRotary,
                                          Positions::kAlibi};

// True when `path` is `prefix` or lies below it ("a.b" and "a.b[0]" are under "a").
bool is_under(std::string_view path, std::string_view prefix);
bool valid_path(std::string_view path);
YAML::Node parse_yaml(const std::string& text, const std::string& source);
std::string read_file(const std::string& path);

// The sections of a config, each checked for unknown keys.
struct Sections {
  Map model, hardware, parallel, training, schedule, fixed, costs;
};

// Walks one YAML document after applying the --set flags, which also decide how
// locations are printed: a value set by a flag has no line in the file.
class Loader : public yaml_util::TreeReader {
 public:
  // With `search` set, the file is a sweep: a `search:` section is read into
  // it, and the checks that depend on the parallel layout are left to the
  // explorer's candidates.
  Loader(std::string_view source, const std::vector<ConfigOverride>& overrides,
         SearchSpace* search = nullptr)
      : TreeReader(source), overrides_(overrides), search_(search) {}

  Config load(YAML::Node root) const;

 private:
  // A value set by a --set flag is located by the flag; a preset's by its
  // file; else the config's line and column.
  std::string location(const YAML::Mark& mark, const std::string& path,
                       const std::string& file) const override;
  const ConfigOverride* override_under(std::string_view prefix) const;

  void apply(YAML::Node& root, const ConfigOverride& flag) const;
  Map section(const Value& field, const std::vector<std::string_view>& keys) const;
  // The map at `key` of `s`, with the keys it does not give taken from the
  // preset's map at the same key (Map::shadowed), if any.
  Map nested_section(const Map& s, std::string_view key,
                     const std::vector<std::string_view>& keys) const;

  void read_int(const Map& s, std::string_view key, int& out, int min, int max = INT_MAX) const;
  void read_bool(const Map& s, std::string_view key, bool& out) const;
  // A scalar, or one value per stage; either way each value in [0, max].
  std::vector<double> to_numbers(const Value& field, int64_t stages, double max) const;
  // A scope or a list of scopes (training.cuda_graph_scope).
  CudaGraphs to_cuda_graphs(const Value& field) const;
  double to_number_at_most(const Value& field, double max) const;
  // A path as written, resolved against the folder of the file that holds it
  // unless it came from --set (then against the working directory).
  std::filesystem::path resolve_path(const Value& field) const;
  // The path of a file that exists, resolved by resolve_path; `expected`
  // describes it when it is not a path.
  std::string to_existing_file(const Value& field, std::string_view expected) const;
  // The file a section's `preset:` names: a shipped preset, NAME.yaml in
  // `dir`, or (a value with a '/' or ending in .yaml) a path, resolved like
  // schedule.file.
  std::string preset_file(const Value& field, const std::string& dir) const;
  // `s` with the entries of the preset it names that it does not give itself;
  // `keys` are those a preset file may hold. Without `preset:`, `s` itself.
  Map with_preset(Map s, const std::string& dir, const std::vector<std::string_view>& keys) const;
  // One of `values` (an array or a vector of an enum), by its to_string name.
  template <typename Values>
  auto to_enum(const Value& field, const Values& values) const;

  ModelSpec read_model(const Map& s) const;
  void read_model_shape(const Map& s, ModelSpec& model) const;
  void read_model_block(const Map& s, ModelSpec& model) const;
  MoeSpec read_moe(const Map& s, const ModelSpec& model) const;
  MlaSpec read_mla(const Map& s, const Map& model_section, const ModelSpec& model) const;
  HardwareSpec read_hardware(const Map& s) const;
  void read_hardware_fields(const Map& s, HardwareSpec& hardware) const;
  ParallelSpec read_parallel(const Map& s) const;
  TrainingSpec read_training(const Map& s) const;
  FixedCosts read_fixed(const Map& s, const ParallelSpec& parallel) const;
  std::string read_schedule_file(const Map& s, ScheduleKind kind) const;
  void read_slicing(const Map& s, ScheduleSpec& schedule) const;
  void check_cross_fields(const Config& config, const Sections& tree) const;
  void check_slicing(const Config& config, const Sections& tree) const;
  void check_cost_sources(const Config& config, const Sections& tree) const;
  void check_tensor_features(const Config& config, const Sections& tree) const;
  void check_sizes(const Config& config, const Sections& tree) const;
  void check_model_split(const Config& config, const Sections& tree) const;
  void check_layers_per_stage(const Config& config, const Sections& tree) const;
  void check_context(const Config& config, const Sections& tree) const;
  void check_expert(const Config& config, const Sections& tree) const;
  void check_fp8(const Config& config, const Sections& tree) const;
  void check_cuda_graph(const Config& config, const Sections& tree) const;
  void read_search_expert(const Map& s, const Config& config) const;

  void read_search(const Map& s, const Config& config) const;
  std::vector<int> to_ints(const Value& field, int min, int max) const;

  std::vector<ConfigOverride> overrides_;
  SearchSpace* search_;
};

template <typename Values>
auto Loader::to_enum(const Value& field, const Values& values) const {
  std::vector<std::string> names;
  for (auto value : values) names.emplace_back(ppsim::to_string(value));
  return values[to_choice(field, names)];
}

// Why context parallelism of degree cp > 1 cannot split `model`'s
// sequences (a length that is no multiple of 2 cp, attention that is not
// flash), worded to follow the degree; empty when it can (config_checks.cc).
std::string context_misfit(int cp, const ModelSpec& model);

}  // namespace config_internal
}  // namespace ppsim
