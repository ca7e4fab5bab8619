#include "sim/core/workload.h"

namespace ppsim {

int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kBf16:
    case DType::kFp16:
      return 2;
    case DType::kFp32:
      return 4;
  }
  return 0;
}

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::kBf16:
      return "bf16";
    case DType::kFp16:
      return "fp16";
    case DType::kFp32:
      return "fp32";
  }
  return "?";
}

const char* to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

const char* to_string(OptimizerStep step) {
  return step == OptimizerStep::kSynchronous ? "synchronous" : "post_validation";
}

const char* to_string(MoeDispatcher dispatcher) {
  return dispatcher == MoeDispatcher::kAllToAll ? "alltoall" : "deepep";
}

const char* to_string(MasterWeights master) {
  switch (master) {
    case MasterWeights::kSeparate:
      return "separate";
    case MasterWeights::kParams:
      return "params";
    case MasterWeights::kNone:
      return "none";
  }
  return "?";
}

const char* to_string(MomentDType moments) {
  return moments == MomentDType::kFp32 ? "fp32" : "model_dtype";
}

const char* to_string(GradientDType gradients) {
  switch (gradients) {
    case GradientDType::kAuto:
      return "auto";
    case GradientDType::kFp32:
      return "fp32";
    case GradientDType::kModelDType:
      return "model_dtype";
  }
  return "?";
}

const char* to_string(CrossEntropy loss) {
  switch (loss) {
    case CrossEntropy::kMegatron:
      return "megatron";
    case CrossEntropy::kMegatronFused:
      return "megatron_fused";
    case CrossEntropy::kTorch:
      return "torch";
    case CrossEntropy::kTorchFp32:
      return "torch_fp32";
    case CrossEntropy::kFused:
      return "fused";
  }
  return "?";
}

const char* to_string(Fp8Recipe recipe) {
  switch (recipe) {
    case Fp8Recipe::kNone:
      return "none";
    case Fp8Recipe::kDelayed:
      return "delayed";
    case Fp8Recipe::kCurrent:
      return "current";
    case Fp8Recipe::kMxfp8:
      return "mxfp8";
  }
  return "?";
}

const char* to_string(CudaGraphScope scope) {
  switch (scope) {
    case CudaGraphScope::kNone:
      return "none";
    case CudaGraphScope::kFullIteration:
      return "full_iteration";
    case CudaGraphScope::kAttention:
      return "attn";
    case CudaGraphScope::kMlp:
      return "mlp";
    case CudaGraphScope::kMoeRouter:
      return "moe_router";
    case CudaGraphScope::kMoePreprocess:
      return "moe_preprocess";
  }
  return "?";
}

bool CudaGraphs::captures(CudaGraphScope part) const {
  const bool layer_part = part == CudaGraphScope::kAttention || part == CudaGraphScope::kMlp ||
                          part == CudaGraphScope::kMoeRouter;
  return layer_part && has(part);
}

const char* to_string(ContextComm comm) { return comm == ContextComm::kP2p ? "p2p" : "all_gather"; }

const char* to_string(SlicingMethod slicing) {
  return slicing == SlicingMethod::kEven ? "even" : "optimal";
}

const char* to_string(Mlp mlp) {
  switch (mlp) {
    case Mlp::kGelu:
      return "gelu";
    case Mlp::kSwiglu:
      return "swiglu";
    case Mlp::kSquaredRelu:
      return "squared_relu";
  }
  return "?";
}

const char* to_string(Norm norm) { return norm == Norm::kLayerNorm ? "layernorm" : "rmsnorm"; }

const char* to_string(Attention attention) {
  return attention == Attention::kStandard ? "standard" : "flash";
}

const char* to_string(Positions positions) {
  switch (positions) {
    case Positions::kLearned:
      return "learned";
    case Positions::kRotary:
      return "rotary";
    case Positions::kAlibi:
      return "alibi";
  }
  return "?";
}

bool HardwareSpec::fp8_gemm_needs_transposes() const {
  const double cc = compute_capability;
  const bool any_layout = (cc >= 10 && cc < 12) || cc >= 13;
  return !any_layout;
}

double HardwareSpec::peak_tflops(DType dtype) const {
  switch (dtype) {
    case DType::kBf16:
      return peak_tflops_bf16;
    case DType::kFp16:
      return peak_tflops_fp16;
    case DType::kFp32:
      return peak_tflops_fp32;
  }
  return 0;
}

const char* gpt_block_misfit(const ModelSpec& model) {
  if (model.mlp != Mlp::kGelu) return "mlp";
  if (model.norm != Norm::kLayerNorm) return "norm";
  if (model.key_value_heads() != model.heads) return "kv_heads";
  if (model.explicit_head_dim > 0 && model.explicit_head_dim * model.heads != model.hidden) {
    return "head_dim";
  }
  if (!model.bias) return "bias";
  if (model.moe) return "moe";
  if (model.mla) return "mla";
  return nullptr;
}

std::string flushes_misfit(const Config& config) {
  const int flushes = config.schedule.flushes;
  if (flushes == 1) return "";
  switch (config.schedule.kind) {
    case ScheduleKind::kCustom:
      return "cannot be combined with schedule.kind custom: the file holds the whole iteration";
    case ScheduleKind::kZbAuto:
      return "cannot be combined with schedule.kind zb-auto, whose search places all the "
             "iteration's microbatches in one pass";
    case ScheduleKind::kDualPipe:
      return "cannot be combined with schedule.kind dualpipe, whose two chains each take half "
             "the iteration's microbatches";
    case ScheduleKind::kPipeDream:
    case ScheduleKind::kPipeDream2bw:
      return "cannot be combined with schedule.kind " +
             std::string(to_string(config.schedule.kind)) +
             ", which never flushes: its optimizer steps inside the stream";
    default:
      break;
  }
  const int m = config.num_microbatches();
  if (m % flushes != 0) {
    return std::to_string(flushes) + " does not divide the iteration's " + std::to_string(m) +
           " microbatches (global_batch / (micro_batch x data))";
  }
  return "";
}

std::string Config::model_stages_formula(std::string_view p_times_v) const {
  std::string formula(p_times_v);
  if (num_chains() > 1) formula += " / 2 (DualPipe holds the model twice)";
  return formula;
}

}  // namespace ppsim
