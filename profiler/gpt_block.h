// One pre-LN GPT transformer block on the CPU (Eigen), forward and backward by
// hand, for a token slice of a batch of sequences:
//
//   h = x + Attn(LN1(x))           Attn: causal multi-head self-attention with
//   y = h + MLP(LN2(h))            QKV and output projections (weights, biases)
//                                  MLP: W2 gelu(W1 a + b1) + b2, tanh GeLU
//
// This is the compute a pipeline stage stands for when the real runtime runs
// a schedule, so its API follows the schedule's actions:
//   F  forward()         keeps `Saved` for backward, appends the slice's K/V
//                        to the `KvCache` so later slices can attend to them;
//   I  backward_input()  input gradient; also the gradient w.r.t. the K/V of
//                        earlier slices, added into a `KvGrad` their own
//                        backward consumes (why slice j's I runs before j-1's);
//   W  backward_weight() weight gradients, from what I left in `Saved`;
//   B  backward()        = I then W.
//
// Token slices: a microbatch of `batch` sequences is cut along the sequence
// into slices run in order 0, 1, ... in forward and in reverse in backward.
// A slice of l tokens at context c (the tokens the cache already holds) takes
// x with batch * l rows, sequence-major: rows [i l, (i + 1) l) are sequence
// i's tokens c .. c + l - 1. A whole sequence is the one-slice case (c = 0).
//
// Templated on the scalar: `float` for the runtime, `double` for gradient
// checks; both instantiated in gpt_block.cc. Errors are PPSIM_CHECKs: every
// precondition here is a programming error, not user input.
#pragma once

#include <cstdint>
#include <vector>

#include "profiler/block_kernels.h"

namespace ppsim::kernels {

// A tensor of a parameter set, flattened: for tests (gradient checks touch
// every entry), zeroing, counting and optimizers.
template <typename S>
struct TensorView {
  const char* name;
  S* data;
  int64_t size;
};

// All weights of one block. Also the type of its gradients (BlockGrads), which
// have the same shapes. Linear weights are (in x out).
template <typename S>
struct BlockParams {
  int hidden = 0;
  int ffn = 0;
  int heads = 0;
  RowVec<S> ln1_gain, ln1_bias;  // hidden
  Mat<S> w_qkv;                  // hidden x 3 hidden, columns [Q | K | V]
  RowVec<S> b_qkv;               // 3 hidden
  Mat<S> w_o;                    // hidden x hidden
  RowVec<S> b_o;                 // hidden
  RowVec<S> ln2_gain, ln2_bias;  // hidden
  Mat<S> w1;                     // hidden x ffn
  RowVec<S> b1;                  // ffn
  Mat<S> w2;                     // ffn x hidden
  RowVec<S> b2;                  // hidden

  std::vector<TensorView<S>> tensors();
  int64_t num_parameters() const;
};
template <typename S>
using BlockGrads = BlockParams<S>;

// All tensors zero (gradient buffers). REQUIRES: hidden % heads == 0.
template <typename S>
BlockParams<S> zero_params(int hidden, int ffn, int heads);
// GPT-2's initialisation: weights N(0, 0.02), biases 0, gains 1; the same seed
// gives the same weights for float and double.
template <typename S>
BlockParams<S> init_params(int hidden, int ffn, int heads, uint64_t seed);

// The runtime's optimizer step: params -= learning_rate * grads, then grads
// = 0, tensor by tensor. REQUIRES: the two lists have the same shapes in the
// same order (tensors() of a set of weights and of its gradients).
template <typename S>
void sgd_update(const std::vector<TensorView<S>>& params, const std::vector<TensorView<S>>& grads,
                double learning_rate);

// Keys and values of the tokens a block has seen so far in each sequence of a
// microbatch: rows [0, length()) of k(i)/v(i). Forward of a slice appends its
// rows; I of the slice gives them back (length() returns to the slice's
// context), so slices must be run backwards in reverse order. Storage for
// `capacity` tokens is allocated once. The rows are charged to the slice that
// wrote them (Saved::bytes()), since they live exactly until its I.
template <typename S>
class KvCache {
 public:
  KvCache(int batch, int hidden, int capacity);
  int batch() const { return static_cast<int>(k_.size()); }
  int capacity() const { return capacity_; }
  int length() const { return length_; }
  Mat<S>& k(int seq) { return k_[seq]; }
  Mat<S>& v(int seq) { return v_[seq]; }
  const Mat<S>& k(int seq) const { return k_[seq]; }
  const Mat<S>& v(int seq) const { return v_[seq]; }
  // REQUIRES: 0 <= length <= capacity(). Used by the block only.
  void set_length(int length);

 private:
  std::vector<Mat<S>> k_, v_;  // per sequence, capacity x hidden
  int capacity_;
  int length_ = 0;
};

// Gradient w.r.t. the K/V rows of a KvCache, per sequence, capacity x hidden,
// zero at construction. Slice j's I adds into the rows of earlier tokens and
// consumes (then zeroes) its own rows, which later slices' I filled.
template <typename S>
struct KvGrad {
  KvGrad(int batch, int hidden, int capacity);
  std::vector<Mat<S>> dk, dv;
};

// What a block's forward keeps for backward, for one slice, and what I leaves
// for W. Fields are the block's business; the figures are the API:
//
//   after forward: bytes() = the activations below, plus the slice's K/V rows
//     in the KvCache (2 b l h scalars);
//   after I:       bytes() = weight_grad_bytes() + grad_stash_bytes();
//   after W:       bytes() = 0.
//
// With n = b l tokens and t = c + l, forward keeps, in scalars:
//   xhat1, xhat2  n h each   layer-norm outputs before gain/bias (LN backward,
//                            and W rebuilds the LN outputs from them)
//   rstd1, rstd2  n each     per-token 1/deviation (LN backward)
//   q             n h        queries (dK); K/V live in the cache
//   probs         b a l t    softmax, masked entries included (attention bwd)
//   o             n h        attention output before W_o (dW_o)
//   u             n f        GeLU input (GeLU backward; W recomputes gelu(u))
// I frees rstd1, rstd2, q, probs and the K/V rows; W still reads the inputs of
// the four linear layers: xhat1, o, xhat2, u — weight_grad_bytes(), (3 n h +
// n f) scalars, the quantity the simulator's cost model calls
// weight_grad_bytes — and the output gradients I computed for it:
//   d_qkv 3 n h, d_h (at the attention output) n h, dy n h, du n f, and the
//   layer-norm gain/bias gradients already reduced over tokens, 4 h:
// grad_stash_bytes(), (5 n h + n f + 4 h) scalars.
template <typename S>
struct Saved {
  enum class Phase { kEmpty, kForward, kInputDone };
  Phase phase = Phase::kEmpty;
  int batch = 0, tokens = 0, context = 0, hidden = 0, ffn = 0, heads = 0;

  Mat<S> xhat1, q, o, xhat2, u;
  ColVec<S> rstd1, rstd2;
  std::vector<Mat<S>> probs;  // per sequence, (heads l) x (c + l)

  Mat<S> d_qkv, d_h, dy, du;
  RowVec<S> d_ln1_gain, d_ln1_bias, d_ln2_gain, d_ln2_bias;

  // Bytes held now (see above), counted from the buffers actually held.
  int64_t bytes() const;
  // Bytes of the activations W reads, from the shapes (any phase but kEmpty).
  int64_t weight_grad_bytes() const;
  // Bytes of the gradients I stashes for W, from the shapes.
  int64_t grad_stash_bytes() const;
};

// F for one slice: x is (b l) x h, b = kv->batch(), c = kv->length(); appends
// the slice's K/V to kv and fills *saved. Returns y, (b l) x h.
// REQUIRES: x.rows() % b == 0, c + l <= kv->capacity(), p shapes consistent.
template <typename S>
Mat<S> forward(const BlockParams<S>& p, const Mat<S>& x, KvCache<S>* kv, Saved<S>* saved);

// I for the slice `saved` belongs to: returns dx. Reads from kv_grad the
// gradient later slices left for this slice's K/V rows, adds the gradient
// w.r.t. the context rows [0, c), and gives the slice's rows of kv back.
// REQUIRES: saved->phase == kForward, kv->length() == c + l (later slices'
// I done), kv and kv_grad are the ones forward used.
template <typename S>
Mat<S> backward_input(const BlockParams<S>& p, const Mat<S>& dy, KvCache<S>* kv, KvGrad<S>* kv_grad,
                      Saved<S>* saved);

// W: accumulates the weight gradients into *grads and empties *saved.
// REQUIRES: saved->phase == kInputDone.
template <typename S>
void backward_weight(const BlockParams<S>& p, Saved<S>* saved, BlockGrads<S>* grads);

// B: I then W.
template <typename S>
Mat<S> backward(const BlockParams<S>& p, const Mat<S>& dy, KvCache<S>* kv, KvGrad<S>* kv_grad,
                Saved<S>* saved, BlockGrads<S>* grads);

}  // namespace ppsim::kernels
