// `ppsim explore`'s outputs: the ranked table, CSV and JSON of its candidates.
#pragma once

#include <cstddef>
#include <string>

#include "sim/plan/explore.h"

namespace ppsim {

std::string format_explore_table(const ExploreResult& result, size_t top_k);
std::string explore_to_csv(const ExploreResult& result);
std::string explore_to_json(const ExploreResult& result);

}  // namespace ppsim
