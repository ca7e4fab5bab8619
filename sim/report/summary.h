// Writers of a Summary for people (a table on stdout) and for programs (JSON
// with the fields DESIGN.md promises).
#pragma once

#include <string>

#include "sim/plan/metrics.h"

namespace ppsim {

class JsonWriter;

std::string format_summary_table(const Summary& summary);
// Writes the summary as one JSON object (summary_to_json's content).
void write_summary(JsonWriter& writer, const Summary& summary);
// Its fields alone, into an object the caller opened (and may add to).
void write_summary_fields(JsonWriter& writer, const Summary& summary);
std::string summary_to_json(const Summary& summary);
// "1.25 s", "830.0 ms", "12.5 us": three significant digits or more.
std::string format_duration(double seconds);

}  // namespace ppsim
