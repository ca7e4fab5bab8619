#include "schedules/validate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "schedules/csv.h"
#include "schedules/generators.h"
#include "sim/core/costs.h"
#include "sim/engine/engine.h"

namespace ppsim {
namespace validate_test {
namespace {

using ::testing::HasSubstr;

// Two ranks, two microbatches, programs written out by hand from CSV rows.
Schedule two_ranks(const std::string& rank0, const std::string& rank1) {
  Result<Schedule> s = schedule_from_csv(rank0 + "\n" + rank1 + "\n", "test.csv");
  EXPECT_TRUE(s.ok()) << s.error().message;
  return *s;
}

std::string error_of(const Schedule& s) {
  const Status st = validate(s);
  EXPECT_FALSE(st.ok());
  return st.message();
}

TEST(Validate, AcceptsEveryGeneratedSchedule) {
  for (ScheduleKind kind : generated_schedule_kinds()) {
    for (int p : {1, 2, 3, 4}) {
      for (int v : {1, 2, 3}) {
        if (fixed_virtual_stages(kind).value_or(v) != v) continue;
        if (kind == ScheduleKind::kDualPipe && p % 2 != 0) continue;  // half from each end
        const Result<Schedule> s = make_schedule(kind, {p, 2 * p, v, 2, 2 * p});
        ASSERT_TRUE(s.ok()) << s.error().message;
        EXPECT_TRUE(validate(*s).ok()) << kind << " p=" << p << ": " << validate(*s).message();
      }
    }
  }
}

// Rank 0 runs 0B0 before sending microbatch 1, but rank 1 wants 1F1 before
// 1F0, so it can never reach 1B0, which 0B0 waits for.
TEST(Validate, ReportsDeadlockAsTheCycle) {
  const Schedule s = two_ranks("0F0,0B0,0F1,0B1", "1F1,1F0,1B0,1B1");
  const std::string message = error_of(s);
  ASSERT_THAT(message, HasSubstr("deadlock"));
  // Whatever action the report starts from, it must walk the five actions
  // of the cycle in waiting order (each waits for the next) and close it.
  const std::vector<std::string> cycle = {"0B0", "1B0", "1F0", "1F1", "0F1"};
  const size_t colon = message.rfind(": ");
  std::vector<std::string> listed;
  std::stringstream in(message.substr(colon + 2));
  for (std::string word; in >> word;) {
    if (word != "->") listed.push_back(word);
  }
  ASSERT_EQ(listed.size(), cycle.size() + 1) << message;
  EXPECT_EQ(listed.front(), listed.back()) << message;
  const auto start = std::find(cycle.begin(), cycle.end(), listed.front());
  ASSERT_NE(start, cycle.end()) << message;
  const size_t offset = start - cycle.begin();
  for (size_t i = 0; i < cycle.size(); ++i) {
    EXPECT_EQ(listed[i], cycle[(offset + i) % cycle.size()]) << message;
  }
}

// Generated schedules skip the search (validate_coverage); should one
// deadlock, the engine stalls and reports the same cycle.
TEST(Validate, TheEngineReportsADeadlockAsValidateWordsIt) {
  const Schedule s = two_ranks("0F0,0B0,0F1,0B1", "1F1,1F0,1B0,1B1");
  ASSERT_TRUE(validate_coverage(s).ok());
  Timeline t;
  const Status run = Engine().run(s, uniform_costs(2, 2, 1, 2), &t);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.message(), error_of(s));
  // Without records, the replay in program order (ProgramOrderReplay) stalls
  // on it as the event engine does.
  RunOptions summary_only;
  summary_only.record = false;
  const Status tallied = Engine().run(s, uniform_costs(2, 2, 1, 2), &t, summary_only);
  ASSERT_FALSE(tallied.ok());
  EXPECT_EQ(tallied.message(), error_of(s));
}

// The replay in program order skips an input on the action's own rank, which
// ran earlier in the program; one later in the program is a deadlock, left
// to the event engine to report. Here 1F0 needs 0F0, which its rank runs
// after it.
TEST(Validate, TheEngineReportsADeadlockWithinOneRank) {
  Result<Schedule> s = schedule_from_csv("1F0,0F0,1B0,0B0\n", "test.csv");
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(validate_coverage(*s).ok());
  const std::string message = error_of(*s);
  EXPECT_THAT(message, HasSubstr("1F0 -> 0F0"));
  RunOptions summary_only;
  summary_only.record = false;
  Timeline t;
  const Status tallied = Engine().run(*s, uniform_costs(2, 1, 1, 2), &t, summary_only);
  ASSERT_FALSE(tallied.ok());
  EXPECT_EQ(tallied.message(), message);
}

// Engine::run checks coverage itself, as validate_coverage words it, with
// records and without: no schedule reaches a replay with an action missing.
TEST(Validate, TheEngineRefusesAScheduleWithAnActionMissing) {
  const Schedule s = two_ranks("0F0,0B0,0F1", "1F0,1B0,1F1,1B1");
  const Status coverage = validate_coverage(s);
  ASSERT_FALSE(coverage.ok());
  EXPECT_THAT(coverage.message(), HasSubstr("missing the backward of stage 0 microbatch 1"));
  for (const bool record : {true, false}) {
    RunOptions options;
    options.record = record;
    Timeline t;
    const Status run = Engine().run(s, uniform_costs(2, 2, 1, 2), &t, options);
    ASSERT_FALSE(run.ok()) << "record " << record;
    EXPECT_EQ(run.message(), coverage.message()) << "record " << record;
  }
}

// An overlapped pair starts only when both its actions may: a backward that
// needs its own pair's forward waits for itself.
TEST(Validate, AnOverlappedPairThatNeedsItsOwnForwardIsADeadlock) {
  const Schedule s = two_ranks("0F0,(0F1;0B1)OVERLAP_F_B,0B0", "1F0,1F1,1B0,1B1");
  EXPECT_EQ(error_of(s),
            "deadlock in schedule custom: the overlapped pair (0F1;0B1) on rank 0 waits for "
            "itself: 0B1 needs 0F1's output, and the pair starts only when both may");
  EXPECT_FALSE(validate_coverage(s).ok());  // the engine refuses it too
}

// Rank 0's pair (0F1;0B0) waits for 0B0's gradient, 1B0, which rank 1 runs
// after 1F1, which needs the pair's forward: run one after the other, the
// same programs have no cycle.
TEST(Validate, AnOverlappedPairWaitsForItsBackwardsInputs) {
  const std::string rank1 = "1F0,1F1,1B0,1B1";
  EXPECT_TRUE(validate(two_ranks("0F0,0F1,0B0,0B1", rank1)).ok());
  const std::string message = error_of(two_ranks("0F0,(0F1;0B0)OVERLAP_F_B,0B1", rank1));
  EXPECT_THAT(message, HasSubstr("deadlock"));
  EXPECT_THAT(message, HasSubstr("0F1 -> 1B0"));  // the forward waits for the gradient
}

TEST(Validate, AnOverlappedPairIsAForwardAndThenABackward) {
  Schedule s = two_ranks("0F0,0F1,0B0,0B1", "1F0,1F1,1B0,1B1");
  s.programs[0][3].overlaps_next = true;  // 0B1, a backward, and the last
  EXPECT_EQ(error_of(s),
            "rank 0 runs 0B1 overlapped with the next action, but only a forward pairs with a "
            "backward (an overlapped pair is F then B or I)");
  s.programs[0][3].overlaps_next = false;
  s.programs[0][0].overlaps_next = true;  // 0F0, then 0F1
  EXPECT_EQ(error_of(s),
            "rank 0 runs 0F0 overlapped with the next action, but 0F1 is not a backward: an "
            "overlapped pair is a forward and then a backward (B or I)");
  s.programs[0][0].overlaps_next = false;
  s.programs[1][1].overlaps_next = true;  // 1F1, then 1B0: fine
  EXPECT_TRUE(validate(s).ok()) << validate(s).message();
}

TEST(Validate, MissingForward) {
  EXPECT_EQ(error_of(two_ranks("0F0,0B0,0B1", "1F0,1F1,1B0,1B1")), "missing 0F1");
}

TEST(Validate, MissingBackward) {
  EXPECT_THAT(error_of(two_ranks("0F0,0F1,0B0", "1F0,1F1,1B0,1B1")),
              HasSubstr("missing the backward of stage 0 microbatch 1"));
}

// (A CSV file with a repeat is refused earlier, naming both cells: csv_test.)
TEST(Validate, Duplicate) {
  Schedule s = two_ranks("0F0,0F1,0B0,0B1", "1F0,1F1,1B0,1B1");
  s.programs[0].push_back({ActionKind::kForward, 0, 1});
  EXPECT_EQ(error_of(s), "0F1 appears more than once");
}

TEST(Validate, WrongRank) {
  Schedule s = two_ranks("0F0,0F1,0B0,0B1", "1F0,1F1,1B0,1B1");
  s.programs[1].push_back({ActionKind::kBackwardWeight, 0, 0});
  EXPECT_EQ(error_of(s), "rank 1 runs 0W0, but stage 0 belongs to rank 0");
}

TEST(Validate, SplitNeedsBothHalves) {
  EXPECT_EQ(error_of(two_ranks("0F0,0F1,0I0,0W0,0I1", "1F0,1F1,1B0,1B1")),
            "missing 0W1: a split backward needs both I and W");
  EXPECT_THAT(error_of(two_ranks("0F0,0F1,0B0,0W0,0B1", "1F0,1F1,1B0,1B1")),
              HasSubstr("both appear"));
}

TEST(Validate, OutOfRange) {
  Schedule s = two_ranks("0F0,0F1,0B0,0B1", "1F0,1F1,1B0,1B1");
  s.programs[0].push_back({ActionKind::kForward, 0, 5});
  EXPECT_EQ(error_of(s),
            "rank 0 runs 0F5, outside the 2 stages and 2 microbatches of this schedule");
}

TEST(Validate, AcceptsAHandWrittenSplitSchedule) {
  EXPECT_TRUE(validate(two_ranks("0F0,0F1,0I0,0I1,0W0,0W1", "1F0,1I0,1F1,1I1,1W0,1W1")).ok());
}

// Posted transfers (Schedule::comm_posts): a send after its action, a
// receive before it, and for an overlapped pair's backward before the pair.
TEST(Validate, PostsSendsAfterAndReceivesBefore) {
  Schedule s = two_ranks("0F0,0F1,0B0,0B1", "1F0,1B0,1F1,1B1");
  for (const auto& program : s.programs) s.comm_posts.emplace_back(program.size());
  EXPECT_TRUE(validate(s).ok()) << validate(s).message();
  s.comm_posts[1][2].recv_after = 3;  // 1F1's input received after 1F1
  EXPECT_EQ(error_of(s),
            "schedule custom: rank 1 posts the transfers of 1F1 after -1 and 3 of its actions: a "
            "send is posted after its action, a receive before it");
  s.comm_posts[1][2].recv_after = -1;
  s.comm_posts[0][1].send_after = 1;  // 0F1's output sent before 0F1 ends
  EXPECT_THAT(error_of(s), ::testing::HasSubstr("posts the transfers of 0F1 after 1 and -1"));
  Schedule pair = two_ranks("0F0,(0F1;0B0)OVERLAP_F_B,0B1", "1F0,1B0,1F1,1B1");
  for (const auto& program : pair.programs) pair.comm_posts.emplace_back(program.size());
  pair.comm_posts[0][2].recv_after = 2;  // 0B0's gradient received inside its pair
  EXPECT_THAT(error_of(pair), ::testing::HasSubstr("posts the transfers of 0B0 after -1 and 2"));
}

}  // namespace
}  // namespace validate_test
}  // namespace ppsim
