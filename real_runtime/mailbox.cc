#include "real_runtime/mailbox.h"

namespace ppsim::runtime {

// A thread that finds the run aborted, on arriving or while waiting, leaves
// by Aborted and is not counted: no later arriver can complete a generation
// that it did not reach, so no rank ever passes a barrier after an abort
// that it could have seen.
void AbortableBarrier::arrive_and_wait() {
  std::unique_lock<std::mutex> lock(mu_);
  if (control_->aborted()) throw Aborted{};
  const int64_t generation = generation_;
  if (++waiting_ == n_) {
    waiting_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  while (generation_ == generation) {
    if (control_->aborted()) {
      --waiting_;
      throw Aborted{};
    }
    cv_.wait_for(lock, kAbortPoll);
  }
}

}  // namespace ppsim::runtime
