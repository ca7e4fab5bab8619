#include "profiler/gpt_head.h"

#include <cmath>
#include <random>

#include "profiler/gemm.h"
#include "schedules/status.h"

namespace ppsim::kernels {

template <typename S>
std::vector<TensorView<S>> HeadParams<S>::tensors() {
  return {
      {"tok_emb", tok_emb.data(), tok_emb.size()},
      {"pos_emb", pos_emb.data(), pos_emb.size()},
      {"lnf_gain", lnf_gain.data(), lnf_gain.size()},
      {"lnf_bias", lnf_bias.data(), lnf_bias.size()},
      {"w_out", w_out.data(), w_out.size()},
  };
}

template <typename S>
HeadParams<S> zero_head_params(int vocab, int hidden, int max_seq) {
  PPSIM_CHECK(vocab > 0 && hidden > 0 && max_seq > 0);
  HeadParams<S> p;
  p.vocab = vocab;
  p.hidden = hidden;
  p.max_seq = max_seq;
  p.tok_emb = Mat<S>::Zero(vocab, hidden);
  p.pos_emb = Mat<S>::Zero(max_seq, hidden);
  p.lnf_gain = p.lnf_bias = RowVec<S>::Zero(hidden);
  p.w_out = Mat<S>::Zero(hidden, vocab);
  return p;
}

template <typename S>
HeadParams<S> init_head_params(int vocab, int hidden, int max_seq, uint64_t seed) {
  HeadParams<S> p = zero_head_params<S>(vocab, hidden, max_seq);
  p.lnf_gain.setOnes();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 0.02);
  for (Mat<S>* w : {&p.tok_emb, &p.pos_emb, &p.w_out}) {
    for (Eigen::Index i = 0; i < w->size(); ++i) w->data()[i] = static_cast<S>(normal(rng));
  }
  return p;
}

template <typename S>
Mat<S> embed_forward(const HeadParams<S>& p, const std::vector<int32_t>& tokens, int batch,
                     int context) {
  const int n = static_cast<int>(tokens.size());
  PPSIM_CHECK(batch > 0 && n > 0 && n % batch == 0);
  const int l = n / batch;
  PPSIM_CHECK(context >= 0 && context + l <= p.max_seq);
  Mat<S> x(n, p.hidden);
  for (int r = 0; r < n; ++r) {
    PPSIM_CHECK(tokens[r] >= 0 && tokens[r] < p.vocab);
    x.row(r) = p.tok_emb.row(tokens[r]) + p.pos_emb.row(context + r % l);
  }
  return x;
}

template <typename S>
void embed_backward_weight(const std::vector<int32_t>& tokens, int batch, int context,
                           const Mat<S>& dx, HeadGrads<S>* grads) {
  const int n = static_cast<int>(tokens.size());
  PPSIM_CHECK(batch > 0 && n % batch == 0 && dx.rows() == n && dx.cols() == grads->hidden);
  const int l = n / batch;
  PPSIM_CHECK(context >= 0 && context + l <= grads->max_seq);
  for (int r = 0; r < n; ++r) {
    PPSIM_CHECK(tokens[r] >= 0 && tokens[r] < grads->vocab);
    grads->tok_emb.row(tokens[r]) += dx.row(r);
    grads->pos_emb.row(context + r % l) += dx.row(r);
  }
}

template <typename S>
int64_t LossSaved<S>::bytes() const {
  const int64_t scalars =
      xhat.size() + probs.size() + rstd.size() + d_lnf_gain.size() + d_lnf_bias.size();
  return scalars * static_cast<int64_t>(sizeof(S)) +
         static_cast<int64_t>(targets.size() * sizeof(int32_t));
}

template <typename S>
S loss_forward(const HeadParams<S>& p, const Mat<S>& y, const std::vector<int32_t>& targets,
               S scale, LossSaved<S>* saved) {
  PPSIM_CHECK(y.cols() == p.hidden && y.rows() == static_cast<Eigen::Index>(targets.size()));
  LossSaved<S>& s = *saved;
  s = LossSaved<S>{};
  s.scale = scale;
  s.targets = targets;
  Mat<S> z;
  layer_norm_forward(y, p.lnf_gain, p.lnf_bias, &s.xhat, &s.rstd, &z);
  s.probs = product<S>(z, Op::kAsIs, p.w_out, Op::kAsIs);
  S loss = 0;
  for (Eigen::Index r = 0; r < s.probs.rows(); ++r) {
    PPSIM_CHECK(targets[r] >= 0 && targets[r] < p.vocab);
    auto row = s.probs.row(r).array();
    const S max = row.maxCoeff();
    row = (row - max).exp();
    const S sum = row.sum();
    // -log softmax[target] = log sum exp(logit - max) - (logit_target - max).
    loss += std::log(sum) - std::log(row(targets[r]));
    row /= sum;
  }
  s.phase = LossSaved<S>::Phase::kForward;
  return scale * loss;
}

template <typename S>
Mat<S> loss_backward_input(const HeadParams<S>& p, LossSaved<S>* saved) {
  LossSaved<S>& s = *saved;
  PPSIM_CHECK(s.phase == LossSaved<S>::Phase::kForward);
  // d loss / d logits = scale (softmax - onehot(target)), built in place.
  for (Eigen::Index r = 0; r < s.probs.rows(); ++r) s.probs(r, s.targets[r]) -= S(1);
  s.probs *= s.scale;
  const Mat<S> dz = product<S>(s.probs, Op::kAsIs, p.w_out, Op::kTransposed);
  s.d_lnf_gain = s.d_lnf_bias = RowVec<S>::Zero(p.hidden);
  layer_norm_backward_params(dz, s.xhat, &s.d_lnf_gain, &s.d_lnf_bias);
  Mat<S> dy = layer_norm_backward_input(dz, s.xhat, s.rstd, p.lnf_gain);
  s.rstd.resize(0);
  s.phase = LossSaved<S>::Phase::kInputDone;
  return dy;
}

template <typename S>
void loss_backward_weight(const HeadParams<S>& p, LossSaved<S>* saved, HeadGrads<S>* grads) {
  LossSaved<S>& s = *saved;
  PPSIM_CHECK(s.phase == LossSaved<S>::Phase::kInputDone);
  const Mat<S> z = layer_norm_output(s.xhat, p.lnf_gain, p.lnf_bias);
  gemm<S>(z, Op::kTransposed, s.probs, Op::kAsIs, grads->w_out, true);
  grads->lnf_gain += s.d_lnf_gain;
  grads->lnf_bias += s.d_lnf_bias;
  s = LossSaved<S>{};
}

#define PPSIM_INSTANTIATE_HEAD(S)                                                                 \
  template struct HeadParams<S>;                                                                  \
  template struct LossSaved<S>;                                                                   \
  template HeadParams<S> zero_head_params<S>(int, int, int);                                      \
  template HeadParams<S> init_head_params<S>(int, int, int, uint64_t);                            \
  template Mat<S> embed_forward<S>(const HeadParams<S>&, const std::vector<int32_t>&, int, int);  \
  template void embed_backward_weight<S>(const std::vector<int32_t>&, int, int, const Mat<S>&,    \
                                         HeadGrads<S>*);                                          \
  template S loss_forward<S>(const HeadParams<S>&, const Mat<S>&, const std::vector<int32_t>&, S, \
                             LossSaved<S>*);                                                      \
  template Mat<S> loss_backward_input<S>(const HeadParams<S>&, LossSaved<S>*);                    \
  template void loss_backward_weight<S>(const HeadParams<S>&, LossSaved<S>*, HeadGrads<S>*);

PPSIM_INSTANTIATE_HEAD(float)
PPSIM_INSTANTIATE_HEAD(double)
#undef PPSIM_INSTANTIATE_HEAD

}  // namespace ppsim::kernels
