// Fitting links (cost_profile.h; kernel_time is in kernel_time.cc).
#include "sim/cost/cost_profile.h"

#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ppsim {

Result<LinkFit> fit_link(std::string name, std::vector<LinkSample> samples) {
  std::set<int64_t> sizes;
  for (size_t i = 0; i < samples.size(); ++i) {
    const LinkSample& s = samples[i];
    if (s.bytes < 0 || !std::isfinite(s.seconds) || s.seconds < 0) {
      return Error{
          fmt::format("link \"{}\": sample {} ({} B in {} s): expected bytes >= 0 and "
                      "seconds >= 0",
                      name, i, s.bytes, s.seconds)};
    }
    sizes.insert(s.bytes);
  }
  auto describe = [&] {
    std::string text;
    for (size_t i = 0; i < samples.size() && i < 8; ++i) {
      text +=
          fmt::format("{}{} B in {} s", i == 0 ? "" : ", ", samples[i].bytes, samples[i].seconds);
    }
    if (samples.size() > 8) text += fmt::format(", and {} more", samples.size() - 8);
    return text;
  };
  if (sizes.size() < 2) {
    return Error{fmt::format(
        "link \"{}\": need samples of at least 2 distinct sizes to fit latency and bandwidth, "
        "got {} sample(s){}{}",
        name, samples.size(), samples.empty() ? "" : ": ", describe())};
  }

  // Timing noise grows with the time, so each row is weighted by 1 / seconds:
  // unweighted, the gigabyte samples' milliseconds of noise would swamp the
  // microseconds of latency. Bytes are scaled to at most 1 so that both
  // columns are of a size.
  double smallest = 0;
  for (const LinkSample& s : samples) {
    if (s.seconds > 0 && (smallest == 0 || s.seconds < smallest)) smallest = s.seconds;
  }
  const double scale = static_cast<double>(*sizes.rbegin());
  std::vector<double> a0, a1, t;  // the columns (latency, per-byte) and the times, weighted
  for (const LinkSample& s : samples) {
    const double weight = 1.0 / (s.seconds > 0 ? s.seconds : smallest > 0 ? smallest : 1.0);
    a0.push_back(weight);
    a1.push_back(weight * static_cast<double>(s.bytes) / scale);
    t.push_back(weight * s.seconds);
  }
  const auto dot = [](const std::vector<double>& x, const std::vector<double>& y) {
    return std::inner_product(x.begin(), x.end(), y.begin(), 0.0);
  };
  // Least squares over the two columns by Gram-Schmidt: a1 = c a0 + u with
  // u orthogonal to a0, so the per-byte term is (u . t) / (u . u) and the
  // latency what a0 explains of the rest (a QR factorisation by hand; two
  // distinct sizes make u nonzero).
  const double c = dot(a0, a1) / dot(a0, a0);
  std::vector<double> u(a1.size());
  for (size_t i = 0; i < u.size(); ++i) u[i] = a1[i] - c * a0[i];
  const double x1 = dot(u, t) / dot(u, u);
  double latency = dot(a0, t) / dot(a0, a0) - c * x1;
  double per_byte = x1 / scale;
  if (latency < 0) {  // the best fit with latency held at 0
    latency = 0;
    per_byte = dot(a1, t) / dot(a1, a1) / scale;
  }
  if (!(per_byte > 0) || !std::isfinite(per_byte)) {
    return Error{
        fmt::format("link \"{}\": time does not grow with size, so no positive bandwidth fits: {}",
                    name, describe())};
  }
  return LinkFit{std::move(name), latency, 1.0 / per_byte, std::move(samples)};
}

}  // namespace ppsim
