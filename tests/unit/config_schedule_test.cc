// The schedule section: the known kinds, a custom schedule's CSV file,
// TeraPipe's token slices and zb-auto's memory limit, each key only with the
// kind it belongs to.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/config/config.h"
#include "tests/unit/config_fixtures.h"

namespace ppsim {
namespace config_schedule_test {
namespace {

using config_test::error_of;
using config_test::example;
using config_test::kIdeal;
using config_test::kModel;
using config_test::yaml;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ConfigTest, UnknownScheduleKindListsTheKnownOnes) {
  std::string text = yaml(kIdeal);
  text.replace(text.find("kind: 1f1b"), 10, "kind: zb-h9");
  std::string error = error_of(text);
  EXPECT_THAT(error, StartsWith("test.yaml:7:9: schedule.kind: expected one of "));
  EXPECT_THAT(error, HasSubstr("gpipe, 1f1b, interleaved-1f1b"));
  EXPECT_THAT(error, HasSubstr("got \"zb-h9\""));
}

// kIdeal's schedule section is at lines 6-7; the custom tests replace the kind.
TEST(ConfigTest, CustomScheduleNeedsAFile) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.kind", "custom"}}),
            "test.yaml:6:1: schedule.file: expected the path of a CSV schedule, one row per rank "
            "(schedule.kind is custom), got nothing");
}

TEST(ConfigTest, CustomScheduleFileMustExist) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.kind", "custom"}, {"schedule.file", "no/such.csv"}}),
            "--set schedule.file=no/such.csv: schedule.file: cannot read no/such.csv: No such file "
            "or directory");
}

TEST(ConfigTest, FileOnlyForCustom) {
  std::string text(kIdeal);
  text.replace(text.find("kind: 1f1b"), 10, "kind: 1f1b\n  file: x.csv");
  EXPECT_EQ(error_of(text), "test.yaml:8:3: schedule.file: only for schedule.kind custom");
}

TEST(ConfigTest, CustomFileIsRelativeToTheConfig) {
  Result<Config> config = load_config(example("custom.yaml"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->schedule.kind, ScheduleKind::kCustom);
  EXPECT_EQ(config->schedule.file, example("custom-2rank.csv"));
}

TEST(ConfigTest, SlicesOnlyForTerapipe) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.slices", "4"}}),
            "--set schedule.slices=4: schedule.slices: only for schedule.kind terapipe");
}

TEST(ConfigTest, TerapipeNeedsSlicesOrOptimal) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.kind", "terapipe"}}),
            "test.yaml:6:1: schedule.slices: expected a number of token slices per microbatch (or "
            "schedule.slicing: optimal), got nothing");
  Result<Config> config = parse_config(yaml(kIdeal), "test.yaml",
                                       {{"schedule.kind", "terapipe"}, {"schedule.slices", "4"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->schedule.slices, 4);
  EXPECT_EQ(config->schedule.slicing, SlicingMethod::kEven);
}

TEST(ConfigTest, OptimalSlicingNeedsTheModel) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.kind", "terapipe"}, {"schedule.slicing", "optimal"}}),
            "--set schedule.slicing=optimal: schedule.slicing: expected even when there is no "
            "model: the optimal cut needs the model's costs, got \"optimal\"");
}

TEST(ConfigTest, SlicesMustDivideTheSequence) {
  // kModel has seq_len 2048.
  EXPECT_EQ(error_of(kModel, {{"schedule.kind", "terapipe"}, {"schedule.slices", "3"}}),
            "--set schedule.slices=3: schedule.slices: expected a divisor of model.seq_len "
            "(2048), got \"3\"");
  EXPECT_EQ(error_of(kModel, {{"schedule.kind", "terapipe"},
                              {"schedule.slicing", "optimal"},
                              {"schedule.slice_granularity", "100"}}),
            "--set schedule.slice_granularity=100: schedule.slice_granularity: expected a divisor "
            "of model.seq_len (2048), got \"100\"");
  EXPECT_EQ(error_of(kModel, {{"schedule.kind", "terapipe"},
                              {"schedule.slicing", "optimal"},
                              {"schedule.slices", "4"}}),
            "--set schedule.slices=4: schedule.slices: not with schedule.slicing: optimal, which "
            "chooses the cut");
}

TEST(ConfigTest, MemoryLimitOnlyForZbAuto) {
  EXPECT_EQ(error_of(kIdeal, {{"schedule.memory_limit_gib", "40"}}),
            "--set schedule.memory_limit_gib=40: schedule.memory_limit_gib: only for "
            "schedule.kind zb-auto");
  Result<Config> config =
      parse_config(yaml(kIdeal), "test.yaml",
                   {{"schedule.kind", "zb-auto"}, {"schedule.memory_limit_gib", "40"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->schedule.memory_limit_gib, 40.0);
}

}  // namespace
}  // namespace config_schedule_test
}  // namespace ppsim
