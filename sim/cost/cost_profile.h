// Fitting a link's latency and bandwidth to measured transfers, and looking
// a kernel's time up in a cost profile (sim/core/cost_profile.h; the file is
// read by sim/config/profile_file.h, which this header brings along for the
// profile's users).
#pragma once

#include <string>
#include <vector>

#include "schedules/status.h"
#include "sim/config/profile_file.h"
#include "sim/core/cost_profile.h"

namespace ppsim {

// Least-squares fit of time = latency + bytes / bandwidth, each sample
// weighted by 1 / seconds: timing noise grows with the time, and unweighted
// the largest transfers' noise would swamp the latency. When the best line
// crosses below zero at bytes = 0 (noise on a fast link), the latency is held
// at 0 and the bandwidth refitted, since a negative latency would give small
// messages negative times. Errors: a negative or non-finite sample, fewer
// than two distinct sizes, and a fitted bandwidth that is not positive (time
// not growing with size); the message lists the samples.
Result<LinkFit> fit_link(std::string name, std::vector<LinkSample> samples);

// The model shape a kernel ran at, as kernel_time looks it up: the part, and
// a block's (micro_batch, hidden, ffn, heads, tensor) or the embedding's or
// head's (micro_batch, hidden, vocab, tensor); the fields a part does not
// have are 0, as in KernelSample.
struct KernelShape {
  KernelPart part = KernelPart::kBlock;
  int micro_batch = 0, hidden = 0, ffn = 0, heads = 0, vocab = 0, tensor = 0;

  bool matches(const KernelSample& k) const;
};

// The median time of `kind` at (tokens, context) for one model shape, which
// must have been measured exactly. Between measured points it is
// piecewise-linear in tokens at a measured context; between two measured
// contexts it blends the two linearly (bilinear on a full grid); outside the
// measured range it extends the nearest segment linearly (proportionally
// through the origin when only one token count was measured; the nearest
// context when only one was) and sets `extrapolated`. Never below zero. Errors: the optimizer
// step (not timed per tokens), tokens < 1 or context < 0, and no sample of that kind and shape
// (naming those there are).
struct Interpolated {
  double seconds = 0;
  bool extrapolated = false;
};
Result<Interpolated> kernel_time(const CostProfile& profile, KernelKind kind,
                                 const KernelShape& shape, int tokens, int context);
// A block's: the shape {KernelPart::kBlock, micro_batch, hidden, ffn, heads, 0, tensor}.
Result<Interpolated> kernel_time(const CostProfile& profile, KernelKind kind, int micro_batch,
                                 int hidden, int ffn, int heads, int tensor, int tokens,
                                 int context);

}  // namespace ppsim
