#include "profiler/gemm.h"

#include "schedules/status.h"

namespace ppsim::kernels {
namespace {

template <typename S, typename A, typename B>
void assign(const A& a, const B& b, Strided<S>& c, bool accumulate) {
  if (accumulate) {
    c.noalias() += a * b;
  } else {
    c.noalias() = a * b;
  }
}

}  // namespace

template <typename S>
void gemm(ConstStrided<S> a, Op op_a, ConstStrided<S> b, Op op_b, Strided<S> c, bool accumulate) {
  const Eigen::Index rows = op_a == Op::kAsIs ? a.rows() : a.cols();
  const Eigen::Index inner = op_a == Op::kAsIs ? a.cols() : a.rows();
  PPSIM_CHECK(inner == (op_b == Op::kAsIs ? b.rows() : b.cols()));
  PPSIM_CHECK(c.rows() == rows && c.cols() == (op_b == Op::kAsIs ? b.cols() : b.rows()));
  if (op_a == Op::kAsIs && op_b == Op::kAsIs) {
    assign<S>(a, b, c, accumulate);
  } else if (op_a == Op::kAsIs) {
    assign<S>(a, b.transpose(), c, accumulate);
  } else if (op_b == Op::kAsIs) {
    assign<S>(a.transpose(), b, c, accumulate);
  } else {
    assign<S>(a.transpose(), b.transpose(), c, accumulate);
  }
}

template void gemm<float>(ConstStrided<float>, Op, ConstStrided<float>, Op, Strided<float>, bool);
template void gemm<double>(ConstStrided<double>, Op, ConstStrided<double>, Op, Strided<double>,
                           bool);

}  // namespace ppsim::kernels
