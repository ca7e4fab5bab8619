#include "schedules/dualpipe.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "schedules/generator_util.h"

namespace ppsim {
namespace {

// Builds one rank's program over its two stages (down, then up): each
// stage's forwards and backwards in microbatch order from the stage's first
// microbatch, and the weight gradients of split backwards deferred in a
// queue, oldest first.
class RankProgram {
 public:
  struct Stage {
    int id = 0;
    int first_microbatch = 0;
  };
  RankProgram(std::vector<Action>* program, Stage down, Stage up)
      : program_(program), stages_{down, up} {}

  void forward(int phase) { push(ActionKind::kForward, phase, forwards_[phase]++); }
  // A full backward, or its input-gradient half with the weight gradient
  // owed.
  void backward(int phase, bool split) {
    const int k = backwards_[phase]++;
    push(split ? ActionKind::kBackwardInput : ActionKind::kBackward, phase, k);
    if (split) owed_.push_back(program_->back());
  }
  // The oldest weight gradient owed, if any.
  void owed_weight_grad() {
    if (owed_.empty()) return;
    Action w = owed_.front();
    owed_.pop_front();
    w.kind = ActionKind::kBackwardWeight;
    program_->push_back(w);
  }
  // An overlapped pair: a forward and a full backward run together.
  void pair(int forward_phase, int backward_phase) {
    forward(forward_phase);
    program_->back().overlaps_next = true;
    backward(backward_phase, false);
  }

 private:
  // The phase's k-th microbatch.
  void push(ActionKind kind, int phase, int k) {
    const Stage& stage = stages_[phase];
    program_->push_back(Action{kind, stage.id, stage.first_microbatch + k});
  }

  std::vector<Action>* program_;
  Stage stages_[2];
  int forwards_[2] = {0, 0};
  int backwards_[2] = {0, 0};
  std::deque<Action> owed_;
};

constexpr int kDown = 0;  // the rank's stage nearer its microbatches' entry
constexpr int kUp = 1;

// The eight steps of dualpipe.h for a V of p ranks and m microbatches, rank
// r of the V.
void build_rank(int p, int m, int r, RankProgram& rank) {
  for (int k = 0; k < 2 * (p - 1 - r); ++k) rank.forward(kDown);
  for (int k = 0; k < r + 1; ++k) {
    rank.forward(kDown);
    rank.forward(kUp);
  }
  for (int k = 0; k < p - 1 - r; ++k) {
    rank.backward(kUp, true);
    rank.owed_weight_grad();
    rank.forward(kUp);
  }
  for (int k = 0; k < m - 2 * p + r + 1; ++k) {
    if (k == 0 && r == p - 1) {
      rank.forward(kDown);
      rank.backward(kUp, false);
    } else {
      rank.pair(kDown, kUp);
    }
    rank.pair(kUp, kDown);
  }
  for (int k = 0; k < p - 1 - r; ++k) {
    rank.backward(kUp, false);
    rank.pair(kUp, kDown);
  }
  bool split = false;
  const int middle = (r + 1) / 2;
  for (int k = 0; k < r + 1; ++k) {
    if (k == middle && r % 2 == 1) split = true;
    rank.backward(kUp, split);
    if (k == middle && r % 2 == 0) split = true;
    rank.backward(kDown, split);
  }
  for (int k = 0; k < p - 1 - r; ++k) {
    rank.owed_weight_grad();
    rank.backward(kDown, split);
  }
  for (int k = 0; k < r + 1; ++k) rank.owed_weight_grad();
}

// DualPipe and DualPipeV place stages alike: rank r owns stages r and
// 2p-1-r.
Schedule make_v_layout(std::string name, const ScheduleParams& params) {
  Schedule s = generator_util::make_empty(std::move(name), params);
  const int p = params.ranks;
  for (int stage = 0; stage < 2 * p; ++stage) {
    s.stage_rank[stage] = stage < p ? stage : 2 * p - 1 - stage;
  }
  return s;
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
  Schedule s = make_v_layout("dualpipev", params);
  for (int r = 0; r < p; ++r) {
    s.programs[r].reserve(3 * 2 * static_cast<size_t>(m));
    RankProgram rank(&s.programs[r], {r, 0}, {2 * p - 1 - r, 0});
    build_rank(p, m, r, rank);
  }
  return s;
}

Result<Schedule> make_dualpipe(const ScheduleParams& params) {
  if (Status st = generator_util::check_params(
          "dualpipe", params, 2,
          "places two stages on each rank, one of each direction (rank r owns stages r and "
          "2p-1-r)");
      !st) {
    return Error{st.message()};
  }
  const int p = params.ranks;
  const int m = params.microbatches;
  if (p % 2 != 0 || m % 2 != 0 || m < 2 * p) {
    return Error{fmt::format(
        "schedule dualpipe: needs an even number of ranks and an even number of microbatches, "
        "at least twice the ranks (half enter at each end), got {} ranks and {} microbatches; "
        "change parallel.pipeline, training.global_batch or micro_batch",
        p, m)};
  }
  Schedule s = make_v_layout("dualpipe", params);
  s.num_chains = 2;
  const int half_m = m / 2;
  for (int r = 0; r < p; ++r) {
    // Chain 0 runs from rank 0 (stage r here), chain 1 from rank p-1
    // (stage 2p-1-r). The half of the ranks nearer a chain's entry
    // treats that chain's stage as its down stage.
    const RankProgram::Stage chain0{r, 0};
    const RankProgram::Stage chain1{2 * p - 1 - r, half_m};
    const bool second_half = r >= p / 2;
    s.programs[r].reserve(3 * static_cast<size_t>(m));
    RankProgram rank(&s.programs[r], second_half ? chain1 : chain0, second_half ? chain0 : chain1);
    build_rank(p / 2, half_m, std::min(r, p - 1 - r), rank);
  }
  return s;
}

}  // namespace ppsim
