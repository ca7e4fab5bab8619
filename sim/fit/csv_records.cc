#include "sim/fit/csv_records.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace ppsim {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

}  // namespace

CsvSplitter::CsvSplitter(std::string_view text, const std::string& path)
    : text_(text), path_(path) {
  if (text_.starts_with("\xEF\xBB\xBF")) pos_ = 3;  // a UTF-8 byte order mark
}

Result<std::optional<CsvRecord>> CsvSplitter::next() {
  while (pos_ < text_.size()) {
    CsvRecord record{line_, {}};
    bool last = false;
    while (!last) {
      Result<CsvField> field = read_field(&last);
      if (!field.ok()) return field.error();
      record.fields.push_back(std::move(*field));
    }
    if (!record.blank()) return std::optional<CsvRecord>(std::move(record));
  }
  return std::optional<CsvRecord>();
}

void CsvSplitter::skip_blanks() {
  while (pos_ < text_.size() && is_blank(text_[pos_])) ++pos_;
}

// Consumes the separator after a field; *last when it ended the record.
Status CsvSplitter::end_field(bool* last) {
  if (pos_ == text_.size()) {
    *last = true;
  } else if (text_[pos_] == ',') {
    ++pos_;
  } else if (text_[pos_] == '\n') {
    ++pos_;
    ++line_;
    *last = true;
  } else {
    return Error{fmt::format("{}:{}: expected a comma or the end of the line after a quoted field",
                             path_, line_)};
  }
  return {};
}

Result<CsvField> CsvSplitter::read_quoted(bool* last) {
  const int start_line = line_;
  CsvField field{"", true};
  for (++pos_;; ++pos_) {
    if (pos_ == text_.size()) {
      return Error{fmt::format("{}:{}: a quoted field is not closed", path_, start_line)};
    }
    const char c = text_[pos_];
    if (c == '"') {
      if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '"') {
        field.text += '"';
        ++pos_;
        continue;
      }
      ++pos_;
      break;
    }
    if (c == '\n') ++line_;
    field.text += c;
  }
  skip_blanks();
  if (Status st = end_field(last); !st) return Error{st.message()};
  return field;
}

Result<CsvField> CsvSplitter::read_plain(bool* last) {
  const size_t begin = pos_;
  while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n') {
    if (text_[pos_] == '"') {
      return Error{fmt::format(
          "{}:{}: a quote inside an unquoted field; quote the whole field (\"a \"\"b\"\"\")", path_,
          line_)};
    }
    ++pos_;
  }
  std::string_view text = text_.substr(begin, pos_ - begin);
  while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
  if (Status st = end_field(last); !st) return Error{st.message()};
  return CsvField{std::string(text), false};
}

Result<CsvField> CsvSplitter::read_field(bool* last) {
  skip_blanks();
  if (pos_ < text_.size() && text_[pos_] == '"') return read_quoted(last);
  return read_plain(last);
}

Result<std::vector<int>> read_csv_header(const CsvRecord& header, const std::string& path,
                                         std::span<const CsvColumn> known) {
  std::vector<std::string> names, required;
  for (const CsvColumn& c : known) {
    names.emplace_back(c.name);
    if (c.required) required.emplace_back(c.name);
  }
  std::vector<int> columns;
  for (const CsvField& field : header.fields) {
    const auto it = std::find(names.begin(), names.end(), field.text);
    if (it == names.end()) {
      return Error{fmt::format("{}:{}: unknown column \"{}\"; the columns are {}", path,
                               header.line, field.text, fmt::join(names, ", "))};
    }
    const int index = static_cast<int>(it - names.begin());
    if (std::find(columns.begin(), columns.end(), index) != columns.end()) {
      return Error{
          fmt::format("{}:{}: column \"{}\" appears twice", path, header.line, field.text)};
    }
    columns.push_back(index);
  }
  for (size_t i = 0; i < known.size(); ++i) {
    if (known[i].required &&
        std::find(columns.begin(), columns.end(), static_cast<int>(i)) == columns.end()) {
      return Error{fmt::format("{}:{}: missing column \"{}\" (required: {})", path, header.line,
                               known[i].name, fmt::join(required, ", "))};
    }
  }
  return columns;
}

Result<double> read_csv_number(const std::string& text, const std::string& where,
                               const char* column, CsvNumberRange range) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  const bool whole = range.largest_whole > 0;
  const bool ok = ec == std::errc() && ptr == end && std::isfinite(value) &&
                  (whole ? value >= 1 && value <= range.largest_whole && value == std::floor(value)
                         : value > 0);
  if (!ok) {
    return Error{
        fmt::format("{}: {}: expected {}, got \"{}\"", where, column,
                    whole ? fmt::format("a whole number from 1 to {:.0f}", range.largest_whole)
                          : std::string("a number of seconds above 0"),
                    text)};
  }
  return value;
}

}  // namespace ppsim
