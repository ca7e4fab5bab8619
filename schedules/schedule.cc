#include "schedules/schedule.h"

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
