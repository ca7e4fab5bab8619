#include "profiler/gpt_block.h"

#include <random>

#include "profiler/gemm.h"
#include "schedules/status.h"

namespace ppsim::kernels {
namespace {

template <typename S>
void release(Mat<S>* m) {
  m->resize(0, 0);  // frees: these figures are what bytes() reports
}

template <typename S, typename T>
int64_t bytes_of(const T& m) {
  return static_cast<int64_t>(m.size()) * static_cast<int64_t>(sizeof(S));
}

}  // namespace

template <typename S>
std::vector<TensorView<S>> BlockParams<S>::tensors() {
  return {
      {"ln1_gain", ln1_gain.data(), ln1_gain.size()},
      {"ln1_bias", ln1_bias.data(), ln1_bias.size()},
      {"w_qkv", w_qkv.data(), w_qkv.size()},
      {"b_qkv", b_qkv.data(), b_qkv.size()},
      {"w_o", w_o.data(), w_o.size()},
      {"b_o", b_o.data(), b_o.size()},
      {"ln2_gain", ln2_gain.data(), ln2_gain.size()},
      {"ln2_bias", ln2_bias.data(), ln2_bias.size()},
      {"w1", w1.data(), w1.size()},
      {"b1", b1.data(), b1.size()},
      {"w2", w2.data(), w2.size()},
      {"b2", b2.data(), b2.size()},
  };
}

template <typename S>
int64_t BlockParams<S>::num_parameters() const {
  const int64_t h = hidden, f = ffn;
  return 4 * h + 3 * h * h + 3 * h + h * h + h + h * f + f + f * h + h;
}

template <typename S>
BlockParams<S> zero_params(int hidden, int ffn, int heads) {
  PPSIM_CHECK(hidden > 0 && ffn > 0 && heads > 0 && hidden % heads == 0);
  BlockParams<S> p;
  p.hidden = hidden;
  p.ffn = ffn;
  p.heads = heads;
  p.ln1_gain = p.ln1_bias = p.b_o = p.ln2_gain = p.ln2_bias = p.b2 = RowVec<S>::Zero(hidden);
  p.w_qkv = Mat<S>::Zero(hidden, 3 * hidden);
  p.b_qkv = RowVec<S>::Zero(3 * hidden);
  p.w_o = Mat<S>::Zero(hidden, hidden);
  p.w1 = Mat<S>::Zero(hidden, ffn);
  p.b1 = RowVec<S>::Zero(ffn);
  p.w2 = Mat<S>::Zero(ffn, hidden);
  return p;
}

template <typename S>
BlockParams<S> init_params(int hidden, int ffn, int heads, uint64_t seed) {
  BlockParams<S> p = zero_params<S>(hidden, ffn, heads);
  p.ln1_gain.setOnes();
  p.ln2_gain.setOnes();
  // Drawn in double so float and double blocks with one seed agree.
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 0.02);
  for (Mat<S>* w : {&p.w_qkv, &p.w_o, &p.w1, &p.w2}) {
    for (Eigen::Index i = 0; i < w->size(); ++i) w->data()[i] = static_cast<S>(normal(rng));
  }
  return p;
}

template <typename S>
KvCache<S>::KvCache(int batch, int hidden, int capacity) : capacity_(capacity) {
  PPSIM_CHECK(batch > 0 && hidden > 0 && capacity > 0);
  k_.assign(batch, Mat<S>::Zero(capacity, hidden));
  v_.assign(batch, Mat<S>::Zero(capacity, hidden));
}

template <typename S>
void KvCache<S>::set_length(int length) {
  PPSIM_CHECK(length >= 0 && length <= capacity_);
  length_ = length;
}

template <typename S>
KvGrad<S>::KvGrad(int batch, int hidden, int capacity) {
  PPSIM_CHECK(batch > 0 && hidden > 0 && capacity > 0);
  dk.assign(batch, Mat<S>::Zero(capacity, hidden));
  dv.assign(batch, Mat<S>::Zero(capacity, hidden));
}

template <typename S>
int64_t Saved<S>::bytes() const {
  int64_t total = 0;
  for (const Mat<S>* m : {&xhat1, &q, &o, &xhat2, &u, &d_qkv, &d_h, &dy, &du}) {
    total += bytes_of<S>(*m);
  }
  total += bytes_of<S>(rstd1) + bytes_of<S>(rstd2);
  for (const Mat<S>& m : probs) total += bytes_of<S>(m);
  for (const RowVec<S>* v : {&d_ln1_gain, &d_ln1_bias, &d_ln2_gain, &d_ln2_bias}) {
    total += bytes_of<S>(*v);
  }
  // The slice's K/V rows sit in the KvCache until its I gives them back.
  if (phase == Phase::kForward) total += 2LL * batch * tokens * hidden * sizeof(S);
  return total;
}

template <typename S>
int64_t Saved<S>::weight_grad_bytes() const {
  const int64_t n = static_cast<int64_t>(batch) * tokens;
  return (3 * n * hidden + n * ffn) * static_cast<int64_t>(sizeof(S));
}

template <typename S>
int64_t Saved<S>::grad_stash_bytes() const {
  const int64_t n = static_cast<int64_t>(batch) * tokens;
  return (5 * n * hidden + n * ffn + 4LL * hidden) * static_cast<int64_t>(sizeof(S));
}

template <typename S>
Mat<S> forward(const BlockParams<S>& p, const Mat<S>& x, KvCache<S>* kv, Saved<S>* saved) {
  const int b = kv->batch(), h = p.hidden, c = kv->length();
  PPSIM_CHECK(x.cols() == h && x.rows() > 0 && x.rows() % b == 0);
  const int l = static_cast<int>(x.rows() / b);
  PPSIM_CHECK(c + l <= kv->capacity() && kv->k(0).cols() == h);
  Saved<S>& s = *saved;
  s = Saved<S>{};
  s.batch = b;
  s.tokens = l;
  s.context = c;
  s.hidden = h;
  s.ffn = p.ffn;
  s.heads = p.heads;

  Mat<S> a1;
  layer_norm_forward(x, p.ln1_gain, p.ln1_bias, &s.xhat1, &s.rstd1, &a1);
  Mat<S> qkv = product<S>(a1, Op::kAsIs, p.w_qkv, Op::kAsIs);
  qkv.rowwise() += p.b_qkv;
  s.q = qkv.leftCols(h);
  for (int i = 0; i < b; ++i) {
    kv->k(i).middleRows(c, l) = qkv.block(i * l, h, l, h);
    kv->v(i).middleRows(c, l) = qkv.block(i * l, 2 * h, l, h);
  }
  kv->set_length(c + l);

  s.o.resize(x.rows(), h);
  s.probs.resize(b);
  for (int i = 0; i < b; ++i) {
    attention_forward<S>(s.q.middleRows(i * l, l), kv->k(i).topRows(c + l), kv->v(i).topRows(c + l),
                         p.heads, s.o.middleRows(i * l, l), &s.probs[i]);
  }
  Mat<S> hid = x;
  gemm<S>(s.o, Op::kAsIs, p.w_o, Op::kAsIs, hid, true);
  hid.rowwise() += p.b_o;

  Mat<S> a2;
  layer_norm_forward(hid, p.ln2_gain, p.ln2_bias, &s.xhat2, &s.rstd2, &a2);
  hid += mlp_forward(a2, p.w1, p.b1, p.w2, p.b2, &s.u);
  s.phase = Saved<S>::Phase::kForward;
  return hid;
}

template <typename S>
Mat<S> backward_input(const BlockParams<S>& p, const Mat<S>& dy, KvCache<S>* kv, KvGrad<S>* kv_grad,
                      Saved<S>* saved) {
  Saved<S>& s = *saved;
  PPSIM_CHECK(s.phase == Saved<S>::Phase::kForward);
  const int b = s.batch, l = s.tokens, c = s.context, h = s.hidden;
  PPSIM_CHECK(kv->batch() == b && kv->length() == c + l);
  PPSIM_CHECK(static_cast<int>(kv_grad->dk.size()) == b && kv_grad->dk[0].rows() >= c + l);
  PPSIM_CHECK(dy.rows() == static_cast<Eigen::Index>(b) * l && dy.cols() == h);

  // MLP and LN2; the residual passes dy straight to h.
  s.d_ln2_gain = s.d_ln2_bias = RowVec<S>::Zero(h);
  const Mat<S> da2 = mlp_backward_input(dy, s.u, p.w1, p.w2, &s.du);
  layer_norm_backward_params(da2, s.xhat2, &s.d_ln2_gain, &s.d_ln2_bias);
  s.d_h = dy + layer_norm_backward_input(da2, s.xhat2, s.rstd2, p.ln2_gain);

  // Attention, sequence by sequence.
  const Mat<S> d_o = product<S>(s.d_h, Op::kAsIs, p.w_o, Op::kTransposed);
  s.d_qkv.resize(dy.rows(), 3 * h);
  Mat<S> dk(c + l, h), dv(c + l, h);
  for (int i = 0; i < b; ++i) {
    attention_backward<S>(s.q.middleRows(i * l, l), kv->k(i).topRows(c + l),
                          kv->v(i).topRows(c + l), s.probs[i], d_o.middleRows(i * l, l), p.heads,
                          s.d_qkv.block(i * l, 0, l, h), dk, dv);
    // The slice's own K/V: its gradient here plus what later slices left.
    Mat<S>& gk = kv_grad->dk[i];
    Mat<S>& gv = kv_grad->dv[i];
    s.d_qkv.block(i * l, h, l, h) = dk.bottomRows(l) + gk.middleRows(c, l);
    s.d_qkv.block(i * l, 2 * h, l, h) = dv.bottomRows(l) + gv.middleRows(c, l);
    gk.middleRows(c, l).setZero();
    gv.middleRows(c, l).setZero();
    // The context's K/V: for the earlier slices' I.
    gk.topRows(c) += dk.topRows(c);
    gv.topRows(c) += dv.topRows(c);
  }

  // QKV projection and LN1; the residual passes d_h straight to x.
  const Mat<S> da1 = product<S>(s.d_qkv, Op::kAsIs, p.w_qkv, Op::kTransposed);
  s.d_ln1_gain = s.d_ln1_bias = RowVec<S>::Zero(h);
  layer_norm_backward_params(da1, s.xhat1, &s.d_ln1_gain, &s.d_ln1_bias);
  Mat<S> dx = s.d_h + layer_norm_backward_input(da1, s.xhat1, s.rstd1, p.ln1_gain);

  s.dy = dy;
  kv->set_length(c);
  release(&s.q);
  s.rstd1.resize(0);
  s.rstd2.resize(0);
  s.probs.clear();
  s.probs.shrink_to_fit();
  s.phase = Saved<S>::Phase::kInputDone;
  return dx;
}

template <typename S>
void backward_weight(const BlockParams<S>& p, Saved<S>* saved, BlockGrads<S>* grads) {
  Saved<S>& s = *saved;
  PPSIM_CHECK(s.phase == Saved<S>::Phase::kInputDone);
  PPSIM_CHECK(grads->hidden == p.hidden && grads->ffn == p.ffn);

  const Mat<S> a1 = layer_norm_output(s.xhat1, p.ln1_gain, p.ln1_bias);
  gemm<S>(a1, Op::kTransposed, s.d_qkv, Op::kAsIs, grads->w_qkv, true);
  grads->b_qkv += s.d_qkv.colwise().sum();
  gemm<S>(s.o, Op::kTransposed, s.d_h, Op::kAsIs, grads->w_o, true);
  grads->b_o += s.d_h.colwise().sum();
  const Mat<S> a2 = layer_norm_output(s.xhat2, p.ln2_gain, p.ln2_bias);
  mlp_backward_weight(a2, s.u, s.dy, s.du, &grads->w1, &grads->b1, &grads->w2, &grads->b2);
  grads->ln1_gain += s.d_ln1_gain;
  grads->ln1_bias += s.d_ln1_bias;
  grads->ln2_gain += s.d_ln2_gain;
  grads->ln2_bias += s.d_ln2_bias;

  s = Saved<S>{};
}

template <typename S>
Mat<S> backward(const BlockParams<S>& p, const Mat<S>& dy, KvCache<S>* kv, KvGrad<S>* kv_grad,
                Saved<S>* saved, BlockGrads<S>* grads) {
  Mat<S> dx = backward_input(p, dy, kv, kv_grad, saved);
  backward_weight(p, saved, grads);
  return dx;
}

template <typename S>
void sgd_update(const std::vector<TensorView<S>>& params, const std::vector<TensorView<S>>& grads,
                double learning_rate) {
  PPSIM_CHECK(params.size() == grads.size());
  const S lr = static_cast<S>(learning_rate);
  for (size_t t = 0; t < params.size(); ++t) {
    PPSIM_CHECK(params[t].size == grads[t].size);
    for (int64_t i = 0; i < params[t].size; ++i) {
      params[t].data[i] -= lr * grads[t].data[i];
      grads[t].data[i] = 0;
    }
  }
}

#define PPSIM_INSTANTIATE_BLOCK(S)                                                                 \
  template struct BlockParams<S>;                                                                  \
  template class KvCache<S>;                                                                       \
  template struct KvGrad<S>;                                                                       \
  template struct Saved<S>;                                                                        \
  template BlockParams<S> zero_params<S>(int, int, int);                                           \
  template BlockParams<S> init_params<S>(int, int, int, uint64_t);                                 \
  template Mat<S> forward<S>(const BlockParams<S>&, const Mat<S>&, KvCache<S>*, Saved<S>*);        \
  template Mat<S> backward_input<S>(const BlockParams<S>&, const Mat<S>&, KvCache<S>*, KvGrad<S>*, \
                                    Saved<S>*);                                                    \
  template void backward_weight<S>(const BlockParams<S>&, Saved<S>*, BlockGrads<S>*);              \
  template Mat<S> backward<S>(const BlockParams<S>&, const Mat<S>&, KvCache<S>*, KvGrad<S>*,       \
                              Saved<S>*, BlockGrads<S>*);                                          \
  template void sgd_update<S>(const std::vector<TensorView<S>>&,                                   \
                              const std::vector<TensorView<S>>&, double);

PPSIM_INSTANTIATE_BLOCK(float)
PPSIM_INSTANTIATE_BLOCK(double)
#undef PPSIM_INSTANTIATE_BLOCK

}  // namespace ppsim::kernels
