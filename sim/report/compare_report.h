// `ppsim compare`'s outputs: the table, JSON and CSV of its rows.
#pragma once

#include <string>
#include <vector>

#include "sim/plan/compare.h"

namespace ppsim {

// The table, each row's iteration against the fastest feasible row's, and
// under it comparison_caveat.
std::string format_comparison_table(const std::vector<ComparedSchedule>& rows,
                                    const Config& config);
// The notes under that table and in the reports, when `config`'s layer
// times are the analytic model's (sim/report/evidence_note.h): which
// feasible schedules are closer to the fastest than the model orders
// reliably (two or more within kRankingEvidence.close_gap), and for a model
// with routed experts the published MoE runs' errors; else "".
std::string comparison_caveat(const std::vector<ComparedSchedule>& rows, const Config& config);
std::string comparison_to_json(const std::vector<ComparedSchedule>& rows);
std::string comparison_to_csv(const std::vector<ComparedSchedule>& rows);

}  // namespace ppsim
