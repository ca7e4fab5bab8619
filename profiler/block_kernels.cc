#include "profiler/block_kernels.h"

#include <cmath>

#include "profiler/gemm.h"
#include "schedules/status.h"

namespace ppsim::kernels {

template <typename S>
void layer_norm_forward(const Mat<S>& x, const RowVec<S>& gain, const RowVec<S>& bias, Mat<S>* xhat,
                        ColVec<S>* rstd, Mat<S>* y) {
  PPSIM_CHECK(gain.size() == x.cols() && bias.size() == x.cols());
  const S inv_h = S(1) / static_cast<S>(x.cols());
  const ColVec<S> mean = x.rowwise().sum() * inv_h;
  *xhat = x.colwise() - mean;
  const ColVec<S> var = xhat->rowwise().squaredNorm() * inv_h;
  *rstd = (var.array() + static_cast<S>(kLayerNormEps)).rsqrt().matrix();
  *xhat = rstd->asDiagonal() * *xhat;
  *y = layer_norm_output(*xhat, gain, bias);
}

template <typename S>
Mat<S> layer_norm_output(const Mat<S>& xhat, const RowVec<S>& gain, const RowVec<S>& bias) {
  Mat<S> y = xhat * gain.asDiagonal();
  y.rowwise() += bias;
  return y;
}

template <typename S>
Mat<S> layer_norm_backward_input(const Mat<S>& dy, const Mat<S>& xhat, const ColVec<S>& rstd,
                                 const RowVec<S>& gain) {
  // dx = rstd (g - mean(g) - xhat mean(g . xhat)), g = dy . gain, per row.
  const S inv_h = S(1) / static_cast<S>(dy.cols());
  Mat<S> g = dy * gain.asDiagonal();
  const ColVec<S> mean_g = g.rowwise().sum() * inv_h;
  const ColVec<S> mean_gx = g.cwiseProduct(xhat).rowwise().sum() * inv_h;
  g.colwise() -= mean_g;
  g -= mean_gx.asDiagonal() * xhat;
  return rstd.asDiagonal() * g;
}

template <typename S>
void layer_norm_backward_params(const Mat<S>& dy, const Mat<S>& xhat, RowVec<S>* dgain,
                                RowVec<S>* dbias) {
  *dgain += dy.cwiseProduct(xhat).colwise().sum();
  *dbias += dy.colwise().sum();
}

namespace {
// sqrt(2 / pi) and the cubic coefficient of GPT-2's tanh GeLU.
constexpr double kGeluK = 0.7978845608028654;
constexpr double kGeluC = 0.044715;
}  // namespace

template <typename S>
Mat<S> gelu(const Mat<S>& u) {
  const S k = static_cast<S>(kGeluK);
  const S c = static_cast<S>(kGeluC);
  return u.unaryExpr(
      [k, c](S x) { return S(0.5) * x * (S(1) + std::tanh(k * (x + c * x * x * x))); });
}

template <typename S>
Mat<S> gelu_backward(const Mat<S>& dg, const Mat<S>& u) {
  const S k = static_cast<S>(kGeluK);
  const S c = static_cast<S>(kGeluC);
  return dg.binaryExpr(u, [k, c](S d, S x) {
    const S t = std::tanh(k * (x + c * x * x * x));
    const S dt = (S(1) - t * t) * k * (S(1) + S(3) * c * x * x);
    return d * (S(0.5) * (S(1) + t) + S(0.5) * x * dt);
  });
}

template <typename S>
Mat<S> mlp_forward(const Mat<S>& a, const Mat<S>& w1, const RowVec<S>& b1, const Mat<S>& w2,
                   const RowVec<S>& b2, Mat<S>* u) {
  *u = product<S>(a, Op::kAsIs, w1, Op::kAsIs);
  u->rowwise() += b1;
  Mat<S> m = product<S>(gelu(*u), Op::kAsIs, w2, Op::kAsIs);
  m.rowwise() += b2;
  return m;
}

template <typename S>
Mat<S> mlp_backward_input(const Mat<S>& dm, const Mat<S>& u, const Mat<S>& w1, const Mat<S>& w2,
                          Mat<S>* du) {
  *du = gelu_backward(product<S>(dm, Op::kAsIs, w2, Op::kTransposed), u);
  return product<S>(*du, Op::kAsIs, w1, Op::kTransposed);
}

template <typename S>
void mlp_backward_weight(const Mat<S>& a, const Mat<S>& u, const Mat<S>& dm, const Mat<S>& du,
                         Mat<S>* dw1, RowVec<S>* db1, Mat<S>* dw2, RowVec<S>* db2) {
  gemm<S>(gelu(u), Op::kTransposed, dm, Op::kAsIs, *dw2, true);
  *db2 += dm.colwise().sum();
  gemm<S>(a, Op::kTransposed, du, Op::kAsIs, *dw1, true);
  *db1 += du.colwise().sum();
}

template <typename S>
void attention_forward(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v, int heads, MatRef<S> o,
                       Mat<S>* probs) {
  const Eigen::Index l = q.rows(), t = k.rows(), h = q.cols();
  PPSIM_CHECK(heads > 0 && h % heads == 0 && t >= l && v.rows() == t);
  PPSIM_CHECK(k.cols() == h && v.cols() == h && o.rows() == l && o.cols() == h);
  const Eigen::Index d = h / heads, c = t - l;
  const S scale = S(1) / std::sqrt(static_cast<S>(d));
  probs->resize(heads * l, t);
  for (int j = 0; j < heads; ++j) {
    auto p = probs->middleRows(j * l, l);
    gemm<S>(q.middleCols(j * d, d), Op::kAsIs, k.middleCols(j * d, d), Op::kTransposed, p, false);
    for (Eigen::Index i = 0; i < l; ++i) {
      // Causal: the query at position c + i sees keys 0 .. c + i only.
      const Eigen::Index seen = c + i + 1;
      auto row = p.row(i).head(seen).array();
      row = (row - row.maxCoeff()) * scale;
      row = row.exp();
      row /= row.sum();
      p.row(i).tail(t - seen).setZero();
    }
    gemm<S>(p, Op::kAsIs, v.middleCols(j * d, d), Op::kAsIs, o.middleCols(j * d, d), false);
  }
}

template <typename S>
void attention_backward(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v, const Mat<S>& probs,
                        ConstMatRef<S> d_o, int heads, MatRef<S> dq, MatRef<S> dk, MatRef<S> dv) {
  const Eigen::Index l = q.rows(), t = k.rows(), h = q.cols();
  PPSIM_CHECK(heads > 0 && h % heads == 0 && probs.rows() == heads * l && probs.cols() == t);
  PPSIM_CHECK(dq.rows() == l && dk.rows() == t && dv.rows() == t);
  const Eigen::Index d = h / heads;
  const S scale = S(1) / std::sqrt(static_cast<S>(d));
  Mat<S> ds(l, t);
  for (int j = 0; j < heads; ++j) {
    const auto p = probs.middleRows(j * l, l);
    const auto d_oj = d_o.middleCols(j * d, d);
    gemm<S>(p, Op::kTransposed, d_oj, Op::kAsIs, dv.middleCols(j * d, d), false);
    gemm<S>(d_oj, Op::kAsIs, v.middleCols(j * d, d), Op::kTransposed, ds, false);  // dP
    // Softmax backward row by row; masked entries have p = 0, so ds = 0 there.
    const ColVec<S> dot = p.cwiseProduct(ds).rowwise().sum();
    ds = p.cwiseProduct((ds.colwise() - dot)) * scale;
    gemm<S>(ds, Op::kAsIs, k.middleCols(j * d, d), Op::kAsIs, dq.middleCols(j * d, d), false);
    gemm<S>(ds, Op::kTransposed, q.middleCols(j * d, d), Op::kAsIs, dk.middleCols(j * d, d), false);
  }
}

#define PPSIM_INSTANTIATE_KERNELS(S)                                                               \
  template void layer_norm_forward<S>(const Mat<S>&, const RowVec<S>&, const RowVec<S>&, Mat<S>*,  \
                                      ColVec<S>*, Mat<S>*);                                        \
  template Mat<S> layer_norm_output<S>(const Mat<S>&, const RowVec<S>&, const RowVec<S>&);         \
  template Mat<S> layer_norm_backward_input<S>(const Mat<S>&, const Mat<S>&, const ColVec<S>&,     \
                                               const RowVec<S>&);                                  \
  template void layer_norm_backward_params<S>(const Mat<S>&, const Mat<S>&, RowVec<S>*,            \
                                              RowVec<S>*);                                         \
  template Mat<S> gelu<S>(const Mat<S>&);                                                          \
  template Mat<S> gelu_backward<S>(const Mat<S>&, const Mat<S>&);                                  \
  template Mat<S> mlp_forward<S>(const Mat<S>&, const Mat<S>&, const RowVec<S>&, const Mat<S>&,    \
                                 const RowVec<S>&, Mat<S>*);                                       \
  template Mat<S> mlp_backward_input<S>(const Mat<S>&, const Mat<S>&, const Mat<S>&,               \
                                        const Mat<S>&, Mat<S>*);                                   \
  template void mlp_backward_weight<S>(const Mat<S>&, const Mat<S>&, const Mat<S>&, const Mat<S>&, \
                                       Mat<S>*, RowVec<S>*, Mat<S>*, RowVec<S>*);                  \
  template void attention_forward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, int,          \
                                     MatRef<S>, Mat<S>*);                                          \
  template void attention_backward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,              \
                                      const Mat<S>&, ConstMatRef<S>, int, MatRef<S>, MatRef<S>,    \
                                      MatRef<S>);

PPSIM_INSTANTIATE_KERNELS(float)
PPSIM_INSTANTIATE_KERNELS(double)
#undef PPSIM_INSTANTIATE_KERNELS

}  // namespace ppsim::kernels
