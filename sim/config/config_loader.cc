// The core of the config loader (config_loader.h): reading YAML, applying the
// --set flags, locating errors, and converting a field to a value.
#include "sim/config/config_loader.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/yaml_util.h"
#include "sim/core/text_file.h"

namespace ppsim {
namespace config_internal {
namespace {

using yaml_util::render;

std::string set_flag(const ConfigOverride& flag) {
  return fmt::format("--set {}={}", flag.path, flag.value);
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t dot = path.find('.', start);
    parts.emplace_back(path.substr(start, dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

}  // namespace

bool is_under(std::string_view path, std::string_view prefix) {
  if (prefix.empty() || !path.starts_with(prefix)) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

bool valid_path(std::string_view path) {
  std::vector<std::string> parts = split_path(path);
  return std::none_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
}

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  Result<YAML::Node> root = yaml_util::load_document(text, source);
  if (!root) throw ReadError{root.error().message};
  return *root;
}

std::string read_file(const std::string& path) {
  Result<std::string> text = read_text_file(path, kMaxYamlFileBytes);
  if (!text) throw ReadError{text.error().message};
  return std::move(*text);
}

const ConfigOverride* Loader::override_under(std::string_view prefix) const {
  for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it) {
    if (is_under(it->path, prefix)) return &*it;
  }
  return nullptr;
}

std::string Loader::location(const YAML::Mark& mark, const std::string& path,
                             const std::string& file) const {
  // A preset's value is the file's, whatever --set flags name its section.
  if (!file.empty()) {
    return mark.is_null() ? file : fmt::format("{}:{}:{}", file, mark.line + 1, mark.column + 1);
  }
  for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it) {
    if (is_under(path, it->path)) return set_flag(*it);
  }
  if (!mark.is_null()) return fmt::format("{}:{}:{}", source_, mark.line + 1, mark.column + 1);
  // A section that --set created: name the flag that set something inside it.
  for (std::string_view prefix = path; !prefix.empty();) {
    if (const ConfigOverride* flag = override_under(prefix)) return set_flag(*flag);
    size_t dot = prefix.rfind('.');
    prefix = prefix.substr(0, dot == std::string_view::npos ? 0 : dot);
  }
  return source_;
}

void Loader::apply(YAML::Node& root, const ConfigOverride& flag) const {
  auto fail_set = [&](std::string_view what) {
    throw ReadError{fmt::format("{}: {}", set_flag(flag), what)};
  };
  if (!valid_path(flag.path)) fail_set("expected key.path=value with no empty key");
  YAML::Node value;
  try {
    value = YAML::Load(flag.value);
  } catch (const YAML::ParserException& e) {
    fail_set(fmt::format("invalid YAML value: {}", e.msg));
  }
  std::vector<std::string> parts = split_path(flag.path);
  YAML::Node node = root;
  std::string path;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    path += (i == 0 ? "" : ".") + parts[i];
    YAML::Node child = node[parts[i]];
    if (child.IsDefined() && !child.IsNull() && !child.IsMap()) {
      fail_set(fmt::format("{}: expected a map to set \"{}\" in, got \"{}\"", path, parts[i + 1],
                           render(child)));
    }
    node.reset(child);  // plain assignment would overwrite the node's content
  }
  node[parts.back()] = value;
}

Map Loader::section(const Value& field, const std::vector<std::string_view>& keys) const {
  return map(field, keys, /*absent_is_empty=*/true);
}

Map Loader::nested_section(const Map& s, std::string_view key,
                           const std::vector<std::string_view>& keys) const {
  Map nested = section(s.get(key), keys);
  if (const Value* preset = s.shadowed(key)) nested.add_missing(section(*preset, keys));
  return nested;
}

void Loader::read_int(const Map& s, std::string_view key, int& out, int min, int max) const {
  if (s.has(key)) out = to_int(s.get(key), min, max);
}

void Loader::read_bool(const Map& s, std::string_view key, bool& out) const {
  if (s.has(key)) out = to_bool(s.get(key));
}

std::vector<double> Loader::to_numbers(const Value& field, int64_t stages, double max) const {
  if (!field.node.IsSequence()) return {to_number_at_most(field, max)};
  if (field.node.size() != 1 && static_cast<int64_t>(field.node.size()) != stages) {
    throw_error(
        field.mark(), field.path,
        fmt::format("expected 1 value or {} (one per stage: pipeline x virtual_stages), got {}",
                    stages, field.node.size()));
  }
  std::vector<double> values;
  for (size_t i = 0; i < field.node.size(); ++i) {
    Value element{fmt::format("{}[{}]", field.path, i), field.node[i], field.mark(), field.file};
    values.push_back(to_number_at_most(element, max));
  }
  return values;
}

CudaGraphs Loader::to_cuda_graphs(const Value& field) const {
  const std::vector<Value> scopes =
      field.node.IsSequence() ? list(field) : std::vector<Value>{field};
  if (scopes.empty()) throw_expected(field, "a scope or a list of scopes");
  CudaGraphs graphs;
  for (const Value& scope : scopes) {
    const CudaGraphScope part = to_enum(scope, kCudaGraphScopes);
    if (part == CudaGraphScope::kNone && scopes.size() > 1) {
      throw_error(scope.mark(), scope.path, "none cannot be listed with other scopes");
    }
    graphs.add(part);
  }
  return graphs;
}

double Loader::to_number_at_most(const Value& field, double max) const {
  const double value = to_number(field, Bound::kNonNegative);
  if (value > max) {
    throw_expected(field, fmt::format("a number from 0 to {:g}, the most ppsim simulates", max));
  }
  return value;
}

// A path written in the file is relative to the config's folder, so that a
// config and the files it names move together; one given with --set is
// relative to the working directory, where the command was typed.
std::filesystem::path Loader::resolve_path(const Value& field) const {
  std::filesystem::path path = field.node.Scalar();
  if (path.is_absolute()) return path;
  if (!field.file.empty()) return std::filesystem::path(field.file).parent_path() / path;
  const bool from_flag = std::any_of(overrides_.begin(), overrides_.end(), [&](const auto& flag) {
    return is_under(field.path, flag.path);
  });
  return from_flag ? path : std::filesystem::path(source_).parent_path() / path;
}

std::string Loader::to_existing_file(const Value& field, std::string_view expected) const {
  if (!field.present() || !field.node.IsScalar() || field.node.Scalar().empty()) {
    throw_expected(field, expected);
  }
  std::filesystem::path path = resolve_path(field);
  if (const std::string why = why_not_readable(path.string()); !why.empty()) {
    throw_error(field.mark(), field.path, fmt::format("cannot read {}: {}", path.string(), why),
                field.file);
  }
  return path.string();
}

std::vector<int> Loader::to_ints(const Value& field, int min, int max) const {
  if (!field.node.IsSequence() || field.node.size() == 0) {
    throw_expected(field, "a non-empty list of integers");
  }
  std::vector<int> values;
  for (size_t i = 0; i < field.node.size(); ++i) {
    const Value item{fmt::format("{}[{}]", field.path, i), field.node[i], field.key_mark,
                     field.file};
    values.push_back(to_int(item, min, max));
  }
  return values;
}

}  // namespace config_internal
}  // namespace ppsim
