// Simulated time: an integer count of picoseconds. Integers keep event order
// exact and deterministic; 2^63 ps is about 106 days, the longest run the
// engine replays (it reports a longer one as an error, never a wrapped time).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace ppsim {

using Picos = int64_t;

inline constexpr Picos kPicosPerSecond = 1'000'000'000'000;
// The longest one action, transfer or end-of-iteration phase may take
// (about 11.6 days): far past any real kernel, and short enough that a run
// of them is replayed without overflow until its total passes kMaxPicos.
inline constexpr double kMaxDurationSeconds = 1e6;
inline constexpr Picos kMaxDuration = 1'000'000 * kPicosPerSecond;
inline constexpr Picos kMaxPicos = std::numeric_limits<Picos>::max();

// A duration computed in floating point, rounded to the nearest picosecond.
// One that is no duration (negative or NaN) becomes -1 and one past
// kMaxDuration (infinity included) kMaxDuration + 1, so that check_costs
// (sim/core/costs.h) rejects either with the entry's name instead of a
// wrapped integer.
inline Picos duration_to_picos(double picos) {
  if (!(picos >= 0)) return -1;
  if (picos > static_cast<double>(kMaxDuration)) return kMaxDuration + 1;
  return static_cast<Picos>(std::llround(picos));
}
inline Picos seconds_to_picos(double seconds) {
  return duration_to_picos(seconds * static_cast<double>(kPicosPerSecond));
}
inline double picos_to_seconds(Picos t) { return static_cast<double>(t) * 1e-12; }

// Sums and multiples of durations as the cost model forms them (a layer's
// time x layers, pieces added): one past kMaxDuration stays just past it
// and a -1 stays -1, so that nothing wraps and check_costs still rejects it.
inline Picos duration_plus(Picos a, Picos b) {
  if (a < 0 || b < 0) return -1;
  return a + b > kMaxDuration ? kMaxDuration + 1 : a + b;  // each at most kMaxDuration + 1
}
inline Picos duration_times(Picos t, int64_t n) {
  if (t < 0 || n < 0) return -1;
  return n > 0 && t > kMaxDuration / n ? kMaxDuration + 1 : t * n;
}

// a + b for times that are not negative, kMaxPicos when the sum passes it.
inline Picos add_saturated(Picos a, Picos b) { return a > kMaxPicos - b ? kMaxPicos : a + b; }

}  // namespace ppsim
