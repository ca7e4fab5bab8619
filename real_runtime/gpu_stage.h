// A pipeline stage on a GPU: StageCompute's contract (stage_compute.h) --
// the same model split, data, actions, state and order checks -- with the
// GPU block (profiler/gpu_block.h) and the GPU embedding and loss
// (profiler/gpu_head.h) in the model's bf16 or fp16, so that the CUDA
// backend's RankExecutor runs the same per-rank programs as the CPU
// backends. Internal to real_runtime/.
//
// State on the device: per block the parameters in the storage type, their
// fp32 master copy and fp32 gradients (and likewise the embedding at stage
// 0, the final layer norm and output projection at the last stage); per
// (microbatch, slice) from its F each block's GpuSaved, the loss's
// GpuLossSaved, and at stage 0 the slice's token ids and, from I to W, its
// input gradient; per microbatch each block's KV cache and KV gradient from
// slice 0's F to slice 0's I. Weights start as the CPU stage's (the same
// seeded initialisation, uploaded), so a run trains the model the CPU
// backends train, in 16 bits.
//
// Synchronous schedules only: a step updates the one weight version in
// place (the CUDA backend refuses schedules with S actions; weight
// stashing on the GPU is not built).
//
// Every call issues work on the context's stream and returns once it is
// issued; the backend waits for it (Transport::compute_end). F at the last
// stage waits for its loss. CUDA failures throw std::runtime_error, actions
// out of order std::logic_error (throw_out_of_order), as StageCompute does.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "profiler/gpu_block.h"
#include "profiler/gpu_head.h"
#include "real_runtime/runtime.h"

namespace ppsim::runtime {

// Inside a rank, a failed GPU call is an exception (the executor reports it
// as "rank 1, 1F3: <what>"): std::runtime_error with the call's message.
void throw_if_failed(const Status& st);
template <typename T>
T value_or_throw(Result<T> r) {
  if (!r) throw std::runtime_error(r.error().message);
  return std::move(*r);
}

class GpuStage {
 public:
  using Tensor = gpu::DeviceMatrix;

  // REQUIRES: check_model(model, num_stages) ok (so every stage has a
  // block); lengths from
  // slice_lengths; `ctx` current on the calling thread here and at every
  // later call, and outlives the stage. Throws std::runtime_error on a
  // CUDA error or a storage type that is not bf16 or fp16.
  GpuStage(gpu::GpuContext* ctx, const RuntimeModel& model, int stage, int num_stages,
           int num_microbatches, std::vector<int> lengths);
  ~GpuStage();
  GpuStage(const GpuStage&) = delete;
  GpuStage& operator=(const GpuStage&) = delete;

  Tensor forward(int iteration, int mb, int slice, const Tensor& x, double* loss);
  Tensor backward_input(int mb, int slice, const Tensor& dy);
  void backward_weight(int iteration, int mb, int slice);
  Tensor backward(int iteration, int mb, int slice, const Tensor& dy);
  // Mixed-precision SGD on every tensor of the stage; the gradients are then zero.
  void sgd_step(double learning_rate);
  int max_weight_versions() const { return 1; }
  // Bytes of the stage's weights in the storage type.
  int64_t weight_bytes() const;

  // As StageCompute's: the blocks' GpuSaved::bytes(), the loss's
  // GpuLossSaved::bytes() and stage 0's kept input gradient.
  int64_t held_bytes(int mb, int slice) const;
  int64_t activation_bytes(int slice) const { return after_forward_[slice]; }
  int64_t weight_grad_bytes(int slice) const { return after_input_[slice]; }

  // The fp32 master weights, named as StageCompute's (waits for the GPU).
  StageWeights weights() const;
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == num_stages_ - 1; }

 private:
  struct Block;
  struct Slot;
  struct Kv;
  Slot& slot(int mb, int slice);
  int context(int slice) const { return offsets_[slice]; }
  bool has_head() const { return first() || last(); }

  gpu::GpuContext* ctx_;
  RuntimeModel model_;
  int stage_, num_stages_, num_microbatches_, first_block_;
  std::vector<int> lengths_, offsets_;
  float loss_scale_;
  std::vector<Block> blocks_;
  // The embedding and/or the loss's weights: storage, master, gradients.
  gpu::GpuHeadParams head_, head_master_, head_grads_;
  std::vector<std::unique_ptr<Slot>> slots_;  // (mb, slice), allocated at F
  std::vector<std::unique_ptr<Kv>> kv_;       // per mb, slice 0's F to slice 0's I
  std::vector<int64_t> after_forward_, after_input_;
};

}  // namespace ppsim::runtime
