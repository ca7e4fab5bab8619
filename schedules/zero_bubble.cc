#include "schedules/zero_bubble.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "schedules/generator_util.h"

namespace ppsim {
namespace {

using generator_util::check_params;
using generator_util::make_empty;

// Appends one stage's actions to a rank's program, each kind in microbatch
// order (every schedule here runs a stage's F's, I's and W's in that order).
// Microbatches at or past `keep` are counted but not written, so that an
// order built for more microbatches can be cut down to the real ones.
class StageCursor {
 public:
  StageCursor(std::vector<Action>* program, int stage, int keep)
      : program_(program), stage_(stage), keep_(keep) {}

  void forward() { push(ActionKind::kForward, forwards_++); }
  void input_grad() { push(ActionKind::kBackwardInput, input_grads_++); }
  void weight_grad() { push(ActionKind::kBackwardWeight, weight_grads_++); }

  int forwards() const { return forwards_; }
  int input_grads() const { return input_grads_; }
  int weight_grads() const { return weight_grads_; }

 private:
  void push(ActionKind kind, int mb) {
    if (mb < keep_) program_->push_back(Action{kind, stage_, mb});
  }

  std::vector<Action>* program_;
  int stage_;
  int keep_;
  int forwards_ = 0;
  int input_grads_ = 0;
  int weight_grads_ = 0;
};

}  // namespace

Result<Schedule> make_zb_h1(const ScheduleParams& params) {
  if (Status st = check_params("zb-h1", params, 1, "runs one stage per rank"); !st) {
    return Error{st.message()};
  }
  const int p = params.ranks;
  const int m = params.microbatches;
  Schedule s = make_empty("zb-h1", params);
  for (int rank = 0; rank < p; ++rank) {
    s.stage_rank[rank] = rank;
    auto& program = s.programs[rank];
    program.reserve(3 * static_cast<size_t>(m));
    StageCursor c(&program, rank, m);
    const int warmup = std::min(p - 1 - rank, m);
    for (int k = 0; k < warmup; ++k) c.forward();
    // Rank i's I's come back i steps after rank 0's; holding back its first
    // i W's keeps it on the I's rhythm, and those W's fill the end, where
    // 1F1B idles while the last gradients travel down.
    for (int k = 0; k < m - warmup; ++k) {
      c.forward();
      c.input_grad();
      if (k >= rank) c.weight_grad();
    }
    while (c.input_grads() < m) {
      c.input_grad();
      c.weight_grad();
    }
    while (c.weight_grads() < m) c.weight_grad();
  }
  return s;
}

Result<Schedule> make_zb_h2(const ScheduleParams& params) {
  if (Status st = check_params("zb-h2", params, 1, "runs one stage per rank"); !st) {
    return Error{st.message()};
  }
  const int p = params.ranks;
  const int m = params.microbatches;
  Schedule s = make_empty("zb-h2", params);
  // The first input gradient reaches rank i at (2p - 1 - i)T, and its first
  // forward can start at iT: 2(p-1-i) + 1 forwards fit in between.
  const int steady = std::max(0, m - (2 * p - 1));
  for (int rank = 0; rank < p; ++rank) {
    s.stage_rank[rank] = rank;
    auto& program = s.programs[rank];
    program.reserve(3 * static_cast<size_t>(m));
    StageCursor c(&program, rank, m);
    const int warmup = std::min(2 * (p - 1 - rank) + 1, m);
    for (int k = 0; k < warmup; ++k) c.forward();
    // W before F: the freed microbatch makes room, so the peak stays at the
    // warm-up's count.
    for (int k = 0; k < steady; ++k) {
      c.input_grad();
      c.weight_grad();
      c.forward();
    }
    // Rank 0 has no forwards left, so its I's now come every 2T; rank i
    // still owes 2i forwards, which its successors need before their last
    // I's. One action between I's keeps every rank on that rhythm; the W's
    // left over close the block.
    while (c.input_grads() < m) {
      c.input_grad();
      if (c.forwards() < m) {
        c.forward();
      } else {
        c.weight_grad();
      }
    }
    while (c.weight_grads() < m) c.weight_grad();
  }
  return s;
}

Result<Schedule> make_zb_v(const ScheduleParams& params) {
  if (Status st = check_params("zb-v", params, 2,
                               "places two stages on each rank in a V (rank r owns stages r "
                               "and 2p-1-r)");
      !st) {
    return Error{st.message()};
  }
  const int p = params.ranks;
  const int m = params.microbatches;
  Schedule s = make_empty("zb-v", params);
  for (int stage = 0; stage < 2 * p; ++stage) {
    s.stage_rank[stage] = stage < p ? stage : 2 * p - 1 - stage;
  }
  // Rank 0's warm-up needs 2p-1 microbatches; with fewer, the order is built
  // for 2p-1 and the missing ones skipped.
  const int built = std::max(m, 2 * p - 1);
  for (int rank = 0; rank < p; ++rank) {
    auto& program = s.programs[rank];
    program.reserve(6 * static_cast<size_t>(m));
    StageCursor down(&program, rank, m);
    StageCursor up(&program, 2 * p - 1 - rank, m);
    // Microbatch 0 leaves the down stage at (r+1)T/2 and reaches the up stage
    // 2(p-1-r) stages later: that many more down forwards fit before it.
    for (int k = 0; k < 2 * (p - rank) - 1; ++k) down.forward();
    // Its gradient comes back 2r stage-times after that (r stages on to the
    // end of the model, r back): alternate up and down forwards meanwhile.
    for (int k = 0; k < rank; ++k) {
      up.forward();
      down.forward();
    }
    // Now the up stage's gradients arrive as soon as its forwards end.
    for (int k = 0; k < p - rank; ++k) {
      up.forward();
      up.input_grad();
      up.weight_grad();
    }
    // Steady: one microbatch through each stage per round; once the down
    // forwards are all issued, the up stage catches up.
    while (down.forwards() < built || up.forwards() < down.forwards()) {
      if (down.forwards() < built) down.forward();
      down.input_grad();
      down.weight_grad();
      up.forward();
      up.input_grad();
      up.weight_grad();
    }
    // Cool-down: the gradients still owed (r on the up stage, p on the down
    // stage) go first, as the ranks before wait for them; the W's nobody waits
    // for fill in and close.
    for (int k = 0; k < rank; ++k) {
      down.input_grad();
      up.input_grad();
    }
    for (int k = 0; k < p - rank; ++k) {
      down.input_grad();
      down.weight_grad();
    }
    while (up.weight_grads() < built) up.weight_grad();
    while (down.weight_grads() < built) down.weight_grad();
    PPSIM_CHECK(down.input_grads() == built && up.input_grads() == built);
  }
  return s;
}

}  // namespace ppsim
