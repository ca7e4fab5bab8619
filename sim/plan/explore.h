// `ppsim explore`: every sensible layout and schedule for a model on a
// cluster, simulated, ranked. A candidate is one choice of pipeline, tensor
// and data parallelism, virtual stages, micro-batch size, schedule,
// recompute and ZeRO stage (the sweep's `search:` lists). Before simulating,
// the explorer prunes what cannot win: a candidate whose weights and
// optimizer state alone exceed the memory cap, and one whose lower bound on
// the iteration time (its busiest rank's compute, which no schedule can
// hide) is no better than the best iteration time found so far. Candidates
// are simulated in waves of a fixed size, best lower bound first, in
// parallel; the waves do not depend on the thread count, so neither do the
// results.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/config.h"
#include "sim/plan/metrics.h"

namespace ppsim {

enum class CandidateStatus {
  kToSimulate,    // passed the checks before simulating; decided by the run
  kSimulated,     // ran, fits the cap
  kOverCap,       // ran, but its peak memory exceeds the cap
  kInvalid,       // the layout or schedule cannot run this config
  kPrunedMemory,  // static memory alone exceeds the cap: not simulated
  kPrunedBound,   // cannot beat the best found: not simulated
  kEquivalent,    // ran and fits, but a one-stage pipeline with the figures of an
                  // earlier candidate under another schedule: not ranked again
};
const char* to_string(CandidateStatus status);

struct Candidate {
  ParallelSpec parallel;
  int micro_batch = 1;
  Recompute recompute = Recompute::kNone;
  int zero_stage = 0;
  ScheduleKind schedule = ScheduleKind::k1f1b;

  CandidateStatus status = CandidateStatus::kInvalid;
  std::string reason;  // why not feasible
  double lower_bound_s = 0;
  std::optional<Summary> summary;  // when simulated

  bool feasible() const { return status == CandidateStatus::kSimulated; }
  // "p=8 t=8 d=16 v=3 mb=1 interleaved-1f1b recompute=full zero=1"
  std::string layout() const;
};

struct ExploreOptions {
  int threads = 0;   // 0: one per core
  size_t wave = 64;  // candidates simulated between two pruning rounds
  // Called after each wave with (candidates decided, all candidates).
  std::function<void(size_t, size_t)> progress;
};

struct ExploreResult {
  std::vector<Candidate> candidates;  // every candidate, in enumeration order
  std::vector<Config> configs;        // each candidate's config (with its layer split)
  std::vector<size_t> ranking;        // feasible ones, best throughput first, then least memory
  std::vector<size_t> pareto;         // feasible, not dominated in (throughput, peak memory)
  double memory_cap_bytes = 0;
  // p t cp not dividing the GPUs, or EP not dividing d cp.
  size_t layouts_skipped = 0;
};

// The candidates of a sweep, in enumeration order, with their configs.
std::vector<std::pair<Candidate, Config>> enumerate_candidates(const Sweep& sweep,
                                                               size_t* layouts_skipped = nullptr);
ExploreResult explore(const Sweep& sweep, const ExploreOptions& options = {});

}  // namespace ppsim
