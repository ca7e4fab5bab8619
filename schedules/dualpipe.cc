#include "schedules/dualpipe.h"

#include <fmt/format.h>

#include <deque>
#include <utility>
#include <vector>

#include "schedules/generator_util.h"

namespace ppsim {
namespace {

// Builds one rank's program over its two stages (down, then up): each
// stage's forwards and backwards in microbatch order, and the weight
// gradients of split backwards deferred in a queue, oldest first.
class RankProgram {
 public:
  RankProgram(std::vector<Action>* program, int down, int up)
      : program_(program), stages_{down, up} {}

  void forward(int stage) { push(ActionKind::kForward, stage, forwards_[local(stage)]++); }
  // A full backward, or its input-gradient half with the weight gradient
  // owed.
  void backward(int stage, bool split) {
    const int mb = backwards_[local(stage)]++;
    push(split ? ActionKind::kBackwardInput : ActionKind::kBackward, stage, mb);
    if (split) owed_.emplace_back(stage, mb);
  }
  // The oldest weight gradient owed, if any.
  void owed_weight_grad() {
    if (owed_.empty()) return;
    const auto [stage, mb] = owed_.front();
    owed_.pop_front();
    push(ActionKind::kBackwardWeight, stage, mb);
  }
  // An overlapped pair: a forward and a full backward run together.
  void pair(int forward_stage, int backward_stage) {
    forward(forward_stage);
    program_->back().overlaps_next = true;
    backward(backward_stage, false);
  }

 private:
  int local(int stage) const { return stage == stages_[0] ? 0 : 1; }
  void push(ActionKind kind, int stage, int mb) { program_->push_back(Action{kind, stage, mb}); }

  std::vector<Action>* program_;
  int stages_[2];
  int forwards_[2] = {0, 0};
  int backwards_[2] = {0, 0};
  std::deque<std::pair<int, int>> owed_;  // (stage, microbatch)
};

void build_rank(int p, int m, int r, std::vector<Action>* program) {
  const int down = r;
  const int up = 2 * p - 1 - r;
  RankProgram rank(program, down, up);
  for (int k = 0; k < 2 * (p - 1 - r); ++k) rank.forward(down);
  for (int k = 0; k < r + 1; ++k) {
    rank.forward(down);
    rank.forward(up);
  }
  for (int k = 0; k < p - 1 - r; ++k) {
    rank.backward(up, true);
    rank.owed_weight_grad();
    rank.forward(up);
  }
  for (int k = 0; k < m - 2 * p + r + 1; ++k) {
    if (k == 0 && r == p - 1) {
      rank.forward(down);
      rank.backward(up, false);
    } else {
      rank.pair(down, up);
    }
    rank.pair(up, down);
  }
  for (int k = 0; k < p - 1 - r; ++k) {
    rank.backward(up, false);
    rank.pair(up, down);
  }
  bool split = false;
  const int middle = (r + 1) / 2;
  for (int k = 0; k < r + 1; ++k) {
    if (k == middle && r % 2 == 1) split = true;
    rank.backward(up, split);
    if (k == middle && r % 2 == 0) split = true;
    rank.backward(down, split);
  }
  for (int k = 0; k < p - 1 - r; ++k) {
    rank.owed_weight_grad();
    rank.backward(down, split);
  }
  for (int k = 0; k < r + 1; ++k) rank.owed_weight_grad();
}

}  // namespace

Result<Schedule> make_dualpipev(const ScheduleParams& params) {
  if (Status st = generator_util::check_params(
          "dualpipev", params, 2,
          "places two stages on each rank in a V (rank r owns stages r and 2p-1-r)");
      !st) {
    return Error{st.message()};
  }
  const int p = params.ranks;
  const int m = params.microbatches;
  if (m < 2 * p) {
    return Error{fmt::format(
        "schedule dualpipev: needs at least as many microbatches as stages (2 x {} = {}), got "
        "{}; change training.global_batch or micro_batch",
        p, 2 * p, m)};
  }
  Schedule s = generator_util::make_empty("dualpipev", params);
  for (int stage = 0; stage < 2 * p; ++stage) {
    s.stage_rank[stage] = stage < p ? stage : 2 * p - 1 - stage;
  }
  for (int r = 0; r < p; ++r) {
    s.programs[r].reserve(3 * 2 * static_cast<size_t>(m));
    build_rank(p, m, r, &s.programs[r]);
  }
  return s;
}

}  // namespace ppsim
