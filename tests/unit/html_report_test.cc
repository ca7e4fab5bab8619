// The HTML report must be well-formed XML (so any XML tool reads it and no
// browser guesses), carry the JSON summary's exact numbers, draw one Gantt
// per timeline with one row per rank, and escape whatever a user typed.
#include "sim/report/html_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "schedules/csv.h"
#include "schedules/generators.h"
#include "schedules/validate.h"
#include "sim/core/costs.h"
#include "sim/engine/engine.h"
#include "sim/plan/metrics.h"
#include "sim/report/summary.h"
#include "sim/report/trace.h"

namespace ppsim {
namespace html_report_test {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Whole picoseconds; tb != 2 tf so that no check holds by accident of the ratio.
constexpr Picos kTf = 12'000'000;
constexpr Picos kTb = 30'000'000;
constexpr Picos kP2p = 1'500'000;
constexpr int64_t kActivation = 1 << 20;

struct SimulatedRun {
  std::string name;
  Timeline timeline;
  Summary summary;
};

std::unique_ptr<SimulatedRun> run(const std::string& name, const Schedule& s, Picos p2p,
                                  int iterations) {
  EXPECT_TRUE(validate(s).ok()) << validate(s).message();
  auto r = std::make_unique<SimulatedRun>();
  r->name = name;
  const CostTable costs = uniform_costs(s.num_stages, s.num_ranks, kTf, kTb, p2p, kActivation);
  RunOptions options;
  options.iterations = iterations;
  EXPECT_TRUE(Engine().run(s, costs, &r->timeline, options).ok());
  Config config;
  config.parallel.pipeline = s.num_ranks;
  config.training.global_batch = s.num_microbatches;
  r->summary = summarize(config, name, r->timeline);
  return r;
}

// Counts the non-overlapping occurrences of `needle`.
int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// The value of attribute `name` in the first tag after `from`.
std::string attribute_after(const std::string& text, size_t from, const std::string& name) {
  const size_t at = text.find(name + "=\"", from);
  if (at == std::string::npos) return "<missing>";
  const size_t begin = at + name.size() + 2;
  return text.substr(begin, text.find('"', begin) - begin);
}

// The number after "key": in a JSON object, as written.
std::string json_number(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return "<missing>";
  const size_t begin = at + key.size() + 3;
  return json.substr(begin, json.find_first_of(",}", begin) - begin);
}

// Every <svg ...>...</svg> of the page (they do not nest).
std::vector<std::string> svgs(const std::string& html) {
  std::vector<std::string> out;
  for (size_t at = html.find("<svg "); at != std::string::npos; at = html.find("<svg ", at + 1)) {
    const size_t end = html.find("</svg>", at);
    if (end == std::string::npos) break;
    out.push_back(html.substr(at, end + 6 - at));
  }
  return out;
}

// XML-escapes the five special characters, as the report must.
std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

bool have_xmllint() { return std::system("command -v xmllint >/dev/null 2>&1") == 0; }

// True when xmllint accepts `text` as a well-formed document; else prints why.
bool well_formed(const std::string& text, const std::string& file_name) {
  const std::string path = ::testing::TempDir() + file_name;
  std::ofstream(path) << text;
  const std::string log = path + ".log";
  const int rc = std::system(("xmllint --noout '" + path + "' 2>'" + log + "'").c_str());
  if (rc != 0) {
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) ADD_FAILURE() << file_name << ": " << line;
  }
  return rc == 0;
}

class HtmlReport : public ::testing::Test {
 protected:
  void SetUp() override {
    // GPipe without transfer time: closed forms below. 1F1B with transfers,
    // two iterations, so there are transfers and iteration ends to draw.
    runs_.push_back(run("gpipe", *make_gpipe({4, 8, 1}), 0, 1));
    runs_.push_back(run("1f1b <fast> & \"lean\"", *make_1f1b({4, 8, 1}), kP2p, 2));
    runs_.push_back(run("1f1b p=3", *make_1f1b({3, 5, 1}), kP2p, 1));
    input_.title = "GPipe vs 1F1B";
    input_.config_text = "parallel: {pipeline: 4}  # a <&> \"quoted\" 'note'\n";
    for (const auto& r : runs_) input_.entries.push_back({r->name, &r->summary, &r->timeline, ""});
    // One run without a timeline, only its numbers, with a note.
    input_.entries.push_back(
        {"gpipe (numbers only)", &runs_[0]->summary, nullptr, "cannot run: m < p & more"});
  }

  std::vector<std::unique_ptr<SimulatedRun>> runs_;
  ReportInput input_;
};

// An overlapped pair's two actions name each other: in the Gantt's hover
// text and in the trace's arguments.
TEST(OverlappedPairReport, EachActionOfAPairNamesTheOther) {
  const Schedule s =
      *schedule_from_csv("0F0,1F0,(0F1;1B0)OVERLAP_F_B,1F1,1B1,0B0,0B1\n", "one-rank.csv");
  const std::unique_ptr<SimulatedRun> r = run("pairs", s, 0, 1);
  ReportInput input;
  input.title = "pairs";
  input.entries.push_back({r->name, &r->summary, &r->timeline, ""});
  const std::string html = html_report(input);
  EXPECT_THAT(html, HasSubstr("<title>0F1 rank 0 iteration 0, overlapped with 1B0: "));
  EXPECT_THAT(html, HasSubstr("<title>1B0 rank 0 iteration 0, overlapped with 0F1: "));
  EXPECT_EQ(count(html, "overlapped with"), 2);
  const std::string trace = chrome_trace_json(r->timeline);
  EXPECT_THAT(trace, HasSubstr("\"overlapped_with\":\"1B0\""));
  EXPECT_THAT(trace, HasSubstr("\"overlapped_with\":\"0F1\""));
  EXPECT_EQ(count(trace, "overlapped_with"), 2);
}

TEST_F(HtmlReport, IsWellFormedXmlAndSoIsEverySvg) {
  if (!have_xmllint()) GTEST_SKIP() << "xmllint not installed (scripts/setup.sh: libxml2-utils)";
  // Bytes that XML cannot hold must not break the file: Latin-1 and a control character.
  input_.config_text += "cafe: caf\xE9\x01\n";
  const std::string html = html_report(input_);
  EXPECT_THAT(html, StartsWith("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\""));
  EXPECT_TRUE(well_formed(html, "report.html"));
  const std::vector<std::string> all = svgs(html);
  // Two bar charts, and a Gantt and a memory chart per timeline.
  ASSERT_EQ(all.size(), 2u + 2 * runs_.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_THAT(all[i], HasSubstr("xmlns=\"http://www.w3.org/2000/svg\"")) << i;
    EXPECT_TRUE(well_formed(all[i], "svg" + std::to_string(i) + ".svg")) << i;
  }
}

TEST_F(HtmlReport, NothingFromTheNetwork) {
  const std::string html = html_report(input_);
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  EXPECT_THAT(html, Not(HasSubstr("url(")));
  // The only URLs are the XML namespaces.
  EXPECT_EQ(count(html, "http"), count(html, "http://www.w3.org/"));
}

TEST_F(HtmlReport, OneGanttPerTimelineWithOneGroupPerRank) {
  const std::string html = html_report(input_);
  EXPECT_EQ(count(html, "class=\"gantt\""), static_cast<int>(runs_.size()));
  for (const auto& r : runs_) {
    const size_t at = html.find("class=\"gantt\" data-schedule=\"" + escaped(r->name) + "\"");
    ASSERT_NE(at, std::string::npos) << r->name;
    const std::string gantt = html.substr(at, html.find("</svg>", at) - at);
    const int p = r->timeline.num_ranks;
    EXPECT_EQ(count(gantt, "class=\"rank\""), p) << r->name;
    for (int rank = 0; rank < p; ++rank) {
      EXPECT_EQ(count(gantt, "<g class=\"rank\" data-rank=\"" + std::to_string(rank) + "\">"), 1)
          << r->name << " rank " << rank;
    }
    // Every action is drawn with its tooltip, p ranks x 2m actions x
    // iterations, and so is every transfer that takes time (GPipe's are free).
    const int m = r->summary.microbatches;
    const int transfers = r->name == "gpipe" ? 0 : static_cast<int>(r->timeline.transfers.size());
    EXPECT_EQ(count(gantt, "class=\"F\"><title>") + count(gantt, "class=\"B\"><title>"),
              p * 2 * m * r->timeline.iterations)
        << r->name;
    EXPECT_EQ(count(gantt, "class=\"xa\"><title>") + count(gantt, "class=\"xg\"><title>"),
              transfers)
        << r->name;
    if (r->name != "gpipe") {
      EXPECT_EQ(transfers, 2 * (p - 1) * m * r->timeline.iterations);
    }
  }
  // rank 0's first action of GPipe: 0F0 from 0 to tf = 0.012 ms.
  EXPECT_THAT(html, HasSubstr("<title>0F0 rank 0 iteration 0: 0 to 0.012 ms</title>"));
}

TEST_F(HtmlReport, TableCarriesTheJsonNumbersExactly) {
  const std::string html = html_report(input_);
  for (const auto& r : runs_) {
    const std::string json = summary_to_json(r->summary);
    const size_t row = html.find("<tr data-entry=\"" + escaped(r->name) + "\">");
    ASSERT_NE(row, std::string::npos) << r->name;
    for (const std::string field : {"iteration_time_s", "bubble_fraction", "samples_per_s"}) {
      const size_t cell = html.find("data-field=\"" + field + "\"", row);
      ASSERT_NE(cell, std::string::npos) << field;
      const std::string value = attribute_after(html, cell, "data-value");
      EXPECT_EQ(value, json_number(json, field)) << r->name << " " << field;
    }
  }
  // GPipe with free transfers: (m + p - 1)(tf + tb) per iteration, and the
  // bubble is (p - 1) / (m + p - 1) of it.
  const size_t row = html.find("<tr data-entry=\"gpipe\">");
  const double t = std::stod(
      attribute_after(html, html.find("data-field=\"iteration_time_s\"", row), "data-value"));
  EXPECT_EQ(t, picos_to_seconds((8 + 4 - 1) * (kTf + kTb)));
  const double bubble = std::stod(
      attribute_after(html, html.find("data-field=\"bubble_fraction\"", row), "data-value"));
  EXPECT_DOUBLE_EQ(bubble, 3.0 / 11.0);
  // GPipe keeps all m microbatches on rank 0: the peak is there.
  const size_t peak = html.find("data-field=\"peak_memory_bytes\"", row);
  EXPECT_EQ(attribute_after(html, peak, "data-value"), std::to_string(8 * kActivation));
  EXPECT_EQ(attribute_after(html, peak, "data-rank"), "0");
}

TEST_F(HtmlReport, EscapesWhatUsersWrote) {
  const std::string html = html_report(input_);
  EXPECT_THAT(html, HasSubstr("# a &lt;&amp;&gt; &quot;quoted&quot; &#39;note&#39;"));
  EXPECT_THAT(html, Not(HasSubstr("<&>")));
  EXPECT_THAT(html, HasSubstr("cannot run: m &lt; p &amp; more"));
  EXPECT_THAT(html, Not(HasSubstr("<fast>")));
}

TEST_F(HtmlReport, MemoryChartHasALinePerRankAndTheCapacity) {
  runs_[0]->summary.memory_capacity_bytes = 16.0 * (1 << 20);
  const std::string html = html_report(input_);
  const size_t at = html.find("class=\"memory\" data-schedule=\"gpipe\"");
  ASSERT_NE(at, std::string::npos);
  const std::string chart = html.substr(at, html.find("</svg>", at) - at);
  EXPECT_EQ(count(chart, "<polyline class=\"mem\""), 4);
  EXPECT_EQ(count(chart, "<line class=\"cap\""), 1);
  // Without a capacity there is no line.
  const size_t other = html.find("class=\"memory\" data-schedule=\"1f1b p=3\"");
  ASSERT_NE(other, std::string::npos);
  EXPECT_THAT(html.substr(other, html.find("</svg>", other) - other),
              Not(HasSubstr("class=\"cap\"")));
}

// The memory curves come from the activation events; the summary's peaks
// from the engine's own count. They must agree, and every curve must end
// where it started: a flushed pipeline holds no activations.
TEST_F(HtmlReport, MemoryCurvesReachTheSummaryPeaks) {
  const std::string html = html_report(input_);
  for (const auto& r : runs_) {
    const size_t at = html.find("class=\"memory\" data-schedule=\"" + escaped(r->name) + "\"");
    ASSERT_NE(at, std::string::npos) << r->name;
    const std::string chart = html.substr(at, html.find("</svg>", at) - at);
    for (const DeviceSummary& d : r->summary.devices) {
      const size_t line =
          chart.find("<polyline class=\"mem\" data-rank=\"" + std::to_string(d.rank) + "\"");
      ASSERT_NE(line, std::string::npos) << r->name << " rank " << d.rank;
      EXPECT_EQ(attribute_after(chart, line, "data-peak"), std::to_string(d.peak_memory_bytes))
          << r->name << " rank " << d.rank;
      const std::string points = attribute_after(chart, line, "points");
      const std::string first_y =
          points.substr(points.find(',') + 1, points.find(' ') - points.find(',') - 1);
      const std::string last_y = points.substr(points.rfind(',') + 1);
      EXPECT_EQ(first_y, last_y) << r->name << " rank " << d.rank << ": " << points;
    }
  }
  // GPipe holds all m microbatches on every rank at once.
  EXPECT_EQ(runs_[0]->summary.devices[3].peak_memory_bytes, 8 * kActivation);
}

TEST_F(HtmlReport, MarkdownHasOneRowPerEntry) {
  const std::string md = markdown_report(input_);
  std::vector<std::string> rows;
  size_t begin = 0;
  for (size_t end = md.find('\n'); end != std::string::npos; end = md.find('\n', begin)) {
    const std::string line = md.substr(begin, end - begin);
    if (line.rfind("|", 0) == 0) rows.push_back(line);
    begin = end + 1;
  }
  ASSERT_EQ(rows.size(), input_.entries.size() + 2);  // header and alignment rows
  EXPECT_THAT(rows[1], StartsWith("| --- |"));
  for (size_t i = 0; i < input_.entries.size(); ++i) {
    EXPECT_THAT(rows[2 + i], StartsWith("| " + input_.entries[i].name + " |"));
    // Every row has the header's cells.
    EXPECT_EQ(count(rows[2 + i], " |"), count(rows[0], " |")) << rows[2 + i];
  }
  EXPECT_THAT(rows[2], HasSubstr("| 27.27 % |"));  // 3 / 11
}

// A caveat (which entries the model cannot tell apart) follows the summary
// table, escaped in HTML, as its own paragraph in Markdown; none, nothing.
TEST_F(HtmlReport, TheCaveatFollowsTheTable) {
  EXPECT_THAT(html_report(input_), Not(HasSubstr("class=\"caveat\"")));
  input_.caveat = "gpipe & 1f1b are close";
  const std::string html = html_report(input_);
  const size_t table_end = html.find("</table>");
  ASSERT_NE(table_end, std::string::npos);
  EXPECT_EQ(html.find("<p class=\"caveat\">gpipe &amp; 1f1b are close</p>"),
            table_end + std::string("</table>\n").size());
  const std::string md = markdown_report(input_);
  EXPECT_THAT(md, EndsWith("|\n\ngpipe & 1f1b are close"));
}

TEST(HtmlReportBig, DrawsOnlyTheFirstIteration) {
  // 1F1B, p = 8, m = 640: 10240 actions per iteration, 20480 in two.
  const auto r = run("1f1b", *make_1f1b({8, 640, 1}), kP2p, 2);
  ASSERT_GT(r->timeline.actions.size(), static_cast<size_t>(kMaxGanttActions));
  ReportInput input;
  input.entries.push_back({r->name, &r->summary, &r->timeline, ""});
  const std::string html = html_report(input);
  EXPECT_THAT(html, HasSubstr("Only the first iteration is drawn (10240 of 20480 actions)"));
  EXPECT_THAT(html, Not(HasSubstr(" iteration 1: ")));
  EXPECT_EQ(count(html, "class=\"rank\""), 8);
}

}  // namespace
}  // namespace html_report_test
}  // namespace ppsim
