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

template <typename T>
bool parse_whole(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

}  // namespace

std::string got(const Field& field) {
  return field.present() ? fmt::format("got \"{}\"", render(field.node)) : "got nothing";
}

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
  if (!root) throw ConfigError{root.error().message};
  return *root;
}

std::string read_file(const std::string& path) {
  Result<std::string> text = read_text_file(path, kMaxYamlFileBytes);
  if (!text) throw ConfigError{text.error().message};
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
    throw ConfigError{fmt::format("{}: {}", set_flag(flag), what)};
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

Section Loader::section(const Field& field, const std::vector<std::string_view>& keys) const {
  Section section(field);
  if (!field.present()) return section;
  std::string allowed = fmt::format("{}", fmt::join(keys, ", "));
  if (!field.node.IsMap()) throw_expected(field, fmt::format("a map with keys {}", allowed));
  for (auto it = field.node.begin(); it != field.node.end(); ++it) {
    std::string key = render(it->first);
    Field entry{section.child_path(key), it->second, it->first.Mark(), field.file};
    if (!it->first.IsScalar() || std::find(keys.begin(), keys.end(), key) == keys.end()) {
      throw_error(entry.key_mark, entry.path,
                  fmt::format("unknown key, expected one of {}", allowed), entry.file);
    }
    if (section.find(key) != nullptr) {
      throw_error(entry.key_mark, entry.path, "duplicate key", entry.file);
    }
    section.add(std::move(entry));
  }
  return section;
}

Section Loader::nested_section(const Section& s, std::string_view key,
                               const std::vector<std::string_view>& keys) const {
  Section nested = section(s.get(key), keys);
  if (const Field* preset = s.shadowed(key)) nested.add_missing(section(*preset, keys));
  return nested;
}

int Loader::to_int(const Field& field, int min, int max) const {
  int value = 0;
  if (!field.present() || !field.node.IsScalar() || !parse_whole(field.node.Scalar(), value) ||
      value < min || value > max) {
    std::string expected = max != INT_MAX ? fmt::format("an integer from {} to {}", min, max)
                           : min == 1     ? "a positive integer"
                                          : fmt::format("an integer >= {}", min);
    throw_expected(field, expected);
  }
  return value;
}

void Loader::read_int(const Section& s, std::string_view key, int& out, int min, int max) const {
  if (s.has(key)) out = to_int(s.get(key), min, max);
}

bool Loader::to_bool(const Field& field) const {
  bool value = false;
  if (!field.present() || !field.node.IsScalar() ||
      !YAML::convert<bool>::decode(field.node, value)) {
    throw_expected(field, "true or false");
  }
  return value;
}

void Loader::read_bool(const Section& s, std::string_view key, bool& out) const {
  if (s.has(key)) out = to_bool(s.get(key));
}

double Loader::to_number(const Field& field, Bound bound) const {
  double value = 0;
  bool ok = field.present() && field.node.IsScalar() && parse_whole(field.node.Scalar(), value) &&
            std::isfinite(value);
  switch (bound) {
    case Bound::kNonNegative:
      if (!ok || value < 0) throw_expected(field, "a number >= 0");
      break;
    case Bound::kPositive:
      if (!ok || value <= 0) throw_expected(field, "a positive number");
      break;
    case Bound::kFraction:
      if (!ok || value <= 0 || value > 1) throw_expected(field, "a number in (0, 1]");
      break;
    case Bound::kProbability:
      if (!ok || value < 0 || value >= 1) throw_expected(field, "a number in [0, 1)");
      break;
  }
  return value;
}

std::vector<double> Loader::to_numbers(const Field& field, int64_t stages, double max) const {
  if (!field.node.IsSequence()) return {to_number_at_most(field, max)};
  if (field.node.size() != 1 && static_cast<int64_t>(field.node.size()) != stages) {
    throw_error(
        field.mark(), field.path,
        fmt::format("expected 1 value or {} (one per stage: pipeline x virtual_stages), got {}",
                    stages, field.node.size()));
  }
  std::vector<double> values;
  for (size_t i = 0; i < field.node.size(); ++i) {
    Field element{fmt::format("{}[{}]", field.path, i), field.node[i], field.mark(), field.file};
    values.push_back(to_number_at_most(element, max));
  }
  return values;
}

double Loader::to_number_at_most(const Field& field, double max) const {
  const double value = to_number(field, Bound::kNonNegative);
  if (value > max) {
    throw_expected(field, fmt::format("a number from 0 to {:g}, the most ppsim simulates", max));
  }
  return value;
}

size_t Loader::to_choice(const Field& field, const std::vector<std::string>& choices) const {
  if (field.present() && field.node.IsScalar()) {
    auto it = std::find(choices.begin(), choices.end(), field.node.Scalar());
    if (it != choices.end()) return it - choices.begin();
  }
  throw_expected(field, fmt::format("one of {}", fmt::join(choices, ", ")));
}

// A path written in the file is relative to the config's folder, so that a
// config and the files it names move together; one given with --set is
// relative to the working directory, where the command was typed.
std::filesystem::path Loader::resolve_path(const Field& field) const {
  std::filesystem::path path = field.node.Scalar();
  if (path.is_absolute()) return path;
  if (!field.file.empty()) return std::filesystem::path(field.file).parent_path() / path;
  const bool from_flag = std::any_of(overrides_.begin(), overrides_.end(), [&](const auto& flag) {
    return is_under(field.path, flag.path);
  });
  return from_flag ? path : std::filesystem::path(source_).parent_path() / path;
}

std::string Loader::to_existing_file(const Field& field, std::string_view expected) const {
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

std::vector<int> Loader::to_ints(const Field& field, int min, int max) const {
  if (!field.node.IsSequence() || field.node.size() == 0) {
    throw_expected(field, "a non-empty list of integers");
  }
  std::vector<int> values;
  for (size_t i = 0; i < field.node.size(); ++i) {
    const Field item{fmt::format("{}[{}]", field.path, i), field.node[i], field.key_mark,
                     field.file};
    values.push_back(to_int(item, min, max));
  }
  return values;
}

}  // namespace config_internal
}  // namespace ppsim
