// Measured runs: a CSV of configs and the iteration times measured for them
// on a real cluster, which `ppsim calibrate --measured` compares with the
// model's predictions and fits the hardware's efficiency parameters to
// (hardware_fit.h).
//
//   config,iteration_time_s,label,source
//   gpt-1.3b-p4t2.yaml,1.234,"1.3B, p=4, t=2",Megatron-LM log 2026-11-30
//
// Columns, in any order: `config` (a YAML config, relative to the CSV's
// folder) and `iteration_time_s` (the measured steady-state iteration, > 0)
// are required; `label` (default: the config as written), `source` (where
// the number came from, for people), `group` (rows of one workload on one
// machine that differ in layout or schedule, whose order the prediction
// should keep: order_agreement) and `series` (rows of one workload that
// differ only in their number of microbatches: series_lines) are optional. A field may be quoted
// ("a, b"; "" inside quotes is one "), and a quoted field may span lines.
// Blank lines are skipped. Every error names file:line, and an unknown or
// repeated column its name.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/status.h"
#include "sim/config/config.h"

namespace ppsim {

struct MeasuredRun {
  int line = 0;             // where its record starts in the CSV, for messages
  std::string config;       // as written
  std::string config_path;  // resolved against the CSV's folder
  double iteration_time_s = 0;
  std::string label;  // as given, else `config`
  std::string source;
  std::string group;   // empty: in no group
  std::string series;  // empty: in no series
};

struct MeasuredRuns {
  std::string path;  // the CSV, as given
  std::vector<MeasuredRun> runs;

  // "runs.csv:7", for messages about a row.
  std::string where(const MeasuredRun& run) const;
};

// Reads the CSV text; `path` names it in messages, and its folder resolves
// the configs. Errors: no header, a missing required column, an unknown or
// repeated column, a record with more or fewer fields than the header, an
// unterminated quote, an empty config, a time that is not a number > 0, no
// rows.
Result<MeasuredRuns> parse_measured_runs(std::string_view text, const std::string& path);
Result<MeasuredRuns> load_measured_runs(const std::string& path);

// Every row's config, read with the normal loader (load_config) with
// `overrides` applied to each (calibrate --measured --set), in row order.
// Errors name the row (file:line) and then the loader's message.
Result<std::vector<Config>> load_run_configs(const MeasuredRuns& runs,
                                             const std::vector<ConfigOverride>& overrides = {});

// Called as work completes, from one thread at a time: `done` of `total`.
using ProgressFn = std::function<void(size_t done, size_t total)>;

// The steady-state iteration time simulate() predicts for each config, in
// order, on `threads` threads (0: one per core). Each thread reuses one
// Engine; the results do not depend on the thread count. Any failure is an
// error: the first by index, its message prefixed by `name(index)`.
Result<std::vector<double>> predict_iteration_times(const std::vector<Config>& configs, int threads,
                                                    const std::function<std::string(size_t)>& name,
                                                    const ProgressFn& progress = {});

// (predicted - measured) / measured: > 0 when the model is slow.
double relative_error(double predicted_s, double measured_s);

struct ErrorSummary {
  double mean_abs = 0;
  double max_abs = 0;
};
ErrorSummary summarize_errors(const std::vector<double>& errors);

// One row's prediction against its measurement.
struct RowPrediction {
  const MeasuredRun* run = nullptr;
  double predicted_s = 0;
  int microbatches = 0;  // of its config: global_batch / (micro_batch * data)

  double error() const { return relative_error(predicted_s, run->iteration_time_s); }
};

// How well the predictions order the rows of each group (MeasuredRun::group)
// as they were measured: every pair of rows of one group with different
// measured times is concordant when the prediction orders it the same way (a
// predicted tie is not); a group of two or more rows is in order when all
// its pairs are. What a layout search needs from the model, more than small
// errors. The pairs predicted less than kRankingEvidence.close_gap apart
// (sim/plan/ranking_evidence.h) are also counted on their own.
struct OrderAgreement {
  int groups = 0;  // of two or more rows
  int groups_in_order = 0;
  int pairs = 0;  // with different measured times
  int concordant = 0;
  int close_pairs = 0;  // of `pairs`, predicted close
  int close_concordant = 0;
};
OrderAgreement order_agreement(const std::vector<RowPrediction>& rows);

// The rows of each series (MeasuredRun::series) fitted by least squares to
// a line in their microbatch count m, measured and predicted apart: time =
// constant + m * per_microbatch. The slope is the steady state (what a
// microbatch costs once the pipeline is full); the constant the fill, the
// drain and the optimizer step. Which of the two an error is in says where
// to look. Series in name order; a series with one microbatch count has no
// line (counts == 1, the figures 0).
struct SeriesLine {
  std::string series;
  int rows = 0;
  int counts = 0;  // distinct microbatch counts
  double measured_per_microbatch_s = 0;
  double predicted_per_microbatch_s = 0;
  double measured_constant_s = 0;
  double predicted_constant_s = 0;
};
std::vector<SeriesLine> series_lines(const std::vector<RowPrediction>& rows);

// Predicts every row (the measured-runs file without -o). Errors name the row.
Result<std::vector<RowPrediction>> predict_runs(const MeasuredRuns& runs,
                                                const std::vector<Config>& configs, int threads,
                                                const ProgressFn& progress = {});

}  // namespace ppsim
