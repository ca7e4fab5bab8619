#include "sim/plan/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "schedules/generators.h"
#include "sim/config/config.h"
#include "sim/plan/simulate.h"

namespace ppsim {
namespace {

double gib(double bytes) { return bytes / (1ull << 30); }

// Why a schedule cannot run, with what to do when it is the config's own
// split of the layers, written for its schedule's stages, that stops it.
std::string cannot_run_reason(const Config& config, const Config& entry, const Error& error) {
  if (config.parallel.layers_per_stage.empty() || entry.model_stages() == config.model_stages()) {
    return error.message;
  }
  return fmt::format(
      "{} (the split is written for the config's {} stages; without it, --set "
      "parallel.layers_per_stage=[], each schedule splits the layers evenly)",
      error.message, config.model_stages());
}

}  // namespace

Result<std::vector<std::string>> parse_schedule_list(const std::string& text) {
  std::vector<std::string> entries;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, comma - start);
    start = comma + 1;
    const std::string kind = entry.substr(0, entry.find(':'));
    if (!schedule_kind_named(kind)) {
      return Error{fmt::format("--schedules: unknown schedule \"{}\"; known: {}", entry,
                               joined_names(config_schedule_kinds()))};
    }
    if (entry.size() > kind.size()) {
      int v = 0;
      const char* first = entry.data() + kind.size() + 1;
      const char* last = entry.data() + entry.size();
      const auto [end, ec] = std::from_chars(first, last, v);
      if (ec != std::errc() || end != last || v < 1) {
        return Error{fmt::format(
            "--schedules: \"{}\": expected KIND or KIND:V with V the virtual stages per rank "
            "(a positive integer)",
            entry)};
      }
    }
    entries.push_back(entry);
  }
  return entries;
}

Config config_for_entry(const Config& config, const std::string& entry) {
  Config c = config;
  const size_t colon = entry.find(':');
  const std::optional<ScheduleKind> kind = schedule_kind_named(entry.substr(0, colon));
  PPSIM_CHECK(kind.has_value());  // parse_schedule_list checked the entry
  c.schedule.kind = *kind;
  if (colon != std::string::npos && c.schedule.kind == ScheduleKind::kTeraPipe) {
    c.schedule.slices = std::stoi(entry.substr(colon + 1));
    c.schedule.slicing = SlicingMethod::kEven;
  } else if (colon != std::string::npos) {
    c.parallel.virtual_stages = std::stoi(entry.substr(colon + 1));
  } else if (const std::optional<int> v = fixed_virtual_stages(c.schedule.kind)) {
    c.parallel.virtual_stages = *v;
  } else if (c.parallel.virtual_stages == 1) {
    c.parallel.virtual_stages = 2;  // with one stage per rank it would be plain 1F1B
  }
  // A token-level schedule picked from the list finds its own cut.
  if (c.schedule.kind == ScheduleKind::kTeraPipe && c.schedule.slices == 0 && c.model) {
    c.schedule.slicing = SlicingMethod::kOptimal;
  }
  return c;
}

std::vector<ComparedSchedule> compare_schedules(const Config& config,
                                                const std::vector<std::string>& entries,
                                                bool keep_timelines) {
  std::vector<ComparedSchedule> rows;
  for (const std::string& entry : entries) {
    ComparedSchedule row;
    row.entry = entry;
    const Config c = config_for_entry(config, entry);
    Result<Simulation> sim =
        simulate(c, nullptr, nullptr, keep_timelines ? Keep::kTimeline : Keep::kSummary);
    if (!sim) {
      row.reason = cannot_run_reason(config, c, sim.error());
      rows.push_back(std::move(row));
      continue;
    }
    row.summary = sim->summary;
    if (keep_timelines) row.timeline = std::move(sim->timeline);
    row.feasible = true;
    const DeviceSummary& top = *fullest_device(*row.summary);
    if (row.summary->memory_capacity_bytes &&
        top.peak_memory_bytes > *row.summary->memory_capacity_bytes) {
      row.feasible = false;
      row.reason = fmt::format("peak memory {:.2f} GiB on rank {} exceeds the device's {:.2f} GiB",
                               gib(top.peak_memory_bytes), top.rank,
                               gib(*row.summary->memory_capacity_bytes));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace ppsim
