// What a backend supplies to the shared per-rank executor (rank_executor.h):
// how a tensor reaches another rank, how a rank waits for one, the barrier
// before the optimizer step, where a failure goes, and, for devices that
// compute asynchronously, the bracket around a rank's compute. The threads
// backend hands tensors between threads through mailboxes (mailbox.h); the
// MPI backend sends them as MPI messages; the CUDA backend copies device
// tensors between streams or devices. `T` is the tensor type of the
// backend's stages: kernels::Mat<S> on the CPU, gpu::DeviceMatrix on a GPU.
// Internal to real_runtime/.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <string>

#include "sim/core/time.h"

namespace ppsim::runtime {

// Thrown in a rank that stops because another rank failed; not the run's
// error, which the failing rank reported.
struct Aborted {};

// The run's clock: picoseconds since `start`, which every rank of a run
// shares (steady_clock is CLOCK_MONOTONIC, one clock for every process of
// a host).
struct RunClock {
  std::chrono::steady_clock::time_point start;
  Picos now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                start)
               .count() *
           1000;
  }
};

enum class MessageKind { kActivation, kGradient };

// What a tensor is for: a receive waits for exactly this key.
struct MessageKey {
  MessageKind kind = MessageKind::kActivation;
  int microbatch = 0;
  int stage = 0;  // the consuming stage
  int slice = 0;
  friend auto operator<=>(const MessageKey&, const MessageKey&) = default;
};

template <typename T>
struct Message {
  T data;
  int32_t producer = 0;  // record index of the action that produced it
  int32_t src_rank = 0;
  // When the transfer began, and when the tensor was at the receiver (set
  // by the transport). The executor stamps the start as it hands the
  // tensor over; a transport whose link copies later (CopyingTransport,
  // transfer_worker.h) restamps it when the copy starts.
  Picos send_start = 0, send_end = 0;
};

template <typename T>
class Transport {
 public:
  virtual ~Transport() = default;
  // Hands `message` to `dst_rank` (possibly the sender itself) under `key`
  // and returns without waiting for the receiver, as the schedule's
  // dependency rules assume.
  virtual void send(int dst_rank, const MessageKey& key, Message<T> message) = 0;
  // Blocks until the message under `key` for `rank` has arrived. Throws
  // Aborted when another rank failed.
  virtual Message<T> receive(int rank, const MessageKey& key) = 0;
  // Waits for every rank. Throws Aborted when another rank failed.
  virtual void barrier(int rank) = 0;
  // `rank` starts `what` (an action's text, "optimizer step") of
  // `iteration`; for reporting a rank that dies without a word.
  virtual void entering(int /*rank*/, int /*iteration*/, const std::string& /*what*/) {}
  // Around what `rank` computes for one action (`id`: its record index + 1)
  // or for the optimizer step (`id` 0): a device that computes
  // asynchronously marks the work for its tracer in begin and waits for it
  // in end, so that the record's end is when the device finished. Both
  // throw (std::runtime_error) on a device error.
  virtual void compute_begin(int /*rank*/, uint64_t /*id*/) {}
  virtual void compute_end(int /*rank*/, uint64_t /*id*/) {}
  // A rank failed: "rank 1, 1F3: <what>". The first failure is the run's.
  virtual void abort_run(std::string message) = 0;
};

}  // namespace ppsim::runtime
