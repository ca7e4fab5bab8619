#include "sim/core/json.h"

#include <fmt/format.h>

#include <cmath>

namespace ppsim {

void JsonWriter::separate() {
  if (need_comma_) *out_ += ',';
  need_comma_ = true;
}

JsonWriter& JsonWriter::begin_object() {
  separate();
  *out_ += '{';
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  *out_ += '}';
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  separate();
  *out_ += '[';
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  *out_ += ']';
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  value(k);
  *out_ += ':';
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view v) {
  separate();
  *out_ += '"';
  for (const char c : v) {
    switch (c) {
      case '"':
        *out_ += "\\\"";
        break;
      case '\\':
        *out_ += "\\\\";
        break;
      case '\n':
        *out_ += "\\n";
        break;
      case '\t':
        *out_ += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          *out_ += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          *out_ += c;
        }
    }
  }
  *out_ += '"';
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  if (!std::isfinite(v)) return null();
  separate();
  // Shortest text that reads back as the same double.
  *out_ += fmt::format("{}", v);
  return *this;
}

JsonWriter& JsonWriter::value(int64_t v) {
  separate();
  *out_ += fmt::format("{}", v);
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  separate();
  *out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(std::optional<double> v) { return v ? value(*v) : null(); }

JsonWriter& JsonWriter::null() {
  separate();
  *out_ += "null";
  return *this;
}

}  // namespace ppsim
