#include "sim/plan/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/cost/cost_model.h"

namespace ppsim {

std::vector<StageWeights> weight_versions(const Timeline& t,
                                          const std::vector<int64_t>& stage_weight_bytes) {
  // Only schedules that step inside their programs keep several versions.
  if (std::none_of(t.actions.begin(), t.actions.end(),
                   [](const ActionRecord& r) { return r.action.kind == ActionKind::kStep; })) {
    return {};
  }
  struct Stage {
    int version = 0;               // steps applied so far
    std::map<int, int> in_flight;  // microbatch -> the version its forward used
    std::map<int, int> users;      // version -> microbatches in flight on it
    int oldest_unapplied = -1;     // oldest version among gradients not yet applied
    StageWeights result;
    bool steps = false;

    void release(int used) {
      if (--users[used] == 0) users.erase(used);
    }
  };
  std::map<int, Stage> stages;
  for (const ActionRecord& r : t.actions) {
    Stage& st = stages[r.action.stage];
    st.result.stage = r.action.stage;
    st.result.rank = r.rank;
    const int mb = r.action.microbatch;
    switch (r.action.kind) {
      case ActionKind::kForward:
        if (r.action.slice != 0) break;
        if (const auto it = st.in_flight.find(mb); it != st.in_flight.end()) {
          st.release(it->second);  // a later iteration's forward of the same microbatch
        }
        st.in_flight[mb] = st.version;
        ++st.users[st.version];
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardWeight: {
        const auto it = st.in_flight.find(mb);
        if (it == st.in_flight.end() || r.action.slice != 0) break;
        st.oldest_unapplied =
            st.oldest_unapplied < 0 ? it->second : std::min(st.oldest_unapplied, it->second);
        st.release(it->second);
        st.in_flight.erase(it);
        break;
      }
      case ActionKind::kBackwardInput:
        break;
      case ActionKind::kStep:
        st.steps = true;
        if (st.oldest_unapplied >= 0) {
          st.result.staleness = std::max(st.result.staleness, st.version - st.oldest_unapplied);
        }
        st.oldest_unapplied = -1;
        ++st.version;
        break;
    }
    // The live versions: those microbatches in flight use, and the current one.
    const int alive = static_cast<int>(st.users.size()) + (st.users.count(st.version) ? 0 : 1);
    st.result.versions = std::max(st.result.versions, alive);
  }
  std::vector<StageWeights> out;
  for (auto& [stage, st] : stages) {
    if (!st.steps) continue;
    if (static_cast<size_t>(stage) < stage_weight_bytes.size()) {
      st.result.extra_bytes = (st.result.versions - 1) * stage_weight_bytes[stage];
    }
    out.push_back(st.result);
  }
  return out;
}

namespace {

// With training.fp8 the linear layers' products run at the FP8 peak, so the
// model's FLOP/s may pass its dtype's peak (what MFU is against) up to it.
void add_speed_warning(Summary& s, const Config& config) {
  if (!s.throughput.mfu) return;
  const bool fp8 = config.training.fp8 != Fp8Recipe::kNone;
  const double fp8_peak = config.hardware->peak_tflops_fp8;
  if (!fp8 || fp8_peak <= 0) {
    if (*s.throughput.mfu <= 1) return;
    s.warnings.push_back(fmt::format(
        "MFU {:.1f} % is above 100 %: the times (costs.fixed, a profile or a calibration) are "
        "shorter than the hardware's peak FLOP/s allows",
        100 * *s.throughput.mfu));
    return;
  }
  if (*s.throughput.tflops_per_gpu <= fp8_peak) return;
  s.warnings.push_back(fmt::format(
      "{:.4g} model TFLOP/s per GPU is above even the FP8 peak of {:.4g}: the times (costs.fixed, "
      "a profile or a calibration) are shorter than the hardware's peak FLOP/s allows",
      *s.throughput.tflops_per_gpu, fp8_peak));
}

void add_warnings(Summary& s, const Config& config) {
  add_speed_warning(s, config);
  if (!s.memory_capacity_bytes) return;
  int over = 0;
  const DeviceSummary* fullest = nullptr;
  for (const DeviceSummary& d : s.devices) {
    if (d.peak_memory_bytes <= *s.memory_capacity_bytes) continue;
    ++over;
    if (!fullest || d.peak_memory_bytes > fullest->peak_memory_bytes) fullest = &d;
  }
  if (fullest != nullptr) {
    s.warnings.push_back(fmt::format(
        "{} of {} ranks need more memory than the device has (rank {}: {:.2f} GiB of {:.2f} "
        "GiB): this layout does not fit",
        over, s.devices.size(), fullest->rank,
        static_cast<double>(fullest->peak_memory_bytes) / (1ull << 30),
        *s.memory_capacity_bytes / (1ull << 30)));
  }
}

}  // namespace

const DeviceSummary* fullest_device(const Summary& s) {
  if (s.devices.empty()) return nullptr;
  return &*std::max_element(s.devices.begin(), s.devices.end(), [](const auto& a, const auto& b) {
    return a.peak_memory_bytes < b.peak_memory_bytes;
  });
}

std::string implausible_figure(const Summary& s) {
  if (!(std::isfinite(s.iteration_time_s) && s.iteration_time_s > 0)) {
    return fmt::format("an iteration time of {} s", s.iteration_time_s);
  }
  if (!(s.bubble_fraction >= 0 && s.bubble_fraction <= 1)) {
    return fmt::format("a bubble fraction of {}", s.bubble_fraction);
  }
  // Busy time and period are each rounded to seconds from picoseconds.
  const double busy_limit_s = s.iteration_time_s * (1 + 1e-9);
  for (const DeviceSummary& d : s.devices) {
    if (!(d.busy_s >= 0 && d.busy_s <= busy_limit_s)) {
      return fmt::format("rank {} busy {} s of a {} s iteration", d.rank, d.busy_s,
                         s.iteration_time_s);
    }
    if (d.static_bytes < 0 || d.peak_activation_bytes < 0 || d.peak_memory_bytes < 0) {
      return fmt::format("rank {} holding a negative number of bytes", d.rank);
    }
  }
  // An MFU above 1 is a figure the times make (costs.fixed, a profile),
  // flagged by a warning (add_warnings), not an error.
  if (s.throughput.mfu && !(std::isfinite(*s.throughput.mfu) && *s.throughput.mfu >= 0)) {
    return fmt::format("an MFU of {}", *s.throughput.mfu);
  }
  return "";
}

Summary summarize(const Config& config, const std::string& schedule_name, const Timeline& timeline,
                  const std::vector<int64_t>& stage_weight_bytes) {
  Summary s;
  s.schedule = schedule_name;
  s.pipeline = config.parallel.pipeline;
  s.tensor = config.parallel.tensor;
  s.data = config.parallel.data;
  s.context = config.parallel.context;
  s.expert = config.parallel.expert;
  s.virtual_stages = config.parallel.virtual_stages;
  s.microbatches = config.num_microbatches();
  s.flushes = config.schedule.flushes;
  s.optimizer_step = to_string(config.training.optimizer_step);
  s.iteration_time_s = picos_to_seconds(timeline.period());
  s.first_iteration_s = picos_to_seconds(
      timeline.iteration_end.empty() ? timeline.makespan : timeline.iteration_end[0]);
  s.iterations_simulated = timeline.iterations;

  // One iteration's busy time, of the run the iteration time is measured on:
  // a measured run's slower first iteration must not push the bubble below 0.
  const std::vector<double> period_busy = timeline.busy_per_iteration();
  double busy = 0;  // summed over ranks in double: p x period can pass 2^63 ps
  for (int rank = 0; rank < timeline.num_ranks; ++rank) {
    DeviceSummary d;
    d.rank = rank;
    d.busy_s = period_busy[rank] * 1e-12;
    d.static_bytes = timeline.static_bytes[rank];
    if (static_cast<size_t>(rank) < timeline.working_bytes.size()) {
      d.working_bytes = timeline.working_bytes[rank];
    }
    d.peak_activation_bytes = timeline.peak_activation_bytes[rank];
    s.devices.push_back(d);
    busy += period_busy[rank];
  }
  s.weights = weight_versions(timeline, stage_weight_bytes);
  for (const StageWeights& w : s.weights) s.devices[w.rank].weight_version_bytes += w.extra_bytes;
  for (DeviceSummary& d : s.devices) {
    d.peak_memory_bytes =
        d.static_bytes + d.weight_version_bytes + d.peak_activation_bytes + d.working_bytes;
  }
  if (timeline.period() > 0) {
    s.bubble_fraction = 1.0 - busy / (static_cast<double>(timeline.num_ranks) * timeline.period());
    s.throughput.samples_per_s = config.training.global_batch / s.iteration_time_s;
    if (config.model) {
      s.throughput.tokens_per_s = s.throughput.samples_per_s * config.model->seq_len;
      const auto gpus = static_cast<double>(config.parallel.gpus());
      s.throughput.tflops_per_gpu =
          model_flops_per_iteration(config) / s.iteration_time_s / gpus / 1e12;
      if (config.hardware) {
        const double peak = config.hardware->peak_tflops(config.model->dtype);
        if (peak > 0) s.throughput.mfu = *s.throughput.tflops_per_gpu / peak;
      }
    }
  }
  if (config.hardware) s.memory_capacity_bytes = config.hardware->memory_gib * (1ull << 30);
  add_warnings(s, config);
  if (config.model) {
    s.model = ModelSize{model_parameters(*config.model), model_active_parameters(*config.model)};
  }
  return s;
}

}  // namespace ppsim
