// Internal to the config loader (sim/config/config.cc, config_loader.cc and
// sweep_config.cc); nothing else includes it, so that no YAML::Node
// reaches past the loader. The YAML walker the loader's sections are read
// with: a Field (a value with its key path and mark), a Section (a map whose
// keys have been checked), and the Loader that turns them into values or into
// an error naming where the value came from.
//
// The tree is walked by hand rather than through YAML::convert<> so that every
// error can name the file, line, column and key path of the offending value.
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

namespace ppsim {
namespace config_internal {

// yaml-cpp reports by throwing, so the walker below throws too; parse_config
// and load_config are the only places that catch, and turn both into an Error.
struct ConfigError {
  std::string message;
};

// A value in the tree, with its key path and where to point when it is wrong.
struct Field {
  std::string path;
  YAML::Node node;      // Null when the key is absent
  YAML::Mark key_mark;  // of its key; of the enclosing section's key when absent
  std::string file;     // the preset file it came from; empty: the config itself

  bool present() const { return node.IsDefined() && !node.IsNull(); }
  // A null value's own mark points at whatever token follows it.
  YAML::Mark mark() const { return present() ? node.Mark() : key_mark; }
};

// The entries of a YAML map whose keys have been checked against those allowed.
class Section {
 public:
  explicit Section(Field self) : self_(std::move(self)) {}

  const Field& field() const { return self_; }
  bool present() const { return self_.present(); }
  // Given, even if empty: an empty value for a field is an error, not its default.
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const Field* find(std::string_view key) const { return find_path(child_path(key)); }
  Field get(std::string_view key) const {
    const Field* entry = find(key);
    return entry != nullptr ? *entry
                            : Field{child_path(key), YAML::Node(), self_.key_mark, self_.file};
  }
  std::string child_path(std::string_view key) const {
    return self_.path.empty() ? std::string(key) : fmt::format("{}.{}", self_.path, key);
  }
  void add(Field entry) { entries_.push_back(std::move(entry)); }
  // Adds the entries of `defaults` (a preset's, read under the same path)
  // whose keys this section does not give; of those it gives, keeps the
  // preset's maps (shadowed), so that a nested map such as model.moe can
  // take the keys it does not give from the preset's.
  void add_missing(const Section& defaults) {
    for (const Field& entry : defaults.entries_) {
      if (find_path(entry.path) == nullptr) {
        entries_.push_back(entry);
      } else if (entry.node.IsMap()) {
        shadowed_.push_back(entry);
      }
    }
  }
  // The preset's map at `key` that this section's own `key` replaced; null
  // where there is none.
  const Field* shadowed(std::string_view key) const {
    const std::string path = child_path(key);
    auto it = std::find_if(shadowed_.begin(), shadowed_.end(),
                           [&](const Field& entry) { return entry.path == path; });
    return it == shadowed_.end() ? nullptr : &*it;
  }

 private:
  const Field* find_path(std::string_view path) const {
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const Field& entry) { return entry.path == path; });
    return it == entries_.end() ? nullptr : &*it;
  }

  Field self_;
  std::vector<Field> entries_;
  std::vector<Field> shadowed_;
};

// kFraction: (0, 1], an efficiency; kProbability: [0, 1), a dropout rate.
enum class Bound { kNonNegative, kPositive, kFraction, kProbability };

inline constexpr std::array kDTypes = {DType::kBf16, DType::kFp16, DType::kFp32};
inline constexpr std::array kRecomputes = {Recompute::kNone, Recompute::kSelective,
                                           Recompute::kFull};
inline constexpr std::array kSlicings = {SlicingMethod::kEven, SlicingMethod::kOptimal};
inline constexpr std::array kOptimizerSteps = {OptimizerStep::kSynchronous,
                                               OptimizerStep::kPostValidation};
inline constexpr std::array kMlps = {Mlp::kGelu, Mlp::kSwiglu};
inline constexpr std::array kNorms = {Norm::kLayerNorm, Norm::kRmsNorm};
inline constexpr std::array kAttentions = {Attention::kStandard, Attention::kFlash};
inline constexpr std::array kPositions = {Positions::kLearned, Positions::kRotary,
                                          Positions::kAlibi};

std::string got(const Field& field);
// True when `path` is `prefix` or lies below it ("a.b" and "a.b[0]" are under "a").
bool is_under(std::string_view path, std::string_view prefix);
bool valid_path(std::string_view path);
YAML::Node parse_yaml(const std::string& text, const std::string& source);
std::string read_file(const std::string& path);

// The sections of a config, each checked for unknown keys.
struct Sections {
  Section model, hardware, parallel, training, schedule, fixed, costs;
};

// Walks one YAML document after applying the --set flags, which also decide how
// locations are printed: a value set by a flag has no line in the file.
class Loader {
 public:
  // With `search` set, the file is a sweep: a `search:` section is read into
  // it, and the checks that depend on the parallel layout are left to the
  // explorer's candidates.
  Loader(std::string_view source, const std::vector<ConfigOverride>& overrides,
         SearchSpace* search = nullptr)
      : source_(source), overrides_(overrides), search_(search) {}

  Config load(YAML::Node root) const;

 private:
  // `file`: a preset's, for a value that came from it; empty: the config.
  [[noreturn]] void throw_error(const YAML::Mark& mark, const std::string& path,
                                std::string_view what, const std::string& file = "") const {
    std::string where = location(mark, path, file);
    throw ConfigError{path.empty() ? fmt::format("{}: {}", where, what)
                                   : fmt::format("{}: {}: {}", where, path, what)};
  }
  [[noreturn]] void throw_expected(const Field& field, std::string_view expected) const {
    throw_error(field.mark(), field.path, fmt::format("expected {}, {}", expected, got(field)),
                field.file);
  }
  std::string location(const YAML::Mark& mark, const std::string& path,
                       const std::string& file) const;
  const ConfigOverride* override_under(std::string_view prefix) const;

  void apply(YAML::Node& root, const ConfigOverride& flag) const;
  Section section(const Field& field, const std::vector<std::string_view>& keys) const;
  // The map at `key` of `s`, with the keys it does not give taken from the
  // preset's map at the same key (Section::shadowed), if any.
  Section nested_section(const Section& s, std::string_view key,
                         const std::vector<std::string_view>& keys) const;

  int to_int(const Field& field, int min, int max = INT_MAX) const;
  void read_int(const Section& s, std::string_view key, int& out, int min, int max = INT_MAX) const;
  bool to_bool(const Field& field) const;
  void read_bool(const Section& s, std::string_view key, bool& out) const;
  double to_number(const Field& field, Bound bound) const;
  // A scalar, or one value per stage; either way each value in [0, max].
  std::vector<double> to_numbers(const Field& field, int64_t stages, double max) const;
  double to_number_at_most(const Field& field, double max) const;
  size_t to_choice(const Field& field, const std::vector<std::string>& choices) const;
  // A path as written, resolved against the folder of the file that holds it
  // unless it came from --set (then against the working directory).
  std::filesystem::path resolve_path(const Field& field) const;
  // The path of a file that exists, resolved by resolve_path; `expected`
  // describes it when it is not a path.
  std::string to_existing_file(const Field& field, std::string_view expected) const;
  // The file a section's `preset:` names: a shipped preset, NAME.yaml in
  // `dir`, or (a value with a '/' or ending in .yaml) a path, resolved like
  // schedule.file.
  std::string preset_file(const Field& field, const std::string& dir) const;
  // `s` with the entries of the preset it names that it does not give itself;
  // `keys` are those a preset file may hold. Without `preset:`, `s` itself.
  Section with_preset(Section s, const std::string& dir,
                      const std::vector<std::string_view>& keys) const;
  // One of `values` (an array or a vector of an enum), by its to_string name.
  template <typename Values>
  auto to_enum(const Field& field, const Values& values) const;

  ModelSpec read_model(const Section& s) const;
  void read_model_shape(const Section& s, ModelSpec& model) const;
  void read_model_block(const Section& s, ModelSpec& model) const;
  MoeSpec read_moe(const Section& s, const ModelSpec& model) const;
  MlaSpec read_mla(const Section& s, const Section& model_section, const ModelSpec& model) const;
  HardwareSpec read_hardware(const Section& s) const;
  void read_hardware_fields(const Section& s, HardwareSpec& hardware) const;
  ParallelSpec read_parallel(const Section& s) const;
  TrainingSpec read_training(const Section& s) const;
  FixedCosts read_fixed(const Section& s, const ParallelSpec& parallel) const;
  std::string read_schedule_file(const Section& s, ScheduleKind kind) const;
  void read_slicing(const Section& s, ScheduleSpec& schedule) const;
  void check_cross_fields(const Config& config, const Sections& tree) const;
  void check_context(const Config& config, const Sections& tree) const;
  void check_expert(const Config& config, const Sections& tree) const;
  void read_search_expert(const Section& s, const Config& config) const;

  void read_search(const Section& s, const Config& config) const;
  std::vector<int> to_ints(const Field& field, int min, int max) const;

  std::string source_;
  std::vector<ConfigOverride> overrides_;
  SearchSpace* search_;
};

template <typename Values>
auto Loader::to_enum(const Field& field, const Values& values) const {
  std::vector<std::string> names;
  for (auto value : values) names.emplace_back(to_string(value));
  return values[to_choice(field, names)];
}

// Why context parallelism of degree cp > 1 cannot split `model`'s
// sequences (a length that is no multiple of 2 cp, attention that is not
// flash), worded to follow the degree; empty when it can (config_checks.cc).
std::string context_misfit(int cp, const ModelSpec& model);

}  // namespace config_internal
}  // namespace ppsim
