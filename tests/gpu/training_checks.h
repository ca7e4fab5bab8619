// What the tests of the CUDA backends share (cuda_runtime_test.cc: every
// rank on one GPU; cuda_mpi_test.cc: a GPU per rank over NCCL): a small
// model, run settings, and the comparison of the weight updates of a GPU
// run with the CPU's fp32 sequential reference, with its tolerances.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "real_runtime/runtime.h"
#include "tests/unit/runtime_checks.h"

namespace ppsim::runtime {

// Small enough to train in a second, wide enough that the GPU block's
// GEMMs and warps are exercised: 4 blocks of width 64, 16 tokens.
inline RuntimeModel gpu_model(DType dtype) {
  RuntimeModel m;
  m.layers = 4;
  m.hidden = 64;
  m.ffn = 128;
  m.heads = 4;
  m.seq_len = 16;
  m.vocab = 64;
  m.micro_batch = 2;
  m.seed = 11;
  m.precision = Precision::kFloat32;
  m.dtype = dtype;
  return m;
}

inline RunSettings settings(int iterations, double learning_rate) {
  RunSettings s;
  s.iterations = iterations;
  s.learning_rate = learning_rate;
  return s;
}

inline std::map<std::string, const std::vector<double>*> by_name(
    const std::vector<StageWeights>& set) {
  std::map<std::string, const std::vector<double>*> out;
  for (const StageWeights& s : set) {
    for (size_t t = 0; t < s.names.size(); ++t) out[s.names[t]] = &s.tensors[t];
  }
  return out;
}

// The largest, over the tensors, of max |u_a - u_b| / max |u_b|, u the update
// from `initial` (what training did, which a comparison of the weights
// themselves would drown in the weights that did not change).
inline double max_update_error(const std::vector<StageWeights>& a,
                               const std::vector<StageWeights>& b,
                               const std::vector<StageWeights>& initial) {
  const auto ta = by_name(a), tb = by_name(b), t0 = by_name(initial);
  EXPECT_EQ(ta.size(), t0.size());
  EXPECT_EQ(tb.size(), t0.size());
  double worst = 0;
  for (const auto& [name, w0] : t0) {
    const std::vector<double>& wa = *ta.at(name);
    const std::vector<double>& wb = *tb.at(name);
    EXPECT_EQ(wa.size(), w0->size()) << name;
    double err = 0, ref = 0;
    for (size_t i = 0; i < w0->size(); ++i) {
      err = std::max(err, std::abs((wa[i] - (*w0)[i]) - (wb[i] - (*w0)[i])));
      ref = std::max(ref, std::abs(wb[i] - (*w0)[i]));
    }
    EXPECT_GT(ref, 1e-6) << name << ": the reference did not move; the check would prove nothing";
    worst = std::max(worst, err / ref);
  }
  return worst;
}

// Tolerances on the updates after three steps. Weights start equal (the GPU's
// fp32 master weights are the CPU's initialisation); the GPU computes every
// gradient from 16-bit activations and weights, each rounding a relative
// error of at most u = 2^-8 (bf16) or 2^-11 (fp16), and the GPU block's
// tests bound a block's gradients by ~5 u against the CPU block on the same
// rounded inputs. Here the inputs are rounded too (the weights, each
// layer's activations), which adds a few u more, and three steps on weights
// that differ by that much compound it a little: 12 u. A wrong gradient (a
// transposed GEMM, a missing microbatch) is off by order 1.
constexpr double kBf16UpdateTolerance = 12.0 / 256;
constexpr double kFp16UpdateTolerance = 12.0 / 2048;

// (producer, consumer) of each transfer, sorted.
inline std::vector<std::pair<int, int>> transfer_pairs(const Timeline& x) {
  std::vector<std::pair<int, int>> out;
  for (const TransferRecord& r : x.transfers) out.emplace_back(r.producer, r.consumer);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ppsim::runtime
