// A cost profile: what a profiler measured on one machine, and what the
// simulator reads instead of the analytic model (`costs.profile: FILE`).
// It holds kernel times at measured shapes, and links as samples of (bytes,
// seconds) with their latency/bandwidth fit. The types only: the file, versioned
// YAML documented in docs/cost_profile.md, is read and written by
// sim/config/profile_file.h; fitting a link and looking a kernel up are
// sim/cost/cost_profile.h's.
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

}  // namespace ppsim
