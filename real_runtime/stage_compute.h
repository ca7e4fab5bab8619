// A pipeline stage's share of the model and its per-microbatch state: the
// one place where the schedule's actions (F, I, W, B of a microbatch's token
// slice) meet the kernels. The threads backend owns one per stage, on the
// thread of the rank that owns the stage; the sequential reference drives a
// single one for the whole model. Internal to real_runtime/.
//
// State follows the schedule exactly: F allocates the slice's `Saved` in
// every block (and the loss head's at the last stage), I reduces it to what
// W needs, W or B frees it. Each microbatch's KV cache (per block) lives
// from its slice 0's F to its slice 0's I, the last backward of its slices.
// At stage 0 the input gradient of the first block is kept from I to W,
// where the embedding's gradient is scattered from it.
//
// Weights are versioned for asynchronous schedules (PipeDream's weight
// stashing): a microbatch's first F on the stage pins the newest version,
// and its later slices, I and W compute with that version. A step updates
// the newest version in place when no microbatch in flight pinned it, else a
// copy of it; an older version is freed with the last microbatch that
// pinned it. Synchronous schedules step after their program, with nothing in
// flight, so they keep one version.
//
// Failures the schedule could cause (an action out of the order the state
// needs) throw std::logic_error, which the backend turns into the run's
// Error; kernel preconditions are PPSIM_CHECKs behind those.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profiler/gpt_block.h"
#include "profiler/gpt_head.h"
#include "real_runtime/runtime.h"

namespace ppsim::runtime {

// Token lengths of the slices of a sequence (model.slice_lengths, or the
// even cut). Error when they do not fit the sequence.
Result<std::vector<int>> slice_lengths(const RuntimeModel& model, int num_slices);

// Checks the model's shapes for `num_stages` stages.
Status check_model(const RuntimeModel& model, int num_stages);

// True when the schedule steps inside its programs (S actions: PipeDream,
// 2BW), false when it steps after them. Error when some stage has S
// actions and another none (its weights would never train).
Result<bool> steps_in_programs(const Schedule& schedule);

// The micro_batch sequences of (iteration, microbatch): seq_len + 1 ids each,
// sequence-major; inputs are ids [0, seq_len), targets ids [1, seq_len].
std::vector<int32_t> microbatch_tokens(const RuntimeModel& model, int iteration, int microbatch);

// Where each slice starts in the sequence (the context its attention reads).
std::vector<int> slice_offsets(const std::vector<int>& lengths);
// The scale of a microbatch's summed loss, 1 / (micro_batch seq_len m): an
// iteration's m microbatches add up to the batch mean.
double loss_scale(const RuntimeModel& model, int num_microbatches);

// Ids [offset, offset + length) of each of the microbatch's sequences
// (`tokens` from microbatch_tokens), sequence-major: a slice's inputs, or,
// one further, its targets.
std::vector<int32_t> slice_ids(const RuntimeModel& model, const std::vector<int32_t>& tokens,
                               int offset, int length);

// Throws the std::logic_error of an action out of the order the stage's
// state needs: "stage 1 microbatch 3 slice 0: <what>".
[[noreturn]] void throw_out_of_order(const char* what, int stage, int mb, int slice);

// Calls fn(name, view) for each tensor a stage uses, named as StageWeights
// names them: at the first stage the head's embeddings, at the last its
// other tensors (final layer norm, output projection), then the stage's
// blocks as "block<first_block + k>.<tensor>".
template <typename S, typename Fn>
void for_each_stage_tensor(std::vector<kernels::BlockParams<S>>& blocks,
                           kernels::HeadParams<S>& head, int first_block, bool first, bool last,
                           Fn fn) {
  for (const auto& t : head.tensors()) {
    const std::string name = t.name;
    const bool embedding = name == "tok_emb" || name == "pos_emb";
    if ((embedding && first) || (!embedding && last)) fn(name, t);
  }
  for (size_t k = 0; k < blocks.size(); ++k) {
    for (const auto& t : blocks[k].tensors()) {
      fn("block" + std::to_string(first_block + static_cast<int>(k)) + "." + t.name, t);
    }
  }
}

template <typename S>
class StageCompute {
 public:
  using Mat = kernels::Mat<S>;
  using Tensor = Mat;  // what travels between stages (rank_executor.h)

  // REQUIRES: check_model(model, num_stages) ok; lengths from slice_lengths.
  StageCompute(const RuntimeModel& model, int stage, int num_stages, int num_microbatches,
               std::vector<int> lengths);
  ~StageCompute();
  StageCompute(const StageCompute&) = delete;
  StageCompute& operator=(const StageCompute&) = delete;

  // F: `x` is the previous stage's output (unused at stage 0, which embeds
  // the tokens). Returns this stage's output, or, at the last stage, an
  // empty matrix with the slice's scaled loss added to *loss.
  Mat forward(int iteration, int mb, int slice, const Mat& x, double* loss);
  // I: `dy` is the next stage's input gradient (unused at the last stage).
  // Returns dx, or an empty matrix at stage 0.
  Mat backward_input(int mb, int slice, const Mat& dy);
  // W: accumulates the weight gradients of (mb, slice).
  void backward_weight(int iteration, int mb, int slice);
  // B = I then W.
  Mat backward(int iteration, int mb, int slice, const Mat& dy);
  // SGD on the newest version with the gradients accumulated since the last
  // step, which are then zeroed. Microbatches in flight keep the version
  // their forward used.
  void sgd_step(double learning_rate);
  // The weight versions held now (the newest and those pinned by
  // microbatches in flight), and the most held at once so far.
  int weight_versions() const;
  int max_weight_versions() const { return max_versions_; }
  // Bytes of one version of the stage's weights (the tensors weights() lists).
  int64_t weight_bytes() const;

  // Activation bytes held now for (mb, slice): the blocks' Saved::bytes(),
  // the loss head's LossSaved::bytes() and stage 0's kept input gradient.
  int64_t held_bytes(int mb, int slice) const;
  // The most bytes one (mb, slice) held after its F, and after its I.
  int64_t activation_bytes(int slice) const { return after_forward_[slice]; }
  int64_t weight_grad_bytes(int slice) const { return after_input_[slice]; }

  // The newest version.
  StageWeights weights() const;
  // For references that keep their own weight histories: replaces the
  // newest version's tensors by name (converted to S; every tensor of
  // weights() must be given, else it throws) ...
  void set_weights(const StageWeights& weights);
  // ... and returns the gradients accumulated since the last step or take
  // (named as weights()), zeroing them.
  StageWeights take_gradients();
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == num_stages_ - 1; }

 private:
  struct Slot;
  struct Kv;
  struct Params;  // one weight version, or the gradients
  Slot& slot(int mb, int slice);
  int context(int slice) const { return offsets_[slice]; }
  // The newest version, made private to this stage first if a microbatch pinned it.
  Params& newest_for_update();
  // Calls fn(name, view) for each tensor of `params` that the stage uses, named as weights().
  template <typename Fn>
  void for_each_tensor(const Params& params, Fn fn) const;
  StageWeights named(const Params& params) const;

  RuntimeModel model_;
  int stage_, num_stages_, num_microbatches_, first_block_;
  std::vector<int> lengths_, offsets_;
  S loss_scale_;
  std::shared_ptr<Params> weights_;  // the newest version; slots of microbatches share it
  std::vector<std::weak_ptr<const Params>> versions_;  // every version made, while alive
  int max_versions_ = 1;
  std::unique_ptr<Params> grads_;
  std::vector<std::unique_ptr<Slot>> slots_;  // (mb, slice), allocated at F
  std::vector<std::unique_ptr<Kv>> kv_;       // per mb, slice 0's F to slice 0's I
  std::vector<int64_t> after_forward_, after_input_;
};

extern template class StageCompute<float>;
extern template class StageCompute<double>;

}  // namespace ppsim::runtime
