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

// Where a layer's GPU waits for the host's launches for at least
// kHostWaitNoteShare of its phases' time (the piece that waits most): that
// sentence and what hides the launches, ending in a newline; empty
// otherwise.
inline constexpr double kHostWaitNoteShare = 0.1;
std::string host_wait_note(const std::vector<PricedPiece>& pieces);
// The same for a config's pieces as the analytic model prices them; empty
// for measured or fixed layer times.
std::string host_wait_note(const Config& config);

}  // namespace ppsim
