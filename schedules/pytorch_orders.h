// Schedule orders of torch.distributed.pipelining that ppsim's other
// generators do not build, reproduced action for action (its idle slots,
// which only align its own ticks, are dropped). Stages are placed as in
// interleaved 1F1B: stage = chunk * p + rank.
#pragma once

#include "schedules/generators.h"

namespace ppsim {

// ScheduleLoopedBFS (breadth-first pipelining, Lamy-Poirier 2023): each
// rank runs every microbatch's forward through its first stage, then its
// second, ...; then the backwards, last stage first, microbatches in reverse.
// Any v.
Result<Schedule> make_looped_bfs(const ScheduleParams& params);

// ScheduleInterleavedZeroBubble (PyTorch's ZB1P, Qi et al. 2024 with
// interleaving): interleaved 1F1B's rounds of min(m, p)-ish microbatches per
// stage (m / max(1, m / p) of them, which must divide m), a warm-up of
// (v - 1) x that + (p - 1 - rank) forwards, then forward and input-gradient
// pairs, rank r holding back its first r weight gradients, which fill the
// end. Any v; needs m to be a multiple of max(1, m / p).
Result<Schedule> make_interleaved_zb(const ScheduleParams& params);

}  // namespace ppsim
