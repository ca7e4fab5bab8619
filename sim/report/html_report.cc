#include "sim/report/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>

#include "schedules/status.h"
#include "sim/report/html_internal.h"
#include "sim/report/summary.h"

namespace ppsim {
namespace html_internal {

bool over_capacity(const Summary& s) {
  const DeviceSummary* top = fullest_device(s);
  return top && s.memory_capacity_bytes && top->peak_memory_bytes > *s.memory_capacity_bytes;
}

}  // namespace html_internal

namespace {

using html_internal::bar_charts;
using html_internal::esc;
using html_internal::gantt;
using html_internal::gib;
using html_internal::memory_chart;
using html_internal::Out;
using html_internal::over_capacity;
using html_internal::rate_text;
using html_internal::visible;
using html_internal::Window;
using html_internal::window_of;

// The exact value as the JSON summary writes it (JsonWriter: the shortest
// text that reads back as the same double), so a program can compare the two.
std::string exact(double v) { return std::isfinite(v) ? fmt::format("{}", v) : std::string(); }

// What the table says besides the entry's own note.
std::string full_note(const ReportEntry& e) {
  std::string note = e.note;
  const auto add = [&](const std::string& text) { note += (note.empty() ? "" : "; ") + text; };
  if (!e.summary->settled) {
    add(fmt::format("iteration time not settled after {} iterations",
                    e.summary->iterations_simulated));
  }
  if (over_capacity(*e.summary) && e.note.find("capacity") == std::string::npos &&
      e.note.find("exceeds") == std::string::npos) {
    add(fmt::format("over the device's {:.2f} GiB", gib(*e.summary->memory_capacity_bytes)));
  }
  return note;
}

struct Columns {
  bool tokens = false;
  bool mfu = false;
};

Columns columns_of(const ReportInput& input) {
  Columns c;
  for (const ReportEntry& e : input.entries) {
    c.tokens |= e.summary->throughput.tokens_per_s.has_value();
    c.mfu |= e.summary->throughput.mfu.has_value();
  }
  return c;
}

void number_cell(Out out, const char* field, const std::string& value, const std::string& text,
                 const char* extra_class = "", const std::string& extra_attrs = "") {
  fmt::format_to(out, "<td class=\"num{}\" data-field=\"{}\" data-value=\"{}\"{}>{}</td>",
                 extra_class, field, value, extra_attrs, text);
}

void summary_table(Out out, const ReportInput& input) {
  const Columns c = columns_of(input);
  double best = 0;
  for (const ReportEntry& e : input.entries) {
    best = std::max(best, e.summary->throughput.samples_per_s);
  }
  fmt::format_to(out,
                 "<table class=\"summary\">\n<thead><tr><th>schedule</th>"
                 "<th title=\"steady state: between the ends of the last two iterations\">"
                 "iteration time</th><th>samples/s</th>{}{}<th>bubble</th>"
                 "<th>peak memory per rank (max)</th><th>note</th></tr></thead>\n<tbody>\n",
                 c.tokens ? "<th>tokens/s</th>" : "", c.mfu ? "<th>MFU</th>" : "");
  for (const ReportEntry& e : input.entries) {
    const Summary& s = *e.summary;
    const Throughput& th = s.throughput;
    fmt::format_to(out, "<tr data-entry=\"{}\"><td class=\"name\">{}</td>", esc(e.name),
                   esc(e.name));
    number_cell(out, "iteration_time_s", exact(s.iteration_time_s),
                esc(format_duration(s.iteration_time_s)));
    number_cell(out, "samples_per_s", exact(th.samples_per_s), rate_text(th.samples_per_s),
                best > 0 && th.samples_per_s == best && input.entries.size() > 1 ? " best" : "");
    if (c.tokens) {
      if (th.tokens_per_s) {
        number_cell(out, "tokens_per_s", exact(*th.tokens_per_s), rate_text(*th.tokens_per_s));
      } else {
        fmt::format_to(out, "<td class=\"num\">-</td>");
      }
    }
    if (c.mfu) {
      if (th.mfu) {
        number_cell(out, "mfu", exact(*th.mfu), fmt::format("{:.1f} %", 100 * *th.mfu));
      } else {
        fmt::format_to(out, "<td class=\"num\">-</td>");
      }
    }
    number_cell(out, "bubble_fraction", exact(s.bubble_fraction),
                fmt::format("{:.2f} %", 100 * s.bubble_fraction));
    if (const DeviceSummary* top = fullest_device(s)) {
      number_cell(out, "peak_memory_bytes", std::to_string(top->peak_memory_bytes),
                  fmt::format("{:.2f} GiB (rank {})", gib(top->peak_memory_bytes), top->rank),
                  over_capacity(s) ? " over" : "", fmt::format(" data-rank=\"{}\"", top->rank));
    } else {
      fmt::format_to(out, "<td class=\"num\">-</td>");
    }
    fmt::format_to(out, "<td class=\"note\">{}</td></tr>\n", esc(full_note(e)));
  }
  fmt::format_to(out, "</tbody>\n</table>\n");
}

// ---------------------------------------------------------------- page

constexpr std::string_view kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  margin: 24px; color: #1d2430; background: #fff; }
h1 { font-size: 1.6em; margin: 0 0 4px 0; }
h2 { font-size: 1.25em; margin: 28px 0 8px 0; border-bottom: 1px solid #d5dae1; padding-bottom: 4px; }
h3 { font-size: 1.05em; margin: 22px 0 4px 0; }
p.meta, p.caption { color: #5b6472; margin: 4px 0 8px 0; font-size: 0.92em; }
p.caveat { max-width: 60em; margin: 8px 0; font-size: 0.92em; }
table.summary { border-collapse: collapse; font-size: 0.92em; }
table.summary th, table.summary td { padding: 4px 10px; border-bottom: 1px solid #e3e6ea; text-align: left; }
table.summary th { background: #f3f5f8; font-weight: 600; }
table.summary td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.summary td.name { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
table.summary td.best { font-weight: 700; }
table.summary td.over { color: #b0281a; font-weight: 600; }
table.summary td.note { color: #5b6472; max-width: 420px; }
table.summary tbody tr:nth-child(even) { background: #fafbfc; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; padding: 12px; overflow: auto; font-size: 0.88em;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
svg { display: block; max-width: 100%; height: auto; margin: 6px 0 10px 0; }
svg text { font-family: inherit; font-size: 11px; fill: #333; }
svg .axis line { stroke: #555; stroke-width: 1; }
svg .axis line.grid { stroke: #000; stroke-opacity: 0.10; }
svg .axis text { fill: #555; }
svg .legend text { fill: #333; }
svg text.ct { font-size: 13px; font-weight: 600; }
svg text.l { font-size: 9px; fill: #fff; pointer-events: none; }
svg text.rl { fill: #333; }
svg text.iterl { font-size: 10px; fill: #6b4f9e; }
svg line.iter { stroke: #6b4f9e; stroke-width: 1; stroke-dasharray: 4 3; }
svg rect.idle { fill: #eceff3; }
svg rect.plot { fill: #fafbfc; stroke: #d5dae1; }
svg .F { fill: #3b6fb6; }
svg .B { fill: #e07b39; }
svg .I { fill: #c8453b; }
svg .W { fill: #3a923a; }
svg .S { fill: #8a5fb0; }
svg .gs { fill: #8c6d4f; }
svg .ps { fill: #c9a27e; }
svg .os { fill: #4a3a2c; }
svg .xa { fill: #1b3a6b; fill-opacity: 0.75; }
svg .xg { fill: #9a3f12; fill-opacity: 0.75; }
svg polyline.mem { fill: none; stroke-width: 1.6; }
svg .cap { stroke: #c0392b; stroke-width: 1.5; stroke-dasharray: 6 4; }
svg text.capl { fill: #c0392b; font-size: 10px; }
svg rect.bv { fill: #3b6fb6; }
svg rect.bv.over { fill: #c0392b; }
svg.bars rect.bv { rx: 2; }
)";

}  // namespace

std::string html_report(const ReportInput& input) {
  for (const ReportEntry& e : input.entries) PPSIM_CHECK(e.summary != nullptr);
  std::string html;
  size_t actions = 0;
  for (const ReportEntry& e : input.entries) {
    if (e.timeline) actions += std::min(e.timeline->actions.size(), size_t{kMaxGanttActions});
  }
  html.reserve(16384 + input.config_text.size() * 2 + actions * 220);
  Out out = std::back_inserter(html);
  const std::string title = input.title.empty() ? std::string("ppsim report") : input.title;
  fmt::format_to(
      out,
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n"
      "<head>\n<meta charset=\"utf-8\"/>\n"
      "<meta name=\"generator\" content=\"ppsim\"/>\n<title>{}</title>\n<style>{}</style>\n"
      "</head>\n<body>\n<h1>{}</h1>\n",
      esc(title), kStyle, esc(title));
  fmt::format_to(
      out,
      "<p class=\"meta\">{} run{}. Iteration time is the steady state (the time "
      "between the ends of two iterations once they repeat); bubble = 1 - compute busy time / "
      "(ranks &#215; iteration time); peak memory counts static, extra weight versions "
      "and activations.</p>\n",
      input.entries.size(), input.entries.size() == 1 ? "" : "s");

  fmt::format_to(out, "<h2>Summary</h2>\n");
  summary_table(out, input);
  if (!input.caveat.empty()) fmt::format_to(out, "<p class=\"caveat\">{}</p>\n", esc(input.caveat));

  if (!input.entries.empty()) {
    fmt::format_to(out, "<h2>Across runs</h2>\n");
    bar_charts(out, input);
  }

  bool any_timeline = false;
  for (const ReportEntry& e : input.entries) any_timeline |= e.timeline != nullptr;
  if (any_timeline) fmt::format_to(out, "<h2>Timelines</h2>\n");
  for (const ReportEntry& e : input.entries) {
    if (!e.timeline) continue;
    const Timeline& t = *e.timeline;
    const Window w = window_of(t);
    fmt::format_to(out, "<section class=\"run\">\n<h3>{}</h3>\n", esc(e.name));
    std::string caption =
        fmt::format("{} ranks, {} actions over {} iteration{}, {} in all; iteration time {}.",
                    t.num_ranks, t.actions.size(), t.iterations, t.iterations == 1 ? "" : "s",
                    format_duration(picos_to_seconds(t.makespan)),
                    format_duration(e.summary->iteration_time_s));
    if (w.first_iteration_only) {
      caption += fmt::format(
          " Only {} is drawn ({} of {} actions): above {} actions the report keeps its charts "
          "small.",
          w.cut ? fmt::format("the first {} of the first iteration",
                              format_duration(picos_to_seconds(w.end)))
                : std::string("the first iteration"),
          w.drawn, t.actions.size(), kMaxGanttActions);
    }
    const auto hidden = std::count_if(t.transfers.begin(), t.transfers.end(), [&](const auto& x) {
      return x.start < w.end && x.end > x.start && !visible(x, w);
    });
    if (hidden > 0) {
      caption += fmt::format(
          " {} transfers too short to see at this scale are left out (the Chrome trace has "
          "them).",
          hidden);
    }
    caption += " Hover a block for its action and times.";
    fmt::format_to(out, "<p class=\"caption\">{}</p>\n", esc(caption));
    gantt(out, e, t, w);
    fmt::format_to(out,
                   "<p class=\"caption\">Memory per rank: static bytes{} plus activations.</p>\n",
                   e.summary->weights.empty() ? "" : " and extra weight versions");
    memory_chart(out, e, t, w);
    fmt::format_to(out, "</section>\n");
  }

  fmt::format_to(out, "<h2>Config</h2>\n<pre class=\"config\">{}</pre>\n</body>\n</html>\n",
                 esc(input.config_text));
  return html;
}

namespace {

// A Markdown table cell: pipes escaped, one line.
std::string md_cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string markdown_report(const ReportInput& input) {
  for (const ReportEntry& e : input.entries) PPSIM_CHECK(e.summary != nullptr);
  const Columns c = columns_of(input);
  std::string md;
  Out out = std::back_inserter(md);
  if (!input.title.empty()) fmt::format_to(out, "# {}\n\n", md_cell(input.title));
  fmt::format_to(out,
                 "| schedule | iteration time | samples/s |{}{} bubble | peak memory | note |\n",
                 c.tokens ? " tokens/s |" : "", c.mfu ? " MFU |" : "");
  fmt::format_to(out, "| --- | ---: | ---: |{}{} ---: | ---: | --- |\n", c.tokens ? " ---: |" : "",
                 c.mfu ? " ---: |" : "");
  for (const ReportEntry& e : input.entries) {
    const Summary& s = *e.summary;
    const Throughput& th = s.throughput;
    fmt::format_to(out, "| {} | {} | {} |", md_cell(e.name), format_duration(s.iteration_time_s),
                   rate_text(th.samples_per_s));
    if (c.tokens) {
      fmt::format_to(out, " {} |", th.tokens_per_s ? rate_text(*th.tokens_per_s) : "-");
    }
    if (c.mfu) fmt::format_to(out, " {} |", th.mfu ? fmt::format("{:.1f} %", 100 * *th.mfu) : "-");
    const DeviceSummary* top = fullest_device(s);
    fmt::format_to(
        out, " {:.2f} % | {} | {} |\n", 100 * s.bubble_fraction,
        top ? fmt::format("{:.2f} GiB (rank {})", gib(top->peak_memory_bytes), top->rank) : "-",
        md_cell(full_note(e)));
  }
  if (!input.caveat.empty()) fmt::format_to(out, "\n{}", input.caveat);
  return md;
}

}  // namespace ppsim
