// kernel_time (cost_profile.h): a kernel's median at any (tokens, context)
// of a measured model shape, piecewise-linear between the measured points.
// Apart from the reading and writing in cost_profile.cc, which it does not
// need.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/cost/cost_profile.h"

namespace ppsim {
namespace {

double lerp(double x0, double y0, double x1, double y1, double x) {
  return y0 + (y1 - y0) * ((x - x0) / (x1 - x0));
}

// (tokens, seconds) at one context, sorted by tokens with no repeats.
using Curve = std::vector<std::pair<int, double>>;

double curve_at(const Curve& curve, int tokens, bool& extrapolated) {
  if (curve.size() == 1) {
    auto [t0, y0] = curve.front();
    if (tokens == t0) return y0;
    extrapolated = true;  // one point gives no slope: scale with the tokens
    return y0 * tokens / t0;
  }
  auto upper = std::lower_bound(curve.begin(), curve.end(), tokens,
                                [](const auto& point, int t) { return point.first < t; });
  if (upper != curve.end() && upper->first == tokens) return upper->second;
  if (upper == curve.begin()) ++upper;  // below the range: the first segment
  if (upper == curve.end()) --upper;    // above it: the last
  if (tokens < curve.front().first || tokens > curve.back().first) extrapolated = true;
  auto lower = std::prev(upper);
  return lerp(lower->first, lower->second, upper->first, upper->second, tokens);
}

}  // namespace

bool KernelShape::matches(const KernelSample& k) const {
  return k.part == part && k.micro_batch == micro_batch && k.hidden == hidden && k.ffn == ffn &&
         k.heads == heads && k.vocab == vocab && k.tensor == tensor;
}

Result<Interpolated> kernel_time(const CostProfile& profile, KernelKind kind, int micro_batch,
                                 int hidden, int ffn, int heads, int tensor, int tokens,
                                 int context) {
  return kernel_time(profile, kind,
                     KernelShape{KernelPart::kBlock, micro_batch, hidden, ffn, heads, 0, tensor},
                     tokens, context);
}

Result<Interpolated> kernel_time(const CostProfile& profile, KernelKind kind,
                                 const KernelShape& wanted, int tokens, int context) {
  if (kind == KernelKind::kOptimizerStep) {
    return Error{
        "the optimizer step is timed once per shape, not over tokens and context: read its "
        "sample"};
  }
  if (tokens < 1 || context < 0) {
    return Error{
        fmt::format("kernel time of {} tokens after {} of context: expected tokens >= 1 "
                    "and context >= 0",
                    tokens, context)};
  }
  const bool block = wanted.part == KernelPart::kBlock;
  // "forward" for a block, "head forward" for the other parts.
  const std::string what = block ? std::string(to_string(kind))
                                 : fmt::format("{} {}", to_string(wanted.part), to_string(kind));
  auto name = [block](const KernelShape& s) {
    return block ? fmt::format("(micro_batch {}, hidden {}, ffn {}, heads {}, tensor {})",
                               s.micro_batch, s.hidden, s.ffn, s.heads, s.tensor)
                 : fmt::format("(micro_batch {}, hidden {}, vocab {}, tensor {})", s.micro_batch,
                               s.hidden, s.vocab, s.tensor);
  };
  std::map<int, Curve> curves;  // by context
  std::set<std::tuple<int, int, int, int, int, int>> shapes;
  for (const KernelSample& k : profile.kernels) {
    if (k.kind != kind || k.part != wanted.part) continue;
    shapes.emplace(k.micro_batch, k.hidden, k.ffn, k.heads, k.vocab, k.tensor);
    if (wanted.matches(k)) curves[k.context].emplace_back(k.tokens, k.median_s);
  }
  if (curves.empty()) {
    std::vector<std::string> available;
    for (const auto& [b, h, f, a, v, t] : shapes) {
      available.push_back(name(KernelShape{wanted.part, b, h, f, a, v, t}));
    }
    if (available.empty()) {
      std::vector<std::string_view> kinds;
      for (const KernelSample& k : profile.kernels) {
        if (k.part != wanted.part) continue;
        if (std::find(kinds.begin(), kinds.end(), to_string(k.kind)) == kinds.end()) {
          kinds.push_back(to_string(k.kind));
        }
      }
      const std::string has = !kinds.empty() ? fmt::format("{}", fmt::join(kinds, ", "))
                              : profile.kernels.empty()
                                  ? std::string("no kernels")
                                  : fmt::format("no {} kernels", to_string(wanted.part));
      return Error{fmt::format("no {} kernel in the profile; it has {}", what, has)};
    }
    return Error{fmt::format("no {} kernel of shape {} in the profile; it has {} at {}", what,
                             name(wanted), what, fmt::join(available, ", "))};
  }
  for (auto& [c, curve] : curves) {
    // A hand-built profile may repeat a point, which parse_profile rejects; the first wins.
    std::stable_sort(curve.begin(), curve.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    curve.erase(std::unique(curve.begin(), curve.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                curve.end());
  }

  Interpolated result;
  auto upper = curves.lower_bound(context);
  if (upper != curves.end() && upper->first == context) {
    result.seconds = curve_at(upper->second, tokens, result.extrapolated);
  } else if (curves.size() == 1) {
    result.extrapolated = true;  // context never varied: the nearest is all there is
    result.seconds = curve_at(curves.begin()->second, tokens, result.extrapolated);
  } else {
    if (upper == curves.begin()) ++upper;
    if (upper == curves.end()) --upper;
    if (context < curves.begin()->first || context > curves.rbegin()->first) {
      result.extrapolated = true;
    }
    auto lower = std::prev(upper);
    double y0 = curve_at(lower->second, tokens, result.extrapolated);
    double y1 = curve_at(upper->second, tokens, result.extrapolated);
    result.seconds = lerp(lower->first, y0, upper->first, y1, context);
  }
  result.seconds = std::max(result.seconds, 0.0);  // a falling extrapolation can cross zero
  return result;
}

}  // namespace ppsim
