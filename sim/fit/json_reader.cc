#include "sim/fit/json_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <unordered_set>

namespace ppsim::json_reader {

// An iterator over the text that keeps, where the recorder can read it, how
// far nlohmann's lexer has read: a SAX event comes right after its token, so
// the token starts at the first character after the previous token that is
// not white space, ',' or ':'.
struct Cursor {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  const char* at = nullptr;
  const char** read = nullptr;  // shared with the recorder: one past the last character read

  reference operator*() const { return *at; }
  Cursor& operator++() {
    ++at;
    *read = at;
    return *this;
  }
  Cursor operator++(int) {
    Cursor before = *this;
    ++*this;
    return before;
  }
  bool operator==(const Cursor& other) const { return at == other.at; }
  bool operator!=(const Cursor& other) const { return at != other.at; }
};

// The SAX handler of the first pass: records where each value and key
// starts, by key path, and stops at a duplicate key or too deep a nesting.
class PlaceRecorder : public nlohmann::json_sax<Json> {
 public:
  PlaceRecorder(std::string_view text, std::string_view source, Document* document)
      : text_(text), source_(source), document_(document), read_(text.data()) {}

  const char** read() { return &read_; }
  const std::string& error() const { return error_; }

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool string(string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& name) override {
    Frame& frame = frames_.back();
    frame.key = name;
    const size_t start = token_start();
    const std::string path = frame.path.empty() ? name : fmt::format("{}.{}", frame.path, name);
    if (!frame.keys.insert(name).second) return fail(start, fmt::format("{}: duplicate key", path));
    document_->keys_[path] = start;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
    std::string_view what = e.what();
    const size_t column = what.find("column ");
    const size_t colon = column == std::string_view::npos ? column : what.find(": ", column);
    if (colon != std::string_view::npos) what.remove_prefix(colon + 2);
    return fail(position > 0 ? position - 1 : 0, std::string(what));
  }

 private:
  struct Frame {
    std::string path;
    bool object = false;
    std::string key;
    size_t index = 0;
    std::unordered_set<std::string> keys;
  };

  size_t token_start() {
    size_t i = scan_from_;
    while (i < text_.size() &&
           std::string_view(" \t\r\n,:").find(text_[i]) != std::string_view::npos) {
      ++i;
    }
    scan_from_ = static_cast<size_t>(read_ - text_.data());
    return i;
  }
  // The path of the value that starts now, and where it starts.
  std::string record() {
    std::string path;
    if (!frames_.empty()) {
      Frame& frame = frames_.back();
      path = frame.object
                 ? (frame.path.empty() ? frame.key : fmt::format("{}.{}", frame.path, frame.key))
                 : fmt::format("{}[{}]", frame.path, frame.index++);
    }
    document_->values_[path] = token_start();
    return path;
  }
  bool scalar() {
    record();
    return true;
  }
  bool open(bool object) {
    std::string path = record();
    if (static_cast<int>(frames_.size()) >= Document::kMaxDepth) {
      return fail(document_->values_[path],
                  fmt::format("nested deeper than {} levels", Document::kMaxDepth));
    }
    frames_.push_back(Frame{std::move(path), object, {}, 0, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    scan_from_ = static_cast<size_t>(read_ - text_.data());
    return true;
  }
  bool fail(size_t offset, const std::string& what) {
    error_ = fmt::format("{}: {}", located(source_, document_->lines_.place(offset)), what);
    return false;
  }

  std::string_view text_;
  std::string_view source_;
  Document* document_;
  const char* read_;
  size_t scan_from_ = 0;
  std::vector<Frame> frames_;
  std::string error_;
};

LineIndex::LineIndex(std::string_view text) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') line_starts_.push_back(i + 1);
  }
}

Place LineIndex::place(size_t offset) const {
  const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
  return Place{static_cast<int>(line - line_starts_.begin()) + 1,
               static_cast<int>(offset - *line) + 1};
}

std::string located(std::string_view source, Place place) {
  return place.line == 0 ? std::string(source)
                         : fmt::format("{}:{}:{}", source, place.line, place.column);
}

Result<Document> Document::parse(std::string_view text, std::string_view source) {
  Document document(text);
  PlaceRecorder recorder(text, source, &document);
  const Cursor begin{text.data(), recorder.read()};
  const Cursor end{text.data() + text.size(), recorder.read()};
  if (!Json::sax_parse(begin, end, &recorder)) return Error{recorder.error()};
  try {
    document.root_ = std::make_unique<Json>(Json::parse(text));
  } catch (const std::exception& e) {  // the first pass read it: not expected
    return Error{fmt::format("{}: {}", source, e.what())};
  }
  return document;
}

Place Document::place(std::string_view path, bool at_key) const {
  if (at_key) {
    const auto it = keys_.find(std::string(path));
    if (it != keys_.end()) return lines_.place(it->second);
  }
  while (true) {
    const auto it = values_.find(std::string(path));
    if (it != values_.end()) return lines_.place(it->second);
    if (path.empty()) return Place{};
    const size_t cut = path.find_last_of(".[");
    path = path.substr(0, cut == std::string_view::npos ? 0 : cut);
  }
}

Value Map::get(std::string_view key) const {
  const std::string path =
      self_.path.empty() ? std::string(key) : fmt::format("{}.{}", self_.path, key);
  const auto it = self_.json->find(std::string(key));
  return Value{path, it == self_.json->end() ? nullptr : &*it};
}

namespace {

// "got \"...\"" as the value reads in the file, or "got nothing".
std::string got(const Value& value) {
  if (!value.present()) return "got nothing";
  return fmt::format("got \"{}\"",
                     value.json->is_string() ? value.json->get<std::string>() : value.json->dump());
}

}  // namespace

void Walker::throw_error(const Value& value, std::string_view what) const {
  // A value that is null or absent points at its key, as the YAML reader's do.
  throw_at(document_.place(value.path, !value.present()), value.path, what);
}

void Walker::throw_at(Place place, const std::string& path, std::string_view what) const {
  const std::string where = located(source_, place);
  throw JsonReadError{path.empty() ? fmt::format("{}: {}", where, what)
                                   : fmt::format("{}: {}: {}", where, path, what)};
}

void Walker::throw_expected(const Value& value, std::string_view expected) const {
  throw_error(value, fmt::format("expected {}, {}", expected, got(value)));
}

Map Walker::map(const Value& value, const std::vector<std::string_view>& keys) const {
  const std::string allowed = fmt::format("{}", fmt::join(keys, ", "));
  if (!value.present() || !value.json->is_object()) {
    throw_expected(value, fmt::format("an object with keys {}", allowed));
  }
  Map map(value);
  for (const auto& [key, member] : value.json->items()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      const std::string path = map.get(key).path;
      throw_at(document_.place(path, /*at_key=*/true), path,
               fmt::format("unknown key, expected one of {}", allowed));
    }
  }
  return map;
}

Value Walker::required(const Map& map, std::string_view key) const {
  Value value = map.get(key);
  if (value.json == nullptr) {
    throw_at(document_.place(map.self().path, /*at_key=*/false), value.path, "missing");
  }
  return value;
}

std::vector<Value> Walker::list(const Value& value) const {
  std::vector<Value> elements;
  if (!value.present()) return elements;
  if (!value.json->is_array()) throw_expected(value, "an array");
  for (size_t i = 0; i < value.json->size(); ++i) {
    elements.push_back(Value{fmt::format("{}[{}]", value.path, i), &(*value.json)[i]});
  }
  return elements;
}

double Walker::to_number(const Value& value, Bound bound) const {
  if (!value.present() || !value.json->is_number() || !within(value.json->get<double>(), bound)) {
    throw_expected(value, number_expectation(bound));
  }
  return value.json->get<double>();
}

std::string Walker::to_string(const Value& value, bool non_empty) const {
  if (!value.present() || !value.json->is_string() ||
      (non_empty && value.json->get_ref<const std::string&>().empty())) {
    throw_expected(value, non_empty ? "a non-empty string" : "a string");
  }
  return value.json->get<std::string>();
}

}  // namespace ppsim::json_reader
