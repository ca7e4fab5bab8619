#include "schedules/action.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace ppsim {
namespace action_test {
namespace {

using ::testing::StartsWith;

TEST(Action, TextForm) {
  EXPECT_EQ(to_string(Action{ActionKind::kForward, 2, 0}), "2F0");
  EXPECT_EQ(to_string(Action{ActionKind::kBackward, 12, 345}), "12B345");
  EXPECT_EQ(to_string(Action{ActionKind::kBackwardInput, 1, 3}), "1I3");
  EXPECT_EQ(to_string(Action{ActionKind::kBackwardWeight, 1, 3}), "1W3");
}

TEST(Action, ParsesWhatItPrints) {
  for (ActionKind kind : {ActionKind::kForward, ActionKind::kBackward, ActionKind::kBackwardInput,
                          ActionKind::kBackwardWeight, ActionKind::kStep}) {
    const Action a{kind, 17, 1023};
    const Result<Action> back = parse_action(to_string(a));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, a);
  }
  EXPECT_EQ(*parse_action("  3W4 "), (Action{ActionKind::kBackwardWeight, 3, 4}));
}

TEST(Action, RejectsMalformedText) {
  for (const char* bad : {"", "F0", "2F", "2X0", "-1F0", "2F-1", "2F0x", "a2F0", "2 F0", "2FB0"}) {
    const Result<Action> a = parse_action(bad);
    ASSERT_FALSE(a.ok()) << bad;
    std::string quoted = "\"";
    quoted += bad;
    quoted += "\" is not an action";
    EXPECT_THAT(a.error().message, StartsWith(quoted));
  }
}

}  // namespace
}  // namespace action_test
}  // namespace ppsim
