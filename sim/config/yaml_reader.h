// The one YAML walker of sim/: every reader that walks a YAML tree by hand
// (the config loader, config_loader.h, and cost profiles) reads it through a Value (a node with its
// key path, the mark of its key and the file it came from), a Map (a map whose keys have been
// checked against those allowed) and a TreeReader, whose checks turn a value into a number, a
// string, a choice ... or throw a ReadError naming file:line:column and the key path. The tree is
// walked by hand rather than through YAML::convert<> so that every error can say where.
// `read_document` is where the throwing stops for the machine-written files;
// the config loader catches in config.cc. Internal to sim/: nothing outside
// includes it, so no YAML::Node leaks.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedules/status.h"
#include "sim/config/yaml_util.h"
#include "sim/core/read_expectations.h"
#include "sim/core/text_file.h"

namespace ppsim::yaml_util {

// The walker throws to unwind from deep in the tree; read_document (and the
// config loader's entry points) catch it and turn it into an Error.
struct ReadError {
  std::string message;
};

// A value in the tree, with its key path and where to point when it is wrong.
struct Value {
  std::string path;
  YAML::Node node;      // undefined or null when the key is absent
  YAML::Mark key_mark;  // of its key; of the enclosing map's key when absent
  std::string file;     // a config preset's file it came from; empty: the document itself

  bool present() const { return node.IsDefined() && !node.IsNull(); }
  // A null value's own mark points at whatever token follows it.
  YAML::Mark mark() const { return present() ? node.Mark() : key_mark; }
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

// "got \"...\"" as the user wrote the value, or "got nothing".
inline std::string got(const Value& value) {
  return value.present() ? fmt::format("got \"{}\"", render(value.node)) : "got nothing";
}

// The entries of a map whose keys have been checked against those allowed.
class Map {
 public:
  explicit Map(Value self) : self_(std::move(self)) {}

  const Value& self() const { return self_; }
  bool present() const { return self_.present(); }
  // Given, even if empty: an empty value for a key is an error, not its default.
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const Value* find(std::string_view key) const { return find_path(child_path(key)); }
  Value get(std::string_view key) const {
    const Value* entry = find(key);
    return entry != nullptr ? *entry
                            : Value{child_path(key), YAML::Node(), self_.key_mark, self_.file};
  }
  std::string child_path(std::string_view key) const {
    return yaml_util::child_path(self_.path, key);
  }
  void add(Value entry) { entries_.push_back(std::move(entry)); }
  // Adds the entries of `defaults` (a preset's, read under the same path)
  // whose keys this map does not give; of those it gives, keeps the preset's
  // maps (shadowed), so that a nested map such as model.moe can take the
  // keys it does not give from the preset's.
  void add_missing(const Map& defaults) {
    for (const Value& entry : defaults.entries_) {
      if (find_path(entry.path) == nullptr) {
        entries_.push_back(entry);
      } else if (entry.node.IsMap()) {
        shadowed_.push_back(entry);
      }
    }
  }
  // The preset's map at `key` that this map's own `key` replaced; null
  // where there is none.
  const Value* shadowed(std::string_view key) const {
    const std::string path = child_path(key);
    auto it = std::find_if(shadowed_.begin(), shadowed_.end(),
                           [&](const Value& entry) { return entry.path == path; });
    return it == shadowed_.end() ? nullptr : &*it;
  }

 private:
  const Value* find_path(std::string_view path) const {
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const Value& entry) { return entry.path == path; });
    return it == entries_.end() ? nullptr : &*it;
  }

  Value self_;
  std::vector<Value> entries_;
  std::vector<Value> shadowed_;
};

using ppsim::Bound;

// The checks every reader shares; a reader of one format derives from it.
class TreeReader {
 public:
  explicit TreeReader(std::string_view source) : source_(source) {}
  virtual ~TreeReader() = default;

 protected:
  // Where a value is, for an error: source:line:column, or the preset
  // file's for a value that came from one. A reader whose values may come
  // from elsewhere (the config loader's --set flags) says so here.
  virtual std::string location(const YAML::Mark& mark, const std::string& /*path*/,
                               const std::string& file) const {
    const std::string& where = file.empty() ? source_ : file;
    return mark.is_null() ? where : fmt::format("{}:{}:{}", where, mark.line + 1, mark.column + 1);
  }
  [[noreturn]] void throw_error(const YAML::Mark& mark, const std::string& path,
                                std::string_view what, const std::string& file = "") const {
    const std::string where = location(mark, path, file);
    throw ReadError{path.empty() ? fmt::format("{}: {}", where, what)
                                 : fmt::format("{}: {}: {}", where, path, what)};
  }
  [[noreturn]] void throw_expected(const Value& value, std::string_view expected) const {
    throw_error(value.mark(), value.path, fmt::format("expected {}, {}", expected, got(value)),
                value.file);
  }

  // The entries of `value`, a map with no key but `keys`; an absent value is
  // an empty map when `absent_is_empty`, else an error.
  Map map(const Value& value, const std::vector<std::string_view>& keys,
          bool absent_is_empty = false) const {
    Map map(value);
    if (absent_is_empty && !value.present()) return map;
    const std::string allowed = fmt::format("{}", fmt::join(keys, ", "));
    if (!value.node.IsMap()) throw_expected(value, fmt::format("a map with keys {}", allowed));
    for (auto it = value.node.begin(); it != value.node.end(); ++it) {
      const std::string key = render(it->first);
      Value entry{map.child_path(key), it->second, it->first.Mark(), value.file};
      if (!it->first.IsScalar() || std::find(keys.begin(), keys.end(), key) == keys.end()) {
        throw_error(entry.key_mark, entry.path,
                    fmt::format("unknown key, expected one of {}", allowed), entry.file);
      }
      if (map.find(key) != nullptr) {
        throw_error(entry.key_mark, entry.path, "duplicate key", entry.file);
      }
      map.add(std::move(entry));
    }
    return map;
  }
  Value required(const Map& map, std::string_view key) const {
    const Value* value = map.find(key);
    if (value == nullptr) {
      throw_error(map.self().mark(), map.child_path(key), "missing", map.self().file);
    }
    return *value;
  }
  // The elements of a list; an absent or empty value is an empty list.
  std::vector<Value> list(const Value& value) const {
    std::vector<Value> elements;
    if (!value.present()) return elements;
    if (!value.node.IsSequence()) throw_expected(value, "a list");
    for (size_t i = 0; i < value.node.size(); ++i) {
      elements.push_back(
          Value{fmt::format("{}[{}]", value.path, i), value.node[i], value.mark(), value.file});
    }
    return elements;
  }

  template <typename Int>
  Int to_int(const Value& value, Int min, Int max = std::numeric_limits<Int>::max()) const {
    Int result = 0;
    if (!value.present() || !value.node.IsScalar() || !parse_whole(value.node.Scalar(), result) ||
        result < min || result > max) {
      throw_expected(value, integer_expectation(min, max));
    }
    return result;
  }
  double to_number(const Value& value, Bound bound = Bound::kNonNegative) const {
    double result = 0;
    if (!value.present() || !value.node.IsScalar() || !parse_whole(value.node.Scalar(), result) ||
        !std::isfinite(result) || !within(result, bound)) {
      throw_expected(value, number_expectation(bound));
    }
    return result;
  }
  std::string to_string(const Value& value, bool non_empty = false) const {
    if (!value.present() || !value.node.IsScalar() || (non_empty && value.node.Scalar().empty())) {
      throw_expected(value, non_empty ? "a non-empty string" : "a string");
    }
    return value.node.Scalar();
  }
  bool to_bool(const Value& value) const {
    bool result = false;
    if (!value.present() || !value.node.IsScalar() ||
        !YAML::convert<bool>::decode(value.node, result)) {
      throw_expected(value, "true or false");
    }
    return result;
  }
  // The index of the value among `choices`.
  size_t to_choice(const Value& value, const std::vector<std::string>& choices) const {
    if (value.present() && value.node.IsScalar()) {
      auto it = std::find(choices.begin(), choices.end(), value.node.Scalar());
      if (it != choices.end()) return it - choices.begin();
    }
    throw_expected(value, fmt::format("one of {}", fmt::join(choices, ", ")));
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
