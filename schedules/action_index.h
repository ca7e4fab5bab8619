// A dense map from every possible action of a schedule, (kind, stage,
// microbatch, slice), to an int: where it sits in a graph, or -1. The
// validator and the engine both look actions up by identity in their hot
// loops; a flat array makes that one multiply-add and no hashing.
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/action.h"

namespace ppsim {

class ActionIndex {
 public:
  // Every entry becomes -1; keeps the memory of earlier uses.
  void reset(int stages, int microbatches, int slices) {
    microbatches_ = microbatches;
    slices_ = slices;
    per_kind_ = static_cast<size_t>(stages) * microbatches * slices;
    slots_.assign(kNumActionKinds * per_kind_, -1);
  }
  // REQUIRES: the action lies within the sizes given to reset().
  int32_t& operator[](const Action& a) { return slots_[offset(a)]; }
  int32_t operator[](const Action& a) const { return slots_[offset(a)]; }
  bool contains(const Action& a) const { return slots_[offset(a)] >= 0; }

 private:
  size_t offset(const Action& a) const {
    return static_cast<size_t>(a.kind) * per_kind_ +
           (static_cast<size_t>(a.stage) * microbatches_ + a.microbatch) * slices_ + a.slice;
  }

  int microbatches_ = 0;
  int slices_ = 1;
  size_t per_kind_ = 0;
  std::vector<int32_t> slots_;
};

}  // namespace ppsim
