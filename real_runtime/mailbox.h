// The links of the threads backend: one Mailbox per rank holds the tensors
// sent to it, keyed by what they are for (MessageKey: an activation or a
// gradient, the microbatch, the consuming stage and the slice); a receive
// blocks until its key arrives. A RunControl is shared by all ranks of a run: the first
// failure records its message and raises the abort flag, which wakes every
// blocked receive and barrier, so a failing rank never leaves the others
// hanging. Internal to real_runtime/.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
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
  void fail(std::string message) {
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

template <typename S>
class Mailbox : public Wakeable {
 public:
  using Key = MessageKey;

  explicit Mailbox(const RunControl* control) : control_(control) {}

  // Throws std::logic_error on a second message under one key (a schedule
  // bug: the first would be lost).
  void put(const Key& key, Message<S> message);
  // Blocks until `key` arrives; throws Aborted when the run is aborted.
  Message<S> take(const Key& key);
  void wake() override {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

 private:
  const RunControl* control_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Message<S>> messages_;
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

}  // namespace ppsim::runtime
