#include "sim/plan/explore.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "schedules/generators.h"
#include "sim/cost/calibration.h"
#include "sim/cost/cost_model.h"
#include "sim/cost/partition.h"
#include "sim/plan/parallel.h"
#include "sim/plan/simulate.h"

namespace ppsim {
namespace {

constexpr double kGiB = 1ull << 30;

// The stage -> rank map and the backward forms a kind uses for p ranks and
// v stages each, from a small instance of it (neither depends on m), and
// whether it runs forwards and backwards as overlapped pairs (DualPipe's).
// zb-auto lays its stages out as 1F1B does and splits every backward.
struct Layout {
  std::vector<int> stage_rank;
  std::vector<BackwardForm> forms;
  bool overlapped_pairs = false;
};
Layout stage_layout(ScheduleKind kind, int p, int v) {
  if (kind == ScheduleKind::kZbAuto) {
    return {stage_layout(ScheduleKind::k1f1b, p, v).stage_rank,
            uniform_forms(p * v, BackwardForm::kSplit)};
  }
  // 2p microbatches: what DualPipe and DualPipeV need at least.
  const Result<Schedule> s = make_schedule(kind, {p, 2 * p, v, 1, p});
  if (!s.ok()) {
    return {interleaved_stage_rank(p * v, p), uniform_forms(p * v, BackwardForm::kWhole)};
  }
  const bool pairs = std::any_of(s->programs.begin(), s->programs.end(), [](const auto& program) {
    return std::any_of(program.begin(), program.end(),
                       [](const Action& a) { return a.overlaps_next; });
  });
  return {s->stage_rank, backward_forms(*s), pairs};
}

// No schedule can finish an iteration before its busiest rank has done its
// own forwards and backwards (its compute is sequential); with DualPipe's
// two chains each stage sees half of the microbatches. An overlapped pair
// takes its two actions' time less the communication each hides under the
// other (overlapped_pair_time), at most all of it: a bound for a schedule
// with pairs leaves that out.
double compute_lower_bound(const Config& c, const CostTable& costs, const Layout& layout) {
  std::vector<Picos> work(c.parallel.pipeline, 0);
  for (int s = 0; s < costs.num_stages(); ++s) {
    for (int j = 0; j < costs.num_slices; ++j) {
      const StageCost& sc = costs.stages[s * costs.num_slices + j];
      Picos both = compute_time(sc, ActionKind::kForward) + compute_time(sc, ActionKind::kBackward);
      if (layout.overlapped_pairs) both -= sc.forward_comm + sc.backward_comm;
      work[layout.stage_rank[s]] += both;
    }
  }
  return picos_to_seconds(*std::max_element(work.begin(), work.end())) * c.num_microbatches() /
         c.num_chains();
}

int64_t max_static_bytes(const CostTable& costs) {
  return *std::max_element(costs.static_bytes.begin(), costs.static_bytes.end());
}

// Decides everything about a candidate that needs no simulation: invalid
// layouts, static memory over the cap, and the lower bound.
// `calibration`: the profile's, read once for the sweep (every candidate
// is a copy of its base config, profile included).
void prepare(Candidate& cand, Config& config, double cap_bytes,
             const Result<Calibration>& calibration) {
  // One rank has no pipeline to interleave its chunks over: Megatron-Core's
  // initialize_model_parallel refuses virtual stages without pipeline ranks
  // to run them on, and on one rank they would only hold more microbatches.
  if (config.parallel.pipeline == 1 && config.parallel.virtual_stages > 1) {
    cand.reason = fmt::format("{} virtual stages on a one-stage pipeline: nothing to interleave",
                              config.parallel.virtual_stages);
    return;
  }
  const int layers = config.model->layers;
  const int stages = config.num_stages();
  if (layers < stages) {
    cand.reason = fmt::format("{} layers do not fill {} stages", layers, stages);
    return;
  }
  if (config.model->heads % config.parallel.tensor != 0) {
    cand.reason = fmt::format("{} heads do not split over tensor {}", config.model->heads,
                              config.parallel.tensor);
    return;
  }
  // Megatron splits key-value heads over t, or replicates them when t is a
  // multiple of their count.
  const int kv = config.model->key_value_heads();
  if (kv % config.parallel.tensor != 0 && config.parallel.tensor % kv != 0) {
    cand.reason = fmt::format("{} key-value heads neither split over nor divide tensor {}", kv,
                              config.parallel.tensor);
    return;
  }
  const int64_t per_microbatch = int64_t{config.training.micro_batch} * config.parallel.data;
  if (config.training.global_batch % per_microbatch != 0) {
    cand.reason = fmt::format("global_batch {} is not a whole number of micro_batch {} x data {}",
                              config.training.global_batch, config.training.micro_batch,
                              config.parallel.data);
    return;
  }
  Result<std::vector<int>> split = balanced_layers(config);
  if (!split) {
    cand.reason = split.error().message;
    return;
  }
  config.parallel.layers_per_stage = std::move(*split);
  cand.parallel.layers_per_stage = config.parallel.layers_per_stage;
  const Layout layout =
      stage_layout(config.schedule.kind, config.parallel.pipeline, config.parallel.virtual_stages);
  Result<CostTable> costs = build_cost_table(config, layout.stage_rank);
  if (!costs) {
    cand.reason = costs.error().message;
    return;
  }
  // The bound is a bound only on the figures simulate() will use.
  if (!calibration) {
    cand.reason = calibration.error().message;
    return;
  }
  apply_calibration(*calibration, layout.stage_rank, layout.forms, config.fixed, *costs);
  const int64_t fixed = max_static_bytes(*costs);
  if (fixed > cap_bytes) {
    cand.status = CandidateStatus::kPrunedMemory;
    cand.reason = fmt::format(
        "weights, gradients and optimizer state take {:.2f} GiB, over the "
        "{:.2f} GiB cap",
        fixed / kGiB, cap_bytes / kGiB);
    return;
  }
  // Token slices change the per-slice costs; a bound from the unsliced
  // table would not be a bound, so terapipe is never pruned by it.
  cand.lower_bound_s = config.schedule.kind == ScheduleKind::kTeraPipe
                           ? 0
                           : compute_lower_bound(config, *costs, layout);
  cand.status = CandidateStatus::kToSimulate;
}

void run_simulation(Candidate& cand, const Config& config, double cap_bytes,
                    const Calibration& calibration, Engine& engine) {
  Result<Simulation> sim = simulate(config, &engine, &calibration, Keep::kSummary);
  if (!sim) {
    cand.status = CandidateStatus::kInvalid;
    cand.reason = sim.error().message;
    return;
  }
  cand.summary = std::move(sim->summary);
  cand.status = CandidateStatus::kSimulated;
  const DeviceSummary& top = *fullest_device(*cand.summary);
  if (top.peak_memory_bytes > cap_bytes) {
    cand.status = CandidateStatus::kOverCap;
    cand.reason = fmt::format("peak memory {:.2f} GiB on rank {} exceeds the {:.2f} GiB cap",
                              top.peak_memory_bytes / kGiB, top.rank, cap_bytes / kGiB);
  }
}

// One split of the GPUs: p t cp d of them, the experts over EP of the d cp
// data-parallel ranks.
struct GpuLayout {
  int p = 1;
  int t = 1;
  int cp = 1;
  int d = 1;
  int ep = 1;
};

// The search's splits of `gpus` GPUs; those whose p t cp does not divide
// the GPUs, or whose EP does not divide d cp, counted in `skipped`.
std::vector<GpuLayout> gpu_layouts(const SearchSpace& space, int64_t gpus, size_t& skipped) {
  std::vector<GpuLayout> layouts;
  for (int p : space.pipeline) {
    for (int t : space.tensor) {
      for (int cp : space.context) {
        const int64_t model_parallel = int64_t{p} * t * cp;
        for (int ep : space.expert) {
          if (gpus % model_parallel != 0 || (gpus / model_parallel * cp) % ep != 0) {
            ++skipped;
            continue;
          }
          layouts.push_back(GpuLayout{p, t, cp, static_cast<int>(gpus / model_parallel), ep});
        }
      }
    }
  }
  return layouts;
}

// A schedule kind with its stages per rank.
struct ScheduleChoice {
  ScheduleKind kind;
  int v = 1;
};

// The search's schedules, each with the virtual stages it runs: its fixed
// count, or the search's counts of two or more (interleaving needs two stages
// per rank or more). Token slicing does not combine with context
// parallelism: no terapipe with cp > 1.
std::vector<ScheduleChoice> schedule_choices(const SearchSpace& space, int cp) {
  std::vector<ScheduleChoice> choices;
  for (ScheduleKind kind : space.schedule) {
    if (kind == ScheduleKind::kTeraPipe && cp > 1) continue;
    if (const std::optional<int> fixed = fixed_virtual_stages(kind)) {
      choices.push_back({kind, *fixed});
      continue;
    }
    for (int v : space.virtual_stages) {
      if (v > 1) choices.push_back({kind, v});
    }
  }
  return choices;
}

// The base config with a candidate's choices.
Config candidate_config(const Config& base, const Candidate& cand) {
  Config c = base;
  c.parallel = cand.parallel;
  c.training.micro_batch = cand.micro_batch;
  c.training.recompute = cand.recompute;
  c.training.zero_stage = cand.zero_stage;
  c.schedule.kind = cand.schedule;
  // A token-level candidate finds its own cut.
  if (cand.schedule == ScheduleKind::kTeraPipe) c.schedule.slicing = SlicingMethod::kOptimal;
  return c;
}

// Every candidate of one layout of the GPUs: the search's micro-batches,
// schedules with their virtual stages, recompute and ZeRO stages.
void add_layouts(const Sweep& sweep, const GpuLayout& layout,
                 std::vector<std::pair<Candidate, Config>>& out) {
  const SearchSpace& space = sweep.search;
  Candidate cand;
  cand.parallel = sweep.base.parallel;
  cand.parallel.pipeline = layout.p;
  cand.parallel.tensor = layout.t;
  cand.parallel.context = layout.cp;
  cand.parallel.data = layout.d;
  cand.parallel.expert = layout.ep;
  const std::vector<ScheduleChoice> choices = schedule_choices(space, layout.cp);
  for (int mb : space.micro_batch) {
    cand.micro_batch = mb;
    for (const ScheduleChoice& choice : choices) {
      cand.schedule = choice.kind;
      cand.parallel.virtual_stages = choice.v;
      for (Recompute recompute : space.recompute) {
        cand.recompute = recompute;
        for (int zero : space.zero_stage) {
          cand.zero_stage = zero;
          out.emplace_back(cand, candidate_config(sweep.base, cand));
        }
      }
    }
  }
}

// A one-stage pipeline has no pipeline to schedule: 1F1B, ZB-H1 (without
// tensor-parallel collectives for its W to stand beside) and most other
// kinds run it alike. Of the p = 1 candidates that differ only in schedule
// and virtual stages (interleaved ones are invalid, prepare()), one with
// the same iteration time and peak memory as an earlier one (in enumeration
// order) is marked equivalent to it, so that the ranking lists the outcome
// once. Different figures (GPipe's memory, TeraPipe's slices) keep their own.
void mark_equivalents(std::vector<Candidate>& candidates) {
  using Key = std::tuple<int, int, int, int, int, Recompute, int, double, int64_t>;
  std::map<Key, size_t> first;
  for (size_t i = 0; i < candidates.size(); ++i) {
    Candidate& c = candidates[i];
    if (!c.feasible() || c.parallel.pipeline != 1) continue;
    const Key key{c.parallel.tensor,
                  c.parallel.context,
                  c.parallel.data,
                  c.parallel.expert,
                  c.micro_batch,
                  c.recompute,
                  c.zero_stage,
                  c.summary->iteration_time_s,
                  fullest_device(*c.summary)->peak_memory_bytes};
    const auto [it, inserted] = first.emplace(key, i);
    if (inserted) continue;
    c.status = CandidateStatus::kEquivalent;
    c.reason = fmt::format("a one-stage pipeline: the same iteration time and peak memory as {}",
                           candidates[it->second].layout());
  }
}

}  // namespace

const char* to_string(CandidateStatus status) {
  switch (status) {
    case CandidateStatus::kToSimulate:
      return "to-simulate";
    case CandidateStatus::kSimulated:
      return "simulated";
    case CandidateStatus::kOverCap:
      return "over-cap";
    case CandidateStatus::kInvalid:
      return "invalid";
    case CandidateStatus::kPrunedMemory:
      return "pruned-memory";
    case CandidateStatus::kPrunedBound:
      return "pruned-bound";
    case CandidateStatus::kEquivalent:
      return "equivalent";
  }
  return "?";
}

std::string Candidate::layout() const {
  const std::string context =
      parallel.context > 1 ? fmt::format(" cp={}", parallel.context) : std::string();
  const std::string expert =
      parallel.expert > 1 ? fmt::format(" ep={}", parallel.expert) : std::string();
  return fmt::format("p={} t={}{} d={}{} v={} mb={} {} recompute={} zero={}", parallel.pipeline,
                     parallel.tensor, context, parallel.data, expert, parallel.virtual_stages,
                     micro_batch, ppsim::to_string(schedule), ppsim::to_string(recompute),
                     zero_stage);
}

std::vector<std::pair<Candidate, Config>> enumerate_candidates(const Sweep& sweep,
                                                               size_t* layouts_skipped) {
  std::vector<std::pair<Candidate, Config>> out;
  size_t skipped = 0;
  for (const GpuLayout& layout :
       gpu_layouts(sweep.search, sweep.base.hardware->num_gpus(), skipped)) {
    add_layouts(sweep, layout, out);
  }
  if (layouts_skipped != nullptr) *layouts_skipped = skipped;
  return out;
}

namespace {

using Work = std::vector<std::pair<Candidate, Config>>;

// The candidates prepare() left to simulate, best lower bound first, ties
// in enumeration order: promising candidates set a good best early, and the
// order is the same for any thread count. *decided counts the others.
std::vector<size_t> simulation_queue(const Work& work, size_t* decided) {
  std::vector<size_t> queue;
  for (size_t i = 0; i < work.size(); ++i) {
    if (work[i].first.status == CandidateStatus::kToSimulate) {
      queue.push_back(i);
    } else {
      ++*decided;
    }
  }
  std::stable_sort(queue.begin(), queue.end(), [&](size_t a, size_t b) {
    return work[a].first.lower_bound_s < work[b].first.lower_bound_s;
  });
  return queue;
}

// Simulates the queue in waves of options.wave; a candidate whose lower
// bound cannot beat the best found before its wave is pruned unsimulated.
void simulate_in_waves(Work& work, const std::vector<size_t>& queue, double cap_bytes,
                       const Result<Calibration>& calibration, const ExploreOptions& options,
                       std::vector<Engine>& engines, size_t decided) {
  double best = std::numeric_limits<double>::infinity();
  if (options.progress) options.progress(decided, work.size());
  for (size_t start = 0; start < queue.size(); start += options.wave) {
    std::vector<size_t> wave;
    for (size_t k = start; k < std::min(queue.size(), start + options.wave); ++k) {
      Candidate& cand = work[queue[k]].first;
      if (cand.lower_bound_s >= best) {
        cand.status = CandidateStatus::kPrunedBound;
        cand.reason = fmt::format(
            "cannot beat {:.6g} s: its busiest rank alone computes for "
            "{:.6g} s",
            best, cand.lower_bound_s);
        ++decided;
      } else {
        wave.push_back(queue[k]);
      }
    }
    parallel_for(wave, engines, [&](size_t i, Engine& engine) {
      // Only candidates prepare() accepted are queued, so the calibration was read.
      run_simulation(work[i].first, work[i].second, cap_bytes, *calibration, engine);
    });
    for (size_t i : wave) {
      const Candidate& cand = work[i].first;
      if (cand.feasible()) best = std::min(best, cand.summary->iteration_time_s);
    }
    decided += wave.size();
    if (options.progress) options.progress(decided, work.size());
  }
}

// The feasible candidates, best throughput first (among equals, the one
// needing less memory), and the Pareto front of throughput and memory.
void rank(ExploreResult& result) {
  for (size_t i = 0; i < result.candidates.size(); ++i) {
    if (result.candidates[i].feasible()) result.ranking.push_back(i);
  }
  const auto throughput = [&](size_t i) {
    return result.candidates[i].summary->throughput.samples_per_s;
  };
  const auto peak = [&](size_t i) {
    return fullest_device(*result.candidates[i].summary)->peak_memory_bytes;
  };
  std::stable_sort(result.ranking.begin(), result.ranking.end(), [&](size_t a, size_t b) {
    if (throughput(a) != throughput(b)) return throughput(a) > throughput(b);
    return peak(a) < peak(b);
  });
  // Walking the ranking, keep each candidate that needs less memory than
  // every one before it (all at least as fast, and the equally fast ones no
  // larger).
  int64_t least = std::numeric_limits<int64_t>::max();
  for (size_t i : result.ranking) {
    if (peak(i) < least) {
      result.pareto.push_back(i);
      least = peak(i);
    }
  }
}

}  // namespace

ExploreResult explore(const Sweep& sweep, const ExploreOptions& options) {
  ExploreResult result;
  result.memory_cap_bytes = sweep.search.memory_cap_gib * kGiB;
  Work work = enumerate_candidates(sweep, &result.layouts_skipped);
  std::vector<Engine> engines(thread_count(options.threads));
  const Result<Calibration> calibration = calibration_for(sweep.base, nullptr);
  std::vector<size_t> all(work.size());
  for (size_t i = 0; i < work.size(); ++i) all[i] = i;
  parallel_for(all, engines, [&](size_t i, Engine&) {
    prepare(work[i].first, work[i].second, result.memory_cap_bytes, calibration);
  });
  size_t decided = 0;
  const std::vector<size_t> queue = simulation_queue(work, &decided);
  simulate_in_waves(work, queue, result.memory_cap_bytes, calibration, options, engines, decided);
  result.candidates.reserve(work.size());
  result.configs.reserve(work.size());
  for (auto& [cand, config] : work) {
    result.candidates.push_back(std::move(cand));
    result.configs.push_back(std::move(config));
  }
  mark_equivalents(result.candidates);
  rank(result);
  return result;
}

}  // namespace ppsim
