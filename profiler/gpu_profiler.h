// The GPU profiler (`ppsim profile --device cuda`): times the GPU block's
// actions (profiler/gpu_block.h) at the shapes a config needs, at the model's
// real sizes, and this machine's copy links, and returns a CostProfile in the
// CPU profiler's format (profiler/cpu_profiler.h, docs/cost_profile.md).
//
// Kernels: F, B, I, W and a recompute (a second F whose result feeds B) per
// slice shape, after warm-up runs, `repetitions` times; median, min and max.
// With a vocabulary in the request, also the two ends as the CPU profiler
// times them (profiler/gpu_head.h): the embedding's F and W (its backward)
// and the head's F, I, W and B, with their bytes (the embedding's kept input
// gradient, GpuLossSaved). Then the optimizer step of one block's weights
// (mixed-precision SGD, fp32 master weights and gradients), once, at the
// first shape.
// Each action is bracketed by the GpuTracer (profiler/cupti_tracer.h): with
// CUPTI its time is the span from the first start to the last end of the GPU
// work it launched (kernels, the memsets that zero its buffers), on the GPU's
// clock; when CUPTI cannot be used, a CUDA event pair around it on the
// stream. The provenance's `tool` says which. The forward sample carries the
// bytes GpuSaved holds after F and after I (16-bit storage, fp32 statistics).
//
// Tensor parallelism: the GPU block has no sharded form (its attention width
// is its hidden size). With t > 1 it runs at hidden h, ffn f / t and heads
// a / t (gpu_timed_shape): the MLP is the shard's exactly; the QKV and output
// projections are full width (t times the shard's work) and the attention
// core is full width in a / t heads of width h t / a (t times the shard's).
// So the time is an upper bound on one shard's, the collectives are not part
// of it (the simulator's analytic tensor-parallel communication stands), and
// samples carry the model's hidden, ffn and heads with `tensor` t, which is
// how the simulator looks them up. The embedding and the head are not
// sharded either: they run the whole vocabulary (for vocabulary-parallel
// ends, t times the shard's work) and carry `tensor` t too.
//
// SM groups (`sm_groups` > 1): the kernels run in a green context on the
// first of that many equal groups of the device's SMs; the provenance and
// the progress output say the placement (GpuContext::placement()). The
// links are measured on the whole device.
//
// Links (cudaMemcpyAsync and friends, each timed by a CUDA event pair on its
// stream, median over the repetitions per size, fitted with fit_link and
// measured again when the fit fails, as the CPU profiler does):
// "device-to-device" (one device), "host-to-device" and "device-to-host"
// (pinned host memory), and, with two or more devices, "peer" (device 0 to
// 1, cudaMemcpyPeerAsync, peer access enabled where the devices allow) and,
// in a build with NCCL, "nccl" (ncclSend on device 0, ncclRecv on device 1,
// one process, ncclCommInitAll).
//
// Plain C++: no CUDA type appears here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/cpu_profiler.h"
#include "profiler/gpu_block.h"
#include "schedules/status.h"
#include "sim/config/config.h"
#include "sim/cost/cost_profile.h"

namespace ppsim {

struct GpuProfileOptions {
  int device = 0;                // the device the kernels and single-device links run on
  int tensor = 1;                // the config's tensor-parallel degree (see above)
  DType storage = DType::kBf16;  // the model's dtype: kBf16 or kFp16
  // > 1: the kernels run on one of that many equal groups of the device's
  // SMs (a green context, gpu::SmPartition), as each of that many pipeline
  // ranks sharing this GPU runs them in `ppsim run --backend cuda`. Error
  // when the driver cannot split the device so.
  int sm_groups = 1;
  // Copy sizes of every link sweep (bytes); none: no link is measured.
  std::vector<int64_t> link_sizes = {1 << 16, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28};
};

// The config's tensor-parallel degree and dtype. Errors: an fp32 model (the
// GPU block stores bf16 or fp16). REQUIRES: config.model.
Result<GpuProfileOptions> gpu_options_for(const Config& config);

// The shape the GPU block runs for one (tokens, context) of the request:
// hidden h, ffn f / t, heads a / t (see above). Errors: t < 1, t not
// dividing heads or ffn.
Result<gpu::SliceShape> gpu_timed_shape(const ProfileRequest& request, int tensor, int tokens,
                                        int context);

inline constexpr std::string_view kDeviceToDeviceLink = "device-to-device";
inline constexpr std::string_view kHostToDeviceLink = "host-to-device";
inline constexpr std::string_view kDeviceToHostLink = "device-to-host";
inline constexpr std::string_view kPeerLink = "peer";
inline constexpr std::string_view kNcclLink = "nccl";

// The links measured with `devices` usable devices, in profile order;
// `nccl`: the build has NCCL.
std::vector<std::string_view> gpu_link_names(int devices, bool nccl);
// Whether this build has NCCL (PPSIM_HAVE_NCCL).
bool gpu_profiler_has_nccl();

// Runs the measurements; `progress` gets a line for people after each shape
// and link, and for each part or link left out, why. Errors: the request's
// (check_request), the options', no usable device (the reason from
// gpu::device_count), and any CUDA, cuBLAS or NCCL failure, named.
Result<CostProfile> profile_gpu(const ProfileRequest& request, const GpuProfileOptions& options,
                                const std::function<void(const std::string&)>& progress = {});

}  // namespace ppsim
