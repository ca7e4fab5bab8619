// The core of sim/'s hand-walking readers of machine-written files (cost
// profiles, validate's runs files): a Value (a node with its key path and
// mark), a Map (a map whose keys have been checked against those allowed) and
// a TreeReader whose checks turn a node into a value or throw a ReadError
// naming file:line:column and the key path. `read_document` is where the
// throwing stops: it parses the text and turns every failure into an Error.
// Internal to sim/: nothing outside includes it, so no YAML::Node leaks.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedules/status.h"
#include "sim/config/yaml_util.h"
#include "sim/core/text_file.h"

namespace ppsim::yaml_util {

// The walker throws to unwind from deep in the tree; read_document is the one
// place that catches, and turns it into an Error.
struct ReadError {
  std::string message;
};

// A value in the tree with its key path, and where to point when it is wrong.
struct Value {
  std::string path;
  YAML::Node node;  // undefined when the key is absent
  YAML::Mark mark;  // its own, or its map's when absent or null

  bool present() const { return node.IsDefined() && !node.IsNull(); }
};

inline std::string child_path(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

template <typename T>
bool parse_whole(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

// The entries of a map whose keys have been checked against those allowed.
struct Map {
  Value self;
  std::vector<std::pair<std::string, Value>> entries;

  const Value* find(std::string_view key) const {
    for (const auto& [name, value] : entries) {
      if (name == key) return &value;
    }
    return nullptr;
  }
  Value get(std::string_view key) const {
    const Value* value = find(key);
    return value != nullptr ? *value : Value{child_path(self.path, key), YAML::Node(), self.mark};
  }
};

// The checks every reader shares; a reader of one format derives from it.
class TreeReader {
 public:
  explicit TreeReader(std::string_view source) : source_(source) {}

 protected:
  [[noreturn]] void throw_error(const YAML::Mark& mark, std::string_view path,
                                std::string_view what) const {
    std::string where =
        mark.is_null() ? source_ : fmt::format("{}:{}:{}", source_, mark.line + 1, mark.column + 1);
    throw ReadError{path.empty() ? fmt::format("{}: {}", where, what)
                                 : fmt::format("{}: {}: {}", where, path, what)};
  }
  [[noreturn]] void throw_expected(const Value& value, std::string_view expected) const {
    std::string got =
        value.present() ? fmt::format("got \"{}\"", render(value.node)) : "got nothing";
    throw_error(value.mark, value.path, fmt::format("expected {}, {}", expected, got));
  }

  Map map(const Value& value, const std::vector<std::string_view>& keys) const {
    Map map{value, {}};
    std::string allowed = fmt::format("{}", fmt::join(keys, ", "));
    if (!value.node.IsMap()) throw_expected(value, fmt::format("a map with keys {}", allowed));
    for (auto it = value.node.begin(); it != value.node.end(); ++it) {
      std::string key = render(it->first);
      std::string path = child_path(value.path, key);
      if (!it->first.IsScalar() || std::find(keys.begin(), keys.end(), key) == keys.end()) {
        throw_error(it->first.Mark(), path,
                    fmt::format("unknown key, expected one of {}", allowed));
      }
      if (map.find(key) != nullptr) throw_error(it->first.Mark(), path, "duplicate key");
      // A null value's own mark points at whatever follows it; its key's does not.
      YAML::Mark mark = it->second.IsNull() ? it->first.Mark() : it->second.Mark();
      map.entries.emplace_back(key, Value{path, it->second, mark});
    }
    return map;
  }
  Value required(const Map& map, std::string_view key) const {
    const Value* value = map.find(key);
    if (value == nullptr) throw_error(map.self.mark, child_path(map.self.path, key), "missing");
    return *value;
  }
  // The elements of a list; an absent or empty value is an empty list.
  std::vector<Value> list(const Value& value) const {
    std::vector<Value> elements;
    if (!value.present()) return elements;
    if (!value.node.IsSequence()) throw_expected(value, "a list");
    for (size_t i = 0; i < value.node.size(); ++i) {
      YAML::Node element = value.node[i];
      elements.push_back(Value{fmt::format("{}[{}]", value.path, i), element,
                               element.IsNull() ? value.mark : element.Mark()});
    }
    return elements;
  }

  template <typename Int>
  Int to_int(const Value& value, Int min) const {
    Int result = 0;
    if (!value.present() || !value.node.IsScalar() || !parse_whole(value.node.Scalar(), result) ||
        result < min) {
      throw_expected(value, min == 1   ? std::string("a positive integer")
                            : min == 0 ? std::string("an integer >= 0")
                                       : std::string("an integer"));
    }
    return result;
  }
  double to_number(const Value& value, bool positive = false) const {
    double result = 0;
    bool ok = value.present() && value.node.IsScalar() &&
              parse_whole(value.node.Scalar(), result) && std::isfinite(result);
    if (!ok || result < 0 || (positive && result == 0)) {
      throw_expected(value, positive ? "a positive number" : "a number >= 0");
    }
    return result;
  }
  std::string to_string(const Value& value, bool non_empty = false) const {
    if (!value.present() || !value.node.IsScalar() || (non_empty && value.node.Scalar().empty())) {
      throw_expected(value, non_empty ? "a non-empty string" : "a string");
    }
    return value.node.Scalar();
  }

  std::string source_;
};

// Parses `text` and hands its root to `read` (which returns a T or throws
// ReadError); any failure, yaml-cpp's included, becomes an Error naming
// `source`.
template <typename T, typename Read>
Result<T> read_document(std::string_view text, std::string_view source, Read&& read) {
  Result<YAML::Node> root = load_document(std::string(text), source);
  if (!root) return root.error();
  try {
    return read(*root);
  } catch (const ReadError& e) {
    return Error{e.message};
  } catch (const std::exception& e) {  // yaml-cpp's own, or allocation: never a crash
    return Error{fmt::format("{}: {}", source, e.what())};
  }
}

}  // namespace ppsim::yaml_util
