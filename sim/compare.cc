#include "sim/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "schedules/generators.h"
#include "sim/config/config.h"
#include "sim/json.h"
#include "sim/report.h"
#include "sim/simulate.h"

namespace ppsim {
namespace {

double gib(double bytes) { return bytes / (1ull << 30); }

// The rank with the highest peak memory.
const DeviceSummary& fullest(const Summary& s) {
  return *std::max_element(s.devices.begin(), s.devices.end(), [](const auto& a, const auto& b) {
    return a.peak_memory_bytes < b.peak_memory_bytes;
  });
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
    const auto& kinds = config_schedule_kinds();
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
      return Error{fmt::format("--schedules: unknown schedule \"{}\"; known: {}", entry,
                               fmt::join(kinds, ", "))};
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
  c.schedule.kind = entry.substr(0, colon);
  if (colon != std::string::npos && c.schedule.kind == "terapipe") {
    c.schedule.slices = std::stoi(entry.substr(colon + 1));
    c.schedule.slicing = SlicingMethod::kEven;
  } else if (colon != std::string::npos) {
    c.parallel.virtual_stages = std::stoi(entry.substr(colon + 1));
  } else if (const std::optional<int> v = stages_per_rank(c.schedule.kind)) {
    c.parallel.virtual_stages = *v;
  } else if (c.parallel.virtual_stages == 1) {
    c.parallel.virtual_stages = 2;  // with one stage per rank it would be plain 1F1B
  }
  // A token-level schedule picked from the list finds its own cut.
  if (c.schedule.kind == "terapipe" && c.schedule.slices == 0 && c.model) {
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
    Result<Simulation> sim = simulate(c);
    if (!sim) {
      row.reason = sim.error().message;
      rows.push_back(std::move(row));
      continue;
    }
    row.summary = sim->summary;
    if (keep_timelines) row.timeline = std::move(sim->timeline);
    row.feasible = true;
    const DeviceSummary& top = fullest(*row.summary);
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

std::string format_comparison_table(const std::vector<ComparedSchedule>& rows) {
  std::string out =
      fmt::format("{:<22} {:>3} {:>14} {:>12} {:>8} {:>15} {:>6}  {}\n", "schedule", "v",
                  "iteration", "samples/s", "bubble", "peak mem GiB", "stale", "note");
  for (const ComparedSchedule& row : rows) {
    if (!row.summary) {
      out += fmt::format("{:<22} {:>3} {:>14} {:>12} {:>8} {:>15} {:>6}  cannot run: {}\n",
                         row.entry, "-", "-", "-", "-", "-", "-", row.reason);
      continue;
    }
    const Summary& s = *row.summary;
    const DeviceSummary& top = fullest(s);
    int staleness = 0;
    for (const StageWeights& w : s.weights) staleness = std::max(staleness, w.staleness);
    out += fmt::format("{:<22} {:>3} {:>14} {:>12.4g} {:>7.2f}% {:>10.2f} (r{}) {:>6}", row.entry,
                       s.virtual_stages, format_duration(s.iteration_time_s),
                       s.throughput.samples_per_s, 100.0 * s.bubble_fraction,
                       gib(top.peak_memory_bytes), top.rank,
                       s.weights.empty() ? "-" : std::to_string(staleness));
    if (!row.feasible) out += "  " + row.reason;
    out += '\n';
  }
  return out;
}

std::string comparison_to_json(const std::vector<ComparedSchedule>& rows) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().key("results").begin_array();
  for (const ComparedSchedule& row : rows) {
    w.begin_object().field("entry", row.entry).field("feasible", row.feasible);
    if (!row.reason.empty()) w.field("reason", row.reason);
    w.key("summary");
    if (row.summary) {
      write_summary(w, *row.summary);
    } else {
      w.null();
    }
    w.end_object();
  }
  w.end_array().end_object();
  out += '\n';
  return out;
}

std::string comparison_to_csv(const std::vector<ComparedSchedule>& rows) {
  int ranks = 0;
  for (const auto& row : rows) {
    if (row.summary) ranks = std::max(ranks, static_cast<int>(row.summary->devices.size()));
  }
  std::string out =
      "schedule,virtual_stages,feasible,reason,iteration_time_s,samples_per_s,tokens_per_s,"
      "bubble_fraction,mfu";
  for (int r = 0; r < ranks; ++r) out += fmt::format(",peak_memory_bytes_rank{}", r);
  out += '\n';
  const auto quoted = [](const std::string& text) {
    std::string q = "\"";
    for (char c : text) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  const auto optional = [](const std::optional<double>& v) {
    return v ? fmt::format("{}", *v) : std::string();
  };
  for (const ComparedSchedule& row : rows) {
    out += fmt::format("{},", row.entry);
    if (row.summary) out += fmt::format("{}", row.summary->virtual_stages);
    out += fmt::format(",{},{}", row.feasible ? "true" : "false", quoted(row.reason));
    if (row.summary) {
      const Summary& s = *row.summary;
      out += fmt::format(",{},{},{},{},{}", s.iteration_time_s, s.throughput.samples_per_s,
                         optional(s.throughput.tokens_per_s), s.bubble_fraction,
                         optional(s.throughput.mfu));
      for (const DeviceSummary& d : s.devices) out += fmt::format(",{}", d.peak_memory_bytes);
    } else {
      out += ",,,,,";
    }
    out += '\n';
  }
  return out;
}

}  // namespace ppsim
