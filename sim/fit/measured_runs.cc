#include "sim/fit/measured_runs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "sim/fit/csv_records.h"
#include "sim/plan/parallel.h"
#include "sim/plan/ranking_evidence.h"
#include "sim/plan/simulate.h"

namespace ppsim {
namespace {

// The targets of read_row are in this order.
constexpr CsvColumn kColumns[] = {
    {"config", true},  {"iteration_time_s", true}, {"label", false},
    {"source", false}, {"group", false},           {"series", false},
};

std::string resolve(const std::string& config, const std::string& csv_path) {
  const std::filesystem::path p(config);
  if (p.is_absolute()) return config;
  const std::filesystem::path folder = std::filesystem::path(csv_path).parent_path();
  return (folder / p).lexically_normal().string();
}

Result<MeasuredRun> read_row(const CsvRecord& record, const std::vector<int>& columns,
                             const std::string& path) {
  Result<MeasuredRun> run =
      read_csv_record<MeasuredRun>(record, columns, path, kColumns, [](MeasuredRun& r, int column) {
        const CsvTarget targets[] = {csv_text(&r.config), csv_number(&r.iteration_time_s),
                                     csv_text(&r.label),  csv_text(&r.source),
                                     csv_text(&r.group),  csv_text(&r.series)};
        return targets[column];
      });
  if (!run.ok()) return run;
  if (run->config.empty()) return Error{fmt::format("{}:{}: config: empty", path, run->line)};
  run->config_path = resolve(run->config, path);
  if (run->label.empty()) run->label = run->config;
  return run;
}

}  // namespace

std::string MeasuredRuns::where(const MeasuredRun& run) const {
  return fmt::format("{}:{}", path, run.line);
}

Result<MeasuredRuns> parse_measured_runs(std::string_view text, const std::string& path) {
  return read_csv_table<MeasuredRuns, MeasuredRun>(
      text, path, kColumns, "config,iteration_time_s,label", "measured runs", read_row);
}

Result<MeasuredRuns> load_measured_runs(const std::string& path) {
  return load_csv_file(path, parse_measured_runs);
}

Result<std::vector<Config>> load_run_configs(const MeasuredRuns& runs,
                                             const std::vector<ConfigOverride>& overrides) {
  std::vector<Config> configs;
  configs.reserve(runs.runs.size());
  for (const MeasuredRun& run : runs.runs) {
    Result<Config> config = load_config(run.config_path, overrides);
    if (!config.ok()) return Error{fmt::format("{}: {}", runs.where(run), config.error().message)};
    configs.push_back(std::move(*config));
  }
  return configs;
}

Result<std::vector<double>> predict_iteration_times(const std::vector<Config>& configs, int threads,
                                                    const std::function<std::string(size_t)>& name,
                                                    const ProgressFn& progress) {
  const size_t n = configs.size();
  std::vector<double> times(n);
  std::vector<std::optional<Error>> errors(n);
  std::mutex progress_mutex;
  size_t done = 0;
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  std::vector<Engine> engines(thread_count(threads));
  parallel_for(all, engines, [&](size_t i, Engine& engine) {
    Result<Simulation> sim = simulate(configs[i], &engine, nullptr, Keep::kSummary);
    if (sim.ok()) {
      times[i] = sim->summary.iteration_time_s;
    } else {
      errors[i] = sim.error();
    }
    if (progress) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      progress(++done, n);
    }
  });
  for (size_t i = 0; i < n; ++i) {
    if (errors[i]) return Error{fmt::format("{}: {}", name(i), errors[i]->message)};
  }
  return times;
}

double relative_error(double predicted_s, double measured_s) {
  return (predicted_s - measured_s) / measured_s;
}

ErrorSummary summarize_errors(const std::vector<double>& errors) {
  ErrorSummary summary;
  if (errors.empty()) return summary;
  for (double e : errors) {
    summary.mean_abs += std::abs(e);
    summary.max_abs = std::max(summary.max_abs, std::abs(e));
  }
  summary.mean_abs /= static_cast<double>(errors.size());
  return summary;
}

OrderAgreement order_agreement(const std::vector<RowPrediction>& rows) {
  std::map<std::string, std::vector<const RowPrediction*>> groups;
  for (const RowPrediction& row : rows) {
    if (!row.run->group.empty()) groups[row.run->group].push_back(&row);
  }
  OrderAgreement agreement;
  for (const auto& [name, members] : groups) {
    if (members.size() < 2) continue;
    ++agreement.groups;
    bool in_order = true;
    for (size_t i = 0; i < members.size(); ++i) {
      for (size_t j = i + 1; j < members.size(); ++j) {
        const double measured =
            members[i]->run->iteration_time_s - members[j]->run->iteration_time_s;
        if (measured == 0) continue;
        const double predicted = members[i]->predicted_s - members[j]->predicted_s;
        ++agreement.pairs;
        const bool concordant = (measured > 0 && predicted > 0) || (measured < 0 && predicted < 0);
        agreement.concordant += concordant;
        in_order &= concordant;
        if (relative_gap(members[i]->predicted_s, members[j]->predicted_s) <
            kRankingEvidence.close_gap) {
          ++agreement.close_pairs;
          agreement.close_concordant += concordant;
        }
      }
    }
    agreement.groups_in_order += in_order;
  }
  return agreement;
}

Result<std::vector<RowPrediction>> predict_runs(const MeasuredRuns& runs,
                                                const std::vector<Config>& configs, int threads,
                                                const ProgressFn& progress) {
  PPSIM_CHECK(configs.size() == runs.runs.size());
  Result<std::vector<double>> times = predict_iteration_times(
      configs, threads, [&](size_t i) { return runs.where(runs.runs[i]); }, progress);
  if (!times.ok()) return times.error();
  std::vector<RowPrediction> rows;
  for (size_t i = 0; i < configs.size(); ++i) {
    rows.push_back({&runs.runs[i], (*times)[i], configs[i].num_microbatches()});
  }
  return rows;
}

namespace {

// Ordinary least squares through (x, y): {slope, intercept}, either sign
// (calibrate.cc's fit_line is another fit: non-negative, on relative
// residuals). REQUIRES two distinct x.
std::pair<double, double> least_squares_line(const std::vector<double>& x,
                                             const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mean_x = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double mean_y = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mean_x) * (y[i] - mean_y);
    sxx += (x[i] - mean_x) * (x[i] - mean_x);
  }
  PPSIM_CHECK(sxx > 0);
  const double slope = sxy / sxx;
  return {slope, mean_y - slope * mean_x};
}

}  // namespace

std::vector<SeriesLine> series_lines(const std::vector<RowPrediction>& rows) {
  std::map<std::string, std::vector<const RowPrediction*>> series;
  for (const RowPrediction& row : rows) {
    if (!row.run->series.empty()) series[row.run->series].push_back(&row);
  }
  std::vector<SeriesLine> lines;
  for (const auto& [name, members] : series) {
    SeriesLine line{name, static_cast<int>(members.size())};
    std::vector<double> counts, measured, predicted;
    for (const RowPrediction* row : members) {
      counts.push_back(row->microbatches);
      measured.push_back(row->run->iteration_time_s);
      predicted.push_back(row->predicted_s);
    }
    line.counts = static_cast<int>(std::set<double>(counts.begin(), counts.end()).size());
    if (line.counts >= 2) {
      std::tie(line.measured_per_microbatch_s, line.measured_constant_s) =
          least_squares_line(counts, measured);
      std::tie(line.predicted_per_microbatch_s, line.predicted_constant_s) =
          least_squares_line(counts, predicted);
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace ppsim
