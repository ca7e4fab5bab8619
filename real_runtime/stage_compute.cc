#include "real_runtime/stage_compute.h"

#include <fmt/format.h>

#include <random>
#include <stdexcept>

#include "profiler/allocation.h"

namespace ppsim::runtime {

using kernels::BlockParams;
using kernels::HeadParams;
using kernels::KvCache;
using kernels::KvGrad;
using kernels::LossSaved;
using kernels::Saved;

Status check_model(const RuntimeModel& m, int num_stages) {
  if (m.layers < 1 || m.hidden < 1 || m.ffn < 1 || m.heads < 1 || m.seq_len < 1 || m.vocab < 2 ||
      m.micro_batch < 1) {
    return Error{fmt::format(
        "runtime model: layers, hidden, ffn, heads, seq_len, micro_batch must be positive and "
        "vocab at least 2 (got {}, {}, {}, {}, {}, {}, {})",
        m.layers, m.hidden, m.ffn, m.heads, m.seq_len, m.micro_batch, m.vocab)};
  }
  if (m.hidden % m.heads != 0) {
    return Error{fmt::format("runtime model: hidden ({}) must be a multiple of heads ({})",
                             m.hidden, m.heads)};
  }
  if (num_stages < 1 || m.layers % num_stages != 0) {
    return Error{
        fmt::format("runtime model: {} layers do not split evenly into the schedule's {} stages",
                    m.layers, num_stages)};
  }
  return {};
}

Result<std::vector<int>> slice_lengths(const RuntimeModel& m, int num_slices) {
  if (num_slices < 1 || num_slices > m.seq_len) {
    return Error{fmt::format("runtime model: cannot cut a sequence of {} tokens into {} slices",
                             m.seq_len, num_slices)};
  }
  if (m.slice_lengths.empty()) {
    std::vector<int> lengths(num_slices, m.seq_len / num_slices);
    for (int j = 0; j < m.seq_len % num_slices; ++j) ++lengths[j];
    return lengths;
  }
  int total = 0;
  bool positive = true;
  for (int l : m.slice_lengths) {
    total += l;
    positive = positive && l > 0;
  }
  if (static_cast<int>(m.slice_lengths.size()) != num_slices || total != m.seq_len || !positive) {
    return Error{fmt::format(
        "runtime model: slice_lengths must be {} positive lengths summing to seq_len {}",
        num_slices, m.seq_len)};
  }
  return m.slice_lengths;
}

std::vector<int32_t> microbatch_tokens(const RuntimeModel& m, int iteration, int microbatch) {
  // One stream per (iteration, microbatch), so any execution order draws the same data.
  std::seed_seq seq{static_cast<uint32_t>(m.seed), static_cast<uint32_t>(m.seed >> 32),
                    static_cast<uint32_t>(iteration), static_cast<uint32_t>(microbatch)};
  std::mt19937_64 rng(seq);
  std::uniform_int_distribution<int32_t> id(0, m.vocab - 1);
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<size_t>(m.micro_batch) * (m.seq_len + 1));
  for (int i = 0; i < m.micro_batch; ++i) {
    // A random start, then a fixed successor rule: there is something to
    // learn, so that a working run's loss visibly falls.
    int32_t t = id(rng);
    for (int k = 0; k <= m.seq_len; ++k) {
      tokens.push_back(t);
      t = static_cast<int32_t>((5LL * t + 3) % m.vocab);
    }
  }
  return tokens;
}

namespace {

// Ids [offset, offset + length) of each sequence, sequence-major.
std::vector<int32_t> slice_ids(const RuntimeModel& m, const std::vector<int32_t>& tokens,
                               int offset, int length) {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(m.micro_batch) * length);
  for (int i = 0; i < m.micro_batch; ++i) {
    const auto begin = tokens.begin() + static_cast<ptrdiff_t>(i) * (m.seq_len + 1) + offset;
    out.insert(out.end(), begin, begin + length);
  }
  return out;
}

template <typename S>
void axpy_and_zero(std::vector<kernels::TensorView<S>> params,
                   std::vector<kernels::TensorView<S>> grads, double lr) {
  for (size_t t = 0; t < params.size(); ++t) {
    for (int64_t i = 0; i < params[t].size; ++i) {
      params[t].data[i] -= static_cast<S>(lr) * grads[t].data[i];
      grads[t].data[i] = 0;
    }
  }
}

[[noreturn]] void out_of_order(const char* what, int stage, int mb, int slice) {
  throw std::logic_error(
      fmt::format("stage {} microbatch {} slice {}: {}", stage, mb, slice, what));
}

}  // namespace

template <typename S>
struct StageCompute<S>::Slot {
  std::vector<Saved<S>> saved;  // per block
  LossSaved<S> loss;            // last stage
  Mat embed_dx;                 // stage 0, from I to W
  bool forward_done = false, input_done = false;
};

template <typename S>
struct StageCompute<S>::Kv {
  std::vector<KvCache<S>> cache;
  std::vector<KvGrad<S>> grad;
};

template <typename S>
StageCompute<S>::StageCompute(const RuntimeModel& model, int stage, int num_stages,
                              int num_microbatches, std::vector<int> lengths)
    : model_(model),
      stage_(stage),
      num_stages_(num_stages),
      num_microbatches_(num_microbatches),
      first_block_(stage * (model.layers / num_stages)),
      lengths_(std::move(lengths)) {
  kernels::retain_freed_memory();  // as the profiler does
  const int per_stage = model.layers / num_stages;
  for (int k = 0; k < per_stage; ++k) {
    // Seeded by the global block index: every split of the layers trains the same model.
    blocks_.push_back(kernels::init_params<S>(model.hidden, model.ffn, model.heads,
                                              model.seed * 1000003 + first_block_ + k + 1));
    block_grads_.push_back(kernels::zero_params<S>(model.hidden, model.ffn, model.heads));
  }
  head_ = kernels::init_head_params<S>(model.vocab, model.hidden, model.seq_len, model.seed);
  head_grads_ = kernels::zero_head_params<S>(model.vocab, model.hidden, model.seq_len);
  offsets_.assign(lengths_.size(), 0);
  for (size_t j = 1; j < lengths_.size(); ++j) offsets_[j] = offsets_[j - 1] + lengths_[j - 1];
  loss_scale_ = static_cast<S>(
      1.0 / (static_cast<double>(model.micro_batch) * model.seq_len * num_microbatches));
  slots_.resize(static_cast<size_t>(num_microbatches) * lengths_.size());
  kv_.resize(num_microbatches);
  after_forward_.assign(lengths_.size(), 0);
  after_input_.assign(lengths_.size(), 0);
}

template <typename S>
StageCompute<S>::~StageCompute() = default;

template <typename S>
typename StageCompute<S>::Slot& StageCompute<S>::slot(int mb, int slice) {
  if (mb < 0 || mb >= num_microbatches_ || slice < 0 ||
      slice >= static_cast<int>(lengths_.size())) {
    out_of_order("no such microbatch or slice", stage_, mb, slice);
  }
  std::unique_ptr<Slot>& s = slots_[static_cast<size_t>(mb) * lengths_.size() + slice];
  if (!s) s = std::make_unique<Slot>();
  return *s;
}

template <typename S>
typename StageCompute<S>::Mat StageCompute<S>::forward(int iteration, int mb, int slice,
                                                       const Mat& x_in, double* loss) {
  Slot& s = slot(mb, slice);
  if (s.forward_done) out_of_order("forward twice", stage_, mb, slice);
  const int c = context(slice), l = lengths_[slice], b = model_.micro_batch;
  if (slice == 0) {
    auto kv = std::make_unique<Kv>();
    for (size_t k = 0; k < blocks_.size(); ++k) {
      kv->cache.emplace_back(b, model_.hidden, model_.seq_len);
      kv->grad.emplace_back(b, model_.hidden, model_.seq_len);
    }
    kv_[mb] = std::move(kv);
  }
  Kv* kv = kv_[mb].get();
  if (kv == nullptr || (!blocks_.empty() && kv->cache[0].length() != c)) {
    out_of_order("forward before the earlier slices' forward", stage_, mb, slice);
  }
  std::vector<int32_t> tokens;
  if (first() || last()) tokens = microbatch_tokens(model_, iteration, mb);
  Mat x = first() ? kernels::embed_forward(head_, slice_ids(model_, tokens, c, l), b, c) : x_in;
  if (x.rows() != static_cast<Eigen::Index>(b) * l || x.cols() != model_.hidden) {
    out_of_order("input of the wrong shape", stage_, mb, slice);
  }
  s.saved.resize(blocks_.size());
  for (size_t k = 0; k < blocks_.size(); ++k) {
    x = kernels::forward(blocks_[k], x, &kv->cache[k], &s.saved[k]);
  }
  s.forward_done = true;
  if (last()) {
    *loss += static_cast<double>(
        kernels::loss_forward(head_, x, slice_ids(model_, tokens, c + 1, l), loss_scale_, &s.loss));
    x = Mat();
  }
  after_forward_[slice] = std::max(after_forward_[slice], held_bytes(mb, slice));
  return x;
}

template <typename S>
typename StageCompute<S>::Mat StageCompute<S>::backward_input(int mb, int slice, const Mat& dy_in) {
  Slot& s = slot(mb, slice);
  if (!s.forward_done || s.input_done)
    out_of_order("input gradient without forward", stage_, mb, slice);
  Kv* kv = kv_[mb].get();
  const int c = context(slice), l = lengths_[slice];
  if (kv == nullptr || (!blocks_.empty() && kv->cache[0].length() != c + l)) {
    out_of_order("input gradient before the later slices' input gradient", stage_, mb, slice);
  }
  Mat dy = last() ? kernels::loss_backward_input(head_, &s.loss) : dy_in;
  if (dy.rows() != static_cast<Eigen::Index>(model_.micro_batch) * l ||
      dy.cols() != model_.hidden) {
    out_of_order("gradient of the wrong shape", stage_, mb, slice);
  }
  for (size_t k = blocks_.size(); k-- > 0;) {
    dy = kernels::backward_input(blocks_[k], dy, &kv->cache[k], &kv->grad[k], &s.saved[k]);
  }
  s.input_done = true;
  if (slice == 0) kv_[mb].reset();  // the last backward of the microbatch's slices
  if (first()) {
    s.embed_dx = std::move(dy);
    dy = Mat();
  }
  after_input_[slice] = std::max(after_input_[slice], held_bytes(mb, slice));
  return dy;
}

template <typename S>
void StageCompute<S>::backward_weight(int iteration, int mb, int slice) {
  Slot& s = slot(mb, slice);
  if (!s.input_done) out_of_order("weight gradient before input gradient", stage_, mb, slice);
  for (size_t k = 0; k < blocks_.size(); ++k) {
    kernels::backward_weight(blocks_[k], &s.saved[k], &block_grads_[k]);
  }
  if (last()) kernels::loss_backward_weight(head_, &s.loss, &head_grads_);
  if (first()) {
    const std::vector<int32_t> tokens = microbatch_tokens(model_, iteration, mb);
    const int c = context(slice);
    kernels::embed_backward_weight(slice_ids(model_, tokens, c, lengths_[slice]),
                                   model_.micro_batch, c, s.embed_dx, &head_grads_);
  }
  slots_[static_cast<size_t>(mb) * lengths_.size() + slice].reset();
}

template <typename S>
typename StageCompute<S>::Mat StageCompute<S>::backward(int iteration, int mb, int slice,
                                                        const Mat& dy) {
  Mat dx = backward_input(mb, slice, dy);
  backward_weight(iteration, mb, slice);
  return dx;
}

template <typename S>
void StageCompute<S>::sgd_step(double learning_rate) {
  for (size_t k = 0; k < blocks_.size(); ++k) {
    axpy_and_zero(blocks_[k].tensors(), block_grads_[k].tensors(), learning_rate);
  }
  // Unused head parts have zero gradients and stay as initialised.
  axpy_and_zero(head_.tensors(), head_grads_.tensors(), learning_rate);
}

template <typename S>
int64_t StageCompute<S>::held_bytes(int mb, int slice) const {
  const std::unique_ptr<Slot>& s = slots_[static_cast<size_t>(mb) * lengths_.size() + slice];
  if (!s) return 0;
  int64_t total = s->loss.bytes() + static_cast<int64_t>(s->embed_dx.size() * sizeof(S));
  for (const Saved<S>& saved : s->saved) total += saved.bytes();
  return total;
}

template <typename S>
StageWeights StageCompute<S>::weights() const {
  StageWeights out;
  out.stage = stage_;
  const auto add = [&](const std::string& name, const kernels::TensorView<S>& t) {
    out.names.push_back(name);
    out.tensors.emplace_back(t.data, t.data + t.size);
  };
  // tensors() is non-const only because its views can write; these copies do not.
  auto& self = const_cast<StageCompute&>(*this);
  for (const auto& t : self.head_.tensors()) {
    const std::string name = t.name;
    const bool embedding = name == "tok_emb" || name == "pos_emb";
    if ((embedding && first()) || (!embedding && last())) add(name, t);
  }
  for (size_t k = 0; k < blocks_.size(); ++k) {
    for (const auto& t : self.blocks_[k].tensors()) {
      add(fmt::format("block{}.{}", first_block_ + static_cast<int>(k), t.name), t);
    }
  }
  return out;
}

template class StageCompute<float>;
template class StageCompute<double>;

}  // namespace ppsim::runtime
