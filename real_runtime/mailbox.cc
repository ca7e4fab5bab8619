#include "real_runtime/mailbox.h"

namespace ppsim::runtime {

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

}  // namespace ppsim::runtime
