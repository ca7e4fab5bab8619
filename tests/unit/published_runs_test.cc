// The published measured runs of configs/published/ as a regression guard:
// the shipped presets' mean and largest error per source stay at or below
// the figures docs/validation.md reports. Deterministic (the simulator's
// figures, no timing); a change that makes the model worse against a
// source fails here, one that makes it better should lower the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/config/config.h"
#include "sim/cost/cost_model.h"
#include "sim/fit/measured_runs.h"
#include "sim/plan/accuracy_evidence.h"
#include "sim/plan/ranking_evidence.h"

namespace ppsim {
namespace published_runs_test {
namespace {

struct Source {
  const char* folder;
  double mean_abs_error;  // docs/validation.md, rounded up to the next 0.1%
  double max_abs_error;
  // Of the pairs of rows in one group (measured.csv's group column), the
  // share the model orders as measured: docs/validation.md, rounded down;
  // -1: the source has no groups.
  double min_ordered_pairs = -1;
};

// docs/validation.md, "Published runs" (uncalibrated shipped presets).
const Source kSources[] = {
    {"sc21", 0.034, 0.078},
    {"zero-bubble", 0.066, 0.144, 0.929},
    {"mcore-h100", 0.020, 0.029},
    {"bloom", 0.035, 0.035},
    {"llama3-405b", 0.030, 0.050},
    {"bloom-layouts", 0.070, 0.140, 0.794},
    {"korthikanti2022", 0.048, 0.111, 1.0},
    {"megatron-readme", 0.045, 0.045},
    {"mt-nlg", 0.164, 0.183},
    {"nemo-automodel", 0.170, 0.264},
    {"llm-foundry", 0.080, 0.344},
    {"nemo-fp8", 0.046, 0.116},
    {"nemotron4-340b", 0.039, 0.039},
    {"megatron-bridge", 0.113, 0.155},
    {"megatron-bridge-25.11", 0.097, 0.222, 0.333},
    {"nemo-long-context", 0.074, 0.131},
};

// docs/validation.md, the stage times of Zero Bubble Table 9, rounded up.
constexpr double kTable9MeanError = 0.010;
constexpr double kTable9MaxError = 0.035;

// What the test reads of a source's predictions, taken while the measured
// runs they point into are alive.
struct SourceFigures {
  ErrorSummary errors{1, 1};
  OrderAgreement order;
  size_t rows = 0;
  std::vector<double> moe_errors;      // of the rows whose model has routed experts
  std::vector<double> context_errors;  // of the rows with context parallelism
};

SourceFigures predict_source(const std::string& folder) {
  const std::string path =
      std::string(PPSIM_SOURCE_DIR "/configs/published/") + folder + "/measured.csv";
  const Result<MeasuredRuns> runs = load_measured_runs(path);
  EXPECT_TRUE(runs.ok()) << (runs.ok() ? "" : runs.error().message);
  if (!runs.ok()) return {};
  const Result<std::vector<Config>> configs = load_run_configs(*runs);
  EXPECT_TRUE(configs.ok()) << (configs.ok() ? "" : configs.error().message);
  if (!configs.ok()) return {};
  const Result<std::vector<RowPrediction>> rows = predict_runs(*runs, *configs, 0);
  EXPECT_TRUE(rows.ok()) << (rows.ok() ? "" : rows.error().message);
  if (!rows.ok()) return {};
  std::vector<double> errors;
  std::vector<double> moe_errors;
  std::vector<double> context_errors;
  for (size_t i = 0; i < rows->size(); ++i) {
    errors.push_back((*rows)[i].error());
    const Config& config = (*configs)[i];
    if (config.model && config.model->moe) moe_errors.push_back((*rows)[i].error());
    if (config.parallel.context > 1) context_errors.push_back((*rows)[i].error());
  }
  return SourceFigures{summarize_errors(errors), order_agreement(*rows), rows->size(), moe_errors,
                       context_errors};
}

// Each source predicted once per process: two tests read them.
const SourceFigures& figures_of(const std::string& folder) {
  static std::map<std::string, SourceFigures> figures;
  auto it = figures.find(folder);
  if (it == figures.end()) it = figures.emplace(folder, predict_source(folder)).first;
  return it->second;
}

void PrintTo(const Source& source, std::ostream* os) { *os << source.folder; }

class PublishedRuns : public testing::TestWithParam<Source> {};

TEST_P(PublishedRuns, ErrorStaysWithinWhatTheDocsReport) {
  const Source& source = GetParam();
  const SourceFigures figures = figures_of(source.folder);
  ASSERT_GT(figures.rows, 0u) << source.folder;
  EXPECT_LE(figures.errors.mean_abs, source.mean_abs_error) << source.folder;
  EXPECT_LE(figures.errors.max_abs, source.max_abs_error) << source.folder;
  const OrderAgreement& order = figures.order;
  if (source.min_ordered_pairs >= 0) {
    ASSERT_GT(order.pairs, 0) << source.folder;
    EXPECT_GE(static_cast<double>(order.concordant) / order.pairs, source.min_ordered_pairs)
        << source.folder << ": " << order.concordant << " of " << order.pairs;
  }
}

// The figures `ppsim explore` quotes (sim/plan/ranking_evidence.h) are
// the pairs of every source with groups, as the shipped model predicts
// them: a change to the model that moves them updates the header and
// docs/validation.md, "Telling layouts apart".
TEST(PublishedRuns, RankingEvidenceIsWhatTheGroupsShow) {
  OrderAgreement all;
  for (const Source& source : kSources) {
    if (source.min_ordered_pairs < 0) continue;  // a source with groups has its order checked
    const OrderAgreement& order = figures_of(source.folder).order;
    all.pairs += order.pairs;
    all.concordant += order.concordant;
    all.close_pairs += order.close_pairs;
    all.close_concordant += order.close_concordant;
  }
  const RankingEvidence& e = kRankingEvidence;
  EXPECT_EQ(all.close_pairs, e.close_pairs);
  EXPECT_EQ(all.close_concordant, e.close_in_order);
  EXPECT_EQ(all.pairs - all.close_pairs, e.far_pairs);
  EXPECT_EQ(all.concordant - all.close_concordant, e.far_in_order);
}

// The errors of the rows `of` picks from every source, against the figures
// reports quote for such a config (sim/plan/accuracy_evidence.h).
void expect_evidence(std::vector<double> SourceFigures::*of, const AccuracyEvidence& e) {
  std::vector<double> errors;
  for (const Source& source : kSources) {
    const std::vector<double>& picked = figures_of(source.folder).*of;
    errors.insert(errors.end(), picked.begin(), picked.end());
  }
  ASSERT_EQ(static_cast<int>(errors.size()), e.rows);
  EXPECT_NEAR(summarize_errors(errors).mean_abs, e.mean_abs_error, 0.0005);
  EXPECT_NEAR(*std::min_element(errors.begin(), errors.end()), e.most_optimistic, 0.0005);
  EXPECT_NEAR(*std::max_element(errors.begin(), errors.end()), e.most_pessimistic, 0.0005);
}

// Every published MoE row, as the shipped model predicts it: a change to
// the model that moves them updates the header and docs/validation.md,
// "Mixture of experts: the measured runs".
TEST(PublishedRuns, MoeEvidenceIsWhatTheMixtureRowsShow) {
  expect_evidence(&SourceFigures::moe_errors, kMoeEvidence);
}

// Every published row with context parallelism: docs/validation.md,
// "Context parallelism: the measured runs".
TEST(PublishedRuns, ContextEvidenceIsWhatTheContextRowsShow) {
  expect_evidence(&SourceFigures::context_errors, kContextEvidence);
}

INSTANTIATE_TEST_SUITE_P(Sources, PublishedRuns, testing::ValuesIn(kSources),
                         [](const testing::TestParamInfo<Source>& info) {
                           std::string name = info.param.folder;
                           for (char& c : name) c = (c == '-' || c == '.') ? '_' : c;
                           return name;
                         });

// Zero Bubble Table 9: the stage times the paper's code profiled, against
// the first middle stage of the ZB-2p config of the same run.
struct StageTimes {
  std::string model;  // "1.5B"
  int microbatches = 0;
  double forward_ms = 0;
  double input_grad_ms = 0;
  double weight_grad_ms = 0;
};

// model,pipeline,microbatches,forward_ms,input_grad_ms,weight_grad_ms,p2p_ms,source
std::vector<StageTimes> read_table9() {
  std::ifstream in(PPSIM_SOURCE_DIR "/configs/published/zero-bubble/table9_stage_times.csv");
  EXPECT_TRUE(in.good());
  std::vector<StageTimes> rows;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream cells(line);
    std::vector<std::string> f(7);
    for (std::string& cell : f) std::getline(cells, cell, ',');
    rows.push_back(
        StageTimes{f[0], std::stoi(f[2]), std::stod(f[3]), std::stod(f[4]), std::stod(f[5])});
  }
  return rows;
}

// Issue 12's target is 5 % for each; the mean and the largest error are
// held to what docs/validation.md reports for the twelve runs (F, I and W:
// mean 1.0 %, max 3.5 %).
TEST(PublishedRuns, ZeroBubbleStageTimes) {
  const std::vector<StageTimes> rows = read_table9();
  ASSERT_EQ(rows.size(), 12);
  std::vector<double> errors;
  for (const StageTimes& row : rows) {
    std::string model = row.model;
    std::transform(model.begin(), model.end(), model.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    const std::string path = std::string(PPSIM_SOURCE_DIR "/configs/published/zero-bubble/") +
                             model + "-zb2p-m" + std::to_string(row.microbatches) + ".yaml";
    const Result<Config> config = load_config(path);
    ASSERT_TRUE(config.ok()) << config.error().message;
    const Result<CostTable> table = build_cost_table(
        *config, interleaved_stage_rank(config->num_stages(), config->parallel.pipeline));
    ASSERT_TRUE(table.ok()) << table.error().message;
    const StageCost& middle = table->stages[1];
    const auto ms = [](Picos t) { return static_cast<double>(t) / 1e9; };
    const double predicted[] = {ms(middle.forward), ms(input_grad_time(middle)),
                                ms(middle.weight_grad)};
    const double measured[] = {row.forward_ms, row.input_grad_ms, row.weight_grad_ms};
    for (int k = 0; k < 3; ++k) {
      errors.push_back(predicted[k] / measured[k] - 1);
      EXPECT_LE(std::abs(errors.back()), 0.05) << path << " phase "
                                               << "FIW"[k];
    }
  }
  const ErrorSummary summary = summarize_errors(errors);
  EXPECT_LE(summary.mean_abs, kTable9MeanError);
  EXPECT_LE(summary.max_abs, kTable9MaxError);
}

}  // namespace
}  // namespace published_runs_test
}  // namespace ppsim
