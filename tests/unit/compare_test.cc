#include "sim/plan/compare.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "sim/config/config.h"
#include "sim/plan/accuracy_evidence.h"
#include "sim/plan/ranking_evidence.h"
#include "sim/report/compare_report.h"
#include "sim/report/evidence_note.h"

namespace ppsim {
namespace compare_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Four A100s (80 GiB each) and stages that keep 30e9 bytes per microbatch:
// 1F1B holds min(p - i, m) microbatches on rank i, 4 x 30e9 = 120e9 bytes on
// rank 0 (111.8 GiB: over), 2 x 30e9 = 60e9 on rank 2 (55.9 GiB: fits).
constexpr const char* kTight = R"(
hardware: {preset: a100-80gb, gpus_per_node: 4, nodes: 1}
parallel: {pipeline: 4}
training: {global_batch: 8}
costs:
  fixed: {forward_s: 1.0, backward_s: 2.0, activation_bytes: 30.0e9}
)";

// Rows that ran in 10, 10.3, 10.6 and 12 s within memory, one over memory
// in 9 s and one that cannot run: each against the fastest feasible row
// (10 s), and a note on the two less than 5 % apart when the layer times
// are the analytic model's.
std::vector<ComparedSchedule> timed_rows() {
  std::vector<ComparedSchedule> rows;
  for (const auto& [entry, seconds, feasible] :
       {std::tuple{"a", 10.3, true}, std::tuple{"b", 10.0, true}, std::tuple{"c", 10.6, true},
        std::tuple{"d", 12.0, true}, std::tuple{"e", 9.0, false}}) {
    ComparedSchedule row{entry, feasible, feasible ? "" : "over memory", Summary{}, {}};
    row.summary->iteration_time_s = seconds;
    row.summary->devices.push_back(DeviceSummary{});
    rows.push_back(row);
  }
  rows.push_back(ComparedSchedule{"f", false, "needs more microbatches", {}, {}});
  return rows;
}

TEST(CompareTable, EachRowAgainstTheFastestAndTheCloseOnesNamed) {
  ASSERT_EQ(kRankingEvidence.close_gap, 0.05);
  Config analytic;
  const std::string table = format_comparison_table(timed_rows(), analytic);
  const auto row_of = [&](const std::string& entry) {
    const size_t at = table.find("\n" + entry + " ");
    return at == std::string::npos ? "" : table.substr(at + 1, table.find('\n', at + 1) - at - 1);
  };
  EXPECT_THAT(row_of("a"), HasSubstr("   +3.0% "));
  EXPECT_THAT(row_of("b"), HasSubstr("  fastest "));
  EXPECT_THAT(row_of("c"), HasSubstr("   +6.0% "));
  EXPECT_THAT(row_of("d"), HasSubstr("  +20.0% "));
  EXPECT_THAT(row_of("e"), HasSubstr("  -10.0% "));
  EXPECT_THAT(row_of("f"), HasSubstr("cannot run: needs more microbatches"));
  EXPECT_THAT(table, HasSubstr("\na and b are predicted within 5 % of each other"));
  Config profiled;
  profiled.profile_path = "profile.yaml";
  EXPECT_THAT(format_comparison_table(timed_rows(), profiled), Not(HasSubstr("predicted within")));
}

// A model with routed experts, priced by the analytic model, gets the
// published MoE runs' errors under the table (sim/plan/accuracy_evidence.h); a
// dense one, or one with fixed layer times, does not.
TEST(CompareTable, ExpertsCarryTheMixtureEvidence) {
  Config moe;
  moe.model = ModelSpec{};
  moe.model->moe = MoeSpec{};
  const std::string table = format_comparison_table(timed_rows(), moe);
  EXPECT_THAT(table, HasSubstr(fmt::format("on {} published mixture-of-experts runs the predicted "
                                           "iteration time was -22 to +26 % off",
                                           kMoeEvidence.rows)));
  Config dense;
  dense.model = ModelSpec{};
  EXPECT_THAT(format_comparison_table(timed_rows(), dense), Not(HasSubstr("mixture-of-experts")));
  moe.fixed.forward_s = {1.0};
  EXPECT_EQ(moe_accuracy_note(moe), "");
}

// A layout with context parallelism gets the published context-parallel
// runs' errors; one without, or with a measured profile, does not; a
// mixture of experts with context parallelism gets both notes.
TEST(CompareTable, ContextParallelismCarriesItsEvidence) {
  Config ring;
  ring.model = ModelSpec{};
  ring.parallel.context = 2;
  const std::string table = format_comparison_table(timed_rows(), ring);
  EXPECT_THAT(table,
              HasSubstr(fmt::format("on {} published runs with context parallelism the predicted "
                                    "iteration time was -13 to +5 % off",
                                    kContextEvidence.rows)));
  Config plain;
  plain.model = ModelSpec{};
  EXPECT_EQ(context_accuracy_note(plain), "");
  Config profiled = ring;
  profiled.profile_path = "profile.json";
  EXPECT_EQ(context_accuracy_note(profiled), "");
  ring.model->moe = MoeSpec{};
  EXPECT_EQ(accuracy_notes(ring), moe_accuracy_note(ring) + context_accuracy_note(ring));
  EXPECT_THAT(accuracy_notes(ring), HasSubstr("mixture-of-experts"));
}

// Where the fused attention kernel runs a third of the FLOPs or more, the
// reports say its speed is one kernel and release's; a short sequence, a
// profile or standard attention gets nothing.
TEST(CompareTable, AttentionHeavyRunsNameTheKernel) {
  Config run;
  run.model = ModelSpec{};
  run.model->layers = 2;
  run.model->hidden = 8;
  run.model->ffn_hidden = 32;
  run.model->heads = 2;
  run.model->vocab = 16;
  run.model->seq_len = 96;  // 48 % in the kernel (AttentionFlopShare's hand count)
  run.model->attention = Attention::kFlash;
  EXPECT_EQ(
      attention_kernel_note(run).rfind("Attention is 48 % of this model's FLOPs at 96 tokens", 0),
      0u);
  EXPECT_THAT(format_comparison_table(timed_rows(), run),
              HasSubstr("flash_forward_efficiency and flash_backward_efficiency"));
  Config short_sequence = run;
  short_sequence.model->seq_len = 4;  // 1/27
  EXPECT_EQ(attention_kernel_note(short_sequence), "");
  Config profiled = run;
  profiled.profile_path = "profile.json";
  EXPECT_EQ(attention_kernel_note(profiled), "");
  Config standard = run;
  standard.model->attention = Attention::kStandard;
  EXPECT_EQ(attention_kernel_note(standard), "");
}

TEST(Compare, OverMemoryIsListedWithItsReason) {
  const Result<Config> config = parse_config(kTight, "tight.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const auto rows = compare_schedules(*config, {"1f1b", "gpipe"});
  ASSERT_EQ(rows.size(), 2u);
  for (const ComparedSchedule& row : rows) {
    EXPECT_FALSE(row.feasible) << row.entry;
    ASSERT_TRUE(row.summary.has_value()) << row.entry;  // the numbers are still there
    EXPECT_THAT(row.reason, HasSubstr("on rank 0 exceeds the device's 80.00 GiB"));
  }
  EXPECT_THAT(rows[0].reason, HasSubstr("peak memory 111.76 GiB"));
  EXPECT_EQ(rows[0].summary->devices[2].peak_memory_bytes, 60'000'000'000);
}

TEST(Compare, AScheduleThatCannotRunIsKept) {
  // An interleaved run needs m % p == 0: 6 microbatches on 4 ranks cannot.
  const Result<Config> six = parse_config(kTight, "tight.yaml", {{"training.global_batch", "6"}});
  ASSERT_TRUE(six.ok());
  const auto rows = compare_schedules(*six, {"interleaved-1f1b:3", "1f1b"});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_FALSE(rows[0].feasible);
  EXPECT_FALSE(rows[0].summary.has_value());
  EXPECT_THAT(rows[0].reason, HasSubstr("must be a multiple of the pipeline size"));
  EXPECT_EQ(rows[1].entry, "1f1b");
  ASSERT_TRUE(rows[1].summary.has_value());
}

// A split of the layers written for two stages a rank (eight) does not fit
// a schedule of one (four) nor TeraPipe's token slices on one: each says so
// and what to do, and the interleaved row with the config's own stages runs.
constexpr const char* kSplitForTwoChunks = R"(
model: {layers: 8, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32000}
hardware: {preset: a100-80gb, gpus_per_node: 4, nodes: 1}
parallel: {pipeline: 4, virtual_stages: 2, layers_per_stage: [0, 1, 1, 1, 1, 1, 1, 2]}
training: {global_batch: 8}
schedule: {kind: interleaved-1f1b}
)";

TEST(Compare, ASplitForOtherStagesSaysWhatToDo) {
  const Result<Config> config = parse_config(kSplitForTwoChunks, "split.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const auto rows = compare_schedules(*config, {"1f1b", "terapipe", "interleaved-1f1b"});
  ASSERT_EQ(rows.size(), 3u);
  for (int i : {0, 1}) {
    EXPECT_FALSE(rows[i].summary.has_value()) << rows[i].entry;
    EXPECT_EQ(rows[i].reason,
              "split.yaml: parallel.layers_per_stage has 8 entries; it needs one per stage, p * v "
              "= 4 (the split is written for the config's 8 stages; without it, --set "
              "parallel.layers_per_stage=[], each schedule splits the layers evenly)")
        << rows[i].entry;
  }
  EXPECT_TRUE(rows[2].summary.has_value()) << rows[2].reason;
}

TEST(Compare, VirtualStagesPerEntry) {
  const Result<Config> config = parse_config(kTight, "tight.yaml");
  ASSERT_TRUE(config.ok());
  const auto rows = compare_schedules(*config, {"interleaved-1f1b", "interleaved-1f1b:4"});
  ASSERT_TRUE(rows[0].summary && rows[1].summary);
  EXPECT_EQ(rows[0].summary->virtual_stages, 2);  // the config says 1: interleaving needs 2+
  EXPECT_EQ(rows[1].summary->virtual_stages, 4);
}

TEST(Compare, ParsesTheList) {
  const auto list = parse_schedule_list("gpipe,interleaved-1f1b:3");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<std::string>{"gpipe", "interleaved-1f1b:3"}));
  // Each error names the entry that is wrong.
  const auto error_of = [](const std::string& text) {
    const auto parsed = parse_schedule_list(text);
    EXPECT_FALSE(parsed.ok()) << text;
    return parsed.ok() ? std::string("(no error)") : parsed.error().message;
  };
  EXPECT_THAT(error_of("gpipe,nope"), HasSubstr("unknown schedule \"nope\"; known: gpipe, 1f1b"));
  EXPECT_THAT(error_of("1f1b:0"), HasSubstr("\"1f1b:0\": expected KIND or KIND:V"));
  EXPECT_THAT(error_of("1f1b:x"), HasSubstr("\"1f1b:x\": expected KIND or KIND:V"));
  EXPECT_THAT(error_of(""), HasSubstr("unknown schedule \"\""));
}

TEST(Compare, CsvHasOneRowPerScheduleAndAColumnPerRank) {
  const Result<Config> config = parse_config(kTight, "tight.yaml");
  ASSERT_TRUE(config.ok());
  const std::string csv = comparison_to_csv(compare_schedules(*config, {"1f1b", "gpipe"}));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_THAT(csv, HasSubstr("peak_memory_bytes_rank3\n"));
}

}  // namespace
}  // namespace compare_test
}  // namespace ppsim
