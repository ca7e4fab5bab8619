// The links of the backends whose ranks are threads of one process (the
// threads and CUDA backends): one Mailbox per rank holds the tensors sent
// to it, keyed by what they are for (MessageKey: an activation or a
// gradient, the microbatch, the consuming stage and the slice); a receive
// blocks until its key arrives. A RunControl is shared by all ranks of a
// run: the first failure records its message and raises the abort flag,
// which wakes every blocked receive and barrier, so a failing rank never
// leaves the others hanging. InProcessTransport puts them together; a
// backend adds how a tensor is copied for another rank. Internal to
// real_runtime/.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "real_runtime/transport.h"

namespace ppsim::runtime {

class RunControl;

// Something a rank may block on, so that RunControl can wake it.
class Wakeable {
 public:
  virtual ~Wakeable() = default;
  virtual void wake() = 0;
};

class RunControl {
 public:
  // Records the first failure only; later ones are consequences.
  void abort_run(std::string message) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.empty()) error_ = std::move(message);
    }
    aborted_.store(true);
    for (Wakeable* w : waiters_) w->wake();
  }
  bool aborted() const { return aborted_.load(); }
  std::string error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  // Before the threads start only.
  void add(Wakeable* w) { waiters_.push_back(w); }

 private:
  mutable std::mutex mu_;
  std::string error_;
  std::atomic<bool> aborted_{false};
  std::vector<Wakeable*> waiters_;
};

// How long a blocked thread sleeps before it looks at the abort flag again,
// should a wake-up be missed: bounds the time an abort takes to reach all.
inline constexpr std::chrono::milliseconds kAbortPoll{20};

template <typename T>
class Mailbox : public Wakeable {
 public:
  using Key = MessageKey;

  explicit Mailbox(const RunControl* control) : control_(control) {}

  // Throws std::logic_error on a second message under one key (a schedule
  // bug: the first would be lost).
  void put(const Key& key, Message<T> message) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const bool inserted = messages_.emplace(key, std::move(message)).second;
      if (!inserted) {
        throw std::logic_error(fmt::format(
            "a second {} for microbatch {} stage {} slice {} arrived before the first was "
            "received",
            key.kind == MessageKind::kActivation ? "activation" : "gradient", key.microbatch,
            key.stage, key.slice));
      }
    }
    cv_.notify_all();
  }
  // Blocks until `key` arrives; throws Aborted when the run is aborted.
  Message<T> take(const Key& key) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (control_->aborted()) throw Aborted{};
      auto it = messages_.find(key);
      if (it != messages_.end()) {
        Message<T> m = std::move(it->second);
        messages_.erase(it);
        return m;
      }
      cv_.wait_for(lock, kAbortPoll);
    }
  }
  void wake() override {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

 private:
  const RunControl* control_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Message<T>> messages_;
};

// A barrier of n threads that an abort releases (std::barrier cannot be
// left by a thread whose peer died).
class AbortableBarrier : public Wakeable {
 public:
  AbortableBarrier(int n, const RunControl* control) : n_(n), control_(control) {}
  // Throws Aborted when the run is aborted.
  void arrive_and_wait();
  void wake() override {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

 private:
  int n_;
  const RunControl* control_;
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  int64_t generation_ = 0;
};

// In-process links: a mailbox per rank, a barrier that an abort releases.
// A backend's send() makes the receiver's copy of a cross-rank tensor (as
// a link would), on a thread of the link (CopyingTransport,
// transfer_worker.h), and hands it on with deliver().
template <typename T>
class InProcessTransport : public Transport<T> {
 public:
  InProcessTransport(int num_ranks, const RunClock* clock) : clock_(clock) {
    for (int r = 0; r < num_ranks; ++r) {
      mailboxes_.push_back(std::make_unique<Mailbox<T>>(&control_));
      control_.add(mailboxes_.back().get());
    }
    barrier_ = std::make_unique<AbortableBarrier>(num_ranks, &control_);
    control_.add(barrier_.get());
  }

  Message<T> receive(int rank, const MessageKey& key) override {
    return mailboxes_[rank]->take(key);
  }
  void barrier(int /*rank*/) override { barrier_->arrive_and_wait(); }
  void abort_run(std::string message) override { control_.abort_run(std::move(message)); }

  RunControl& control() { return control_; }

 protected:
  // The tensor is at the receiver now: stamps the message's end and puts it
  // in `dst_rank`'s mailbox.
  void deliver(int dst_rank, const MessageKey& key, Message<T> m) {
    m.send_end = clock_->now();
    mailboxes_[dst_rank]->put(key, std::move(m));
  }
  const RunClock& clock() const { return *clock_; }

 private:
  const RunClock* clock_;
  RunControl control_;
  std::vector<std::unique_ptr<Mailbox<T>>> mailboxes_;
  std::unique_ptr<AbortableBarrier> barrier_;
};

}  // namespace ppsim::runtime
