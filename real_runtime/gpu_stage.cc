#include "real_runtime/gpu_stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "profiler/gpu_block_io.h"
#include "real_runtime/stage_compute.h"

namespace ppsim::runtime {
void throw_if_failed(const Status& st) {
  if (!st) throw std::runtime_error(st.message());
}

namespace {

int64_t matrix_bytes(const gpu::DeviceMatrix& m) { return m.buffer.bytes(); }

}  // namespace

struct GpuStage::Block {
  gpu::GpuBlockParams params;  // storage type: what F, I and W compute with
  gpu::GpuParams master;       // fp32: what the step updates
  gpu::GpuBlockGrads grads;    // fp32
};

struct GpuStage::Slot {
  std::vector<gpu::GpuSaved> saved;  // per block
  gpu::GpuLossSaved loss;            // last stage
  gpu::DeviceTokens tokens;          // stage 0: the slice's ids, from F to W
  gpu::DeviceMatrix embed_dx;        // stage 0, from I to W
  bool forward_done = false, input_done = false;
};

struct GpuStage::Kv {
  std::vector<gpu::GpuKvCache> cache;
  std::vector<gpu::GpuKvGrad> grad;
};

GpuStage::GpuStage(gpu::GpuContext* ctx, const RuntimeModel& model, int stage, int num_stages,
                   int num_microbatches, std::vector<int> lengths)
    : ctx_(ctx),
      model_(model),
      stage_(stage),
      num_stages_(num_stages),
      num_microbatches_(num_microbatches),
      first_block_(stage * (model.layers / num_stages)),
      lengths_(std::move(lengths)) {
  if (!gpu::is_storage_type(model.dtype)) {
    throw std::runtime_error(fmt::format(
        "the GPU stages store bf16 or fp16, not {} (set model.dtype)", to_string(model.dtype)));
  }
  const gpu::ParamLayout layout = gpu::param_layout(model.hidden, model.ffn, model.heads);
  const int per_stage = model.layers / num_stages;
  for (int k = 0; k < per_stage; ++k) {
    // The CPU stage's initialisation, seeded by the global block index.
    const kernels::BlockParams<float> init = kernels::init_params<float>(
        model.hidden, model.ffn, model.heads, model.seed * 1000003 + first_block_ + k + 1);
    Block b;
    b.params = value_or_throw(gpu::upload_params(*ctx_, init, model.dtype));
    b.master = value_or_throw(gpu::allocate_params(*ctx_, layout, DType::kFp32));
    const std::vector<float> packed = gpu::pack_params(init, layout);
    throw_if_failed(
        gpu::upload(*ctx_, packed.data(), layout.total, DType::kFp32, b.master.data.get()));
    b.grads = value_or_throw(gpu::zero_grads(*ctx_, model.hidden, model.ffn, model.heads));
    blocks_.push_back(std::move(b));
  }
  if (has_head()) {
    const gpu::HeadLayout hl =
        gpu::head_layout(model.vocab, model.hidden, model.seq_len, first(), last());
    const kernels::HeadParams<float> init =
        kernels::init_head_params<float>(model.vocab, model.hidden, model.seq_len, model.seed);
    head_ = value_or_throw(gpu::upload_head(*ctx_, init, hl, model.dtype));
    head_master_ = value_or_throw(gpu::upload_head(*ctx_, init, hl, DType::kFp32));
    head_grads_ = value_or_throw(gpu::allocate_head(*ctx_, hl, DType::kFp32));
  }
  offsets_ = slice_offsets(lengths_);
  loss_scale_ = static_cast<float>(loss_scale(model, num_microbatches));
  slots_.resize(static_cast<size_t>(num_microbatches) * lengths_.size());
  kv_.resize(num_microbatches);
  after_forward_.assign(lengths_.size(), 0);
  after_input_.assign(lengths_.size(), 0);
  throw_if_failed(ctx_->synchronize());
}

GpuStage::~GpuStage() = default;

GpuStage::Slot& GpuStage::slot(int mb, int slice) {
  if (mb < 0 || mb >= num_microbatches_ || slice < 0 ||
      slice >= static_cast<int>(lengths_.size())) {
    throw_out_of_order("no such microbatch or slice", stage_, mb, slice);
  }
  std::unique_ptr<Slot>& s = slots_[static_cast<size_t>(mb) * lengths_.size() + slice];
  if (!s) s = std::make_unique<Slot>();
  return *s;
}

GpuStage::Tensor GpuStage::forward(int iteration, int mb, int slice, const Tensor& x_in,
                                   double* loss) {
  Slot& s = slot(mb, slice);
  if (s.forward_done) throw_out_of_order("forward twice", stage_, mb, slice);
  const int c = context(slice), l = lengths_[slice], b = model_.micro_batch;
  if (slice == 0) {
    auto kv = std::make_unique<Kv>();
    for (size_t k = 0; k < blocks_.size(); ++k) {
      kv->cache.push_back(value_or_throw(
          gpu::GpuKvCache::create(*ctx_, b, model_.hidden, model_.seq_len, model_.dtype)));
      kv->grad.push_back(
          value_or_throw(gpu::GpuKvGrad::create(*ctx_, b, model_.hidden, model_.seq_len)));
    }
    kv_[mb] = std::move(kv);
  }
  Kv* kv = kv_[mb].get();
  if (kv == nullptr || kv->cache[0].length() != c) {
    throw_out_of_order("forward before the earlier slices' forward", stage_, mb, slice);
  }
  std::vector<int32_t> tokens;
  if (has_head()) tokens = microbatch_tokens(model_, iteration, mb);
  Tensor x;
  const Tensor* in = &x_in;
  if (first()) {
    s.tokens = value_or_throw(gpu::upload_tokens(*ctx_, slice_ids(model_, tokens, c, l)));
    throw_if_failed(gpu::embed_forward(*ctx_, head_, s.tokens, b, c, &x));
    in = &x;
  }
  if (in->rows != static_cast<int64_t>(b) * l || in->cols != model_.hidden ||
      in->type != model_.dtype) {
    throw_out_of_order("input of the wrong shape", stage_, mb, slice);
  }
  s.saved.resize(blocks_.size());
  for (size_t k = 0; k < blocks_.size(); ++k) {
    Tensor y;
    throw_if_failed(gpu::forward(*ctx_, blocks_[k].params, *in, &kv->cache[k], &s.saved[k], &y));
    x = std::move(y);
    in = &x;
  }
  s.forward_done = true;
  if (last()) {
    double value = 0;
    gpu::DeviceTokens targets =
        value_or_throw(gpu::upload_tokens(*ctx_, slice_ids(model_, tokens, c + 1, l)));
    throw_if_failed(
        gpu::loss_forward(*ctx_, head_, *in, std::move(targets), loss_scale_, &s.loss, &value));
    *loss += value;
    x = Tensor();
  }
  after_forward_[slice] = std::max(after_forward_[slice], held_bytes(mb, slice));
  return x;
}

GpuStage::Tensor GpuStage::backward_input(int mb, int slice, const Tensor& dy_in) {
  Slot& s = slot(mb, slice);
  if (!s.forward_done || s.input_done) {
    throw_out_of_order("input gradient without forward", stage_, mb, slice);
  }
  Kv* kv = kv_[mb].get();
  const int c = context(slice), l = lengths_[slice];
  if (kv == nullptr || kv->cache[0].length() != c + l) {
    throw_out_of_order("input gradient before the later slices' input gradient", stage_, mb, slice);
  }
  Tensor dy;
  const Tensor* g = &dy_in;
  if (last()) {
    throw_if_failed(gpu::loss_backward_input(*ctx_, head_, &s.loss, &dy));
    g = &dy;
  }
  if (g->rows != static_cast<int64_t>(model_.micro_batch) * l || g->cols != model_.hidden ||
      g->type != model_.dtype) {
    throw_out_of_order("gradient of the wrong shape", stage_, mb, slice);
  }
  for (size_t k = blocks_.size(); k-- > 0;) {
    Tensor dx;
    throw_if_failed(gpu::backward_input(*ctx_, blocks_[k].params, *g, &kv->cache[k], &kv->grad[k],
                                        &s.saved[k], &dx));
    dy = std::move(dx);
    g = &dy;
  }
  s.input_done = true;
  if (slice == 0) kv_[mb].reset();  // the last backward of the microbatch's slices
  if (first()) {
    s.embed_dx = std::move(dy);
    dy = Tensor();
  }
  after_input_[slice] = std::max(after_input_[slice], held_bytes(mb, slice));
  return dy;
}

void GpuStage::backward_weight(int /*iteration*/, int mb, int slice) {
  Slot& s = slot(mb, slice);
  if (!s.input_done) throw_out_of_order("weight gradient before input gradient", stage_, mb, slice);
  for (size_t k = 0; k < blocks_.size(); ++k) {
    throw_if_failed(gpu::backward_weight(*ctx_, blocks_[k].params, &s.saved[k], &blocks_[k].grads));
  }
  if (last()) throw_if_failed(gpu::loss_backward_weight(*ctx_, head_, &s.loss, &head_grads_));
  if (first()) {
    throw_if_failed(gpu::embed_backward_weight(*ctx_, s.tokens, model_.micro_batch, context(slice),
                                               s.embed_dx, &head_grads_));
  }
  slots_[static_cast<size_t>(mb) * lengths_.size() + slice].reset();
}

GpuStage::Tensor GpuStage::backward(int iteration, int mb, int slice, const Tensor& dy) {
  Tensor dx = backward_input(mb, slice, dy);
  backward_weight(iteration, mb, slice);
  return dx;
}

void GpuStage::sgd_step(double learning_rate) {
  const float lr = static_cast<float>(learning_rate);
  for (Block& b : blocks_) {
    throw_if_failed(
        gpu::sgd_step(*ctx_, lr, b.params.layout.total, static_cast<float*>(b.master.data.get()),
                      static_cast<float*>(b.grads.data.get()), b.params.data.get(), model_.dtype));
  }
  if (has_head()) {
    throw_if_failed(
        gpu::sgd_step(*ctx_, lr, head_.layout.total, static_cast<float*>(head_master_.data.get()),
                      static_cast<float*>(head_grads_.data.get()), head_.data.get(), model_.dtype));
  }
}

int64_t GpuStage::held_bytes(int mb, int slice) const {
  const std::unique_ptr<Slot>& s = slots_[static_cast<size_t>(mb) * lengths_.size() + slice];
  if (!s) return 0;
  int64_t total = s->loss.bytes() + matrix_bytes(s->embed_dx);
  for (const gpu::GpuSaved& saved : s->saved) total += saved.bytes();
  return total;
}

int64_t GpuStage::weight_bytes() const {
  int64_t elements = 0;
  const gpu::ParamLayout layout = gpu::param_layout(model_.hidden, model_.ffn, model_.heads);
  for (int t = 0; t < gpu::kNumParamTensors; ++t) elements += layout.size[t];
  elements *= static_cast<int64_t>(blocks_.size());
  if (has_head()) {
    for (int t = 0; t < gpu::kNumHeadTensors; ++t) elements += head_.layout.size[t];
  }
  return elements * dtype_bytes(model_.dtype);
}

StageWeights GpuStage::weights() const {
  std::vector<kernels::BlockParams<float>> blocks;
  for (const Block& b : blocks_) {
    const gpu::ParamLayout& layout = b.master.layout;
    std::vector<float> packed(layout.total);
    throw_if_failed(
        gpu::download(*ctx_, b.master.data.get(), DType::kFp32, layout.total, packed.data()));
    blocks.push_back(gpu::unpack_params(packed, layout));
  }
  kernels::HeadParams<float> head;
  if (has_head()) head = value_or_throw(gpu::download_head(*ctx_, head_master_));
  StageWeights out;
  out.stage = stage_;
  for_each_stage_tensor(blocks, head, first_block_, first(), last(),
                        [&](const std::string& name, const kernels::TensorView<float>& t) {
                          out.names.push_back(name);
                          out.tensors.emplace_back(t.data, t.data + t.size);
                        });
  return out;
}

}  // namespace ppsim::runtime
