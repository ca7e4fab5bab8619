#include "schedules/csv.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "schedules/limits.h"

namespace ppsim {

namespace {

// An overlapped pair as one cell, as PyTorch writes it: "(0F7;7B3)OVERLAP_F_B".
constexpr std::string_view kPairSuffix = ")OVERLAP_F_B";

// A rank's transfer cells (Schedule::comm_posts) by the number of its
// actions done when each is posted: the sends, then the receives, each in
// program order. "2SEND_F0" sends 2F0's output; "2RECV_F0" receives 2F0's
// input (and _B for a backward's gradient).
std::vector<std::vector<std::string>> posts_by_slot(const std::vector<Action>& program,
                                                    const std::vector<CommPosts>& posts) {
  std::vector<std::vector<std::string>> slots(program.size() + 1);
  const auto cell = [](const Action& a, std::string_view what) {
    return fmt::format("{}{}_{}{}", a.stage, what, a.kind == ActionKind::kForward ? 'F' : 'B',
                       a.microbatch);
  };
  for (size_t j = 0; j < program.size(); ++j) {
    if (posts[j].send_after >= 0) slots[posts[j].send_after].push_back(cell(program[j], "SEND"));
  }
  for (size_t j = 0; j < program.size(); ++j) {
    if (posts[j].recv_after >= 0) slots[posts[j].recv_after].push_back(cell(program[j], "RECV"));
  }
  return slots;
}

std::string rows_text(const Schedule& schedule, std::string_view line_end) {
  std::string out;
  for (size_t rank = 0; rank < schedule.programs.size(); ++rank) {
    const std::vector<Action>& program = schedule.programs[rank];
    const std::vector<std::vector<std::string>> slots =
        schedule.comm_posts.empty() ? std::vector<std::vector<std::string>>{}
                                    : posts_by_slot(program, schedule.comm_posts[rank]);
    bool first = true;
    const auto cell = [&](std::string_view text) {
      if (!first) out += ',';
      out += text;
      first = false;
    };
    // The transfer cells posted once `done` actions are.
    const auto posted_at = [&](size_t done) {
      if (slots.empty()) return;
      for (const std::string& text : slots[done]) cell(text);
    };
    posted_at(0);
    for (size_t i = 0; i < program.size(); ++i) {
      if (program[i].overlaps_next && i + 1 < program.size()) {
        cell(
            fmt::format("({};{}{}", to_string(program[i]), to_string(program[i + 1]), kPairSuffix));
        ++i;  // a post between a pair's two actions follows the pair's cell
        posted_at(i);
      } else {
        cell(to_string(program[i]));
      }
      posted_at(i + 1);
    }
    out += line_end;
  }
  return out;
}

// Why torch.distributed.pipelining cannot read `action` back, or "" when it can.
std::string_view pytorch_cannot_read(const Action& action) {
  if (action.kind == ActionKind::kStep) {
    return "is an optimizer step inside the program, which torch.distributed.pipelining has no "
           "action for";
  }
  if (action.slice != 0) {
    return "is a token slice, which torch.distributed.pipelining has no action for (its reader "
           "would take it for the whole microbatch)";
  }
  return {};
}

}  // namespace

std::string schedule_to_csv(const Schedule& schedule) {
  return fmt::format(
             "# ppsim schedule {}: {} ranks, {} stages, {} microbatches; one row per rank\n",
             schedule.name, schedule.num_ranks, schedule.num_stages, schedule.num_microbatches) +
         rows_text(schedule, "\n");
}

Result<std::string> schedule_to_pytorch_csv(const Schedule& schedule) {
  for (size_t rank = 0; rank < schedule.programs.size(); ++rank) {
    for (const Action& a : schedule.programs[rank]) {
      if (const std::string_view why = pytorch_cannot_read(a); !why.empty()) {
        return Error{
            fmt::format("schedule {}, rank {}: \"{}\" {}", schedule.name, rank, to_string(a), why)};
      }
    }
  }
  return rows_text(schedule, "\r\n");
}

namespace {

std::string_view trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// What follows the stage index: "SEND_F0" of "2SEND_F0".
std::string_view after_stage(std::string_view cell) {
  const size_t kind = cell.find_first_not_of("0123456789");
  return kind == std::string_view::npos ? std::string_view{} : cell.substr(kind);
}

// The per-stage FSDP actions of PyTorch's compute+comms format
// (_ComputationType in torch/distributed/pipelining/schedules.py): "1UNSHARD"
// gathers stage 1's weights, "1RESHARD" frees them, "1REDUCE_GRAD"
// reduce-scatters its gradients. Read and set aside (their stage checked).
constexpr std::string_view kFsdpActions[] = {"UNSHARD", "RESHARD", "REDUCE_GRAD"};

// A transfer cell of the compute+comms format ("0SEND_F0", "2RECV_B1"): the
// activation a forward sends or receives (SEND_F, RECV_F) or the input
// gradient of a backward (SEND_B, RECV_B), named by that action's stage and
// microbatch.
struct Transfer {
  bool send = false;
  bool forward = false;
  int stage = 0;
  int microbatch = 0;
};
struct TransferName {
  std::string_view name;
  bool send;
  bool forward;
};
constexpr TransferName kTransferNames[] = {
    {"SEND_F", true, true},
    {"RECV_F", false, true},
    {"SEND_B", true, false},
    {"RECV_B", false, false},
};

// One cell: an action, an overlapped pair's two (the forward, marked
// Action::overlaps_next, then the backward), or a transfer (no action).
struct Cell {
  Action actions[2];
  int count = 1;
  bool spelled_bw = false;  // the full backward as older PyTorch releases spelled it
  std::optional<Transfer> transfer;
  std::optional<int> fsdp_stage;  // an FSDP action's stage
};

// "1UNSHARD", "1RESHARD", "1REDUCE_GRAD": the stage, read as an action's
// ("1F0") so that it is checked as any action's is.
std::optional<Result<Cell>> parse_fsdp(std::string_view cell) {
  const std::string_view name = after_stage(cell);
  for (const std::string_view fsdp : kFsdpActions) {
    if (!name.starts_with(fsdp)) continue;
    const std::string_view stage = cell.substr(0, cell.size() - name.size());
    const Result<Action> a = parse_action(fmt::format("{}F0", stage));
    if (name != fsdp || stage.empty() || !a) {
      return Error{fmt::format("\"{}\" is not an FSDP action: expected STAGE {} (e.g. \"1{}\")",
                               printable(cell), fsdp, fsdp)};
    }
    Cell set_aside;
    set_aside.count = 0;
    set_aside.fsdp_stage = a->stage;
    return set_aside;
  }
  return std::nullopt;
}

// "2SEND_F0": its stage and microbatch read as the action's ("2F0"), so
// that they are checked as any action's are.
std::optional<Result<Cell>> parse_transfer(std::string_view cell) {
  const size_t kind = cell.size() - after_stage(cell).size();
  for (const TransferName& t : kTransferNames) {
    if (!cell.substr(kind).starts_with(t.name)) continue;
    const std::string action =
        fmt::format("{}F{}", cell.substr(0, kind), cell.substr(kind + t.name.size()));
    const Result<Action> a = parse_action(action);
    if (!a || a->slice != 0) {
      return Error{
          fmt::format("\"{}\" is not a transfer: expected STAGE {} MICROBATCH (e.g. \"2{}0\")",
                      printable(cell), t.name, t.name)};
    }
    Cell transfer;
    transfer.count = 0;
    transfer.transfer = Transfer{t.send, t.forward, a->stage, a->microbatch};
    return transfer;
  }
  return std::nullopt;
}

// PyTorch's overlapped pair "(0F7;7B3)OVERLAP_F_B": a forward and a backward
// (full, or its input-gradient half) of another microbatch, read as the two
// actions, the forward overlapping the next.
Result<Cell> parse_pair(std::string_view cell) {
  const std::string_view inner = cell.substr(1, cell.size() - 1 - kPairSuffix.size());
  const size_t semicolon = inner.find(';');
  const auto bad = [&](std::string_view why) {
    return Error{fmt::format("\"{}\": an overlapped pair {}", printable(cell), why)};
  };
  if (semicolon == std::string_view::npos) return bad("needs two actions, (F;B)");
  const Result<Action> forward = parse_action(inner.substr(0, semicolon));
  const Result<Action> backward = parse_action(inner.substr(semicolon + 1));
  if (!forward) return forward.error();
  if (!backward) return backward.error();
  if (forward->kind != ActionKind::kForward || !sends_input_gradient(backward->kind)) {
    return bad("is a forward and then a backward (B or I), (F;B)");
  }
  Cell pair;
  pair.actions[0] = *forward;
  pair.actions[0].overlaps_next = true;
  pair.actions[1] = *backward;
  pair.count = 2;
  return pair;
}

Result<Cell> parse_cell(std::string_view text) {
  const std::string_view cell = trimmed(text);
  if (cell.starts_with('(') && cell.ends_with(kPairSuffix)) return parse_pair(cell);
  if (std::optional<Result<Cell>> transfer = parse_transfer(cell)) return std::move(*transfer);
  if (std::optional<Result<Cell>> fsdp = parse_fsdp(cell)) return std::move(*fsdp);
  const size_t kind = cell.size() - after_stage(cell).size();
  Cell one;
  if (cell.substr(kind).starts_with("BW")) {
    const std::string full = fmt::format("{}B{}", cell.substr(0, kind), cell.substr(kind + 2));
    if (const Result<Action> a = parse_action(full)) {
      one.actions[0] = *a;
      one.spelled_bw = true;
      return one;
    }
  }
  const Result<Action> a = parse_action(cell);
  if (!a) return a.error();
  one.actions[0] = *a;
  return one;
}

// The programs as read, before the meaning of B is settled.
struct Rows {
  std::vector<std::vector<Action>> programs;
  std::vector<int> lines;                       // the line of each rank's row, for errors
  std::vector<std::vector<int>> cells;          // per rank, each action's cell, for errors
  std::vector<std::pair<int, size_t>> plain_b;  // (rank, index) of each cell spelled "B"
  int spelled_bw = 0;
  // Transfer cells, placed once checked against the actions around them.
  struct PlacedTransfer {
    Transfer transfer;
    int rank = 0;
    size_t before = 0;  // the actions of its rank before it
    int line = 0;
    int cell = 0;
    std::string text;
  };
  std::vector<PlacedTransfer> transfers;
  // FSDP cells, set aside once their stage is checked against their row's.
  struct FsdpCell {
    int stage = 0;
    int rank = 0;
    int line = 0;
    int cell = 0;
    std::string text;
  };
  std::vector<FsdpCell> fsdp;
};

// Appends one row's actions to `rows` as rank rows.programs.size().
Status read_row(std::string_view line, int line_no, std::string_view source, Rows& rows) {
  const int rank = static_cast<int>(rows.programs.size());
  std::vector<Action> program;
  std::vector<int> cells;
  int column = 1;
  while (true) {
    const size_t comma = line.find(',');
    const std::string_view cell = line.substr(0, comma);
    if (cell.find_first_not_of(" \t\r") != std::string_view::npos) {
      const Result<Cell> c = parse_cell(cell);
      if (!c) {
        return Error{fmt::format("{}:{}: cell {} (rank {}): {}", source, line_no, column, rank,
                                 c.error().message)};
      }
      if (c->transfer) {
        rows.transfers.push_back(
            {*c->transfer, rank, program.size(), line_no, column, std::string(trimmed(cell))});
      }
      if (c->fsdp_stage) {
        rows.fsdp.push_back({*c->fsdp_stage, rank, line_no, column, std::string(trimmed(cell))});
      }
      for (int k = 0; k < c->count; ++k) {
        const Action& action = c->actions[k];
        if (action.kind == ActionKind::kBackward && !c->spelled_bw && c->count == 1) {
          rows.plain_b.emplace_back(rank, program.size());
        }
        program.push_back(action);
        cells.push_back(column);
      }
      rows.spelled_bw += c->spelled_bw;
    }
    if (comma == std::string_view::npos) break;
    line.remove_prefix(comma + 1);
    ++column;
  }
  if (rank == kMaxRanks) {
    return Error{fmt::format("{}:{}: more than {} ranks (rows), the most ppsim simulates", source,
                             line_no, kMaxRanks)};
  }
  rows.programs.push_back(std::move(program));
  rows.lines.push_back(line_no);
  rows.cells.push_back(std::move(cells));
  return {};
}

Result<Rows> read_rows(std::string_view text, std::string_view source) {
  Rows rows;
  int line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_no;
    if (line.starts_with('#')) continue;
    if (Status st = read_row(line, line_no, source, rows); !st) return Error{st.message()};
  }
  // Trailing blank lines are not ranks.
  while (!rows.programs.empty() && rows.programs.back().empty()) {
    rows.programs.pop_back();
    rows.lines.pop_back();
    rows.cells.pop_back();
  }
  if (rows.programs.empty()) {
    return Error{fmt::format("{}: no ranks: the file has no action rows", source)};
  }
  return rows;
}

// Older torch.distributed.pipelining releases spelled the input-gradient
// backward "B" (now "I") and the full backward "BW" (now "B"). A file is of
// one when it has a BW, or when it has W cells, no I, and a B for exactly
// the stages and microbatches that have a W: read today, each W would follow
// a full backward, which computed the weight gradient already.
bool uses_older_pytorch_spelling(const Rows& rows) {
  if (rows.spelled_bw > 0) return true;
  using Key = std::tuple<int, int, int>;  // stage, microbatch, slice
  std::set<Key> weight_grads;
  for (const auto& program : rows.programs) {
    for (const Action& a : program) {
      if (a.kind == ActionKind::kBackwardInput) return false;
      if (a.kind == ActionKind::kBackwardWeight)
        weight_grads.emplace(a.stage, a.microbatch, a.slice);
    }
  }
  std::set<Key> backwards;
  for (const auto& [rank, index] : rows.plain_b) {
    const Action& b = rows.programs[rank][index];
    backwards.emplace(b.stage, b.microbatch, b.slice);
  }
  return !weight_grads.empty() && backwards == weight_grads;
}

std::string older_spelling_note(const Rows& rows, std::string_view source) {
  std::vector<std::string> readings;
  if (!rows.plain_b.empty()) {
    readings.push_back(
        fmt::format("its {} B cells as I, the input-gradient backward", rows.plain_b.size()));
  }
  if (rows.spelled_bw > 0) {
    readings.push_back(fmt::format("its {} BW cells as B, the full backward", rows.spelled_bw));
  }
  return fmt::format(
      "{}: in the spelling of older torch.distributed.pipelining releases ({}): read {}", source,
      rows.spelled_bw > 0 ? "it has BW cells"
                          : "it splits every backward into B and W and has no I",
      fmt::join(readings, ", and "));
}

// Two chains (Schedule::num_chains) when the first half of the microbatches
// runs only on the first half of the stages and the second half only on
// the second, as in a written DualPipe schedule; else one.
int chains_of(const Schedule& s) {
  if (s.num_stages % 2 != 0 || s.num_microbatches % 2 != 0) return 1;
  for (const auto& program : s.programs) {
    for (const Action& a : program) {
      if ((2 * a.stage < s.num_stages) != (2 * a.microbatch < s.num_microbatches)) return 1;
    }
  }
  return 2;
}

// The schedule of `rows`: sizes from the largest indices, each stage on the
// rank of its forwards, its chains from where its microbatches run.
Result<Schedule> schedule_of(Rows rows, std::string_view source) {
  Schedule s;
  s.name = "custom";
  s.num_ranks = static_cast<int>(rows.programs.size());
  s.programs = std::move(rows.programs);
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
  s.num_chains = chains_of(s);
  s.stage_rank.assign(s.num_stages, -1);
  for (int rank = 0; rank < s.num_ranks; ++rank) {
    for (const Action& a : s.programs[rank]) {
      if (a.kind != ActionKind::kForward) continue;
      int& owner = s.stage_rank[a.stage];
      if (owner >= 0 && owner != rank) {
        return Error{fmt::format(
            "{}:{}: stage {} has forwards on rank {} (line {}) and on rank {} (line {}, \"{}\"); "
            "a stage runs on one rank",
            source, rows.lines[rank], a.stage, owner, rows.lines[owner], rank, rows.lines[rank],
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

// An action in two cells is an error naming both, as validate() cannot: it
// sees the programs without their lines and cells.
Status check_no_repeats(const Rows& rows, std::string_view source) {
  struct Place {
    uint64_t action;  // kind, stage, microbatch and slice in one key
    int rank;
    int index;
  };
  std::vector<Place> places;
  for (int rank = 0; rank < static_cast<int>(rows.programs.size()); ++rank) {
    const std::vector<Action>& program = rows.programs[rank];
    for (int i = 0; i < static_cast<int>(program.size()); ++i) {
      const Action& a = program[i];
      const uint64_t key =
          ((static_cast<uint64_t>(a.kind) * kMaxStages + a.stage) * kMaxMicrobatches +
           a.microbatch) *
              kMaxSlices +
          a.slice;
      places.push_back({key, rank, i});
    }
  }
  std::sort(places.begin(), places.end(), [](const Place& x, const Place& y) {
    return std::tie(x.action, x.rank, x.index) < std::tie(y.action, y.rank, y.index);
  });
  for (size_t i = 1; i < places.size(); ++i) {
    if (places[i].action != places[i - 1].action) continue;
    const Place& first = places[i - 1];
    const Place& again = places[i];
    return Error{fmt::format("{}:{}: cell {} (rank {}): {} again, first at line {} cell {}", source,
                             rows.lines[again.rank], rows.cells[again.rank][again.index],
                             again.rank, to_string(rows.programs[again.rank][again.index]),
                             rows.lines[first.rank], rows.cells[first.rank][first.index])};
  }
  return {};
}

// Each transfer cell against its rank's actions (a send after the action
// whose output it sends, a receive before the action that needs it), and
// where each is posted (Schedule::comm_posts).
Result<std::vector<std::vector<CommPosts>>> place_transfers(const Rows& rows,
                                                            std::string_view source) {
  using Key = std::tuple<int, int, bool>;  // stage, microbatch, forward
  std::vector<std::map<Key, size_t>> first_of(rows.programs.size());
  const std::map<Key, size_t> no_actions;
  std::vector<std::vector<CommPosts>> posts(rows.programs.size());
  for (size_t rank = 0; rank < rows.programs.size(); ++rank) {
    const std::vector<Action>& program = rows.programs[rank];
    posts[rank].resize(program.size());
    for (size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      if (a.kind == ActionKind::kForward || sends_input_gradient(a.kind)) {
        first_of[rank].emplace(Key{a.stage, a.microbatch, a.kind == ActionKind::kForward}, i);
      }
    }
  }
  for (const Rows::PlacedTransfer& t : rows.transfers) {
    const auto bad = [&](const std::string& why) {
      return Error{fmt::format("{}:{}: cell {} (rank {}): \"{}\": {}", source, t.line, t.cell,
                               t.rank, printable(t.text), why)};
    };
    const std::string_view what = t.transfer.forward ? "forward" : "backward";
    // A trailing row of transfers alone was dropped with the blank rows: its
    // rank runs nothing.
    const std::map<Key, size_t>& firsts =
        static_cast<size_t>(t.rank) < first_of.size() ? first_of[t.rank] : no_actions;
    const auto found =
        firsts.find(Key{t.transfer.stage, t.transfer.microbatch, t.transfer.forward});
    if (found == firsts.end()) {
      return bad(fmt::format("rank {} runs no {} of stage {} microbatch {} for it to {}", t.rank,
                             what, t.transfer.stage, t.transfer.microbatch,
                             t.transfer.send ? "send from" : "receive for"));
    }
    const size_t index = found->second;
    const std::string action = fmt::format("{} in cell {}", to_string(rows.programs[t.rank][index]),
                                           rows.cells[t.rank][index]);
    if (t.transfer.send && index >= t.before) {
      return bad(fmt::format("sends before the {} it sends from, {}", what, action));
    }
    if (!t.transfer.send && index < t.before) {
      return bad(fmt::format("receives after the {} that needs it, {}", what, action));
    }
    int32_t& post =
        t.transfer.send ? posts[t.rank][index].send_after : posts[t.rank][index].recv_after;
    if (post >= 0) {
      return bad(fmt::format("a second {} for {}", t.transfer.send ? "send" : "receive", action));
    }
    post = static_cast<int32_t>(t.before);
  }
  return posts;
}

// Each FSDP cell names a stage its row's rank runs.
Status check_fsdp(const std::vector<Rows::FsdpCell>& cells, const Schedule& s,
                  std::string_view source) {
  for (const Rows::FsdpCell& c : cells) {
    if (c.stage >= s.num_stages || s.stage_rank[c.stage] != c.rank) {
      return Error{fmt::format("{}:{}: cell {} (rank {}): \"{}\": rank {} runs no stage {}", source,
                               c.line, c.cell, c.rank, printable(c.text), c.rank, c.stage)};
    }
  }
  return {};
}

}  // namespace

Result<ScheduleFile> read_schedule_csv(std::string_view text, std::string_view source) {
  Result<Rows> rows = read_rows(text, source);
  if (!rows) return rows.error();
  ScheduleFile file;
  if (uses_older_pytorch_spelling(*rows)) {
    file.notes.push_back(older_spelling_note(*rows, source));
    for (const auto& [rank, index] : rows->plain_b) {
      rows->programs[rank][index].kind = ActionKind::kBackwardInput;
    }
  }
  std::vector<std::vector<CommPosts>> posts;
  if (!rows->transfers.empty()) {
    Result<std::vector<std::vector<CommPosts>>> placed = place_transfers(*rows, source);
    if (!placed) return placed.error();
    posts = std::move(*placed);
    file.notes.push_back(fmt::format(
        "{}: its {} transfer cells (SEND_F, RECV_F, SEND_B, RECV_B) are simulated where they "
        "stand: a transfer starts once its rank has posted the send and the receiving rank the "
        "receive (each after the actions before it in its row), and the action that needs it "
        "waits for it",
        source, rows->transfers.size()));
  }
  if (Status st = check_no_repeats(*rows, source); !st) return Error{st.message()};
  const std::vector<Rows::FsdpCell> fsdp = std::move(rows->fsdp);
  Result<Schedule> schedule = schedule_of(std::move(*rows), source);
  if (!schedule) return schedule.error();
  file.schedule = std::move(*schedule);
  file.schedule.comm_posts = std::move(posts);
  if (!fsdp.empty()) {
    if (Status st = check_fsdp(fsdp, file.schedule, source); !st) return Error{st.message()};
    file.notes.push_back(fmt::format(
        "{}: its {} FSDP cells (UNSHARD, RESHARD, REDUCE_GRAD) were read and set aside: ppsim "
        "does not time FSDP's per-stage weight gathers and gradient reductions there (its "
        "data-parallel reduction follows training.zero_stage)",
        source, fsdp.size()));
  }
  return file;
}

Result<Schedule> schedule_from_csv(std::string_view text, std::string_view source) {
  Result<ScheduleFile> file = read_schedule_csv(text, source);
  if (!file) return file.error();
  return std::move(file->schedule);
}

}  // namespace ppsim
