// The CPU profiler: times the GPT block's kernels (profiler/gpt_block.h) with
// a steady clock at the shapes a config needs, and the cost of handing a
// buffer from one thread to another, and returns a CostProfile
// (sim/cost_profile.h) the simulator can read. Every kernel is timed after
// warm-up runs, `repetitions` times; the profile keeps the median and the
// spread (min, max). Each forward sample also carries the bytes one block
// holds after F and after I (Saved::bytes(), fp32, per microbatch). With a
// vocabulary it also times the two ends of the model (profiler/gpt_head.h):
// the first stage's embedding and the last stage's head, with their bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedules/status.h"
#include "sim/core/workload.h"
#include "sim/cost/cost_profile.h"

namespace ppsim {

struct ProfileRequest {
  int micro_batch = 1;
  int hidden = 0;
  int ffn = 0;
  int heads = 0;
  // > 0: also time the embedding and the head (part `embedding`, `head`).
  int vocab = 0;
  // (tokens, context) of each slice shape to time; a whole sequence is (s, 0).
  std::vector<std::pair<int, int>> shapes;
  int warmup = 2;
  int repetitions = 5;
  // Buffer sizes for the thread hand-off sweep (bytes); none: no link is
  // measured (the simulator then keeps the config's analytic link).
  std::vector<int64_t> link_sizes = {1 << 12, 1 << 16, 1 << 20, 1 << 22, 1 << 24};
};

// An Error naming the config (and the key) unless it has a model whose block
// is the GPT-3 block the profilers and the runtimes build (gpt_block_misfit);
// `tool` names the command in the message ("ppsim run").
Status check_runnable_model(const Config& config, std::string_view tool);

// The shapes a config needs: its sequence, or each slice of its token-level
// cut with that slice's context; an Error where check_runnable_model has one.
// REQUIRES: config.model.
Result<ProfileRequest> request_for(const Config& config);

// Runs the measurements. `progress(done, total)` after each kernel shape.
Result<CostProfile> profile_cpu(const ProfileRequest& request,
                                const std::function<void(int, int)>& progress = {});

// Shared with the GPU profiler (profiler/gpu_profiler.h).

// An Error naming what is wrong unless hidden, ffn, heads and micro_batch
// are >= 1 with heads dividing hidden, vocab >= 0, and there are a shape and
// a repetition.
Status check_request(const ProfileRequest& request);
// Median, min and max of `samples` (seconds) as one block sample of `kind`
// at the request's shape, tensor 1. REQUIRES: samples not empty.
KernelSample summarize_samples(KernelKind kind, const ProfileRequest& request, int tokens,
                               int context, std::vector<double> samples);
// The same for the embedding or the head: `part` and the request's vocab in
// place of a block's ffn and heads.
KernelSample part_sample(KernelKind kind, KernelPart part, const ProfileRequest& request,
                         int tokens, int context, std::vector<double> samples);
// This host, its CPU, the build and the date, the request's counts, and `tool`.
ProfileProvenance profile_provenance(const ProfileRequest& request, std::string tool);
// fit_link over what `measure` returns. A busy machine can delay one
// transfer by more than a large one takes: when the fit fails it measures
// again, three times in all, before giving up with the fit's error.
Result<LinkFit> measure_link(const std::string& name,
                             const std::function<Result<std::vector<LinkSample>>()>& measure);

}  // namespace ppsim
