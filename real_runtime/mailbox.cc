#include "real_runtime/mailbox.h"

#include <fmt/format.h>

#include <stdexcept>

namespace ppsim::runtime {

template <typename S>
void Mailbox<S>::put(const Key& key, Message<S> message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool inserted = messages_.emplace(key, std::move(message)).second;
    if (!inserted) {
      throw std::logic_error(fmt::format(
          "a second {} for microbatch {} stage {} slice {} arrived before the first was received",
          key.kind == MessageKind::kActivation ? "activation" : "gradient", key.microbatch,
          key.stage, key.slice));
    }
  }
  cv_.notify_all();
}

template <typename S>
Message<S> Mailbox<S>::take(const Key& key) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (control_->aborted()) throw Aborted{};
    auto it = messages_.find(key);
    if (it != messages_.end()) {
      Message<S> m = std::move(it->second);
      messages_.erase(it);
      return m;
    }
    cv_.wait_for(lock, kAbortPoll);
  }
}

void AbortableBarrier::arrive_and_wait() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t generation = generation_;
  if (++waiting_ == n_) {
    waiting_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  while (generation_ == generation) {
    if (control_->aborted()) throw Aborted{};
    cv_.wait_for(lock, kAbortPoll);
  }
}

template class Mailbox<float>;
template class Mailbox<double>;

}  // namespace ppsim::runtime
