// A report people can open anywhere and trust: one self-contained HTML file
// (no network, no scripts, no external styles or fonts) that sets several
// runs side by side. It holds the summary table, a Gantt chart and a memory
// chart per run that has a Timeline, bar charts of throughput and peak
// memory across the runs, and the config that produced them, verbatim.
//
// The file is XHTML, well-formed XML throughout (inline SVG included), so
// that `xmllint --noout` accepts it and programs can read numbers back out of
// it: every numeric cell of the summary table carries the exact value, as the
// JSON summary (sim/report.h) writes it, in a `data-value` attribute next to
// a `data-field` naming the JSON key, while the text shows it rounded.
#pragma once

#include <string>
#include <vector>

#include "sim/core/timeline.h"
#include "sim/plan/metrics.h"

namespace ppsim {

struct ReportEntry {
  std::string name;                    // e.g. "1f1b" or "p=8 t=8 d=16 interleaved-1f1b:3 mb=1"
  const Summary* summary = nullptr;    // required
  const Timeline* timeline = nullptr;  // may be null: no Gantt or memory chart for it
  std::string note;                    // e.g. why it is infeasible; may be empty
};

struct ReportInput {
  std::string title;
  std::string config_text;  // the YAML that produced it, shown verbatim
  std::vector<ReportEntry> entries;
  // A paragraph under the summary table, e.g. which entries are closer than
  // the model orders reliably (sim/report/evidence_note.h); may be empty.
  std::string caveat;
};

// Timelines with more actions than this draw only their first iteration
// (and of that at most this many actions, the earliest), so that a report of
// a big pipeline stays a file a browser opens at once.
inline constexpr int kMaxGanttActions = 20000;

// REQUIRES: every entry's summary is non-null; a timeline, when given, is
// the one the summary was made from.
std::string html_report(const ReportInput& input);
// The summary table in (GitHub-flavoured) Markdown, one row per entry,
// under the title as a heading.
std::string markdown_report(const ReportInput& input);

}  // namespace ppsim
