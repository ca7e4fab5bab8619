#include "real_runtime/stage_compute.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
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

Result<bool> steps_in_programs(const Schedule& schedule) {
  std::vector<bool> steps(schedule.num_stages, false);
  for (const auto& program : schedule.programs) {
    for (const Action& a : program) {
      if (a.kind == ActionKind::kStep) steps[a.stage] = true;
    }
  }
  const auto with = std::find(steps.begin(), steps.end(), true);
  const auto without = std::find(steps.begin(), steps.end(), false);
  if (with != steps.end() && without != steps.end()) {
    return Error{fmt::format("schedule {}: stage {} never steps (no S action) while stage {} does",
                             schedule.name, without - steps.begin(), with - steps.begin())};
  }
  return with != steps.end();
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

std::vector<int> slice_offsets(const std::vector<int>& lengths) {
  std::vector<int> offsets(lengths.size(), 0);
  for (size_t j = 1; j < lengths.size(); ++j) offsets[j] = offsets[j - 1] + lengths[j - 1];
  return offsets;
}

double loss_scale(const RuntimeModel& model, int num_microbatches) {
  return 1.0 / (static_cast<double>(model.micro_batch) * model.seq_len * num_microbatches);
}

void throw_out_of_order(const char* what, int stage, int mb, int slice) {
  throw std::logic_error(
      fmt::format("stage {} microbatch {} slice {}: {}", stage, mb, slice, what));
}

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
struct StageCompute<S>::Params {
  std::vector<kernels::BlockParams<S>> blocks;
  HeadParams<S> head;  // only the embeddings at stage 0, LN_f and W_out at the last
};

template <typename S>
struct StageCompute<S>::Slot {
  std::shared_ptr<const Params> weights;  // the version pinned at the microbatch's first F
  std::vector<Saved<S>> saved;            // per block
  LossSaved<S> loss;                      // last stage
  Mat embed_dx;                           // stage 0, from I to W
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
      lengths_(std::move(lengths)),
      weights_(std::make_shared<Params>()),
      grads_(std::make_unique<Params>()) {
  kernels::retain_freed_memory();  // as the profiler does
  const int per_stage = model.layers / num_stages;
  for (int k = 0; k < per_stage; ++k) {
    // Seeded by the global block index: every split of the layers trains the same model.
    weights_->blocks.push_back(kernels::init_params<S>(
        model.hidden, model.ffn, model.heads, model.seed * 1000003 + first_block_ + k + 1));
    grads_->blocks.push_back(kernels::zero_params<S>(model.hidden, model.ffn, model.heads));
  }
  weights_->head =
      kernels::init_head_params<S>(model.vocab, model.hidden, model.seq_len, model.seed);
  grads_->head = kernels::zero_head_params<S>(model.vocab, model.hidden, model.seq_len);
  // Each weight version copies the head: keep only the parts the stage uses.
  for (HeadParams<S>* head : {&weights_->head, &grads_->head}) {
    if (!first()) {
      head->tok_emb.resize(0, 0);
      head->pos_emb.resize(0, 0);
    }
    if (!last()) {
      head->lnf_gain.resize(0);
      head->lnf_bias.resize(0);
      head->w_out.resize(0, 0);
    }
  }
  versions_.push_back(weights_);
  offsets_ = slice_offsets(lengths_);
  loss_scale_ = static_cast<S>(loss_scale(model, num_microbatches));
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
    throw_out_of_order("no such microbatch or slice", stage_, mb, slice);
  }
  std::unique_ptr<Slot>& s = slots_[static_cast<size_t>(mb) * lengths_.size() + slice];
  if (!s) s = std::make_unique<Slot>();
  return *s;
}

template <typename S>
typename StageCompute<S>::Mat StageCompute<S>::forward(int iteration, int mb, int slice,
                                                       const Mat& x_in, double* loss) {
  Slot& s = slot(mb, slice);
  if (s.forward_done) throw_out_of_order("forward twice", stage_, mb, slice);
  const int c = context(slice), l = lengths_[slice], b = model_.micro_batch;
  const size_t blocks = grads_->blocks.size();
  if (slice == 0) {
    auto kv = std::make_unique<Kv>();
    for (size_t k = 0; k < blocks; ++k) {
      kv->cache.emplace_back(b, model_.hidden, model_.seq_len);
      kv->grad.emplace_back(b, model_.hidden, model_.seq_len);
    }
    kv_[mb] = std::move(kv);
  }
  Kv* kv = kv_[mb].get();
  if (kv == nullptr || (blocks > 0 && kv->cache[0].length() != c)) {
    throw_out_of_order("forward before the earlier slices' forward", stage_, mb, slice);
  }
  // Slice 0 pins the newest version; the later slices (whose F came after
  // slice 0's, whose W comes after their I) find it in slice 0's slot.
  s.weights = slice == 0 ? weights_ : slot(mb, 0).weights;
  const Params& w = *s.weights;
  std::vector<int32_t> tokens;
  if (first() || last()) tokens = microbatch_tokens(model_, iteration, mb);
  Mat x = first() ? kernels::embed_forward(w.head, slice_ids(model_, tokens, c, l), b, c) : x_in;
  if (x.rows() != static_cast<Eigen::Index>(b) * l || x.cols() != model_.hidden) {
    throw_out_of_order("input of the wrong shape", stage_, mb, slice);
  }
  s.saved.resize(blocks);
  for (size_t k = 0; k < blocks; ++k) {
    x = kernels::forward(w.blocks[k], x, &kv->cache[k], &s.saved[k]);
  }
  s.forward_done = true;
  if (last()) {
    *loss += static_cast<double>(kernels::loss_forward(
        w.head, x, slice_ids(model_, tokens, c + 1, l), loss_scale_, &s.loss));
    x = Mat();
  }
  after_forward_[slice] = std::max(after_forward_[slice], held_bytes(mb, slice));
  return x;
}

template <typename S>
typename StageCompute<S>::Mat StageCompute<S>::backward_input(int mb, int slice, const Mat& dy_in) {
  Slot& s = slot(mb, slice);
  if (!s.forward_done || s.input_done)
    throw_out_of_order("input gradient without forward", stage_, mb, slice);
  Kv* kv = kv_[mb].get();
  const int c = context(slice), l = lengths_[slice];
  const Params& w = *s.weights;
  if (kv == nullptr || (!w.blocks.empty() && kv->cache[0].length() != c + l)) {
    throw_out_of_order("input gradient before the later slices' input gradient", stage_, mb, slice);
  }
  Mat dy = last() ? kernels::loss_backward_input(w.head, &s.loss) : dy_in;
  if (dy.rows() != static_cast<Eigen::Index>(model_.micro_batch) * l ||
      dy.cols() != model_.hidden) {
    throw_out_of_order("gradient of the wrong shape", stage_, mb, slice);
  }
  for (size_t k = w.blocks.size(); k-- > 0;) {
    dy = kernels::backward_input(w.blocks[k], dy, &kv->cache[k], &kv->grad[k], &s.saved[k]);
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
  if (!s.input_done) throw_out_of_order("weight gradient before input gradient", stage_, mb, slice);
  const Params& w = *s.weights;
  for (size_t k = 0; k < w.blocks.size(); ++k) {
    kernels::backward_weight(w.blocks[k], &s.saved[k], &grads_->blocks[k]);
  }
  if (last()) kernels::loss_backward_weight(w.head, &s.loss, &grads_->head);
  if (first()) {
    const std::vector<int32_t> tokens = microbatch_tokens(model_, iteration, mb);
    const int c = context(slice);
    kernels::embed_backward_weight(slice_ids(model_, tokens, c, lengths_[slice]),
                                   model_.micro_batch, c, s.embed_dx, &grads_->head);
  }
  // Also releases the slot's pin on its weight version.
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
typename StageCompute<S>::Params& StageCompute<S>::newest_for_update() {
  // Only this stage's thread touches the pointers, so the count is exact.
  if (weights_.use_count() > 1) {
    weights_ = std::make_shared<Params>(*weights_);
    std::erase_if(versions_, [](const std::weak_ptr<const Params>& v) { return v.expired(); });
    versions_.push_back(weights_);
    max_versions_ = std::max(max_versions_, static_cast<int>(versions_.size()));
  }
  return *weights_;
}

template <typename S>
void StageCompute<S>::sgd_step(double learning_rate) {
  Params& w = newest_for_update();
  for (size_t k = 0; k < w.blocks.size(); ++k) {
    kernels::sgd_update(w.blocks[k].tensors(), grads_->blocks[k].tensors(), learning_rate);
  }
  kernels::sgd_update(w.head.tensors(), grads_->head.tensors(), learning_rate);
}

template <typename S>
int StageCompute<S>::weight_versions() const {
  return static_cast<int>(std::count_if(versions_.begin(), versions_.end(),
                                        [](const auto& v) { return !v.expired(); }));
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
template <typename Fn>
void StageCompute<S>::for_each_tensor(const Params& params, Fn fn) const {
  // tensors() is non-const only because its views can write; callers that
  // were given const params only read through them.
  auto& p = const_cast<Params&>(params);
  for_each_stage_tensor(p.blocks, p.head, first_block_, first(), last(), fn);
}

template <typename S>
StageWeights StageCompute<S>::named(const Params& params) const {
  StageWeights out;
  out.stage = stage_;
  for_each_tensor(params, [&](const std::string& name, const kernels::TensorView<S>& t) {
    out.names.push_back(name);
    out.tensors.emplace_back(t.data, t.data + t.size);
  });
  return out;
}

template <typename S>
StageWeights StageCompute<S>::weights() const {
  return named(*weights_);
}

template <typename S>
StageWeights StageCompute<S>::take_gradients() {
  StageWeights out = named(*grads_);
  for_each_tensor(*grads_, [](const std::string&, const kernels::TensorView<S>& t) {
    std::fill(t.data, t.data + t.size, S{0});
  });
  return out;
}

template <typename S>
void StageCompute<S>::set_weights(const StageWeights& weights) {
  std::map<std::string, const std::vector<double>*> given;
  for (size_t t = 0; t < weights.names.size(); ++t) given[weights.names[t]] = &weights.tensors[t];
  for_each_tensor(
      newest_for_update(), [&](const std::string& name, const kernels::TensorView<S>& t) {
        const auto it = given.find(name);
        if (it == given.end() || static_cast<int64_t>(it->second->size()) != t.size) {
          throw std::logic_error(fmt::format(
              "stage {}: set_weights: tensor {} missing or of another size", stage_, name));
        }
        std::transform(it->second->begin(), it->second->end(), t.data,
                       [](double x) { return static_cast<S>(x); });
      });
}

template <typename S>
int64_t StageCompute<S>::weight_bytes() const {
  int64_t total = 0;
  for_each_tensor(*weights_, [&](const std::string&, const kernels::TensorView<S>& t) {
    total += t.size * static_cast<int64_t>(sizeof(S));
  });
  return total;
}

template class StageCompute<float>;
template class StageCompute<double>;

}  // namespace ppsim::runtime
