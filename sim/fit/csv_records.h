// Records of a CSV file (RFC 4180), for the fit's readers (measured runs,
// GEMM timings, memory timings): fields separated by commas; a quoted field
// may hold commas, newlines and "" for a quote; spaces around a field are
// not part of it; blank lines are skipped; a UTF-8 byte order mark is
// ignored. The header's columns, checked against the reader's table of
// names; each record's fields into the reader's row, numbers checked; the
// whole table and the file. Every error names file:line.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/status.h"
#include "sim/core/text_file.h"

namespace ppsim {

struct CsvField {
  std::string text;
  bool quoted = false;
};

struct CsvRecord {
  int line = 0;  // where it starts
  std::vector<CsvField> fields;

  bool blank() const { return fields.size() == 1 && !fields[0].quoted && fields[0].text.empty(); }
};

// Splits `text` into records; `path` names it in messages.
class CsvSplitter {
 public:
  CsvSplitter(std::string_view text, const std::string& path);

  // The next record that is not a blank line; nullopt at the end. Errors:
  // an unclosed quote, a quote inside an unquoted field, text after a
  // quoted field.
  Result<std::optional<CsvRecord>> next();

 private:
  void skip_blanks();
  Status end_field(bool* last);
  Result<CsvField> read_quoted(bool* last);
  Result<CsvField> read_plain(bool* last);
  Result<CsvField> read_field(bool* last);

  std::string_view text_;
  std::string path_;
  size_t pos_ = 0;
  int line_ = 1;
};

// A column a reader knows.
struct CsvColumn {
  const char* name;
  bool required;
};

// The header's columns, in file order, as indices into `known`. Errors: an
// unknown column (listing the known ones), a repeated one, a required one
// missing.
Result<std::vector<int>> read_csv_header(const CsvRecord& header, const std::string& path,
                                         std::span<const CsvColumn> known);

// The numbers a column takes: whole numbers from 1 to `largest_whole`, or
// (largest_whole 0) any finite number above 0.
struct CsvNumberRange {
  double largest_whole = 0;
};

// A field's number, `where` (file:line) and `column` naming it in the
// error: "<where>: <column>: expected a whole number from 1 to N" (or "a
// number of seconds above 0"), "got \"<text>\"".
Result<double> read_csv_number(const std::string& text, const std::string& where,
                               const char* column, CsvNumberRange range);

// Where a column's field goes in a row: a text column's string, or a
// number column's double with the numbers it takes.
struct CsvTarget {
  std::string* text = nullptr;
  double* number = nullptr;
  CsvNumberRange range;
};
inline CsvTarget csv_text(std::string* text) { return {text, nullptr, {}}; }
inline CsvTarget csv_number(double* number, CsvNumberRange range = {}) {
  return {nullptr, number, range};
}

// A record as a `Row` (its `line` set), each field through `target(row,
// column)`: a text copied, a number read by read_csv_number (named by
// `known[column]`). Errors: the first number's.
template <typename Row, typename Target>
Result<Row> read_csv_record(const CsvRecord& record, const std::vector<int>& columns,
                            const std::string& path, std::span<const CsvColumn> known,
                            Target&& target) {
  const std::string where = path + ":" + std::to_string(record.line);
  Row row;
  row.line = record.line;
  for (size_t i = 0; i < columns.size(); ++i) {
    const CsvTarget to = target(row, columns[i]);
    if (to.text != nullptr) {
      *to.text = record.fields[i].text;
      continue;
    }
    Result<double> value =
        read_csv_number(record.fields[i].text, where, known[columns[i]].name, to.range);
    if (!value.ok()) return value.error();
    *to.number = *value;
  }
  return row;
}

// Reads a whole table, a `Table{path, rows}` of `Row`s: the header
// (read_csv_header), then each record after it, with as many fields as the
// header has columns, through `read_row(record, columns, path)`, in order.
// Errors: an empty text ("expected a header line such as
// <example_header>"), the splitter's, the header's, a record with more or
// fewer fields, the first of read_row's, no record ("no <rows_name> below
// the header").
template <typename Table, typename Row, typename ReadRow>
Result<Table> read_csv_table(std::string_view text, const std::string& path,
                             std::span<const CsvColumn> known, std::string_view example_header,
                             std::string_view rows_name, ReadRow&& read_row) {
  CsvSplitter splitter(text, path);
  Result<std::optional<CsvRecord>> header = splitter.next();
  if (!header.ok()) return header.error();
  if (!*header) {
    return Error{path + ": empty; expected a header line such as \"" + std::string(example_header) +
                 "\""};
  }
  Result<std::vector<int>> columns = read_csv_header(**header, path, known);
  if (!columns.ok()) return columns.error();
  std::vector<Row> rows;
  for (;;) {
    Result<std::optional<CsvRecord>> record = splitter.next();
    if (!record.ok()) return record.error();
    if (!*record) break;
    if ((*record)->fields.size() != columns->size()) {
      return Error{path + ":" + std::to_string((*record)->line) + ": " +
                   std::to_string((*record)->fields.size()) + " fields, but the header has " +
                   std::to_string(columns->size()) + " columns"};
    }
    Result<Row> row = read_row(**record, *columns, path);
    if (!row.ok()) return row.error();
    rows.push_back(std::move(*row));
  }
  if (rows.empty()) {
    return Error{path + ": no " + std::string(rows_name) + " below the header"};
  }
  return Table{path, std::move(rows)};
}

// Reads the CSV file at `path` (at most kMaxDataFileBytes) and hands its
// text to `parse(text, path)`. Errors: the file's, then parse's.
template <typename Parse>
auto load_csv_file(const std::string& path, Parse&& parse)
    -> decltype(parse(std::string_view(), path)) {
  const Result<std::string> text = read_text_file(path, kMaxDataFileBytes);
  if (!text) return text.error();
  return parse(*text, path);
}

}  // namespace ppsim
