// A field for a CSV file (RFC 4180): the text in double quotes, each quote
// inside doubled, so that commas, quotes and newlines in it survive. Every
// CSV writer's free-text column (reasons, sources) goes through it.
#pragma once

#include <string>
#include <string_view>

namespace ppsim {

inline std::string csv_quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

}  // namespace ppsim
