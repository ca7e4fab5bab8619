// The numerical kernels a GPT block is made of, each with its backward written
// by hand: layer norm, tanh GeLU, the two-layer MLP and causal multi-head
// attention over a token slice that also attends to a KV context.
//
// Activations are row-major matrices with one row per token, so a sequence's
// tokens are a contiguous block of rows and a head's features a block of
// columns. Linear layers compute `y = x W + b` with W stored (in x out).
// Everything is templated on the scalar type: `float` is what the runtime
// uses, `double` is what the gradient checks use (finite differences in fp32
// are too noisy to catch a small bug). Both are instantiated in the .cc.
//
// "backward_input" kernels return the gradient of the kernel's input;
// "backward_weight"/"backward_params" kernels ACCUMULATE (+=) parameter
// gradients, so several token slices or microbatches can add into one buffer.
#pragma once

#include <Eigen/Core>

namespace ppsim::kernels {

template <typename S>
using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename S>
using RowVec = Eigen::Matrix<S, 1, Eigen::Dynamic>;  // a bias or gain, one entry per feature
template <typename S>
using ColVec = Eigen::Matrix<S, Eigen::Dynamic, 1>;  // one entry per token
template <typename S>
using MatRef = Eigen::Ref<Mat<S>>;
template <typename S>
using ConstMatRef = Eigen::Ref<const Mat<S>>;

inline constexpr double kLayerNormEps = 1e-5;

// ---- Layer norm over each row: y = (x - mean) / sqrt(var + eps) * gain + bias.
// Keeps the normalised input `xhat` and the per-row reciprocal deviation
// `rstd`, which is all its backward needs.
template <typename S>
void layer_norm_forward(const Mat<S>& x, const RowVec<S>& gain, const RowVec<S>& bias, Mat<S>* xhat,
                        ColVec<S>* rstd, Mat<S>* y);
// Rebuilds the output from what forward kept, so W need not keep it too.
template <typename S>
Mat<S> layer_norm_output(const Mat<S>& xhat, const RowVec<S>& gain, const RowVec<S>& bias);
template <typename S>
Mat<S> layer_norm_backward_input(const Mat<S>& dy, const Mat<S>& xhat, const ColVec<S>& rstd,
                                 const RowVec<S>& gain);
template <typename S>
void layer_norm_backward_params(const Mat<S>& dy, const Mat<S>& xhat, RowVec<S>* dgain,
                                RowVec<S>* dbias);

// ---- GeLU, tanh approximation (GPT-2's), elementwise.
template <typename S>
Mat<S> gelu(const Mat<S>& u);
// Returns dg * gelu'(u).
template <typename S>
Mat<S> gelu_backward(const Mat<S>& dg, const Mat<S>& u);

// ---- MLP: m = gelu(a W1 + b1) W2 + b2. Forward keeps the GeLU input `u`; the
// GeLU output W2's gradient needs is recomputed from it (elementwise, cheap).
template <typename S>
Mat<S> mlp_forward(const Mat<S>& a, const Mat<S>& w1, const RowVec<S>& b1, const Mat<S>& w2,
                   const RowVec<S>& b2, Mat<S>* u);
// Returns da; leaves the gradient at the GeLU input in `du` for W.
template <typename S>
Mat<S> mlp_backward_input(const Mat<S>& dm, const Mat<S>& u, const Mat<S>& w1, const Mat<S>& w2,
                          Mat<S>* du);
template <typename S>
void mlp_backward_weight(const Mat<S>& a, const Mat<S>& u, const Mat<S>& dm, const Mat<S>& du,
                         Mat<S>* dw1, RowVec<S>* db1, Mat<S>* dw2, RowVec<S>* db2);

// ---- Causal multi-head attention for ONE sequence and one token slice.
// q: l x h, the slice's queries. k, v: t x h with t = c + l: the keys/values
// of the c earlier tokens (the KV context) followed by the slice's own. Query
// i sits at position c + i and attends to keys 0 .. c + i. Head `j` uses
// feature columns [j d, (j + 1) d), d = h / heads, scores scaled 1/sqrt(d).
// `probs` receives the softmax, heads stacked: (heads l) x t, masked entries 0.
// Call with the scalar named (`attention_forward<float>(...)`): Ref arguments
// do not deduce it.
// REQUIRES: h % heads == 0, t >= l, o is l x h.
template <typename S>
void attention_forward(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v, int heads, MatRef<S> o,
                       Mat<S>* probs);
// Overwrites dq (l x h), dk and dv (t x h): the rows [0, c) of dk/dv are the
// gradient w.r.t. the KV context, the rows [c, t) w.r.t. the slice's own K/V.
template <typename S>
void attention_backward(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v, const Mat<S>& probs,
                        ConstMatRef<S> d_o, int heads, MatRef<S> dq, MatRef<S> dk, MatRef<S> dv);

}  // namespace ppsim::kernels
