// The in-process backends' links (threads and CUDA): a tensor for another
// rank is copied (the transfer) by a thread of the link it travels, not by
// its sender, which hands it over and goes on computing. That is the link the simulator's
// engine models: one per directed pair of ranks, carrying one transfer at a
// time, first in first out. A TransferWorker is one link's queue and
// thread; CopyingTransport puts one on each link of a schedule. An abort
// (RunControl, mailbox.h) drops what is queued and ends every worker, so a
// failing rank leaves no worker waiting; the workers are joined by close()
// or the destructor. Internal to real_runtime/.
#pragma once

#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "real_runtime/mailbox.h"
#include "real_runtime/ordered_links.h"

namespace ppsim::runtime {

// One link's thread: carries the jobs pushed to it one at a time, in the
// order they were pushed, until it is closed or the run is aborted.
template <typename Job>
class TransferWorker : public Wakeable {
 public:
  using Carry = std::function<void(Job&)>;

  // `carry` runs each job on the worker's thread; what it throws fails the
  // run as "<link>: <what>". REQUIRES: `control` outlives the worker; add
  // the worker to it before any rank can fail.
  TransferWorker(RunControl* control, std::string link, Carry carry)
      : control_(control),
        link_(std::move(link)),
        carry_(std::move(carry)),
        thread_(&TransferWorker::run, this) {}
  ~TransferWorker() override { close(); }
  TransferWorker(const TransferWorker&) = delete;
  TransferWorker& operator=(const TransferWorker&) = delete;

  // Queues `job` behind the ones pushed before it and returns at once.
  void push(Job job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(job));
    }
    cv_.notify_all();
  }
  // Carries what is still queued (after an abort: drops it) and joins the
  // thread. From the owner's thread only.
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void wake() override {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

 private:
  void run() {
    while (std::optional<Job> job = next()) carry(*job);
  }
  // Blocks until a job is queued; none once the run is aborted, or once
  // the worker is closed and its queue is empty.
  std::optional<Job> next() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (control_->aborted()) return std::nullopt;
      if (!queue_.empty()) {
        Job job = std::move(queue_.front());
        queue_.pop_front();
        return job;
      }
      if (closing_) return std::nullopt;
      cv_.wait_for(lock, kAbortPoll);
    }
  }
  // Outside the lock: a failure wakes every Wakeable, this one included.
  void carry(Job& job) {
    try {
      carry_(job);
    } catch (const std::exception& e) {
      control_->abort_run(fmt::format("{}: {}", link_, e.what()));
    } catch (...) {
      control_->abort_run(link_ + ": unknown exception");
    }
  }

  RunControl* control_;
  std::string link_;
  Carry carry_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool closing_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// In-process links that copy: a tensor sent to another rank is copied by
// its link's TransferWorker, which stamps the message's send_start when
// the copy starts and its send_end when the copy is in the receiver's
// mailbox; a hand-off within a rank is delivered as it is, at once.
template <typename T>
class CopyingTransport : public InProcessTransport<T> {
 public:
  // Makes the receiver's copy of `source`, the sender's tensor, on the
  // thread of `link`, and releases the source (the CUDA backend frees it in
  // the order of the link's stream).
  using Copy = std::function<T(T source, const DirectedLink& link)>;

  // A worker on each of `links`. Throws std::system_error when a thread
  // cannot start.
  CopyingTransport(int num_ranks, const RunClock* clock, const std::vector<DirectedLink>& links,
                   Copy copy)
      : InProcessTransport<T>(num_ranks, clock), copy_(std::move(copy)) {
    for (const DirectedLink& link : links) {
      auto worker = std::make_unique<TransferWorker<Transfer>>(
          &this->control(), fmt::format("link from rank {} to rank {}", link.src, link.dst),
          [this](Transfer& t) { carry(t); });
      this->control().add(worker.get());
      workers_.emplace(link, std::move(worker));
    }
  }

  // Throws std::logic_error for a cross-rank send on no link of the
  // transport's (a schedule that the links were not made for).
  void send(int dst_rank, const MessageKey& key, Message<T> m) override {
    if (dst_rank == m.src_rank) {
      this->deliver(dst_rank, key, std::move(m));
      return;
    }
    auto it = workers_.find(DirectedLink{m.src_rank, dst_rank});
    if (it == workers_.end()) {
      throw std::logic_error(
          fmt::format("no link from rank {} to rank {} was made", m.src_rank, dst_rank));
    }
    it->second->push(Transfer{dst_rank, key, std::move(m)});
  }
  // Ends the links: what is queued is carried (after an abort: dropped) and
  // every worker joined. After every rank's thread has returned.
  void close() {
    for (auto& [link, worker] : workers_) worker->close();
  }

 private:
  struct Transfer {
    int dst_rank = 0;
    MessageKey key;
    Message<T> message;
  };

  void carry(Transfer& t) {
    t.message.send_start = this->clock().now();
    t.message.data = copy_(std::move(t.message.data), DirectedLink{t.message.src_rank, t.dst_rank});
    this->deliver(t.dst_rank, t.key, std::move(t.message));
  }

  Copy copy_;
  // Declared last: destroyed (joined) before anything a worker uses.
  std::map<DirectedLink, std::unique_ptr<TransferWorker<Transfer>>> workers_;
};

}  // namespace ppsim::runtime
