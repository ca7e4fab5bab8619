#include "schedules/csv.h"

#include <gtest/gtest.h>

#include "schedules/generators.h"

namespace ppsim {
namespace {

TEST(Csv, RoundTripsEveryGeneratedSchedule) {
  for (const std::string& kind : schedule_kinds()) {
    // 2 slices for terapipe, batches of all 8 microbatches for pipedream-2bw.
    const Result<Schedule> s =
        make_schedule(kind, {4, 8, fixed_virtual_stages(kind).value_or(2), 2, 8});
    ASSERT_TRUE(s.ok());
    const Result<Schedule> back = schedule_from_csv(schedule_to_csv(*s), "x.csv");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->programs, s->programs) << kind;
    EXPECT_EQ(back->stage_rank, s->stage_rank) << kind;
    EXPECT_EQ(back->num_stages, s->num_stages);
    EXPECT_EQ(back->num_microbatches, s->num_microbatches);
  }
}

TEST(Csv, ToleratesSpacesEmptyCellsCommentsAndCrLf) {
  const Result<Schedule> s =
      schedule_from_csv("# comment\r\n 0F0 ,,0B0\r\n1F0, 1B0,\r\n\r\n", "x.csv");
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->num_ranks, 2);
  EXPECT_EQ(program_to_string(s->programs[0]), "0F0 0B0");
  EXPECT_EQ(program_to_string(s->programs[1]), "1F0 1B0");
}

TEST(Csv, NamesTheBadCell) {
  const Result<Schedule> s = schedule_from_csv("0F0,0B0\n1F0,1X0\n", "my.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(
      s.error().message,
      "my.csv:2: cell 2 (rank 1): \"1X0\" is not an action: expected STAGE KIND MICROBATCH "
      "with KIND one of F, B, I, W, S (e.g. \"2F0\"), and sSLICE for a token slice (\"2F0s3\")");
}

TEST(Csv, StageOnTwoRanks) {
  const Result<Schedule> s = schedule_from_csv("# two ranks\n0F0,0B0\n0F1,0B1\n", "my.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "my.csv:3: stage 0 has forwards on rank 0 (line 2) and on rank 1 (line 3, \"0F1\"); a "
            "stage runs on one rank");
}

TEST(Csv, Empty) {
  const Result<Schedule> s = schedule_from_csv("# nothing\n\n", "e.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "e.csv: no ranks: the file has no action rows");
}

// Issue 14's reproducers: an index at INT_MAX overflowed stage + 1 (a
// segfault), one just below it asked for an 8 GiB index table.
TEST(Csv, IndexPastItsCapIsAnErrorNamingTheCap) {
  const Result<Schedule> max = schedule_from_csv("2147483647F1\n", "big.csv");
  ASSERT_FALSE(max.ok());
  EXPECT_EQ(max.error().message,
            "big.csv:1: cell 1 (rank 0): \"2147483647F1\": stage 2147483647 is past the largest "
            "ppsim simulates (65535)");
  const Result<Schedule> below = schedule_from_csv("0F2147483646\n", "big.csv");
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.error().message.find("microbatch 2147483646 is past the largest ppsim "
                                       "simulates (4194303)"),
            std::string::npos)
      << below.error().message;
  const Result<Schedule> overflow = schedule_from_csv("0F99999999999\n", "big.csv");
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.error().message.find("is not an action"), std::string::npos);
}

// Each index within its cap, but their product past the actions ppsim
// replays: refused before the index table is allocated.
TEST(Csv, SizesWhoseProductIsTooLargeAreRefused) {
  const Result<Schedule> s = schedule_from_csv("65535F4194303\n", "wide.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "wide.csv: 65536 stages x 4194304 microbatches x 1 token slices make up to "
            "824633720832 actions, more than the 33554432 ppsim simulates (about 10 GiB of "
            "memory): use fewer stages, microbatches or slices");
}

TEST(Csv, ControlCharactersInACellAreEscaped) {
  const Result<Schedule> s = schedule_from_csv("0F0,\x1b[2J\n", "c.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("\"\\x1b[2J\" is not an action"), std::string::npos)
      << s.error().message;
}

}  // namespace
}  // namespace ppsim
