#include "sim/plan/explore.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "sim/cost/partition.h"
#include "sim/plan/ranking_evidence.h"
#include "sim/plan/simulate.h"
#include "sim/report/explore_report.h"

namespace ppsim {
namespace explore_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A small GPT on 16 A100s: enough layouts to prune, small enough to
// simulate them all.
constexpr const char* kSweep = R"(
model: {layers: 16, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32000}
hardware: {preset: a100-80gb, gpus_per_node: 8, nodes: 2}
training: {global_batch: 64}
search:
  pipeline: [1, 2, 4, 8]
  tensor: [1, 2, 4]
  micro_batch: [1, 2]
  virtual_stages: [2]
  schedule: [gpipe, 1f1b, interleaved-1f1b, zb-h1]
  recompute: [none, full]
  zero_stage: [0]
  memory_cap_gib: 6
)";

Sweep sweep() {
  Result<Sweep> s = parse_sweep(kSweep, "sweep.yaml");
  EXPECT_TRUE(s.ok()) << s.error().message;
  return *s;
}

TEST(Explore, PruningNeverDiscardsTheBest) {
  const Sweep sw = sweep();
  const ExploreResult result = explore(sw);
  ASSERT_FALSE(result.ranking.empty());
  size_t pruned = 0;
  for (const Candidate& c : result.candidates) {
    pruned +=
        c.status == CandidateStatus::kPrunedBound || c.status == CandidateStatus::kPrunedMemory;
  }
  EXPECT_GT(pruned, 0u) << "the sweep should exercise pruning";

  // Exhaustive: simulate every candidate, keep those within the cap.
  double best = std::numeric_limits<double>::infinity();
  std::string best_layout;
  for (auto [cand, config] : enumerate_candidates(sw)) {
    // The same layer split the explorer gives each candidate.
    Result<std::vector<int>> split = balanced_layers(config);
    if (!split) continue;
    config.parallel.layers_per_stage = *split;
    Result<Simulation> sim = simulate(config);
    if (!sim) continue;
    int64_t peak = 0;
    for (const DeviceSummary& d : sim->summary.devices) peak = std::max(peak, d.peak_memory_bytes);
    if (peak > result.memory_cap_bytes) continue;
    if (sim->summary.iteration_time_s < best) {
      best = sim->summary.iteration_time_s;
      best_layout = cand.layout();
    }
  }
  const Candidate& top = result.candidates[result.ranking.front()];
  EXPECT_EQ(top.summary->iteration_time_s, best);
  EXPECT_EQ(top.layout(), best_layout);
}

// The bound the explorer prunes by is a bound: no candidate, simulated, is
// faster than it. DualPipe's overlapped pairs hide one action's
// communication (here the experts' all-to-all) under the other's compute,
// so their bound leaves that communication out; with every action's whole
// time in it, DualPipeV's bound was 1-4 % above its simulated iteration
// here (many microbatches: little bubble to absorb what the pairs hide).
TEST(Explore, TheLowerBoundIsNeverAboveTheSimulatedIteration) {
  constexpr const char* kMoeSweep = R"(
model: {preset: mixtral-8x7b, layers: 8, seq_len: 1024}
hardware: {preset: h100-sxm, gpus_per_node: 8, nodes: 2}
training: {global_batch: 1024}
search:
  pipeline: [2, 4]
  tensor: [1]
  expert: [2, 4, 8]
  micro_batch: [1]
  virtual_stages: [2]
  schedule: [1f1b, zb-h1, dualpipe, dualpipev]
  recompute: [none]
  zero_stage: [1]
  memory_cap_gib: 10000
)";
  const Result<Sweep> sw = parse_sweep(kMoeSweep, "moe-sweep.yaml");
  ASSERT_TRUE(sw.ok()) << sw.error().message;
  const ExploreResult r = explore(*sw);
  int checked = 0;
  int with_pairs = 0;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const Candidate& c = r.candidates[i];
    if (c.lower_bound_s <= 0) continue;  // not prepared: invalid or over the memory cap
    const Result<Simulation> sim = simulate(r.configs[i]);
    ASSERT_TRUE(sim.ok()) << c.layout() << ": " << sim.error().message;
    EXPECT_LE(c.lower_bound_s, sim->summary.iteration_time_s) << c.layout();
    ++checked;
    with_pairs += c.schedule == ScheduleKind::kDualPipe || c.schedule == ScheduleKind::kDualPipeV;
  }
  EXPECT_GT(with_pairs, 0);
  EXPECT_GT(checked, with_pairs);
}

TEST(Explore, SameResultsWithOneAndTwoThreads) {
  const Sweep sw = sweep();
  ExploreOptions one;
  one.threads = 1;
  ExploreOptions two;
  two.threads = 2;
  const ExploreResult a = explore(sw, one);
  const ExploreResult b = explore(sw, two);
  ASSERT_EQ(a.candidates.size(), b.candidates.size());
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    EXPECT_EQ(a.candidates[i].status, b.candidates[i].status) << a.candidates[i].layout();
    EXPECT_EQ(a.candidates[i].reason, b.candidates[i].reason);
    ASSERT_EQ(a.candidates[i].summary.has_value(), b.candidates[i].summary.has_value());
    if (a.candidates[i].summary) {
      EXPECT_EQ(a.candidates[i].summary->iteration_time_s,
                b.candidates[i].summary->iteration_time_s);
    }
  }
  EXPECT_EQ(a.ranking, b.ranking);
  EXPECT_EQ(a.pareto, b.pareto);
  EXPECT_EQ(explore_to_json(a), explore_to_json(b));
}

TEST(Explore, EveryCandidateIsAccountedFor) {
  const ExploreResult r = explore(sweep());
  // 4 p x 3 t, less p = 8 x t = 4 (32 GPUs > 16): 11 layouts, x 2 mb x
  // (3 one-stage kinds + interleaved at v = 2) x 2 recompute.
  EXPECT_EQ(r.layouts_skipped, 1u);
  EXPECT_EQ(r.candidates.size(), 11u * 2 * 4 * 2);
  for (const Candidate& c : r.candidates) {
    // Decided, every one: simulated, or a reason why not.
    EXPECT_NE(c.status, CandidateStatus::kToSimulate) << c.layout();
    if (!c.feasible()) {
      EXPECT_FALSE(c.reason.empty()) << c.layout();
      // Memory and bound prunings name the limit they fell foul of.
      if (c.status == CandidateStatus::kOverCap) {
        EXPECT_THAT(c.reason, HasSubstr("exceeds the 6.00 GiB cap")) << c.layout();
      } else if (c.status == CandidateStatus::kPrunedMemory) {
        EXPECT_THAT(c.reason, HasSubstr("over the 6.00 GiB cap")) << c.layout();
      } else if (c.status == CandidateStatus::kPrunedBound) {
        EXPECT_THAT(c.reason, HasSubstr("cannot beat ")) << c.layout();
      }
    } else {
      for (const DeviceSummary& d : c.summary->devices) {
        EXPECT_LE(d.peak_memory_bytes, r.memory_cap_bytes);
      }
    }
  }
  // The table's first line counts each outcome as the candidates hold it.
  std::map<CandidateStatus, int> outcomes;
  for (const Candidate& c : r.candidates) ++outcomes[c.status];
  EXPECT_THAT(
      format_explore_table(r, 1),
      HasSubstr(fmt::format(
          "{} candidates: {} simulated and within the 6.0 GiB cap, {} "
          "over the cap, {} invalid, {} pruned by static memory, {} "
          "pruned by the lower bound",
          r.candidates.size(), outcomes[CandidateStatus::kSimulated],
          outcomes[CandidateStatus::kOverCap], outcomes[CandidateStatus::kInvalid],
          outcomes[CandidateStatus::kPrunedMemory], outcomes[CandidateStatus::kPrunedBound])));
  // The Pareto front in (throughput, peak memory), worked out here from the
  // candidates' summaries: a candidate's memory is its fullest device's peak.
  const auto throughput = [&](size_t i) {
    return r.candidates[i].summary->throughput.samples_per_s;
  };
  const auto memory = [&](size_t i) {
    int64_t peak = 0;
    for (const DeviceSummary& d : r.candidates[i].summary->devices) {
      peak = std::max(peak, d.peak_memory_bytes);
    }
    return peak;
  };
  // a dominates b: at least as fast and at most as much memory, better in one.
  const auto dominates = [&](size_t a, size_t b) {
    return throughput(a) >= throughput(b) && memory(a) <= memory(b) &&
           (throughput(a) > throughput(b) || memory(a) < memory(b));
  };
  std::vector<size_t> feasible;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    if (r.candidates[i].feasible()) feasible.push_back(i);
  }
  ASSERT_GE(r.pareto.size(), 2u) << "the sweep should trade memory for throughput";
  // Best throughput first, and each member needs strictly less memory than
  // every faster one.
  for (size_t k = 1; k < r.pareto.size(); ++k) {
    const size_t faster = r.pareto[k - 1];
    const size_t slower = r.pareto[k];
    EXPECT_GE(throughput(faster), throughput(slower)) << r.candidates[slower].layout();
    EXPECT_GT(memory(faster), memory(slower)) << r.candidates[slower].layout();
  }
  // No feasible candidate, on the front or off it, dominates a member.
  for (size_t f : r.pareto) {
    ASSERT_TRUE(r.candidates[f].feasible()) << r.candidates[f].layout();
    for (size_t c : feasible) {
      EXPECT_FALSE(dominates(c, f))
          << r.candidates[c].layout() << " dominates " << r.candidates[f].layout();
    }
  }
  // And the front is complete: every feasible candidate off it is dominated
  // by a member, or ties one in both throughput and memory.
  for (size_t c : feasible) {
    if (std::find(r.pareto.begin(), r.pareto.end(), c) != r.pareto.end()) continue;
    const bool covered = std::any_of(r.pareto.begin(), r.pareto.end(), [&](size_t f) {
      return dominates(f, c) || (throughput(f) == throughput(c) && memory(f) == memory(c));
    });
    EXPECT_TRUE(covered) << r.candidates[c].layout() << " is missing from the front";
  }
}

// With one stage there is no pipeline to schedule: 1F1B, interleaved 1F1B
// and ZB-H1 all run each microbatch's forward and backward back to back on
// the one rank, so the ranking lists that outcome once (the first in the
// search's order), and the others name the candidate whose figures they have.
TEST(Explore, OneStagePipelinesAreRankedOncePerOutcome) {
  const ExploreResult r = explore(sweep());
  const auto peak = [](const Candidate& c) {
    return fullest_device(*c.summary)->peak_memory_bytes;
  };
  const auto same_but_schedule = [&](const Candidate& a, const Candidate& b) {
    return a.parallel.tensor == b.parallel.tensor && a.parallel.data == b.parallel.data &&
           a.micro_batch == b.micro_batch && a.recompute == b.recompute &&
           a.zero_stage == b.zero_stage &&
           a.summary->iteration_time_s == b.summary->iteration_time_s && peak(a) == peak(b);
  };
  for (size_t x = 0; x < r.ranking.size(); ++x) {
    const Candidate& a = r.candidates[r.ranking[x]];
    if (a.parallel.pipeline != 1) continue;
    for (size_t y = x + 1; y < r.ranking.size(); ++y) {
      const Candidate& b = r.candidates[r.ranking[y]];
      EXPECT_FALSE(b.parallel.pipeline == 1 && same_but_schedule(a, b))
          << a.layout() << " and " << b.layout() << " are both ranked";
    }
  }
  int equivalents = 0;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const Candidate& c = r.candidates[i];
    if (c.status != CandidateStatus::kEquivalent) continue;
    ++equivalents;
    EXPECT_EQ(c.parallel.pipeline, 1) << c.layout();
    // The candidate it names is ranked, comes earlier and has its figures.
    const auto named = std::find_if(r.ranking.begin(), r.ranking.end(), [&](size_t i) {
      return c.reason.find(r.candidates[i].layout()) != std::string::npos;
    });
    ASSERT_NE(named, r.ranking.end()) << c.reason;
    EXPECT_LT(*named, i) << c.reason;
    EXPECT_NE(r.candidates[*named].schedule, c.schedule) << c.reason;
    EXPECT_TRUE(same_but_schedule(r.candidates[*named], c)) << c.reason;
  }
  EXPECT_GT(equivalents, 0) << "the sweep's p = 1 candidates should have equivalents";
  EXPECT_THAT(format_explore_table(r, 1),
              HasSubstr(fmt::format("; {} more with a one-stage pipeline", equivalents)));
}

// Simulated candidates at these throughputs, ranked in this order, each
// iteration 64 samples.
ExploreResult ranking_of(const std::vector<double>& samples_per_s) {
  ExploreResult r;
  for (size_t i = 0; i < samples_per_s.size(); ++i) {
    Candidate c;
    c.status = CandidateStatus::kSimulated;
    c.summary.emplace();
    c.summary->throughput.samples_per_s = samples_per_s[i];
    c.summary->iteration_time_s = 64 / samples_per_s[i];
    r.candidates.push_back(c);
    r.configs.emplace_back();
    r.ranking.push_back(i);
  }
  return r;
}

// At 100, 97, 96 and 90 samples/s the last three are 3.1, 4.2 and 11.1 %
// slower than the best, so the first three are closer than
// kRankingEvidence.close_gap (5 %).
TEST(ExploreTable, SaysWhichCandidatesAreTooCloseToRank) {
  ASSERT_EQ(kRankingEvidence.close_gap, 0.05);
  ExploreResult r = ranking_of({100, 97, 96, 90});
  const std::string table = format_explore_table(r, 10);
  EXPECT_THAT(table, HasSubstr("   -  p="));
  EXPECT_THAT(table, HasSubstr("  +3.1%  p="));
  EXPECT_THAT(table, HasSubstr("  +4.2%  p="));
  EXPECT_THAT(table, HasSubstr(" +11.1%  p="));
  EXPECT_THAT(table, HasSubstr("#1 to #3 are predicted within 5 % of each other"));
  EXPECT_THAT(table,
              HasSubstr(fmt::format("ordered {} of {} pairs", kRankingEvidence.close_in_order,
                                    kRankingEvidence.close_pairs)));
  EXPECT_THAT(format_explore_table(r, 2),
              HasSubstr("#1 to #2, and 1 more below the table, are predicted within 5 %"));
  EXPECT_THAT(explore_to_json(r), HasSubstr("\"close_gap\":0.05,\"close_to_best\":3"));
  // Nothing to say when the runner-up is 5 % or more behind, or when the
  // times are a profile's (the evidence is the analytic model's).
  EXPECT_THAT(format_explore_table(ranking_of({100, 95, 90}), 10),
              Not(HasSubstr("predicted within")));
  r.configs.front().profile_path = "profile.yaml";
  EXPECT_THAT(format_explore_table(r, 10), Not(HasSubstr("predicted within")));
}

// Virtual stages need pipeline ranks to interleave over: Megatron-Core
// refuses them with one, and the explorer does not propose them.
TEST(Explore, OneRankHasNothingToInterleave) {
  const ExploreResult r = explore(sweep());
  int one_rank_interleaved = 0;
  for (const Candidate& c : r.candidates) {
    if (c.parallel.pipeline != 1 || c.parallel.virtual_stages == 1) continue;
    ++one_rank_interleaved;
    EXPECT_EQ(c.status, CandidateStatus::kInvalid) << c.layout();
    EXPECT_THAT(c.reason, HasSubstr("on a one-stage pipeline: nothing to interleave"));
  }
  EXPECT_GT(one_rank_interleaved, 0) << "the sweep has interleaved candidates at p = 1";
}

// True in a build with AddressSanitizer (g++ defines the macro, clang
// answers __has_feature).
constexpr bool built_with_address_sanitizer() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// Every sweep the project ships loads and finds a layout that fits: a sweep
// the model has outgrown fails here, not in a user's hands.
TEST(Explore, EveryShippedSweepRanksACandidate) {
  // 0.3 s in Release; 30 s in .ci/run's sanitizer build (-O0, a third of
  // its unit tests' time), where the smaller sweeps above explore the same
  // code.
  if (built_with_address_sanitizer()) GTEST_SKIP() << "Release runs it; 90 times slower here";
  int sweeps = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(PPSIM_SOURCE_DIR) + "/configs/sweeps")) {
    if (entry.path().extension() != ".yaml") continue;
    ++sweeps;
    const Result<Sweep> sweep = load_sweep(entry.path().string());
    ASSERT_TRUE(sweep.ok()) << sweep.error().message;
    const ExploreResult r = explore(*sweep);
    EXPECT_FALSE(r.ranking.empty()) << entry.path();
  }
  EXPECT_GE(sweeps, 4);
}

TEST(Explore, KeyValueHeadsMustSplitOrBeReplicatedOverTensor) {
  // 12 heads, 3 key-value heads: t = 3 splits them, t = 6 replicates each on
  // two GPUs, t = 2 does neither.
  Result<Sweep> sw = parse_sweep(R"(
model: {layers: 12, hidden: 768, heads: 12, kv_heads: 3, seq_len: 512, vocab: 1024}
hardware: {preset: a100-80gb, gpus_per_node: 6, nodes: 1}
training: {global_batch: 12}
search: {pipeline: [1], tensor: [2, 3, 6], micro_batch: [1], schedule: [1f1b],
         recompute: [none], zero_stage: [0]}
)",
                                 "gqa.yaml");
  ASSERT_TRUE(sw.ok()) << sw.error().message;
  const ExploreResult r = explore(*sw);
  ASSERT_EQ(r.candidates.size(), 3u);
  for (const Candidate& c : r.candidates) {
    const bool split_or_replicated = c.parallel.tensor != 2;
    EXPECT_EQ(c.status == CandidateStatus::kInvalid, !split_or_replicated) << c.layout();
    if (!split_or_replicated) {
      EXPECT_EQ(c.reason, "3 key-value heads neither split over nor divide tensor 2");
    }
  }
}

TEST(Explore, SearchesContextParallelism) {
  // 16 GPUs, p in {1, 2}, cp in {1, 2}: d = 16 / (p cp). TeraPipe's token
  // slices do not combine with cp > 1, so cp = 2 layouts get 1F1B only:
  // 2 layouts x 2 kinds + 2 layouts x 1 kind.
  Result<Sweep> sw = parse_sweep(R"(
model: {layers: 8, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32000, attention: flash}
hardware: {preset: a100-80gb, gpus_per_node: 8, nodes: 2}
training: {global_batch: 64}
search: {pipeline: [1, 2], tensor: [1], context: [1, 2], micro_batch: [1],
         schedule: [1f1b, terapipe], recompute: [none], zero_stage: [0]}
)",
                                 "cp.yaml");
  ASSERT_TRUE(sw.ok()) << sw.error().message;
  const ExploreResult r = explore(*sw);
  ASSERT_EQ(r.candidates.size(), 6u);
  int with_context = 0;
  for (const Candidate& c : r.candidates) {
    const ParallelSpec& par = c.parallel;
    EXPECT_EQ(par.pipeline * par.context * par.data, 16) << c.layout();
    if (par.context == 2) {
      ++with_context;
      EXPECT_EQ(c.schedule, ScheduleKind::k1f1b);
      EXPECT_THAT(c.layout(), HasSubstr(" cp=2 "));
      EXPECT_TRUE(c.feasible()) << c.layout() << ": " << c.reason;
    }
  }
  EXPECT_EQ(with_context, 2);
  EXPECT_THAT(explore_to_csv(r), HasSubstr("pipeline,tensor,data,context,expert,virtual_stages"));
}

TEST(Explore, SearchesExpertParallelism) {
  // 16 GPUs, p in {1, 2}, EP in {1, 4, 16}: EP must divide d = 16 / p, so
  // p = 2 with EP 16 is skipped: 5 layouts.
  Result<Sweep> sw = parse_sweep(R"(
model: {layers: 8, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32000,
        moe: {experts: 16, top_k: 2, expert_ffn_hidden: 1024}}
hardware: {preset: a100-80gb, gpus_per_node: 8, nodes: 2}
training: {global_batch: 64}
search: {pipeline: [1, 2], tensor: [1], expert: [1, 4, 16], micro_batch: [1],
         schedule: [1f1b], recompute: [none], zero_stage: [0]}
)",
                                 "ep.yaml");
  ASSERT_TRUE(sw.ok()) << sw.error().message;
  const ExploreResult r = explore(*sw);
  ASSERT_EQ(r.candidates.size(), 5u);
  EXPECT_EQ(r.layouts_skipped, 1u);
  // On one stage (p = 1) the experts' weights and optimizer state shrink as
  // EP grows: each GPU holds 16 / EP of them.
  int64_t previous_static = INT64_MAX;
  for (const Candidate& c : r.candidates) {
    EXPECT_TRUE(c.feasible()) << c.layout() << ": " << c.reason;
    EXPECT_EQ(c.parallel.data % c.parallel.expert, 0) << c.layout();
    if (c.parallel.expert > 1) {
      EXPECT_THAT(c.layout(), HasSubstr(fmt::format(" ep={} ", c.parallel.expert)));
    }
    if (c.parallel.pipeline != 1 || !c.summary) continue;
    EXPECT_LT(c.summary->devices[0].static_bytes, previous_static) << c.layout();
    previous_static = c.summary->devices[0].static_bytes;
  }
}

TEST(Explore, ExpertCandidatesNeedExperts) {
  const Result<Sweep> sw = parse_sweep(R"(
model: {layers: 8, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32000}
hardware: {preset: a100-80gb, gpus_per_node: 8, nodes: 2}
training: {global_batch: 64}
search: {expert: [1, 2]}
)",
                                       "ep.yaml");
  ASSERT_FALSE(sw.ok());
  EXPECT_THAT(sw.error().message, HasSubstr("search.expert[1]: 2 needs model.moe"));
}

TEST(Explore, ContextCandidatesNeedFlashAttention) {
  const Result<Sweep> sw = parse_sweep(R"(
model: {layers: 8, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32000}
hardware: {preset: a100-80gb, gpus_per_node: 8, nodes: 2}
training: {global_batch: 64}
search: {context: [1, 2]}
)",
                                       "cp.yaml");
  ASSERT_FALSE(sw.ok());
  EXPECT_THAT(sw.error().message, HasSubstr("search.context[1]: 2 needs model.attention: flash"));
}

TEST(Explore, SweepNeedsModelAndHardware) {
  const Result<Sweep> s = parse_sweep(
      "parallel: {pipeline: 2}\ntraining: {global_batch: 4}\ncosts: {fixed: {forward_s: 1, "
      "backward_s: 2}}\nsearch: {pipeline: [1, 2]}\n",
      "s.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("model: required in a sweep"));
}

TEST(Explore, SearchIsOnlyForSweeps) {
  const Result<Config> c = parse_config(kSweep, "sweep.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.error().message, HasSubstr("search: unknown key"));
}

}  // namespace
}  // namespace explore_test
}  // namespace ppsim
