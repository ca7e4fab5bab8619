#include "sim/report/compare_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/core/csv_field.h"
#include "sim/core/json.h"
#include "sim/plan/ranking_evidence.h"
#include "sim/report/evidence_note.h"
#include "sim/report/summary.h"

namespace ppsim {
namespace {

double gib(double bytes) { return bytes / (1ull << 30); }

// The shortest iteration of the rows that ran within memory; 0 for none.
double fastest_feasible_s(const std::vector<ComparedSchedule>& rows) {
  double best = 0;
  for (const ComparedSchedule& row : rows) {
    if (!row.feasible || !row.summary) continue;
    const double t = row.summary->iteration_time_s;
    if (best == 0 || t < best) best = t;
  }
  return best;
}

// A row's iteration against the fastest feasible one: "fastest", "+12.5%"
// (negative for a row over memory that would be faster), "-" without one.
std::string vs_fastest(const Summary& s, double fastest_s) {
  if (fastest_s <= 0) return "-";
  if (s.iteration_time_s == fastest_s) return "fastest";
  return fmt::format("{:+.1f}%", 100 * (s.iteration_time_s / fastest_s - 1));
}

// The feasible schedules within kRankingEvidence.close_gap of the fastest,
// when the layer times are the analytic model's and two or more are; else "".
std::string close_schedules_note(const std::vector<ComparedSchedule>& rows, const Config& config) {
  const double fastest_s = fastest_feasible_s(rows);
  if (!analytic_layer_times(config) || fastest_s <= 0) return "";
  std::vector<std::string> close;
  for (const ComparedSchedule& row : rows) {
    if (row.feasible && row.summary &&
        relative_gap(row.summary->iteration_time_s, fastest_s) < kRankingEvidence.close_gap) {
      close.push_back(row.entry);
    }
  }
  if (close.size() < 2) return "";
  std::string which = close.front();
  for (size_t i = 1; i < close.size(); ++i) {
    which += (i + 1 == close.size() ? " and " : ", ") + close[i];
  }
  return close_ranking_note(which);
}

}  // namespace

std::string comparison_caveat(const std::vector<ComparedSchedule>& rows, const Config& config) {
  return close_schedules_note(rows, config) + accuracy_notes(config);
}

std::string format_comparison_table(const std::vector<ComparedSchedule>& rows,
                                    const Config& config) {
  std::string out =
      fmt::format("{:<22} {:>3} {:>14} {:>12} {:>8} {:>8} {:>15} {:>6}  {}\n", "schedule", "v",
                  "iteration", "samples/s", "vs best", "bubble", "peak mem GiB", "stale", "note");
  const double fastest_s = fastest_feasible_s(rows);
  for (const ComparedSchedule& row : rows) {
    if (!row.summary) {
      out += fmt::format("{:<22} {:>3} {:>14} {:>12} {:>8} {:>8} {:>15} {:>6}  cannot run: {}\n",
                         row.entry, "-", "-", "-", "-", "-", "-", "-", row.reason);
      continue;
    }
    const Summary& s = *row.summary;
    const DeviceSummary& top = *fullest_device(s);
    int staleness = 0;
    for (const StageWeights& w : s.weights) staleness = std::max(staleness, w.staleness);
    out += fmt::format("{:<22} {:>3} {:>14} {:>12.4g} {:>8} {:>7.2f}% {:>10.2f} (r{}) {:>6}",
                       row.entry, s.virtual_stages, format_duration(s.iteration_time_s),
                       s.throughput.samples_per_s, vs_fastest(s, fastest_s),
                       100.0 * s.bubble_fraction, gib(top.peak_memory_bytes), top.rank,
                       s.weights.empty() ? "-" : std::to_string(staleness));
    if (!row.feasible) out += "  " + row.reason;
    out += '\n';
  }
  return out + comparison_caveat(rows, config);
}

std::string comparison_to_json(const std::vector<ComparedSchedule>& rows) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().key("results").begin_array();
  for (const ComparedSchedule& row : rows) {
    w.begin_object().field("entry", row.entry).field("feasible", row.feasible);
    if (!row.reason.empty()) w.field("reason", row.reason);
    w.key("summary");
    if (row.summary) {
      write_summary(w, *row.summary);
    } else {
      w.null();
    }
    w.end_object();
  }
  w.end_array().end_object();
  out += '\n';
  return out;
}

std::string comparison_to_csv(const std::vector<ComparedSchedule>& rows) {
  int ranks = 0;
  for (const auto& row : rows) {
    if (row.summary) ranks = std::max(ranks, static_cast<int>(row.summary->devices.size()));
  }
  std::string out =
      "schedule,virtual_stages,feasible,reason,iteration_time_s,samples_per_s,tokens_per_s,"
      "bubble_fraction,mfu";
  for (int r = 0; r < ranks; ++r) out += fmt::format(",peak_memory_bytes_rank{}", r);
  out += '\n';
  const auto optional = [](const std::optional<double>& v) {
    return v ? fmt::format("{}", *v) : std::string();
  };
  for (const ComparedSchedule& row : rows) {
    out += fmt::format("{},", row.entry);
    if (row.summary) out += fmt::format("{}", row.summary->virtual_stages);
    out += fmt::format(",{},{}", row.feasible ? "true" : "false", csv_quoted(row.reason));
    if (row.summary) {
      const Summary& s = *row.summary;
      out += fmt::format(",{},{},{},{},{}", s.iteration_time_s, s.throughput.samples_per_s,
                         optional(s.throughput.tokens_per_s), s.bubble_fraction,
                         optional(s.throughput.mfu));
      for (const DeviceSummary& d : s.devices) out += fmt::format(",{}", d.peak_memory_bytes);
    } else {
      out += ",,,,,";
    }
    out += '\n';
  }
  return out;
}

}  // namespace ppsim
