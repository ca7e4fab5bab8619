// Device spans replacing host brackets (real_runtime/device_spans.h), on
// synthetic runs: spans made from known work times on a clock with a known
// offset, brackets widened by launch and wake-up latencies drawn with a
// fixed seed.
#include "real_runtime/device_spans.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

namespace ppsim::runtime {
namespace device_spans_test {
namespace {

using ::testing::HasSubstr;

struct Synthetic {
  Timeline timeline;
  std::vector<DeviceSpan> spans;
  std::vector<Picos> work;  // per record, the device time of its work
};

// `per_rank` actions on each of `ranks` ranks, one after another with gaps;
// the device clock reads `offset_ns` more than the run's clock. Each
// bracket starts 3 to 40 us before its work (launch) and ends 2 to 25 us
// after it (the wait's wake-up); rank 0's first action has a tight bracket
// (1 us either side), which pins the offset to within 2 us.
Synthetic make_run(int ranks, int per_rank, uint64_t offset_ns, uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> launch(3000, 40000), wake(2000, 25000),
      work(50000, 5000000), gap(0, 100000);
  Synthetic s;
  Timeline& t = s.timeline;
  t.num_ranks = ranks;
  for (int r = 0; r < ranks; ++r) {
    int64_t now_ns = 1000000 + 7919 * r;
    for (int k = 0; k < per_rank; ++k) {
      const bool tight = r == 0 && k == 0;
      const int64_t before = tight ? 1000 : launch(rng), after = tight ? 1000 : wake(rng);
      const int64_t w = work(rng);
      ActionRecord a;
      a.action = Action{ActionKind::kForward, r, k, 0};
      a.rank = r;
      a.start = now_ns * 1000;
      a.end = (now_ns + before + w + after) * 1000;
      s.spans.push_back({static_cast<int64_t>(t.actions.size()),
                         static_cast<uint64_t>(now_ns + before) + offset_ns,
                         static_cast<uint64_t>(now_ns + before + w) + offset_ns});
      s.work.push_back(w * 1000);
      t.actions.push_back(a);
      now_ns += before + w + after + gap(rng);
    }
  }
  EpilogueRecord e;
  e.end = t.actions.back().end + 1000000;
  t.epilogue.push_back(e);
  t.makespan = e.end;
  return s;
}

TEST(DeviceSpans, EachActionTakesItsWorkTimeInsideItsBracket) {
  const uint64_t offset_ns = 1234567890123;
  Synthetic s = make_run(3, 20, offset_ns);
  const Timeline before = s.timeline;
  const Result<SpanAlignment> a = apply_device_spans(s.spans, {0, 0, 0}, &s.timeline);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->replaced, 60);
  EXPECT_EQ(a->missing, 0);
  ASSERT_EQ(a->offset.size(), 1u);
  // The tight bracket allows 2 us of offsets; the one taken is within them.
  EXPECT_LE(a->uncertainty[0], 2000000);
  EXPECT_LE(std::abs(a->offset[0] - static_cast<Picos>(offset_ns) * 1000), 1000000);
  for (size_t i = 0; i < s.timeline.actions.size(); ++i) {
    const ActionRecord& got = s.timeline.actions[i];
    const ActionRecord& host = before.actions[i];
    EXPECT_EQ(got.end - got.start, s.work[i]) << "record " << i;
    EXPECT_GE(got.start, host.start) << "record " << i;
    EXPECT_LE(got.end, host.end) << "record " << i;
  }
  EXPECT_EQ(s.timeline.makespan, before.makespan);  // the epilogue ends last
}

TEST(DeviceSpans, EachDeviceHasItsOwnClock) {
  Synthetic s = make_run(2, 10, 5000);
  for (DeviceSpan& span : s.spans) {
    if (s.timeline.actions[span.record].rank == 1) {
      span.start_ns += 777777777;
      span.end_ns += 777777777;
    }
  }
  // One clock for both ranks cannot fit; a clock per rank's device can.
  const Result<SpanAlignment> one = apply_device_spans(s.spans, {0, 0}, &s.timeline);
  ASSERT_FALSE(one.ok());
  EXPECT_THAT(one.error().message,
              HasSubstr("no clock offset puts device 0's spans inside their actions' host"));
  const Result<SpanAlignment> a = apply_device_spans(s.spans, {0, 1}, &s.timeline);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_EQ(a->offset.size(), 2u);
  EXPECT_GT(a->offset[1] - a->offset[0], 777000000LL * 1000);
  for (size_t i = 0; i < s.timeline.actions.size(); ++i) {
    EXPECT_EQ(s.timeline.actions[i].end - s.timeline.actions[i].start, s.work[i]);
  }
}

TEST(DeviceSpans, ActionsWithoutASpanKeepTheirBrackets) {
  Synthetic s = make_run(2, 5, 0);
  const Timeline before = s.timeline;
  s.spans.erase(s.spans.begin() + 3);
  const Result<SpanAlignment> a = apply_device_spans(s.spans, {0, 0}, &s.timeline);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->replaced, 9);
  EXPECT_EQ(a->missing, 1);
  EXPECT_EQ(s.timeline.actions[3].start, before.actions[3].start);
  EXPECT_EQ(s.timeline.actions[3].end, before.actions[3].end);
}

TEST(DeviceSpans, SpansThatCannotBeTheseActionsAreErrorsAndChangeNothing) {
  const Synthetic good = make_run(2, 6, 42);
  const auto rejected = [&](std::vector<DeviceSpan> spans, const std::string& says) {
    Timeline t = good.timeline;
    const Result<SpanAlignment> a = apply_device_spans(spans, {0, 0}, &t);
    ASSERT_FALSE(a.ok());
    EXPECT_THAT(a.error().message, HasSubstr(says));
    for (size_t i = 0; i < t.actions.size(); ++i) {
      EXPECT_EQ(t.actions[i].start, good.timeline.actions[i].start);
      EXPECT_EQ(t.actions[i].end, good.timeline.actions[i].end);
    }
  };
  std::vector<DeviceSpan> spans = good.spans;
  spans[4].start_ns += 5000000;  // work 5 ms later than its bracket allows
  spans[4].end_ns += 5000000;
  rejected(spans, "no clock offset");
  spans = good.spans;
  spans.push_back(spans[2]);
  rejected(spans, "two spans");
  spans = good.spans;
  spans[0].record = 12;
  rejected(spans, "not an action");
  spans = good.spans;
  std::swap(spans[1].start_ns, spans[1].end_ns);
  rejected(spans, "ends before it starts");
}

}  // namespace
}  // namespace device_spans_test
}  // namespace ppsim::runtime
