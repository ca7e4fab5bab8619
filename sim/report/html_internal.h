// Internal to the HTML report (sim/html_report.cc, sim/html_internal.cc,
// sim/html_gantt.cc and sim/html_charts.cc); nothing else includes it. What
// those files share: XML escaping, number formatting, the chart layout, time
// axes, legends and colours, the part of a timeline drawn, and the charts the
// page is made of.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/time.h"
#include "sim/core/timeline.h"
#include "sim/plan/metrics.h"
#include "sim/report/html_report.h"

namespace ppsim {
namespace html_internal {

using Out = std::back_insert_iterator<std::string>;

// ---------------------------------------------------------------- text

// `text` as XML character data or attribute content; whatever XML cannot
// hold becomes U+FFFD.
std::string esc(std::string_view text);

inline double gib(double bytes) { return bytes / (1ull << 30); }

// A rate for people: four significant digits, and from 10^4 on the whole
// number with its thousands grouped ("105,472"), never "1.055e+05".
std::string rate_text(double v);

// 1, 2 or 5 times a power of ten, near `rough`.
double nice_step(double rough);

// Rank r's line colour: golden-angle hues, so neighbouring ranks differ.
std::string rank_color(int rank);

// ---------------------------------------------------------------- layout

inline constexpr int kChartWidth = 1280;
inline constexpr int kLeft = 84;  // room for "rank 63" and "120 GiB"
inline constexpr int kRight = 28;
inline constexpr int kPlotWidth = kChartWidth - kLeft - kRight;

// Time [0, end) onto x pixels [kLeft, kLeft + kPlotWidth).
struct TimeScale {
  Picos end = 1;
  double x(Picos t) const {
    return kLeft + kPlotWidth * static_cast<double>(t) / static_cast<double>(end);
  }
};

// Ticks, grid lines and labels of a time axis under a plot spanning
// [top, bottom) in y.
void time_axis(Out out, const TimeScale& scale, int top, int bottom);

struct LegendItem {
  std::string swatch_class;  // a CSS class giving the fill
  std::string fill;          // or an explicit fill when the class is empty
  std::string label;
  bool line = false;  // a line sample instead of a square
  bool dashed = false;
};

// A row of legend items from (x, y), wrapping at the chart's width; returns
// the y below it.
int legend(Out out, const std::vector<LegendItem>& items, int x0, int y);

void svg_open(Out out, const char* cls, int height, const std::string& extra_attrs,
              const std::string& label);

// ---------------------------------------------------------------- what to draw

// The part of a timeline a report draws: all of it, or for a big one the
// time up to the end of the first iteration, cut shorter still if that holds
// more than kMaxGanttActions actions.
struct Window {
  Picos end = 1;
  size_t drawn = 0;  // actions that start before `end`
  bool first_iteration_only = false;
  bool cut = false;  // shorter than the first iteration
};

Window window_of(const Timeline& t);

// Whether a transfer is drawn: in the window and wide enough to see.
bool visible(const TransferRecord& x, const Window& w);

// ---------------------------------------------------------------- summary

bool over_capacity(const Summary& s);

// ---------------------------------------------------------------- charts

void gantt(Out out, const ReportEntry& entry, const Timeline& t, const Window& w);
void memory_chart(Out out, const ReportEntry& entry, const Timeline& t, const Window& w);
// Throughput and peak memory across the entries; REQUIRES: entries non-empty.
void bar_charts(Out out, const ReportInput& input);

}  // namespace html_internal
}  // namespace ppsim
