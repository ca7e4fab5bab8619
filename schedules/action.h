// An Action is one unit of work on a pipeline rank, named the way
// torch.distributed.pipelining names it: `2F0` is stage 2's forward of
// microbatch 0, `1B3` a full backward, `1I3`/`1W3` its input- and
// weight-gradient halves. Token-level schedules (TeraPipe) cut a microbatch's
// sequence into slices: `2F0s3` is slice 3 of it (slice 0 prints without the
// suffix). Actions are plain 20-byte values so programs of 10^5..10^6 of
// them stay cache friendly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "schedules/status.h"

namespace ppsim {

enum class ActionKind : uint8_t {
  kForward,         // F
  kBackward,        // B: input and weight gradients together
  kBackwardInput,   // I: input gradient only (zero-bubble split)
  kBackwardWeight,  // W: weight gradient only
  // S: the optimizer step of the stage's weights after microbatch mb's
  // gradient (with its data-parallel gradient reduction). Only asynchronous
  // schedules (PipeDream) step inside their programs; the others step once
  // per iteration, after the program.
  kStep,
};
inline constexpr int kNumActionKinds = 5;

struct Action {
  ActionKind kind = ActionKind::kForward;
  int32_t stage = 0;
  int32_t microbatch = 0;
  int32_t slice = 0;  // token slice of the microbatch's sequence; 0 when not sliced
  // A forward that runs together with the next action of its rank's program,
  // a backward (B or I) of another microbatch, as one overlapped pair
  // (DualPipe's; PyTorch's "(0F7;7B3)OVERLAP_F_B"): the pair starts when both
  // may, takes CostTable's overlapped time, and hands both outputs on at its
  // end.
  bool overlaps_next = false;

  friend bool operator==(const Action&, const Action&) = default;
};
static_assert(sizeof(Action) == 20);

// The letter of a kind: F, B, I, W or S.
char action_kind_letter(ActionKind kind);
// "2F0", "2F0s3". A forward that overlaps the next action prints alone; a
// program's text (schedules/csv.h) writes the pair.
std::string to_string(const Action& action);
// Parses "2F0" or "2F0s3"; surrounding spaces are allowed. The error names the text.
Result<Action> parse_action(std::string_view text);

// True for the kinds that produce the gradient the previous stage waits for.
inline bool sends_input_gradient(ActionKind kind) {
  return kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput;
}

}  // namespace ppsim
