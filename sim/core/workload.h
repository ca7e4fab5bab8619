// The workload a user describes in YAML, as plain structs with documented
// defaults. The config loader (config.h) is the only place that sees YAML;
// everything below it takes these structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ppsim {

enum class DType { kBf16, kFp16, kFp32 };
enum class Recompute { kNone, kSelective, kFull };
// How iterations meet: `synchronous` all-reduces across the pipeline ranks
// before the optimizer step (gradient clipping, NaN checks), so no rank
// starts the next iteration before all have finished this one;
// `post_validation` (Qi et al. 2024) steps at once and checks afterwards.
enum class OptimizerStep { kSynchronous, kPostValidation };
// How a token-level schedule cuts a sequence: equal slices, or TeraPipe's
// optimal cut for the model's costs.
enum class SlicingMethod { kEven, kOptimal };

int dtype_bytes(DType dtype);
const char* to_string(DType dtype);
const char* to_string(Recompute recompute);
const char* to_string(OptimizerStep step);
const char* to_string(SlicingMethod slicing);

// A GPT-style decoder-only transformer.
struct ModelSpec {
  int layers = 0;
  int hidden = 0;
  int ffn_hidden = 0;  // 0 in YAML means 4 * hidden; the loader fills it in
  int heads = 0;
  int seq_len = 0;
  int vocab = 0;
  DType dtype = DType::kBf16;
};

// One kind of accelerator and the links between them. Figures come from a
// preset in configs/hardware/ and may be overridden inline.
struct HardwareSpec {
  std::string name;
  double memory_gib = 0;        // device memory capacity
  double peak_tflops_bf16 = 0;  // dense, no sparsity
  double peak_tflops_fp16 = 0;
  double peak_tflops_fp32 = 0;       // plain fp32 (no TF32)
  double max_gemm_efficiency = 0.8;  // fraction of peak reached by large GEMMs
  // GEMM size (in GFLOP) at which a GEMM reaches half of max_gemm_efficiency:
  // efficiency(x) = max_gemm_efficiency * x / (x + gemm_half_efficiency_gflop).
  double gemm_half_efficiency_gflop = 1.0;
  double hbm_bandwidth_gbps = 0;         // GB/s, for memory-bound kernels
  double intra_node_bandwidth_gbps = 0;  // GB/s per GPU per direction (NVLink)
  double intra_node_latency_us = 0;
  double inter_node_bandwidth_gbps = 0;  // GB/s per GPU per direction (network)
  double inter_node_latency_us = 0;
  int gpus_per_node = 8;
  int nodes = 1;

  double peak_tflops(DType dtype) const;
  int num_gpus() const { return gpus_per_node * nodes; }
};

struct ParallelSpec {
  int pipeline = 1;        // p
  int tensor = 1;          // t
  int data = 1;            // d
  int virtual_stages = 1;  // v
  bool sequence_parallel = false;
  // Layers of each of the p * v stages, first stage first (each >= 1, summing
  // to model.layers). Empty: the default even split (layers_per_stage in
  // cost_model.h); balanced_layers (partition.h) finds the fastest one.
  std::vector<int> layers_per_stage;
};

struct TrainingSpec {
  int global_batch = 0;  // samples per iteration (required in YAML)
  int micro_batch = 1;
  Recompute recompute = Recompute::kNone;
  int zero_stage = 0;  // 0..3
  OptimizerStep optimizer_step = OptimizerStep::kSynchronous;
};

struct ScheduleSpec {
  std::string kind = "1f1b";  // a generator's kind, or "custom"
  std::string file;           // custom: the CSV, one row per rank (resolved path)
  // terapipe: `slices` equal token slices per microbatch, or the cut that
  // TeraPipe's dynamic program finds, in multiples of `slice_granularity`
  // tokens (0: the smallest that keeps seq_len / granularity <= 256).
  int slices = 0;
  SlicingMethod slicing = SlicingMethod::kEven;
  int slice_granularity = 0;
  // zb-auto: activation memory allowed per rank; 0: the device's memory less
  // the rank's static bytes (the tightest rank), or without hardware, what
  // 1F1B keeps on rank 0 (p microbatches).
  double memory_limit_gib = 0;
};

// Durations per stage and microbatch, for idealized studies and for
// overriding the analytic model. Each list holds one value (applies to every
// stage) or one value per stage (p * v of them). Empty means "not given".
struct FixedCosts {
  std::vector<double> forward_s;
  std::vector<double> backward_s;
  std::vector<double> weight_grad_s;  // the part of backward_s that W can take
  std::vector<double> p2p_s;          // one transfer between consecutive stages
  std::vector<double> activation_bytes;
  // The part of activation_bytes that W still reads after I (split backward);
  // when not given and there is no model, 0: I gives everything back.
  std::vector<double> weight_grad_bytes;
};

struct Config {
  std::string source;  // the file it came from, for messages
  std::optional<ModelSpec> model;
  std::optional<HardwareSpec> hardware;
  ParallelSpec parallel;
  TrainingSpec training;
  ScheduleSpec schedule;
  FixedCosts fixed;
  // costs.profile: a cost profile (docs/cost_profile.md) whose measured
  // kernel times replace the analytic layer times; the path as resolved by
  // the loader (relative to the config's folder), empty for none. The loader
  // checks only that the file exists; build_cost_table reads it.
  std::string profile_path;
  // costs.link: the profile's link that prices the pipeline's transfers
  // (`nccl` for a GPU per rank); empty: its "thread-copy" link, else its
  // "device-to-device" one. The loader checks only that costs.profile is
  // given; build_cost_table that the profile has the link.
  std::string profile_link;

  int num_stages() const { return parallel.pipeline * parallel.virtual_stages; }
  // m = global_batch / (micro_batch * data); the loader checks divisibility.
  int num_microbatches() const {
    return training.global_batch / (training.micro_batch * parallel.data);
  }
};

// The `search:` section of a sweep file (`ppsim explore`): the values to try
// for each dimension. The loader fills in the defaults of an omitted key
// (pipeline and tensor: powers of two that fit the GPUs, the model and a
// node; micro_batch [1, 2, 4]; virtual_stages [1, 2, 4]; schedule [1f1b,
// interleaved-1f1b, zb-h1, zb-v]; recompute [none, selective, full];
// zero_stage [0, 1]; memory_cap_gib: the device's memory less 4 GiB).
struct SearchSpace {
  std::vector<int> pipeline;
  std::vector<int> tensor;
  std::vector<int> micro_batch;
  std::vector<int> virtual_stages;
  std::vector<std::string> schedule;
  std::vector<Recompute> recompute;
  std::vector<int> zero_stage;
  double memory_cap_gib = 0;
};

}  // namespace ppsim
