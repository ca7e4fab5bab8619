// The names of a cost profile's kernel kinds and parts (cost_profile.h).
#include "sim/core/cost_profile.h"

namespace ppsim {

std::string_view to_string(KernelKind kind) {
  switch (kind) {
    case KernelKind::kForward:
      return "forward";
    case KernelKind::kBackward:
      return "backward";
    case KernelKind::kBackwardInput:
      return "backward_input";
    case KernelKind::kBackwardWeight:
      return "backward_weight";
    case KernelKind::kRecompute:
      return "recompute";
    case KernelKind::kOptimizerStep:
      return "optimizer_step";
  }
  return "?";
}

std::string_view to_string(KernelPart part) {
  switch (part) {
    case KernelPart::kBlock:
      return "block";
    case KernelPart::kEmbedding:
      return "embedding";
    case KernelPart::kHead:
      return "head";
  }
  return "?";
}

}  // namespace ppsim
