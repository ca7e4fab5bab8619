#include "schedules/csv.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "schedules/limits.h"

namespace ppsim {

std::string schedule_to_csv(const Schedule& schedule) {
  std::string out = fmt::format(
      "# ppsim schedule {}: {} ranks, {} stages, {} microbatches; one row per rank\n",
      schedule.name, schedule.num_ranks, schedule.num_stages, schedule.num_microbatches);
  for (const auto& program : schedule.programs) {
    for (size_t i = 0; i < program.size(); ++i) {
      if (i > 0) out += ',';
      out += to_string(program[i]);
    }
    out += '\n';
  }
  return out;
}

Result<Schedule> schedule_from_csv(std::string_view text, std::string_view source) {
  Schedule s;
  s.name = "custom";
  std::vector<int> row_lines;  // the line of each rank's row, for errors
  int line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty() && line.front() == '#') continue;
    std::vector<Action> program;
    int column = 1;
    while (true) {
      const size_t comma = line.find(',');
      const std::string_view cell = line.substr(0, comma);
      if (cell.find_first_not_of(" \t") != std::string_view::npos) {
        Result<Action> a = parse_action(cell);
        if (!a) {
          return Error{fmt::format("{}:{}: cell {} (rank {}): {}", source, line_no, column,
                                   s.programs.size(), a.error().message)};
        }
        program.push_back(*a);
      }
      if (comma == std::string_view::npos) break;
      line.remove_prefix(comma + 1);
      ++column;
    }
    if (static_cast<int64_t>(s.programs.size()) == kMaxRanks) {
      return Error{fmt::format("{}:{}: more than {} ranks (rows), the most ppsim simulates", source,
                               line_no, kMaxRanks)};
    }
    s.programs.push_back(std::move(program));
    row_lines.push_back(line_no);
  }
  // Trailing blank lines are not ranks.
  while (!s.programs.empty() && s.programs.back().empty()) s.programs.pop_back();
  if (s.programs.empty())
    return Error{fmt::format("{}: no ranks: the file has no action rows", source)};

  s.num_ranks = static_cast<int>(s.programs.size());
  for (const auto& program : s.programs) {
    for (const Action& a : program) {  // parse_action capped each index
      s.num_stages = std::max(s.num_stages, a.stage + 1);
      s.num_microbatches = std::max(s.num_microbatches, a.microbatch + 1);
      s.num_slices = std::max(s.num_slices, a.slice + 1);
    }
  }
  const Status size =
      check_schedule_size(s.num_ranks, s.num_stages, s.num_microbatches, s.num_slices);
  if (!size) return Error{fmt::format("{}: {}", source, size.message())};
  s.stage_rank.assign(s.num_stages, -1);
  for (int rank = 0; rank < s.num_ranks; ++rank) {
    for (const Action& a : s.programs[rank]) {
      if (a.kind != ActionKind::kForward) continue;
      int& owner = s.stage_rank[a.stage];
      if (owner >= 0 && owner != rank) {
        return Error{fmt::format(
            "{}:{}: stage {} has forwards on rank {} (line {}) and on rank {} (line {}, \"{}\"); "
            "a stage runs on one rank",
            source, row_lines[rank], a.stage, owner, row_lines[owner], rank, row_lines[rank],
            to_string(a))};
      }
      owner = rank;
    }
  }
  for (int stage = 0; stage < s.num_stages; ++stage) {
    if (s.stage_rank[stage] < 0) {
      return Error{fmt::format("{}: stage {} has no forward on any rank", source, stage)};
    }
  }
  return s;
}

}  // namespace ppsim
