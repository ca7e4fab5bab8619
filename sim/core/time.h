// Simulated time: an integer count of picoseconds. Integers keep event order
// exact and deterministic; 2^63 ps is about 106 days.
#pragma once

#include <cmath>
#include <cstdint>

namespace ppsim {

using Picos = int64_t;

inline constexpr Picos kPicosPerSecond = 1'000'000'000'000;

// Rounds to the nearest picosecond. REQUIRES: 0 <= seconds < 9e6.
inline Picos seconds_to_picos(double seconds) {
  return static_cast<Picos>(std::llround(seconds * static_cast<double>(kPicosPerSecond)));
}
inline double picos_to_seconds(Picos t) { return static_cast<double>(t) * 1e-12; }

}  // namespace ppsim
