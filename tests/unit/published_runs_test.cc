// The published measured runs of configs/published/ as a regression guard:
// the shipped presets' mean and largest error per source stay at or below
// the figures docs/validation.md reports. Deterministic (the simulator's
// figures, no timing); a change that makes the model worse against a
// source fails here, one that makes it better should lower the bound.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "sim/fit/measured_runs.h"

namespace ppsim {
namespace {

struct Source {
  const char* folder;
  double mean_abs_error;  // docs/validation.md, rounded up to the next 0.1%
  double max_abs_error;
};

// docs/validation.md, "Published runs" (uncalibrated shipped presets).
const Source kSources[] = {
    {"sc21", 0.034, 0.078},  {"zero-bubble", 0.066, 0.143}, {"mcore-h100", 0.023, 0.045},
    {"bloom", 0.110, 0.110}, {"llama3-405b", 0.093, 0.262},
};

ErrorSummary errors_of(const std::string& folder) {
  const std::string path =
      std::string(PPSIM_SOURCE_DIR "/configs/published/") + folder + "/measured.csv";
  const Result<MeasuredRuns> runs = load_measured_runs(path);
  EXPECT_TRUE(runs.ok()) << (runs.ok() ? "" : runs.error().message);
  if (!runs.ok()) return ErrorSummary{1, 1};
  const Result<std::vector<Config>> configs = load_run_configs(*runs);
  EXPECT_TRUE(configs.ok()) << (configs.ok() ? "" : configs.error().message);
  if (!configs.ok()) return ErrorSummary{1, 1};
  const Result<std::vector<RowPrediction>> rows = predict_runs(*runs, *configs, 0);
  EXPECT_TRUE(rows.ok()) << (rows.ok() ? "" : rows.error().message);
  if (!rows.ok()) return ErrorSummary{1, 1};
  std::vector<double> errors;
  for (const RowPrediction& row : *rows) errors.push_back(row.error());
  return summarize_errors(errors);
}

void PrintTo(const Source& source, std::ostream* os) { *os << source.folder; }

class PublishedRuns : public testing::TestWithParam<Source> {};

TEST_P(PublishedRuns, ErrorStaysWithinWhatTheDocsReport) {
  const Source& source = GetParam();
  const ErrorSummary summary = errors_of(source.folder);
  EXPECT_LE(summary.mean_abs, source.mean_abs_error) << source.folder;
  EXPECT_LE(summary.max_abs, source.max_abs_error) << source.folder;
}

INSTANTIATE_TEST_SUITE_P(Sources, PublishedRuns, testing::ValuesIn(kSources),
                         [](const testing::TestParamInfo<Source>& info) {
                           std::string name = info.param.folder;
                           for (char& c : name) c = (c == '-' || c == '.') ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace ppsim
