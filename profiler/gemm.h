// The matrix products of the CPU kernels (block_kernels, gpt_block,
// gpt_head), all through one function: C = op(A) op(B), or C += op(A)
// op(B), op keeping or transposing, on row-major matrices or blocks of their
// rows or columns. Eigen instantiates its product code for every distinct
// expression type it multiplies; written inline, the kernels' twenty-odd
// products, each for float and double, took most of the 38 s their three
// sources needed to compile (g++ -O3; issue 14, CI time). Here Eigen instantiates
// eight per scalar type, once, in gemm.cc; a product runs the same Eigen
// GEMM as before, on strided views instead of block expressions.
#pragma once

#include "profiler/block_kernels.h"

namespace ppsim::kernels {

// A matrix or a block of one, row-major with any row stride.
template <typename S>
using ConstStrided = Eigen::Ref<const Mat<S>, 0, Eigen::OuterStride<>>;
template <typename S>
using Strided = Eigen::Ref<Mat<S>, 0, Eigen::OuterStride<>>;

enum class Op { kAsIs, kTransposed };

// c = op_a(a) op_b(b), or c += op_a(a) op_b(b) with `accumulate`. Call with
// the scalar named (`gemm<float>(...)`): Ref arguments do not deduce it.
// REQUIRES: the shapes agree; c has the product's shape; c shares no
// memory with a or b.
template <typename S>
void gemm(ConstStrided<S> a, Op op_a, ConstStrided<S> b, Op op_b, Strided<S> c, bool accumulate);

// op_a(a) op_b(b) as a new matrix.
template <typename S>
Mat<S> product(ConstStrided<S> a, Op op_a, ConstStrided<S> b, Op op_b) {
  Mat<S> c(op_a == Op::kAsIs ? a.rows() : a.cols(), op_b == Op::kAsIs ? b.cols() : b.rows());
  gemm<S>(a, op_a, b, op_b, c, false);
  return c;
}

}  // namespace ppsim::kernels
