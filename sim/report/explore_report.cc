#include "sim/report/explore_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/core/csv_field.h"
#include "sim/core/json.h"
#include "sim/plan/ranking_evidence.h"
#include "sim/report/evidence_note.h"
#include "sim/report/summary.h"

namespace ppsim {
namespace {

constexpr double kGiB = 1ull << 30;

// The peak memory of the fullest rank.
int64_t peak_bytes(const Summary& s) {
  const DeviceSummary* top = fullest_device(s);
  return top == nullptr ? 0 : top->peak_memory_bytes;
}

// How much longer than the best candidate's a candidate's iteration is (the
// candidates share the global batch, so their throughputs are in the
// inverse ratio).
double gap_to_best(const ExploreResult& r, size_t candidate) {
  return relative_gap(r.candidates[candidate].summary->iteration_time_s,
                      r.candidates[r.ranking.front()].summary->iteration_time_s);
}

// The ranked candidates predicted within kRankingEvidence.close_gap of the
// best, the best included: a prefix of the ranking.
size_t close_to_best(const ExploreResult& r) {
  size_t n = 0;
  while (n < r.ranking.size() && gap_to_best(r, r.ranking[n]) < kRankingEvidence.close_gap) ++n;
  return n;
}

// The published runs' errors where the best candidate is of a kind with
// thinner evidence (its model's routed experts, which every candidate
// shares; its context parallelism); "" without a ranked candidate.
std::string explore_accuracy_note(const ExploreResult& r) {
  return r.ranking.empty() ? "" : accuracy_notes(r.configs[r.ranking.front()]);
}

}  // namespace

std::string explore_close_note(const ExploreResult& r, size_t shown, bool numbered) {
  if (r.ranking.empty() || !analytic_layer_times(r.configs[r.ranking.front()])) return "";
  const size_t close = close_to_best(r);
  shown = std::min(shown, r.ranking.size());
  if (close < 2 || shown < 2) return "";
  const size_t listed = std::min(close, shown);
  std::string which =
      numbered ? fmt::format("#1 to #{}", listed) : fmt::format("The first {} candidates", listed);
  if (close > shown) {
    which += fmt::format(", and {} more {},", close - shown,
                         numbered ? "below the table" : "not in this report");
  }
  return close_ranking_note(which);
}

std::string explore_report_caveat(const ExploreResult& r, size_t shown) {
  return explore_close_note(r, shown, false) + explore_accuracy_note(r);
}

std::string format_explore_table(const ExploreResult& r, size_t top_k) {
  const auto count = [&](CandidateStatus status) {
    return std::count_if(r.candidates.begin(), r.candidates.end(),
                         [status](const Candidate& c) { return c.status == status; });
  };
  std::string out = fmt::format(
      "{} candidates: {} simulated and within the {:.1f} GiB cap, {} over the cap, {} invalid, "
      "{} pruned by static memory, {} pruned by the lower bound",
      r.candidates.size(), count(CandidateStatus::kSimulated), r.memory_cap_bytes / kGiB,
      count(CandidateStatus::kOverCap), count(CandidateStatus::kInvalid),
      count(CandidateStatus::kPrunedMemory), count(CandidateStatus::kPrunedBound));
  if (const auto same = count(CandidateStatus::kEquivalent); same > 0) {
    out += fmt::format(
        "; {} more with a one-stage pipeline give a ranked candidate's figures under another "
        "schedule",
        same);
  }
  if (r.layouts_skipped > 0) {
    out += fmt::format(
        " ({} layouts skipped: p x t x cp does not divide the GPUs, or EP the d x cp ranks)",
        r.layouts_skipped);
  }
  out += "\n\n";
  const auto rows = [&](const std::vector<size_t>& which, size_t limit) {
    std::string text = fmt::format("{:>4} {:>12} {:>12} {:>6} {:>9} {:>7}  {}\n", "#", "samples/s",
                                   "iteration", "MFU", "peak GiB", "vs #1", "layout");
    for (size_t k = 0; k < std::min(limit, which.size()); ++k) {
      const Candidate& c = r.candidates[which[k]];
      const Summary& s = *c.summary;
      const double gap = gap_to_best(r, which[k]);
      text += fmt::format(
          "{:>4} {:>12.4g} {:>12} {:>5.1f}% {:>9.2f} {:>7}  {}\n", k + 1,
          s.throughput.samples_per_s, format_duration(s.iteration_time_s),
          100.0 * s.throughput.mfu.value_or(0), peak_bytes(s) / kGiB,
          which[k] == r.ranking.front() ? std::string("-") : fmt::format("+{:.1f}%", 100 * gap),
          c.layout());
    }
    return text;
  };
  if (r.ranking.empty()) {
    out += "no candidate fits: see the CSV or JSON output for every candidate's reason\n";
    return out;
  }
  out += fmt::format("top {} by throughput\n", std::min(top_k, r.ranking.size()));
  out += rows(r.ranking, top_k);
  out += explore_close_note(r, top_k, true);
  out += "\nPareto front (throughput against peak memory)\n";
  out += rows(r.pareto, r.pareto.size());
  out += explore_accuracy_note(r);
  return out;
}

std::string explore_to_csv(const ExploreResult& r) {
  std::string out =
      "pipeline,tensor,data,context,expert,virtual_stages,micro_batch,schedule,recompute,"
      "zero_stage,"
      "status,"
      "reason,lower_bound_s,iteration_time_s,samples_per_s,tokens_per_s,mfu,bubble_fraction,"
      "peak_memory_bytes\n";
  for (const Candidate& c : r.candidates) {
    const std::string reason = csv_quoted(c.reason);
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}", c.parallel.pipeline,
                       c.parallel.tensor, c.parallel.data, c.parallel.context, c.parallel.expert,
                       c.parallel.virtual_stages, c.micro_batch, to_string(c.schedule),
                       to_string(c.recompute), c.zero_stage, to_string(c.status), reason,
                       c.lower_bound_s);
    if (c.summary) {
      const Summary& s = *c.summary;
      out += fmt::format(",{},{},{},{},{},{}\n", s.iteration_time_s, s.throughput.samples_per_s,
                         s.throughput.tokens_per_s.value_or(0), s.throughput.mfu.value_or(0),
                         s.bubble_fraction, peak_bytes(s));
    } else {
      out += ",,,,,,\n";
    }
  }
  return out;
}

std::string explore_to_json(const ExploreResult& r) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().field("memory_cap_bytes", r.memory_cap_bytes);
  w.key("candidates").begin_array();
  for (const Candidate& c : r.candidates) {
    w.begin_object();
    w.key("layout").begin_object();
    w.field("pipeline", c.parallel.pipeline).field("tensor", c.parallel.tensor);
    w.field("data", c.parallel.data).field("context", c.parallel.context);
    w.field("expert", c.parallel.expert);
    w.field("virtual_stages", c.parallel.virtual_stages);
    w.field("micro_batch", c.micro_batch).field("schedule", to_string(c.schedule));
    w.field("recompute", to_string(c.recompute)).field("zero_stage", c.zero_stage);
    w.key("layers_per_stage").begin_array();
    for (int l : c.parallel.layers_per_stage) w.value(l);
    w.end_array();
    w.end_object();
    w.field("status", to_string(c.status)).field("feasible", c.feasible());
    if (!c.reason.empty()) w.field("reason", c.reason);
    w.field("lower_bound_s", c.lower_bound_s);
    if (c.summary) {
      w.key("summary");
      write_summary(w, *c.summary);
    }
    w.end_object();
  }
  w.end_array();
  w.key("ranking").begin_array();
  for (size_t i : r.ranking) w.value(static_cast<int64_t>(i));
  w.end_array();
  w.key("pareto").begin_array();
  for (size_t i : r.pareto) w.value(static_cast<int64_t>(i));
  w.end_array();
  w.field("close_gap", kRankingEvidence.close_gap);
  w.field("close_to_best", static_cast<int64_t>(close_to_best(r)));
  w.end_object();
  out += '\n';
  return out;
}

}  // namespace ppsim
