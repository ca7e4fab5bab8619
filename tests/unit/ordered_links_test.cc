// The links of the CUDA backend over NCCL (real_runtime/ordered_links.h),
// on the host: which directions a schedule sends over, and receives posted
// in the sender's order that still give every receive its own key.
#include "real_runtime/ordered_links.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/runtime_checks.h"

namespace ppsim::runtime {
namespace ordered_links_test {
namespace {

using Links = std::vector<DirectedLink>;

TEST(DirectedLinks, APipelineSendsBothWaysBetweenNeighbours) {
  EXPECT_EQ(directed_links(schedule_of("1f1b", 4, 8)),
            (Links{{0, 1}, {1, 0}, {1, 2}, {2, 1}, {2, 3}, {3, 2}}));
  EXPECT_EQ(directed_links(schedule_of("gpipe", 1, 2)), Links{});
}

TEST(DirectedLinks, InterleavedStagesWrapAroundAndShareTheLinks) {
  // Stages 0..5 on ranks 0 1 2 0 1 2: stage 2 -> 3 is rank 2 -> 0.
  EXPECT_EQ(directed_links(schedule_of("interleaved-1f1b", 3, 6, 2)),
            (Links{{0, 1}, {0, 2}, {1, 0}, {1, 2}, {2, 0}, {2, 1}}));
}

TEST(DirectedLinks, AVShapeHandsOffWithinARankWithoutALink) {
  // zb-v: stages 0 1 | 1 0 on ranks 0 1 1 0; stage 1 -> 2 stays on rank 1.
  const Schedule s = schedule_of("zb-v", 2, 4, 2);
  ASSERT_EQ(s.stage_rank, (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ(directed_links(s), (Links{{0, 1}, {1, 0}}));
}

MessageKey key(int mb, int stage = 1, MessageKind kind = MessageKind::kActivation) {
  return MessageKey{kind, mb, stage, 0};
}

// A sender's messages to one receiver, in its order: (key, payload).
struct Sender {
  std::vector<std::pair<MessageKey, int>> sent;
  size_t posted = 0;  // how many the receiver has read so far
  std::pair<MessageKey, int> next() {
    EXPECT_LT(posted, sent.size()) << "the receiver read past what was sent";
    return sent.at(posted++);
  }
};

TEST(InOrderReceiver, ReceivesInAnotherOrderThanSentGetTheirOwnKeys) {
  Sender from2;
  for (int mb : {0, 1, 2, 3}) from2.sent.push_back({key(mb), 100 + mb});
  InOrderReceiver<int> r;
  const auto post = [&](int src) {
    EXPECT_EQ(src, 2);
    return from2.next();
  };
  EXPECT_EQ(r.take(2, key(2), post), 102);
  // Posted up to the key needed, no further; the two before it staged.
  EXPECT_EQ(from2.posted, 3u);
  EXPECT_EQ(r.staged(), 2);
  EXPECT_EQ(r.take(2, key(0), post), 100);
  EXPECT_EQ(r.take(2, key(1), post), 101);
  EXPECT_EQ(from2.posted, 3u);  // both were staged
  EXPECT_EQ(r.take(2, key(3), post), 103);
  EXPECT_EQ(r.staged(), 0);
}

TEST(InOrderReceiver, OneKeySentTwiceArrivesInItsOrder) {
  // The same key in two iterations (or two kinds apart): first in, first out.
  Sender s;
  s.sent = {{key(0), 1}, {key(0, 1, MessageKind::kGradient), 2}, {key(0), 3}, {key(1), 4}};
  InOrderReceiver<int> r;
  const auto post = [&](int) { return s.next(); };
  EXPECT_EQ(r.take(0, key(1), post), 4);
  EXPECT_EQ(r.staged(), 3);
  EXPECT_EQ(r.take(0, key(0), post), 1);
  EXPECT_EQ(r.take(0, key(0), post), 3);
  EXPECT_EQ(r.take(0, key(0, 1, MessageKind::kGradient), post), 2);
  EXPECT_EQ(r.staged(), 0);
}

TEST(InOrderReceiver, SourcesAreStagedApart) {
  Sender a, b;
  a.sent = {{key(0), 10}, {key(1), 11}};
  b.sent = {{key(0), 20}, {key(1), 21}};
  InOrderReceiver<int> r;
  const auto post = [&](int src) { return src == 0 ? a.next() : b.next(); };
  EXPECT_EQ(r.take(0, key(1), post), 11);
  EXPECT_EQ(r.take(1, key(0), post), 20);  // not a's staged key 0
  EXPECT_EQ(r.take(1, key(1), post), 21);
  EXPECT_EQ(r.take(0, key(0), post), 10);
}

// What each rank of `s` sends to each other rank, in its program's order,
// and what it needs from each, in its program's order.
struct Traffic {
  std::map<DirectedLink, std::vector<MessageKey>> sent, needed;
};

Traffic traffic_of(const Schedule& s) {
  Traffic t;
  for (int r = 0; r < s.num_ranks; ++r) {
    for (const Action& a : s.programs[r]) {
      const bool forward = a.kind == ActionKind::kForward;
      const bool backward = sends_input_gradient(a.kind);
      if (forward && a.stage + 1 < s.num_stages) {
        t.sent[{r, s.stage_rank[a.stage + 1]}].push_back(
            {MessageKind::kActivation, a.microbatch, a.stage + 1, a.slice});
      }
      if (forward && a.stage > 0) {
        t.needed[{s.stage_rank[a.stage - 1], r}].push_back(
            {MessageKind::kActivation, a.microbatch, a.stage, a.slice});
      }
      if (backward && a.stage > 0) {
        t.sent[{r, s.stage_rank[a.stage - 1]}].push_back(
            {MessageKind::kGradient, a.microbatch, a.stage - 1, a.slice});
      }
      if (backward && a.stage + 1 < s.num_stages) {
        t.needed[{s.stage_rank[a.stage + 1], r}].push_back(
            {MessageKind::kGradient, a.microbatch, a.stage, a.slice});
      }
    }
  }
  return t;
}

TEST(InOrderReceiver, EveryScheduleKindGetsEachReceiveItsKey) {
  // Each rank's needs from a link, in its program's order, against what the
  // sender sent over it, in the sender's: every receive gets its own message,
  // nothing is left staged, and where the orders differ something was staged.
  struct Kind {
    std::string name;
    int p, m, v, slices;
  };
  bool some_staged = false;
  for (const Kind& k :
       {Kind{"gpipe", 4, 8, 1, 1}, Kind{"1f1b", 4, 8, 1, 1}, Kind{"interleaved-1f1b", 2, 4, 2, 1},
        Kind{"zb-h1", 4, 8, 1, 1}, Kind{"zb-v", 2, 4, 2, 1}, Kind{"terapipe", 2, 4, 1, 3}}) {
    SCOPED_TRACE(k.name);
    const Schedule s = schedule_of(k.name, k.p, k.m, k.v, k.slices);
    const Traffic t = traffic_of(s);
    for (const DirectedLink& l : directed_links(s)) {
      SCOPED_TRACE(testing::Message() << "link " << l.src << " -> " << l.dst);
      const std::vector<MessageKey>& sent = t.sent.at(l);
      const std::vector<MessageKey>& needed = t.needed.at(l);
      ASSERT_EQ(sent.size(), needed.size());
      size_t posted = 0;
      InOrderReceiver<size_t> r;
      const auto post = [&](int) {
        EXPECT_LT(posted, sent.size());
        const size_t i = posted++;
        return std::pair{sent.at(i), i};
      };
      int most_staged = 0;
      for (const MessageKey& want : needed) {
        const size_t got = r.take(l.src, want, post);
        EXPECT_EQ(sent[got], want);
        most_staged = std::max(most_staged, r.staged());
      }
      EXPECT_EQ(r.staged(), 0);
      EXPECT_EQ(most_staged > 0, sent != needed);
      some_staged = some_staged || most_staged > 0;
    }
  }
  // zb-v's link 0 -> 1 carries stage 0's activations and stage 3's gradients,
  // which rank 1 needs in another order than rank 0 sends them.
  EXPECT_TRUE(some_staged);
}

}  // namespace
}  // namespace ordered_links_test
}  // namespace ppsim::runtime
