// Gradient checks of the CPU GPT kernels (profiler/): every hand-written
// backward against central finite differences, in double (the float
// instantiation is the one the runtime uses; it is checked against double).
#include "profiler/gpt_block.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "profiler/block_kernels.h"
#include "profiler/gpt_head.h"

namespace ppsim::kernels {
namespace gpt_block_test {
namespace {

using MatD = Mat<double>;
using RowD = RowVec<double>;

// Small shapes: hidden 8, heads 2, ffn 16, slice of 3 tokens at context 2, 2 sequences.
constexpr int kH = 8, kHeads = 2, kF = 16, kL = 3, kC = 2, kB = 2;

template <typename M>
void fill(M* m, std::mt19937_64& rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> u(lo, hi);
  for (Eigen::Index i = 0; i < m->size(); ++i) m->data()[i] = u(rng);
}

MatD random(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  MatD m(rows, cols);
  fill(&m, rng);
  return m;
}

// Compares `analytic` with central differences of f over data[0, size):
// max error relative to the largest numeric entry, which must not be ~0 (a
// zero gradient would pass any check).
void check_grad(const std::string& what, const double* analytic, double* data, int64_t size,
                const std::function<double()>& f) {
  SCOPED_TRACE(what);
  constexpr double kEps = 1e-6;
  double max_err = 0, max_num = 0;
  for (int64_t i = 0; i < size; ++i) {
    const double saved = data[i];
    data[i] = saved + kEps;
    const double up = f();
    data[i] = saved - kEps;
    const double down = f();
    data[i] = saved;
    const double numeric = (up - down) / (2 * kEps);
    max_err = std::max(max_err, std::abs(numeric - analytic[i]));
    max_num = std::max(max_num, std::abs(numeric));
  }
  EXPECT_GT(max_num, 1e-4) << "gradient is ~0: the check would prove nothing";
  EXPECT_LT(max_err / max_num, 1e-6) << "max abs error " << max_err;
}

double max_abs_diff(const MatD& a, const MatD& b) { return (a - b).cwiseAbs().maxCoeff(); }

// Every tensor of `params` randomised, so biases and gains are not trivially 0 or 1.
BlockParams<double> random_block(std::mt19937_64& rng) {
  BlockParams<double> p = init_params<double>(kH, kF, kHeads, 7);
  for (const TensorView<double>& t : p.tensors()) {
    std::uniform_real_distribution<double> u(-0.5, 0.5);
    for (int64_t i = 0; i < t.size; ++i) t.data[i] = u(rng);
  }
  p.ln1_gain.array() += 1;
  p.ln2_gain.array() += 1;
  return p;
}

TEST(KernelTest, LayerNormGradients) {
  std::mt19937_64 rng(1);
  MatD x = random(6, kH, rng), r = random(6, kH, rng);
  RowD gain(kH), bias(kH);
  fill(&gain, rng, 0.5, 1.5);
  fill(&bias, rng);
  MatD xhat, y;
  ColVec<double> rstd;
  auto f = [&] {
    layer_norm_forward(x, gain, bias, &xhat, &rstd, &y);
    return y.cwiseProduct(r).sum();
  };
  f();
  EXPECT_NEAR(xhat.row(0).mean(), 0, 1e-12);
  EXPECT_NEAR(xhat.row(0).squaredNorm() / kH, 1, 1e-3);  // unit variance up to eps
  const MatD dx = layer_norm_backward_input(r, xhat, rstd, gain);
  RowD dgain = RowD::Zero(kH), dbias = RowD::Zero(kH);
  layer_norm_backward_params(r, xhat, &dgain, &dbias);
  check_grad("dx", dx.data(), x.data(), x.size(), f);
  check_grad("dgain", dgain.data(), gain.data(), gain.size(), f);
  check_grad("dbias", dbias.data(), bias.data(), bias.size(), f);
}

TEST(KernelTest, GeluValueAndGradient) {
  MatD one(1, 1);
  one(0, 0) = 1.0;
  EXPECT_NEAR(gelu(one)(0, 0), 0.841192, 1e-6);  // tanh form; exact erf GeLU is 0.841345
  std::mt19937_64 rng(2);
  MatD u = random(4, kF, rng) * 3, r = random(4, kF, rng);
  const MatD du = gelu_backward(r, u);
  check_grad("du", du.data(), u.data(), u.size(), [&] { return gelu(u).cwiseProduct(r).sum(); });
}

TEST(KernelTest, MlpGradients) {
  std::mt19937_64 rng(3);
  MatD a = random(6, kH, rng), w1 = random(kH, kF, rng), w2 = random(kF, kH, rng);
  MatD r = random(6, kH, rng);
  RowD b1(kF), b2(kH);
  fill(&b1, rng);
  fill(&b2, rng);
  MatD u;
  auto f = [&] { return mlp_forward(a, w1, b1, w2, b2, &u).cwiseProduct(r).sum(); };
  f();
  MatD du;
  const MatD da = mlp_backward_input(r, u, w1, w2, &du);
  MatD dw1 = MatD::Zero(kH, kF), dw2 = MatD::Zero(kF, kH);
  RowD db1 = RowD::Zero(kF), db2 = RowD::Zero(kH);
  mlp_backward_weight(a, u, r, du, &dw1, &db1, &dw2, &db2);
  check_grad("da", da.data(), a.data(), a.size(), f);
  check_grad("dw1", dw1.data(), w1.data(), w1.size(), f);
  check_grad("db1", db1.data(), b1.data(), b1.size(), f);
  check_grad("dw2", dw2.data(), w2.data(), w2.size(), f);
  check_grad("db2", db2.data(), b2.data(), b2.size(), f);
}

TEST(KernelTest, AttentionGradientsIncludingKvContext) {
  std::mt19937_64 rng(4);
  const int t = kC + kL;
  MatD q = random(kL, kH, rng), k = random(t, kH, rng), v = random(t, kH, rng);
  MatD r = random(kL, kH, rng), o(kL, kH), probs;
  auto f = [&] {
    attention_forward<double>(q, k, v, kHeads, o, &probs);
    return o.cwiseProduct(r).sum();
  };
  f();
  // Softmax rows sum to 1 and query i (position c + i) sees no key after it.
  for (int row = 0; row < kHeads * kL; ++row) {
    const int i = row % kL;
    EXPECT_NEAR(probs.row(row).sum(), 1, 1e-12);
    EXPECT_EQ(probs.row(row).tail(t - (kC + i + 1)).cwiseAbs().sum(), 0) << "row " << row;
    EXPECT_GT(probs.row(row).head(kC + i + 1).minCoeff(), 0);
  }
  MatD dq(kL, kH), dk(t, kH), dv(t, kH);
  attention_backward<double>(q, k, v, probs, r, kHeads, dq, dk, dv);
  check_grad("dq", dq.data(), q.data(), q.size(), f);
  // Rows [0, c) are the gradient w.r.t. the KV context of earlier slices.
  check_grad("dk context", dk.data(), k.data(), kC * kH, f);
  check_grad("dv context", dv.data(), v.data(), kC * kH, f);
  check_grad("dk all", dk.data(), k.data(), k.size(), f);
  check_grad("dv all", dv.data(), v.data(), v.size(), f);
}

// The block on a slice of kL tokens after a context of kC tokens, with a
// gradient "left by later slices" on the slice's own K/V.
struct BlockCase {
  std::mt19937_64 rng{5};
  BlockParams<double> p = random_block(rng);
  MatD x_ctx = random(kB * kC, kH, rng), x = random(kB * kL, kH, rng), r = random(kB * kL, kH, rng);
  std::vector<MatD> later_dk, later_dv;
  KvCache<double> ctx{kB, kH, kC + kL};

  BlockCase() {
    for (int i = 0; i < kB; ++i) {
      later_dk.push_back(random(kL, kH, rng));
      later_dv.push_back(random(kL, kH, rng));
    }
    Saved<double> s;
    forward(p, x_ctx, &ctx, &s);
    EXPECT_EQ(ctx.length(), kC);
  }
  // Loss whose gradient backward computes: y and the slice's K/V feed on.
  double loss() {
    KvCache<double> kv = ctx;
    Saved<double> s;
    double f = forward(p, x, &kv, &s).cwiseProduct(r).sum();
    for (int i = 0; i < kB; ++i) {
      f += kv.k(i).middleRows(kC, kL).cwiseProduct(later_dk[i]).sum();
      f += kv.v(i).middleRows(kC, kL).cwiseProduct(later_dv[i]).sum();
    }
    return f;
  }
  KvGrad<double> kv_grad() const {
    KvGrad<double> g(kB, kH, kC + kL);
    for (int i = 0; i < kB; ++i) {
      g.dk[i].middleRows(kC, kL) = later_dk[i];
      g.dv[i].middleRows(kC, kL) = later_dv[i];
    }
    return g;
  }
};

TEST(BlockTest, InputWeightAndKvContextGradients) {
  BlockCase c;
  KvCache<double> kv = c.ctx;
  KvGrad<double> g = c.kv_grad();
  Saved<double> s;
  BlockGrads<double> grads = zero_params<double>(kH, kF, kHeads);
  forward(c.p, c.x, &kv, &s);
  EXPECT_EQ(kv.length(), kC + kL);
  const MatD dx = backward(c.p, c.r, &kv, &g, &s, &grads);
  EXPECT_EQ(kv.length(), kC);  // the slice's K/V rows given back
  auto f = [&] { return c.loss(); };
  check_grad("dx", dx.data(), c.x.data(), c.x.size(), f);
  std::vector<TensorView<double>> params = c.p.tensors(), gradients = grads.tensors();
  ASSERT_EQ(params.size(), 12u);
  for (size_t t = 0; t < params.size(); ++t) {
    check_grad(params[t].name, gradients[t].data, params[t].data, params[t].size, f);
  }
  for (int i = 0; i < kB; ++i) {
    // Context rows are the first kC rows of the row-major cache.
    check_grad("dk context", g.dk[i].data(), c.ctx.k(i).data(), kC * kH, f);
    check_grad("dv context", g.dv[i].data(), c.ctx.v(i).data(), kC * kH, f);
    EXPECT_EQ(g.dk[i].middleRows(kC, kL).cwiseAbs().sum(), 0) << "own rows consumed";
  }
}

TEST(BlockTest, InputThenWeightEqualsFullBackwardAndBytesFollowPhases) {
  BlockCase c;
  KvCache<double> kv1 = c.ctx, kv2 = c.ctx;
  KvGrad<double> g1 = c.kv_grad(), g2 = c.kv_grad();
  Saved<double> s1, s2;
  BlockGrads<double> grads1 = zero_params<double>(kH, kF, kHeads), grads2 = grads1;
  forward(c.p, c.x, &kv1, &s1);
  const MatD dx1 = backward(c.p, c.r, &kv1, &g1, &s1, &grads1);

  forward(c.p, c.x, &kv2, &s2);
  const int64_t forward_bytes = s2.bytes();
  const MatD dx2 = backward_input(c.p, c.r, &kv2, &g2, &s2);
  EXPECT_EQ(s2.bytes(), s2.weight_grad_bytes() + s2.grad_stash_bytes());
  EXPECT_LT(s2.weight_grad_bytes(), forward_bytes);
  backward_weight(c.p, &s2, &grads2);
  EXPECT_EQ(s2.bytes(), 0);

  EXPECT_EQ(max_abs_diff(dx1, dx2), 0);
  std::vector<TensorView<double>> t1 = grads1.tensors(), t2 = grads2.tensors();
  for (size_t t = 0; t < t1.size(); ++t) {
    for (int64_t i = 0; i < t1[t].size; ++i) ASSERT_EQ(t1[t].data[i], t2[t].data[i]) << t1[t].name;
  }
  for (int i = 0; i < kB; ++i) EXPECT_EQ(max_abs_diff(g1.dk[i], g2.dk[i]), 0);
}

TEST(BlockTest, SavedBytesMatchHandCount) {
  // n = b l = 6 tokens, t = c + l = 5. Forward keeps xhat1, xhat2, q, o (n h =
  // 48 each), rstd1, rstd2 (6 each), probs (b a l t = 60), u (n f = 96) and
  // the slice's K/V rows (2 n h = 96): 456 scalars. After I: W's activations
  // xhat1, o, xhat2, u = 240 and the stash d_qkv 144, d_h 48, dy 48, du 96,
  // LN gain/bias gradients 32 = 368.
  BlockCase c;
  KvCache<double> kv = c.ctx;
  Saved<double> s;
  forward(c.p, c.x, &kv, &s);
  EXPECT_EQ(s.bytes(), 456 * 8);
  EXPECT_EQ(s.weight_grad_bytes(), 240 * 8);
  EXPECT_EQ(s.grad_stash_bytes(), 368 * 8);
  KvGrad<double> g = c.kv_grad();
  backward_input(c.p, c.r, &kv, &g, &s);
  EXPECT_EQ(s.bytes(), 608 * 8);

  BlockParams<float> pf = init_params<float>(kH, kF, kHeads, 1);
  KvCache<float> kvf(kB, kH, kC + kL);
  Saved<float> sf;
  forward(pf, Mat<float>(c.x_ctx.cast<float>()), &kvf, &sf);
  forward(pf, Mat<float>(c.x.cast<float>()), &kvf, &sf);
  EXPECT_EQ(sf.bytes(), 456 * 4);
  EXPECT_EQ(pf.num_parameters(), 600);  // 4h + 3h^2 + 3h + h^2 + h + 2hf + f + h
}

// Rows [start, start + len) of every sequence of x (seq tokens each).
MatD take(const MatD& x, int seq, int start, int len) {
  MatD out(kB * len, x.cols());
  for (int i = 0; i < kB; ++i) out.middleRows(i * len, len) = x.middleRows(i * seq + start, len);
  return out;
}

TEST(BlockTest, TwoSlicesMatchOneSliceOfTheWholeSequence) {
  std::mt19937_64 rng(6);
  const BlockParams<double> p = random_block(rng);
  constexpr int kSeq = 5, kFirst = 2;
  const MatD x = random(kB * kSeq, kH, rng), r = random(kB * kSeq, kH, rng);

  KvCache<double> kv(kB, kH, kSeq);
  KvGrad<double> g(kB, kH, kSeq);
  Saved<double> s;
  BlockGrads<double> whole = zero_params<double>(kH, kF, kHeads);
  const MatD y = forward(p, x, &kv, &s);
  const int64_t whole_bytes = s.bytes();
  const MatD dx = backward(p, r, &kv, &g, &s, &whole);

  KvCache<double> kv2(kB, kH, kSeq);
  KvGrad<double> g2(kB, kH, kSeq);
  Saved<double> s0, s1;
  BlockGrads<double> sliced = zero_params<double>(kH, kF, kHeads);
  const MatD y0 = forward(p, take(x, kSeq, 0, kFirst), &kv2, &s0);
  const MatD y1 = forward(p, take(x, kSeq, kFirst, kSeq - kFirst), &kv2, &s1);
  // Slicing keeps fewer scores: b a l t = 2 2 (2 2 + 3 5) = 76 instead of 2 2 5 5 = 100.
  EXPECT_EQ(s0.bytes() + s1.bytes(), whole_bytes - (100 - 76) * 8);
  const MatD dx1 = backward(p, take(r, kSeq, kFirst, kSeq - kFirst), &kv2, &g2, &s1, &sliced);
  const MatD dx0 = backward(p, take(r, kSeq, 0, kFirst), &kv2, &g2, &s0, &sliced);

  EXPECT_LT(max_abs_diff(y0, take(y, kSeq, 0, kFirst)), 1e-12);
  EXPECT_LT(max_abs_diff(y1, take(y, kSeq, kFirst, kSeq - kFirst)), 1e-12);
  EXPECT_LT(max_abs_diff(dx0, take(dx, kSeq, 0, kFirst)), 1e-12);
  EXPECT_LT(max_abs_diff(dx1, take(dx, kSeq, kFirst, kSeq - kFirst)), 1e-12);
  std::vector<TensorView<double>> tw = whole.tensors(), ts = sliced.tensors();
  for (size_t t = 0; t < tw.size(); ++t) {
    for (int64_t i = 0; i < tw[t].size; ++i) {
      ASSERT_NEAR(tw[t].data[i], ts[t].data[i], 1e-12) << tw[t].name << "[" << i << "]";
    }
  }
  for (int i = 0; i < kB; ++i) EXPECT_EQ(g2.dk[i].cwiseAbs().sum(), 0) << "all consumed";
}

TEST(BlockTest, CausalAndSequencesIndependent) {
  std::mt19937_64 rng(7);
  const BlockParams<double> p = random_block(rng);
  MatD x = random(kB * kL, kH, rng);
  KvCache<double> kv(kB, kH, kL), kv2(kB, kH, kL);
  Saved<double> s;
  const MatD y = forward(p, x, &kv, &s);
  x.row(kL - 1) = random(1, kH, rng);  // last token of sequence 0 (not a shift: LN removes it)
  const MatD y2 = forward(p, x, &kv2, &s);
  EXPECT_EQ(max_abs_diff(y.topRows(kL - 1), y2.topRows(kL - 1)), 0);
  EXPECT_GT(max_abs_diff(y.row(kL - 1), y2.row(kL - 1)), 1e-3);
  EXPECT_EQ(max_abs_diff(y.bottomRows(kL), y2.bottomRows(kL)), 0);
}

TEST(BlockTest, FloatAgreesWithDouble) {
  BlockCase c;
  BlockParams<float> pf = zero_params<float>(kH, kF, kHeads);
  std::vector<TensorView<double>> td = c.p.tensors();
  std::vector<TensorView<float>> tf = pf.tensors();
  for (size_t t = 0; t < td.size(); ++t) {
    for (int64_t i = 0; i < td[t].size; ++i) tf[t].data[i] = static_cast<float>(td[t].data[i]);
  }
  KvCache<double> kv = c.ctx;
  KvGrad<double> g(kB, kH, kC + kL);
  Saved<double> s;
  BlockGrads<double> gd = zero_params<double>(kH, kF, kHeads);
  const MatD y = forward(c.p, c.x, &kv, &s);
  const MatD dx = backward(c.p, c.r, &kv, &g, &s, &gd);

  KvCache<float> kvf(kB, kH, kC + kL);
  KvGrad<float> gf(kB, kH, kC + kL);
  Saved<float> sf;
  BlockGrads<float> gradf = zero_params<float>(kH, kF, kHeads);
  forward(pf, Mat<float>(c.x_ctx.cast<float>()), &kvf, &sf);
  const Mat<float> yf = forward(pf, Mat<float>(c.x.cast<float>()), &kvf, &sf);
  const Mat<float> dxf = backward(pf, Mat<float>(c.r.cast<float>()), &kvf, &gf, &sf, &gradf);
  EXPECT_LT(max_abs_diff(y, yf.cast<double>()) / y.cwiseAbs().maxCoeff(), 1e-5);
  EXPECT_LT(max_abs_diff(dx, dxf.cast<double>()) / dx.cwiseAbs().maxCoeff(), 1e-5);
  std::vector<TensorView<double>> gdv = gd.tensors();
  std::vector<TensorView<float>> gfv = gradf.tensors();
  for (size_t t = 0; t < gdv.size(); ++t) {
    double err = 0, top = 0;
    for (int64_t i = 0; i < gdv[t].size; ++i) {
      err = std::max(err, std::abs(gdv[t].data[i] - gfv[t].data[i]));
      top = std::max(top, std::abs(gdv[t].data[i]));
    }
    EXPECT_LT(err / top, 1e-4) << gdv[t].name;
  }
  for (int i = 0; i < kB; ++i) {
    EXPECT_LT(max_abs_diff(g.dk[i], gf.dk[i].cast<double>()), 1e-4);
  }
}

TEST(KernelTest, EmbeddingGradients) {
  std::mt19937_64 rng(8);
  HeadParams<double> p = init_head_params<double>(11, kH, 6, 3);
  const std::vector<int32_t> tokens = {3, 5, 3, 0, 10, 3};  // b = 2, l = 3; id 3 repeats
  const int context = 2;
  const MatD r = random(6, kH, rng);
  const MatD x = embed_forward(p, tokens, kB, context);
  EXPECT_EQ(max_abs_diff(x.row(4), p.tok_emb.row(10) + p.pos_emb.row(context + 1)), 0);
  HeadGrads<double> grads = zero_head_params<double>(11, kH, 6);
  embed_backward_weight(tokens, kB, context, r, &grads);
  auto f = [&] { return embed_forward(p, tokens, kB, context).cwiseProduct(r).sum(); };
  check_grad("tok_emb", grads.tok_emb.data(), p.tok_emb.data(), p.tok_emb.size(), f);
  check_grad("pos_emb", grads.pos_emb.data(), p.pos_emb.data(), p.pos_emb.size(), f);
}

TEST(KernelTest, LossValueAndGradients) {
  std::mt19937_64 rng(9);
  constexpr int kVocab = 11;
  HeadParams<double> p = zero_head_params<double>(kVocab, kH, 6);
  MatD y = random(6, kH, rng);
  const std::vector<int32_t> targets = {1, 4, 4, 0, 10, 7};
  LossSaved<double> s;
  // Zero logits: every token costs log(vocab).
  EXPECT_NEAR(loss_forward(p, y, targets, 0.5, &s), 0.5 * 6 * std::log(kVocab), 1e-12);
  for (const TensorView<double>& t : p.tensors()) {
    std::uniform_real_distribution<double> u(-1, 1);
    for (int64_t i = 0; i < t.size; ++i) t.data[i] = u(rng);
  }
  auto f = [&] {
    LossSaved<double> tmp;
    return loss_forward(p, y, targets, 0.5, &tmp);
  };
  loss_forward(p, y, targets, 0.5, &s);
  EXPECT_EQ(s.bytes(), (6 * kH + 6 + 6 * kVocab) * 8 + 6 * 4);
  const MatD dy = loss_backward_input(p, &s);
  EXPECT_EQ(s.bytes(), (6 * kH + 6 * kVocab + 2 * kH) * 8 + 6 * 4);
  HeadGrads<double> grads = zero_head_params<double>(kVocab, kH, 6);
  loss_backward_weight(p, &s, &grads);
  EXPECT_EQ(s.bytes(), 0);
  check_grad("dy", dy.data(), y.data(), y.size(), f);
  check_grad("lnf_gain", grads.lnf_gain.data(), p.lnf_gain.data(), kH, f);
  check_grad("lnf_bias", grads.lnf_bias.data(), p.lnf_bias.data(), kH, f);
  check_grad("w_out", grads.w_out.data(), p.w_out.data(), p.w_out.size(), f);
}

}  // namespace
}  // namespace gpt_block_test
}  // namespace ppsim::kernels
