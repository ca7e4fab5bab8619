// The writer of `ppsim simulate --ops`: each piece's operations by phase,
// with their shapes, work and times (cost_model.h, priced_pieces).
#pragma once

#include <string>
#include <vector>

#include "sim/cost/cost_model.h"

namespace ppsim {

// One table per piece and phase, under `heading`: each operation's kind,
// shape, GFLOP, MB moved, time alone and share of the phase.
std::string format_op_table(const std::string& heading, const std::vector<PricedPiece>& pieces);

}  // namespace ppsim
