// Reads a JSON file ppsim wrote (a runs file) with nlohmann-json and walks it
// by hand, as sim/config/yaml_reader.h walks YAML: every value keeps its key
// path and where it starts in the text, so that each error names
// file:line:column and the key ("r.json:4:24: runs[0].actions[0].action:
// expected ..."), in the same words (sim/core/read_expectations.h).
// `read_json` parses (syntax errors and duplicate keys name their place too)
// and hands the root to a reader, which throws JsonReadError from anywhere
// in the tree; read_json turns that into an Error.
#pragma once

#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "schedules/status.h"
#include "sim/core/read_expectations.h"

namespace ppsim::json_reader {

using Json = nlohmann::ordered_json;

struct JsonReadError {
  std::string message;
};

struct Place {
  int line = 0;  // 1-based; 0: unknown
  int column = 0;
};

// The line and column of each byte offset of a text.
class LineIndex {
 public:
  explicit LineIndex(std::string_view text);
  Place place(size_t offset) const;

 private:
  std::vector<size_t> line_starts_;  // byte offset of each line
};

// "source:line:column", or the source alone where the place is unknown.
std::string located(std::string_view source, Place place);

// A parsed document and where each value (and each member's key) starts,
// by key path: "runs[0].actions[2].index".
class Document {
 public:
  // A syntax error, a duplicate key or nesting deeper than kMaxDepth: an
  // Error naming source:line:column.
  static Result<Document> parse(std::string_view text, std::string_view source);
  static constexpr int kMaxDepth = 32;  // a runs file nests 5 deep
  const Json& root() const { return *root_; }
  // Where the value at `path` starts, or its key when `at_key`; a path that
  // is not in the document (an absent key) takes its nearest ancestor's.
  Place place(std::string_view path, bool at_key) const;

 private:
  friend class PlaceRecorder;
  explicit Document(std::string_view text) : lines_(text) {}

  std::unique_ptr<Json> root_;
  LineIndex lines_;
  std::unordered_map<std::string, size_t> values_;  // byte offsets
  std::unordered_map<std::string, size_t> keys_;
};

// A value in the tree with its key path; `json` null when the key is absent.
struct Value {
  std::string path;
  const Json* json = nullptr;
  bool present() const { return json != nullptr && !json->is_null(); }
};

// The members of an object whose keys have been checked against those allowed.
class Map {
 public:
  explicit Map(Value self) : self_(std::move(self)) {}
  const Value& self() const { return self_; }
  // The member `key`, or an absent Value with its path.
  Value get(std::string_view key) const;
  bool has(std::string_view key) const { return self_.json->contains(key); }

 private:
  Value self_;
};

// The checks a reader of a JSON document makes; each throws JsonReadError.
class Walker {
 public:
  Walker(const Document& document, std::string source)
      : document_(document), source_(std::move(source)) {}

  Value root() const { return Value{"", &document_.root()}; }
  [[noreturn]] void throw_error(const Value& value, std::string_view what) const;
  [[noreturn]] void throw_expected(const Value& value, std::string_view expected) const;
  [[noreturn]] void throw_at(Place place, const std::string& path, std::string_view what) const;
  // `value`, an object with no key but `keys`.
  Map map(const Value& value, const std::vector<std::string_view>& keys) const;
  Value required(const Map& map, std::string_view key) const;
  // The elements of an array; an absent value is an empty list.
  std::vector<Value> list(const Value& value) const;
  template <typename Int>
  Int to_int(const Value& value, Int min, Int max = std::numeric_limits<Int>::max()) const {
    if (value.present() && value.json->is_number_integer()) {
      // An unsigned above Int's range reads as out of range, not wrapped.
      if (value.json->is_number_unsigned() &&
          value.json->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<Int>::max())) {
        throw_expected(value, integer_expectation(min, max));
      }
      const auto result = value.json->get<int64_t>();
      if (result >= min && result <= max) return static_cast<Int>(result);
    }
    throw_expected(value, integer_expectation(min, max));
  }
  double to_number(const Value& value, Bound bound = Bound::kNonNegative) const;
  std::string to_string(const Value& value, bool non_empty = false) const;

 private:
  const Document& document_;
  std::string source_;
};

// Parses `text` and hands its root to `read` (which returns a T or throws
// JsonReadError); every failure becomes an Error naming `source`.
template <typename T, typename Read>
Result<T> read_json(std::string_view text, std::string_view source, Read&& read) {
  Result<Document> document = Document::parse(text, source);
  if (!document.ok()) return document.error();
  try {
    return read(Walker(*document, std::string(source)));
  } catch (const JsonReadError& e) {
    return Error{e.message};
  } catch (const std::exception& e) {  // nlohmann's own, or allocation: never a crash
    return Error{std::string(source) + ": " + e.what()};
  }
}

}  // namespace ppsim::json_reader
