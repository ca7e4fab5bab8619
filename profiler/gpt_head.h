// The two ends of a GPT model, for the first and last pipeline stages, with
// backward by hand (CPU, Eigen):
//
//   first stage   x = tok_emb[token] + pos_emb[position]
//   last stage    loss = scale * sum_tokens -log softmax(LN_f(y) W_out)[target]
//
// The output projection is not tied to the token embedding: in a pipeline the
// two sit on different ranks and tying them needs an extra all-reduce, which
// is out of scope here.
//
// Tokens follow the block's layout (gpt_block.h): a slice of l tokens at
// context c of b sequences is b l ids, sequence-major, and token t of the
// slice sits at position c + t. The loss is a sum times `scale`, so the
// slices of a microbatch add up to its mean with scale = 1 / (b seq_len).
// Split into I and W like the block: the embedding has only W (its input is
// token ids), the loss has I (dy) and W (W_out and the final LN).
#pragma once

#include <cstdint>
#include <vector>

#include "profiler/block_kernels.h"
#include "profiler/gpt_block.h"

namespace ppsim::kernels {

// Embedding and LM-head weights; also their gradients' type (HeadGrads).
template <typename S>
struct HeadParams {
  int vocab = 0;
  int hidden = 0;
  int max_seq = 0;
  Mat<S> tok_emb;                // vocab x hidden
  Mat<S> pos_emb;                // max_seq x hidden
  RowVec<S> lnf_gain, lnf_bias;  // hidden
  Mat<S> w_out;                  // hidden x vocab

  std::vector<TensorView<S>> tensors();
};
template <typename S>
using HeadGrads = HeadParams<S>;

template <typename S>
HeadParams<S> zero_head_params(int vocab, int hidden, int max_seq);
// GPT-2's initialisation: N(0, 0.02) embeddings and projection, unit gain.
template <typename S>
HeadParams<S> init_head_params(int vocab, int hidden, int max_seq, uint64_t seed);

// Returns x, (b l) x hidden. REQUIRES: tokens.size() % batch == 0, every id
// in [0, vocab), context + l <= max_seq.
template <typename S>
Mat<S> embed_forward(const HeadParams<S>& p, const std::vector<int32_t>& tokens, int batch,
                     int context);
// W of the first stage: scatters dx into the rows of the embeddings used.
template <typename S>
void embed_backward_weight(const std::vector<int32_t>& tokens, int batch, int context,
                           const Mat<S>& dx, HeadGrads<S>* grads);

// What the loss keeps: the targets (n int32) throughout; after forward, xhat
// (n h), rstd (n) and the softmax (n vocab); after I, xhat (W rebuilds LN_f(y) from it), the
// logits' gradient (n vocab, the softmax turned in place) and the final LN's gain/bias gradient
// reduced over tokens (2 h). bytes() counts what is held.
template <typename S>
struct LossSaved {
  enum class Phase { kEmpty, kForward, kInputDone };
  Phase phase = Phase::kEmpty;
  S scale = 0;
  std::vector<int32_t> targets;
  Mat<S> xhat, probs;  // probs becomes d_logits in I
  ColVec<S> rstd;
  RowVec<S> d_lnf_gain, d_lnf_bias;

  int64_t bytes() const;
};

// F of the last stage's head: returns the scaled summed loss.
// REQUIRES: targets.size() == y.rows(), every id in [0, vocab).
template <typename S>
S loss_forward(const HeadParams<S>& p, const Mat<S>& y, const std::vector<int32_t>& targets,
               S scale, LossSaved<S>* saved);
// I: returns d loss / d y. REQUIRES: saved->phase == kForward.
template <typename S>
Mat<S> loss_backward_input(const HeadParams<S>& p, LossSaved<S>* saved);
// W: accumulates W_out and final-LN gradients; empties *saved.
// REQUIRES: saved->phase == kInputDone.
template <typename S>
void loss_backward_weight(const HeadParams<S>& p, LossSaved<S>* saved, HeadGrads<S>* grads);

}  // namespace ppsim::kernels
