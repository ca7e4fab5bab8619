// `ppsim compare`'s outputs: the table, JSON and CSV of its rows.
#pragma once

#include <string>
#include <vector>

#include "sim/plan/compare.h"

namespace ppsim {

std::string format_comparison_table(const std::vector<ComparedSchedule>& rows);
std::string comparison_to_json(const std::vector<ComparedSchedule>& rows);
std::string comparison_to_csv(const std::vector<ComparedSchedule>& rows);

}  // namespace ppsim
