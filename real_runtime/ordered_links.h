// Links whose messages are told apart by their order only, not by a tag:
// NCCL's send and receive match the n-th send from a rank to a peer with
// the peer's n-th receive from it. The CUDA backend over NCCL
// (cuda_mpi_backend.cc) therefore gives every direction between two ranks
// a communicator of its own (directed_links: which directions a schedule
// uses), sends a small header with each tensor's key ahead of it over MPI
// (which keeps the order of one tag between two ranks), and posts the
// receives in the sender's order: a rank that needs a key reads the
// headers from its producer, posting a receive for each and staging the
// ones for other keys, until the key comes (InOrderReceiver). Sends never
// wait for the receiver, so every receive posted is one the sender has
// already issued, and the staged ones are those the sender issued first.
// Host logic, no NCCL here; internal to real_runtime/.
#pragma once

#include <compare>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "real_runtime/transport.h"
#include "schedules/schedule.h"

namespace ppsim::runtime {

// A direction between two ranks that tensors travel: activations from the
// rank of stage s to the rank of stage s + 1, gradients back.
struct DirectedLink {
  int src = 0, dst = 0;
  friend auto operator<=>(const DirectedLink&, const DirectedLink&) = default;
};

// The directions `schedule` sends tensors over, between distinct ranks,
// sorted and each once (a stage's hand-off to a stage of its own rank needs
// none).
std::vector<DirectedLink> directed_links(const Schedule& schedule);

// The receiving side of the links into one rank: per source rank, what was
// posted ahead of its turn, by key, in arrival order.
template <typename Posted>
class InOrderReceiver {
 public:
  // The message under `key` from `src`: the oldest one staged under that
  // key, or else the next ones `post_next(src)` gives (a std::pair of the
  // key and the Posted, in the sender's order), staging those for other
  // keys, until one under `key` comes.
  template <typename PostNext>
  Posted take(int src, const MessageKey& key, PostNext&& post_next) {
    std::map<MessageKey, std::deque<Posted>>& from = staged_[src];
    if (auto it = from.find(key); it != from.end()) {
      Posted p = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) from.erase(it);
      --count_;
      return p;
    }
    for (;;) {
      std::pair<MessageKey, Posted> next = post_next(src);
      if (next.first == key) return std::move(next.second);
      from[next.first].push_back(std::move(next.second));
      ++count_;
    }
  }
  // Messages posted and not yet taken.
  int staged() const { return count_; }

 private:
  std::map<int, std::map<MessageKey, std::deque<Posted>>> staged_;
  int count_ = 0;
};

}  // namespace ppsim::runtime
