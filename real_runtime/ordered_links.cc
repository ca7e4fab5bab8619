#include "real_runtime/ordered_links.h"

#include <algorithm>

namespace ppsim::runtime {

std::vector<DirectedLink> directed_links(const Schedule& schedule) {
  std::vector<DirectedLink> links;
  for (int s = 0; s + 1 < schedule.num_stages; ++s) {
    const int a = schedule.stage_rank[s], b = schedule.stage_rank[s + 1];
    if (a == b) continue;
    links.push_back({a, b});  // activations
    links.push_back({b, a});  // gradients
  }
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  return links;
}

}  // namespace ppsim::runtime
