// The threads backend's links (transfer_worker.h): a sender hands a tensor
// to its link and goes on while the link copies it; a link carries its
// transfers one at a time, in the order they were sent, and does not wait
// for another link; an abort drops what is queued and ends the workers
// (issue 14: the sender used to copy, so the copy delayed its next action,
// which the simulator does not model).
#include "real_runtime/transfer_worker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime_checks.h"

namespace ppsim::runtime {
namespace transfer_worker_test {
namespace {

// How long a gated copy waits for its gate before going on anyway: a hang
// guard, not a timing. A test whose threads run in the wrong order still
// ends, and fails on the order it recorded.
constexpr std::chrono::seconds kHangGuard{60};

// Closed until open() is called.
class Gate {
 public:
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Until open, or for kHangGuard.
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kHangGuard, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// What the threads of a test did, in the order they did it.
class Events {
 public:
  void add(std::string event) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  std::vector<std::string> all() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> events_;
};

MessageKey activation(int microbatch) { return {MessageKind::kActivation, microbatch, 1, 0}; }

// What a rank's executor hands over: the data, its rank, the hand-over time.
Message<int> sent(int src_rank, int data, Picos now) {
  Message<int> m;
  m.data = data;
  m.src_rank = src_rank;
  m.send_start = now;
  return m;
}

RunClock started_clock() { return RunClock{std::chrono::steady_clock::now()}; }

// The copy waits at a gate that the sender opens only after its send
// returned and its next action started: a sender that copied would wait
// out the hang guard first, and its next action would start after the
// transfer ended.
TEST(TransferWorker, TheSenderGoesOnWhileItsTransferIsCopied) {
  const RunClock clock = started_clock();
  Gate gate;
  Events events;
  std::thread::id copier;
  CopyingTransport<int> transport(2, &clock, {{0, 1}}, [&](int x, const DirectedLink&) {
    copier = std::this_thread::get_id();
    gate.wait();
    events.add("copied");
    return x;
  });
  const Picos handed_over = clock.now();
  transport.send(1, activation(0), sent(0, 42, handed_over));
  events.add("send returned");
  const Picos next_action_start = clock.now();
  gate.open();
  const Message<int> m = transport.receive(1, activation(0));
  transport.close();

  EXPECT_EQ(m.data, 42);
  EXPECT_NE(copier, std::this_thread::get_id());
  EXPECT_THAT(events.all(), testing::ElementsAre("send returned", "copied"));
  // The record is the copy's: it ended after the sender went on.
  EXPECT_GE(m.send_start, handed_over);
  EXPECT_LE(m.send_start, m.send_end);
  EXPECT_LE(next_action_start, m.send_end);
}

TEST(TransferWorker, ALinkCarriesItsTransfersOneAtATimeInTheOrderSent) {
  constexpr int kTransfers = 50;
  const RunClock clock = started_clock();
  std::vector<int> copied;  // by the link's one thread
  CopyingTransport<int> transport(2, &clock, {{0, 1}}, [&](int x, const DirectedLink&) {
    copied.push_back(x);
    return x;
  });
  for (int i = 0; i < kTransfers; ++i) transport.send(1, activation(i), sent(0, i, clock.now()));
  std::vector<Message<int>> received(kTransfers);
  for (int i = kTransfers - 1; i >= 0; --i) received[i] = transport.receive(1, activation(i));
  transport.close();

  std::vector<int> in_order(kTransfers);
  for (int i = 0; i < kTransfers; ++i) in_order[i] = i;
  EXPECT_EQ(copied, in_order);
  for (int i = 0; i < kTransfers; ++i) {
    EXPECT_EQ(received[i].data, i);
    EXPECT_LE(received[i].send_start, received[i].send_end);
    if (i > 0) {
      EXPECT_GE(received[i].send_start, received[i - 1].send_end) << i;
    }
  }
}

// Rank 0's transfer to rank 1 is held at a gate; rank 2's to rank 1
// arrives meanwhile. The copy is told which link it is on (the CUDA
// backend copies on that link's stream).
TEST(TransferWorker, ALinkDoesNotWaitForAnother) {
  const RunClock clock = started_clock();
  Gate gate;
  Events events;
  CopyingTransport<int> transport(3, &clock, {{0, 1}, {2, 1}}, [&](int x, const DirectedLink& l) {
    EXPECT_EQ(l.dst, 1);
    if (l.src == 0) {
      gate.wait();
      events.add("copied from rank 0");
    }
    return x;
  });
  transport.send(1, activation(0), sent(0, 0, clock.now()));
  transport.send(1, activation(2), sent(2, 2, clock.now()));
  EXPECT_EQ(transport.receive(1, activation(2)).data, 2);
  events.add("received from rank 2");
  gate.open();
  EXPECT_EQ(transport.receive(1, activation(0)).data, 0);
  transport.close();

  EXPECT_THAT(events.all(), testing::ElementsAre("received from rank 2", "copied from rank 0"));
}

// A rank fails while its link copies one transfer and holds two more: the
// receiver waiting for the last is released, the link finishes the copy it
// is in and drops the rest, and close() joins it.
TEST(TransferWorker, AnAbortDropsTheQueuedTransfersAndEndsTheWorkers) {
  const RunClock clock = started_clock();
  Gate copying, gate;
  Events events;
  CopyingTransport<int> transport(2, &clock, {{0, 1}, {1, 0}}, [&](int x, const DirectedLink&) {
    events.add("copying " + std::to_string(x));
    copying.open();
    gate.wait();
    return x;
  });
  for (int i = 0; i < 3; ++i) transport.send(1, activation(i), sent(0, i, clock.now()));
  copying.wait();
  std::thread receiver([&] {
    try {
      transport.receive(1, activation(2));
      events.add("received");
    } catch (const Aborted&) {
      events.add("aborted");
    }
  });
  transport.abort_run("rank 0, 0F3: injected failure");
  receiver.join();
  gate.open();
  transport.close();

  EXPECT_THAT(events.all(), testing::ElementsAre("copying 0", "aborted"));
  EXPECT_EQ(transport.control().error(), "rank 0, 0F3: injected failure");
  EXPECT_THROW(transport.receive(1, activation(0)), Aborted);
}

// A second message under one key (a schedule bug) fails in the link's
// thread: the run is aborted with the link's name and the reason.
TEST(TransferWorker, AFailedTransferFailsTheRunNamingItsLink) {
  const RunClock clock = started_clock();
  CopyingTransport<int> transport(2, &clock, {{0, 1}},
                                  [](int x, const DirectedLink&) { return x; });
  transport.send(1, activation(0), sent(0, 1, clock.now()));
  transport.send(1, activation(0), sent(0, 2, clock.now()));
  transport.close();  // carries both

  EXPECT_TRUE(transport.control().aborted());
  EXPECT_THAT(transport.control().error(),
              testing::StartsWith("link from rank 0 to rank 1: a second activation for "
                                  "microbatch 0 stage 1 slice 0"));
}

TEST(TransferWorker, ASendOnALinkThatWasNotMadeIsAnError) {
  const RunClock clock = started_clock();
  CopyingTransport<int> transport(3, &clock, {{0, 1}},
                                  [](int x, const DirectedLink&) { return x; });
  EXPECT_THROW(transport.send(2, activation(0), sent(0, 1, clock.now())), std::logic_error);
  transport.close();
}

// In a real run each link's transfers follow its sender's program order
// (record indices are iteration-major, program order within a rank), and
// each starts when the one before it on the link has ended.
TEST(TransferWorker, ThreadsRunsCarryEachLinksTransfersOneAtATimeInProgramOrder) {
  for (const Case& c : {Case{"1f1b", 4, 8, 1, 1}, Case{"zb-v", 2, 4, 2, 1}}) {
    const std::string& kind = c.kind;
    const Schedule schedule = schedule_of(kind, c.p, c.m, c.v, c.slices);
    Result<RunResult> run = run_threads(schedule, tiny_model(), three_iterations());
    ASSERT_TRUE(run.ok()) << run.error().message;
    const Timeline& t = run->timeline;
    expect_well_formed(schedule, t, 3);
    std::map<std::pair<int, int>, std::vector<TransferRecord>> links;
    for (const TransferRecord& x : t.transfers) links[{t.src_rank(x), t.dst_rank(x)}].push_back(x);
    EXPECT_EQ(links.size(), directed_links(schedule).size()) << kind;
    for (auto& [link, transfers] : links) {
      std::sort(
          transfers.begin(), transfers.end(),
          [](const TransferRecord& a, const TransferRecord& b) { return a.producer < b.producer; });
      for (size_t k = 1; k < transfers.size(); ++k) {
        EXPECT_GE(transfers[k].start, transfers[k - 1].end)
            << kind << " link " << link.first << " -> " << link.second << ", transfer " << k;
      }
    }
  }
}

}  // namespace
}  // namespace transfer_worker_test
}  // namespace ppsim::runtime
