#include "schedules/schedule.h"

#include "schedules/status.h"

namespace ppsim {

bool Schedule::split_backward() const {
  for (const auto& program : programs) {
    for (const Action& a : program) {
      if (a.kind == ActionKind::kBackwardInput) return true;
    }
  }
  return false;
}

size_t Schedule::num_actions() const {
  size_t n = 0;
  for (const auto& program : programs) n += program.size();
  return n;
}

Schedule repeat_passes(const Schedule& pass, int passes) {
  PPSIM_CHECK(pass.num_chains == 1 && pass.comm_posts.empty() && passes >= 1);
  Schedule whole = pass;
  whole.num_microbatches = pass.num_microbatches * passes;
  for (size_t rank = 0; rank < whole.programs.size(); ++rank) {
    std::vector<Action>& program = whole.programs[rank];
    program.reserve(pass.programs[rank].size() * passes);
    for (int k = 1; k < passes; ++k) {
      for (Action action : pass.programs[rank]) {
        action.microbatch += k * pass.num_microbatches;
        program.push_back(action);
      }
    }
  }
  return whole;
}

std::string program_to_string(const std::vector<Action>& program) {
  std::string out;
  for (size_t i = 0; i < program.size(); ++i) {
    if (!out.empty()) out += ' ';
    if (program[i].overlaps_next && i + 1 < program.size()) {
      out += '(' + to_string(program[i]) + ';' + to_string(program[i + 1]) + ')';
      ++i;
    } else {
      out += to_string(program[i]);
    }
  }
  return out;
}

}  // namespace ppsim
