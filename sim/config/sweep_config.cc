// The search: section of a sweep file: the explorer's candidate lists, each
// with a default that fits the model and hardware when not given.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "sim/config/config.h"
#include "sim/config/config_loader.h"

namespace ppsim {
namespace config_internal {
namespace {

// Powers of two from 1 up to `limit`.
std::vector<int> powers_of_two(int limit) {
  std::vector<int> values;
  for (int v = 1; v <= limit; v *= 2) values.push_back(v);
  return values;
}

}  // namespace

// Expert-parallel degrees: each must split the model's experts; whether it
// also divides a layout's data x context ranks is the explorer's to skip.
void Loader::read_search_expert(const Map& s, const Config& config) const {
  SearchSpace& out = *search_;
  out.expert = {config.parallel.expert};
  if (!s.has("expert")) return;
  const Value field = s.get("expert");
  out.expert = to_ints(field, 1, INT_MAX);
  for (size_t i = 0; i < out.expert.size(); ++i) {
    const Value item{fmt::format("{}[{}]", field.path, i), field.node[i], field.key_mark,
                     field.file};
    const int ep = out.expert[i];
    if (ep == 1) continue;
    if (!config.model->moe) {
      throw_error(item.mark(), item.path,
                  fmt::format("{} needs model.moe: it splits the experts", ep));
    }
    if (config.model->moe->experts % ep != 0) {
      throw_error(
          item.mark(), item.path,
          fmt::format("{} must divide model.moe.experts ({})", ep, config.model->moe->experts));
    }
  }
}

void Loader::read_search(const Map& s, const Config& config) const {
  if (!config.model || !config.hardware) {
    throw_error(s.self().key_mark, config.model ? "hardware" : "model",
                "required in a sweep: the explorer times and sizes every candidate with the model");
  }
  SearchSpace& out = *search_;
  const int gpus = config.hardware->num_gpus();
  out.pipeline = s.has("pipeline") ? to_ints(s.get("pipeline"), 1, INT_MAX)
                                   : powers_of_two(std::min(gpus, config.model->layers));
  // By default within a node; a list may ask for tensor groups across nodes.
  out.tensor = s.has("tensor") ? to_ints(s.get("tensor"), 1, gpus)
                               : powers_of_two(config.hardware->gpus_per_node);
  out.context = {config.parallel.context};
  if (s.has("context")) {
    const Value field = s.get("context");
    out.context = to_ints(field, 1, INT_MAX);
    for (size_t i = 0; i < out.context.size(); ++i) {
      const std::string misfit =
          out.context[i] > 1 ? context_misfit(out.context[i], *config.model) : std::string();
      if (!misfit.empty()) {
        const Value item{fmt::format("{}[{}]", field.path, i), field.node[i], field.key_mark,
                         field.file};
        throw_error(item.mark(), item.path, fmt::format("{} {}", out.context[i], misfit));
      }
    }
  }
  read_search_expert(s, config);
  out.micro_batch =
      s.has("micro_batch") ? to_ints(s.get("micro_batch"), 1, INT_MAX) : std::vector<int>{1, 2, 4};
  out.virtual_stages = s.has("virtual_stages") ? to_ints(s.get("virtual_stages"), 1, INT_MAX)
                                               : std::vector<int>{1, 2, 4};
  out.zero_stage =
      s.has("zero_stage") ? to_ints(s.get("zero_stage"), 0, 3) : std::vector<int>{0, 1};
  out.schedule = {ScheduleKind::k1f1b, ScheduleKind::kInterleaved1f1b, ScheduleKind::kZbH1,
                  ScheduleKind::kZbV};
  if (s.has("schedule")) {
    const Value field = s.get("schedule");
    if (!field.node.IsSequence() || field.node.size() == 0) {
      throw_expected(field, "a non-empty list of schedule kinds");
    }
    out.schedule.clear();
    // custom, last, needs a file per candidate: not searchable.
    const std::vector<ScheduleKind> kinds(config_schedule_kinds().begin(),
                                          config_schedule_kinds().end() - 1);
    for (size_t i = 0; i < field.node.size(); ++i) {
      const Value item{fmt::format("{}[{}]", field.path, i), field.node[i], field.key_mark,
                       field.file};
      out.schedule.push_back(to_enum(item, kinds));
    }
  }
  out.recompute = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  if (s.has("recompute")) {
    const Value field = s.get("recompute");
    if (!field.node.IsSequence() || field.node.size() == 0) {
      throw_expected(field, "a non-empty list of none, selective, full");
    }
    out.recompute.clear();
    for (size_t i = 0; i < field.node.size(); ++i) {
      const Value item{fmt::format("{}[{}]", field.path, i), field.node[i], field.key_mark,
                       field.file};
      out.recompute.push_back(to_enum(item, kRecomputes));
    }
  }
  constexpr double kReserveGib = 4;
  out.memory_cap_gib = s.has("memory_cap_gib")
                           ? to_number(s.get("memory_cap_gib"), Bound::kPositive)
                           : std::max(config.hardware->memory_gib - kReserveGib, 0.0);
}

}  // namespace config_internal
}  // namespace ppsim
