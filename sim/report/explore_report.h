// `ppsim explore`'s outputs: the ranked table, CSV and JSON of its candidates.
#pragma once

#include <cstddef>
#include <string>

#include "sim/plan/explore.h"

namespace ppsim {

// The ranked table of the top_k, the Pareto front, and under the table
// which of the best are closer than the analytic model orders reliably
// (explore_close_note).
std::string format_explore_table(const ExploreResult& result, size_t top_k);
// Which of the first `shown` ranked candidates are predicted within
// kRankingEvidence.close_gap of the best, named "#1 to #3" when `numbered`
// (the table's numbers) and "The first 3 candidates" otherwise (a report),
// and what that is worth, when the layer times are the analytic model's and
// two or more are; else "".
std::string explore_close_note(const ExploreResult& result, size_t shown, bool numbered);
// What a report of the first `shown` candidates says under its table: the
// close note (not numbered) and, for a model with routed experts, the
// published MoE runs' errors (sim/report/evidence_note.h).
std::string explore_report_caveat(const ExploreResult& result, size_t shown);
std::string explore_to_csv(const ExploreResult& result);
std::string explore_to_json(const ExploreResult& result);

}  // namespace ppsim
