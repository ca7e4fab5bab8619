// `ppsim compare`'s outputs: the table, JSON and CSV of its rows.
#pragma once

#include <string>
#include <vector>

#include "sim/plan/compare.h"

namespace ppsim {

// The table, each row's iteration against the fastest feasible row's, and
// under it, when `config`'s layer times are the analytic model's, which
// schedules are closer to the fastest than the model orders reliably
// (sim/report/evidence_note.h).
std::string format_comparison_table(const std::vector<ComparedSchedule>& rows,
                                    const Config& config);
// The note under that table: the feasible schedules within
// kRankingEvidence.close_gap of the fastest, when the layer times are the
// analytic model's and two or more are; else "".
std::string close_schedules_note(const std::vector<ComparedSchedule>& rows, const Config& config);
std::string comparison_to_json(const std::vector<ComparedSchedule>& rows);
std::string comparison_to_csv(const std::vector<ComparedSchedule>& rows);

}  // namespace ppsim
