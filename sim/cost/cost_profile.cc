// Fitting links (cost_profile.h; kernel_time is in kernel_time.cc).
#include "sim/cost/cost_profile.h"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <cmath>
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
  const Eigen::Index n = static_cast<Eigen::Index>(samples.size());
  const double scale = static_cast<double>(*sizes.rbegin());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd t(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    double seconds = samples[i].seconds;
    double weight = 1.0 / (seconds > 0 ? seconds : smallest > 0 ? smallest : 1.0);
    a(i, 0) = weight;
    a(i, 1) = weight * static_cast<double>(samples[i].bytes) / scale;
    t(i) = weight * seconds;
  }
  Eigen::Vector2d x = a.colPivHouseholderQr().solve(t);
  double latency = x(0);
  double per_byte = x(1) / scale;
  if (latency < 0) {  // the best fit with latency held at 0
    latency = 0;
    per_byte = a.col(1).dot(t) / a.col(1).squaredNorm() / scale;
  }
  if (!(per_byte > 0) || !std::isfinite(per_byte)) {
    return Error{
        fmt::format("link \"{}\": time does not grow with size, so no positive bandwidth fits: {}",
                    name, describe())};
  }
  return LinkFit{std::move(name), latency, 1.0 / per_byte, std::move(samples)};
}

}  // namespace ppsim
