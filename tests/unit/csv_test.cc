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
  const Result<Schedule> s = schedule_from_csv("0F0,0B0\n0F1,0B1\n", "my.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "my.csv: stage 0 has forwards on rank 0 and on rank 1");
}

TEST(Csv, Empty) { EXPECT_FALSE(schedule_from_csv("# nothing\n\n", "e.csv").ok()); }

}  // namespace
}  // namespace ppsim
