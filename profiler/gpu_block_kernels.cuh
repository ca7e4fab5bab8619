// The small CUDA kernels of the GPU block and head (gpu_block_kernels.cu),
// for their .cu files only. T is the storage type (__nv_bfloat16 or __half);
// every kernel reads T or float, computes in fp32 and rounds once on
// writing T. Matrices are row-major with `cols` (or h) elements a row.
// Each launcher returns the launch's error (cudaSuccess for empty work).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ppsim::gpu::detail {

// out[i] = in[i], converted (float <-> T).
template <typename In, typename Out>
cudaError_t convert(const In* in, int64_t count, Out* out, cudaStream_t stream);

// Per row of x (rows x h; In = T or float): xhat = (x - mean) rstd,
// rstd = 1 / sqrt(var + eps), y = xhat gain + bias.
template <typename T, typename In>
cudaError_t layer_norm_forward(const In* x, const T* gain, const T* bias, int64_t rows, int h,
                               T* xhat, float* rstd, T* y, cudaStream_t stream);
// y = xhat gain + bias (W rebuilds the layer norm's output).
template <typename T>
cudaError_t layer_norm_output(const T* xhat, const T* gain, const T* bias, int64_t rows, int h,
                              T* y, cudaStream_t stream);
// Per row, with g = dy gain: dx = rstd (g - mean(g) - xhat mean(g xhat)) +
// residual (R = T or float), written to dx32 and/or dx (either may be null).
template <typename T, typename R>
cudaError_t layer_norm_backward(const float* dy, const T* xhat, const float* rstd, const T* gain,
                                const R* residual, int64_t rows, int h, float* dx32, T* dx,
                                cudaStream_t stream);
// dgain = sum over rows of dy xhat, dbias = sum over rows of dy (overwritten).
template <typename T>
cudaError_t layer_norm_param_grads(const float* dy, const T* xhat, int64_t rows, int h,
                                   float* dgain, float* dbias, cudaStream_t stream);

// v = acc + bias (broadcast over rows) [+ residual]; written to out32 and/or
// out (either may be null). residual may be null.
template <typename T, typename R>
cudaError_t bias_residual(const float* acc, const T* bias, const R* residual, int64_t rows,
                          int cols, float* out32, T* out, cudaStream_t stream);

// g = gelu(u), tanh approximation (block_kernels.h's).
template <typename T>
cudaError_t gelu(const T* u, int64_t count, T* g, cudaStream_t stream);
// du = dg gelu'(u).
template <typename T>
cudaError_t gelu_backward(const float* dg, const T* u, int64_t count, T* du, cudaStream_t stream);

// acc is (b l) x 3h (x W_qkv, no bias yet). Adds b_qkv and writes the Q
// columns to q ((b l) x h) and the K and V columns of sequence i's token r
// to row context + r of k / v (per sequence `capacity` x h rows).
template <typename T>
cudaError_t qkv_split(const float* acc, const T* b_qkv, int batch, int tokens, int context,
                      int hidden, int capacity, T* q, T* k, T* v, cudaStream_t stream);

// scores: rows x keys (already scaled), rows = heads x tokens, row r of each
// head is the query at position context + (r % tokens), which sees keys
// 0 .. context + r % tokens. probs = the masked softmax, 0 where masked.
template <typename T>
cudaError_t causal_softmax(const float* scores, int64_t rows, int tokens, int keys, int context,
                           T* probs, cudaStream_t stream);
// ds = scale p (dp - sum_k p dp) per row (0 where p is).
template <typename T>
cudaError_t softmax_backward(const T* probs, const float* dp, int64_t rows, int keys, float scale,
                             T* ds, cudaStream_t stream);

// One sequence: dk, dv are the attention's (context + tokens) x h gradients
// w.r.t. its keys and values; gk, gv the sequence's rows of the KvGrad.
// Context rows add into gk/gv; the slice's rows, plus what gk/gv held for
// them, go to the K and V columns of d_qkv (the sequence's first row,
// 3h wide) and those gk/gv rows are zeroed.
template <typename T>
cudaError_t kv_grad_combine(const float* dk, const float* dv, int tokens, int context, int hidden,
                            float* gk, float* gv, T* d_qkv, cudaStream_t stream);

// out[c] += sum over rows of m[r][c].
template <typename T>
cudaError_t column_sum_add(const T* m, int64_t rows, int cols, float* out, cudaStream_t stream);

// The head (gpu_head.h). Token ids out of [0, vocab) are clamped into it.

// Row r of x (rows x hidden, sequence-major, `tokens` a sequence) =
// tok_emb[ids[r]] + pos_emb[context + r % tokens], added in fp32.
template <typename T>
cudaError_t embed_forward(const T* tok_emb, const T* pos_emb, const int32_t* ids, int64_t rows,
                          int tokens, int context, int hidden, int vocab, T* x,
                          cudaStream_t stream);
// Adds row r of dx into row ids[r] of tok_grad and row context + r % tokens
// of pos_grad (fp32 atomics).
template <typename T>
cudaError_t embed_backward_weight(const int32_t* ids, const T* dx, int64_t rows, int tokens,
                                  int context, int hidden, int vocab, float* tok_grad,
                                  float* pos_grad, cudaStream_t stream);
// Per row of logits (rows x vocab), one block a row: probs = softmax, and
// row_loss = -log softmax[target] = log sum exp(l - max) - (l_target - max).
template <typename T>
cudaError_t vocab_softmax(const float* logits, const int32_t* targets, int64_t rows, int vocab,
                          T* probs, float* row_loss, cudaStream_t stream);
// probs[r][targets[r]] -= 1: the softmax becomes softmax - onehot.
template <typename T>
cudaError_t subtract_onehot(const int32_t* targets, int64_t rows, int vocab, T* probs,
                            cudaStream_t stream);

// Mixed-precision SGD: master -= learning_rate * grads, params = master
// (rounded), grads = 0.
template <typename T>
cudaError_t sgd_step(float learning_rate, int64_t count, float* master, float* grads, T* params,
                     cudaStream_t stream);

}  // namespace ppsim::gpu::detail
