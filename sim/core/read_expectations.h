// What a reader of a file says a value should have been, in one wording for
// every format a user or ppsim writes (YAML configs and profiles through
// sim/config/yaml_reader.h, JSON runs files through sim/fit/json_reader.h),
// and the range checks that go with the words.
#pragma once

#include <fmt/format.h>

#include <limits>
#include <string>

namespace ppsim {

// kFraction: (0, 1], an efficiency; kProbability: [0, 1), a dropout rate.
enum class Bound { kNonNegative, kPositive, kFraction, kProbability };

inline bool within(double value, Bound bound) {
  switch (bound) {
    case Bound::kNonNegative:
      return value >= 0;
    case Bound::kPositive:
      return value > 0;
    case Bound::kFraction:
      return value > 0 && value <= 1;
    case Bound::kProbability:
      return value >= 0 && value < 1;
  }
  return false;
}

inline const char* number_expectation(Bound bound) {
  switch (bound) {
    case Bound::kNonNegative:
      return "a number >= 0";
    case Bound::kPositive:
      return "a positive number";
    case Bound::kFraction:
      return "a number in (0, 1]";
    case Bound::kProbability:
      return "a number in [0, 1)";
  }
  return "a number";
}

// "an integer from 1 to 8", "a positive integer", "an integer >= 0" ...
template <typename Int>
std::string integer_expectation(Int min, Int max) {
  if (max != std::numeric_limits<Int>::max())
    return fmt::format("an integer from {} to {}", min, max);
  if (min == 1) return "a positive integer";
  if (min == std::numeric_limits<Int>::lowest()) return "an integer";
  return fmt::format("an integer >= {}", min);
}

}  // namespace ppsim
