// A cost profile: what a profiler measured on one machine, and what the
// simulator reads instead of the analytic model (`costs.profile: FILE`).
// It holds kernel times at measured shapes, and links as samples of (bytes,
// seconds) with their latency/bandwidth fit. The file is versioned YAML,
// documented in docs/cost_profile.md; this header is the only way in or out,
// so no YAML::Node reaches past it.
//
// Errors follow the config loader: bad input returns an Error naming
// file:line:col and the key path, unknown keys are errors, and a version this
// build does not read is an error naming the one it does.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedules/status.h"

namespace ppsim {

// The format version this build writes. A change that an older reader would
// misread or reject (a new key, a changed unit) bumps it. Version 2 added
// the embedding and head kernels (`part`, `vocab`) and the `calibration`
// section; this build also reads version 1, which has neither.
inline constexpr int kProfileVersion = 2;
inline constexpr int kOldestProfileVersion = 1;

// Where and how the numbers were taken, so that a profile can be traced back
// and two profiles compared knowingly. Free text, except the counts.
struct ProfileProvenance {
  std::string host, cpu, build, date, tool;
  int repetitions = 0;  // timed runs per measurement (each kernel also has its own)
  int warmup = 0;       // untimed runs before them

  bool operator==(const ProfileProvenance&) const = default;
};

// The kinds of kernel a profile can time: per layer, like the stage costs;
// and one block's optimizer step (the update of its weights from its
// gradients), which no token count changes: timed once, at a profile's first
// shape, and looked up whatever the tokens and context.
enum class KernelKind : uint8_t {
  kForward,
  kBackward,
  kBackwardInput,
  kBackwardWeight,
  kRecompute,
  kOptimizerStep,
};
// The kinds kernel_time interpolates over tokens and context.
inline constexpr std::array<KernelKind, 5> kLayerKernelKinds = {
    KernelKind::kForward, KernelKind::kBackward, KernelKind::kBackwardInput,
    KernelKind::kBackwardWeight, KernelKind::kRecompute};
// Every kind a profile's kernels may have.
inline constexpr std::array<KernelKind, 6> kKernelKinds = {
    KernelKind::kForward,        KernelKind::kBackward,  KernelKind::kBackwardInput,
    KernelKind::kBackwardWeight, KernelKind::kRecompute, KernelKind::kOptimizerStep};

// The parts of a model a kernel stands for: one transformer block (per
// layer), the first stage's token and position embedding, and the last
// stage's head (final layer norm, output projection, softmax cross-entropy).
enum class KernelPart : uint8_t { kBlock, kEmbedding, kHead };
inline constexpr std::array<KernelPart, 3> kKernelParts = {
    KernelPart::kBlock, KernelPart::kEmbedding, KernelPart::kHead};

// Their names in profile files and messages: "forward", "backward_input",
// "optimizer_step"; "block", "embedding", "head".
std::string_view to_string(KernelKind kind);
std::string_view to_string(KernelPart part);

// One kernel at one shape. `tokens` is the slice length and `context` the
// earlier tokens its attention reads (0 for a whole sequence), so token-level
// schedules can be costed from measured slices. A block's shape has `ffn`
// and `heads` (and `vocab` 0); the embedding's and the head's have `vocab`
// (and `ffn`, `heads` 0).
struct KernelSample {
  KernelKind kind = KernelKind::kForward;
  int micro_batch = 0, tokens = 0, context = 0, hidden = 0, ffn = 0, heads = 0, tensor = 0;
  double median_s = 0, min_s = 0, max_s = 0;  // over the repetitions: the spread
  int repetitions = 0;
  // What one layer holds, measured by the profiler on its forward sample
  // (0: not measured): right after F, and still after I (what W reads and
  // the gradients I left for it). Optional keys, so profiles that lack them
  // and hand-written ones stay valid.
  int64_t activation_bytes = 0, weight_grad_bytes = 0;
  KernelPart part = KernelPart::kBlock;
  int vocab = 0;

  bool operator==(const KernelSample&) const = default;
};

struct LinkSample {
  int64_t bytes = 0;
  double seconds = 0;

  bool operator==(const LinkSample&) const = default;
};

// A link as time = latency_s + bytes / bandwidth_Bps, with the samples the fit
// came from (kept so that a later reader can refit or judge the fit).
struct LinkFit {
  std::string name;
  double latency_s = 0;
  double bandwidth_Bps = 0;
  std::vector<LinkSample> samples;

  bool operator==(const LinkFit&) const = default;
};

// A correction of one action kind's times, fitted by `ppsim calibrate` from
// predicted and measured runs (docs/calibration.md): each action of the kind
// takes scale * time + overhead_s instead of its time.
struct KindCalibration {
  double scale = 1;
  double overhead_s = 0;

  bool operator==(const KindCalibration&) const = default;
};

// The pipeline's links as the measured transfers show them: a transfer of n
// bytes takes latency_s + n / bandwidth_Bps.
struct LinkCalibration {
  double latency_s = 0;
  double bandwidth_Bps = 0;

  bool operator==(const LinkCalibration&) const = default;
};

// A profile's `calibration:` section (version 2), which the simulator applies
// over the figures it built from the profile (sim/calibration.h). The kinds
// are named as the kernels are: forward (F), backward (B), backward_input
// (I), backward_weight (W); optimizer_step is each rank's step at the end
// of an iteration (S). An absent entry leaves its figures alone.
struct Calibration {
  std::optional<KindCalibration> forward, backward, backward_input, backward_weight, optimizer_step;
  std::optional<LinkCalibration> link;

  bool operator==(const Calibration&) const = default;
};

// The section's kind entries in file order, by their keys.
inline constexpr std::array<
    std::pair<std::string_view, std::optional<KindCalibration> Calibration::*>, 5>
    kCalibratedKinds = {{{"forward", &Calibration::forward},
                         {"backward", &Calibration::backward},
                         {"backward_input", &Calibration::backward_input},
                         {"backward_weight", &Calibration::backward_weight},
                         {"optimizer_step", &Calibration::optimizer_step}}};

struct CostProfile {
  int version = kProfileVersion;
  ProfileProvenance provenance;
  std::vector<KernelSample> kernels;
  std::vector<LinkFit> links;
  std::optional<Calibration> calibration;  // none when absent

  bool operator==(const CostProfile&) const = default;
};

// The YAML text of a profile: deterministic (fixed key order, samples in the
// order given) and exact (every double in its shortest form that reads back
// to the same bits). REQUIRES: every double is finite.
std::string profile_to_yaml(const CostProfile& profile);

// Reads and checks a profile; `source` stands for the file name in messages.
// Besides types and unknown or missing keys, it rejects: a version outside
// kOldestProfileVersion..kProfileVersion (checked first, so a newer file is
// told apart from a malformed one), an unknown kernel kind or part, a key the
// kernel's part does not have, non-positive shapes or repetitions,
// negative times, min_s <= median_s <= max_s broken, two kernels of the same
// kind and shape, two links of the same name, a negative latency and a
// non-positive bandwidth (of a link or of the calibration's link), a negative
// scale or overhead, and a calibration section in a version 1 file.
Result<CostProfile> parse_profile(std::string_view yaml, std::string_view source);
Result<CostProfile> load_profile(const std::string& path);

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
