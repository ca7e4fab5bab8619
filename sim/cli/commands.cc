#include "sim/cli/commands.h"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <functional>
#include <iostream>
#include <optional>

#include "schedules/csv.h"
#include "schedules/generators.h"
#include "schedules/validate.h"
#include "sim/cli/options.h"
#include "sim/config/config.h"
#include "sim/core/json.h"
#include "sim/core/text_file.h"
#include "sim/fit/sensitivity.h"
#include "sim/plan/compare.h"
#include "sim/plan/explore.h"
#include "sim/plan/simulate.h"
#include "sim/report/compare_report.h"
#include "sim/report/evidence_note.h"
#include "sim/report/explore_report.h"
#include "sim/report/html_report.h"
#include "sim/report/ops_report.h"
#include "sim/report/summary.h"
#include "sim/report/trace.h"

namespace po = boost::program_options;

namespace ppsim::cli {
namespace {

// Options every config-reading command takes.
struct ConfigArgs {
  std::string config;
  std::vector<std::string> sets;
};

void add_config_options(po::options_description& desc, ConfigArgs* args) {
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&args->config)->value_name("CONFIG"), "YAML config (positional)")(
      "set", po::value(&args->sets)->composing()->value_name("KEY.PATH=VALUE"),
      "override one config value, e.g. --set parallel.pipeline=4 (repeatable)");
}

Result<Config> load(const ConfigArgs& args) {
  Result<std::vector<ConfigOverride>> overrides = parse_overrides(args.sets);
  if (!overrides) return overrides.error();
  return load_config(args.config, *overrides);
}

// The file's text, for a report's "config" section (empty when unreadable:
// the report is still worth writing).
std::string file_text(const std::string& path) {
  Result<std::string> text = read_text_file(path, kMaxYamlFileBytes);
  return text ? std::move(*text) : std::string();
}

// Writes the HTML and Markdown reports that were asked for.
Status write_reports(const ReportInput& input, const std::string& html_path,
                     const std::string& markdown_path) {
  if (!html_path.empty()) {
    if (Status st = write_output(html_path, html_report(input)); !st) return st;
    std::cerr << "report written to " << html_path
              << " (open it in a browser; scripts/render_report.sh makes a PNG)\n";
  }
  if (!markdown_path.empty()) return write_output(markdown_path, markdown_report(input));
  return {};
}

// `simulate --ops` needs the analytic model: checked before simulating.
Status check_op_table(const Config& config) {
  if (config.model && config.hardware && config.profile_path.empty()) return {};
  return Error{
      fmt::format("{}: --ops shows the analytic cost model's operations, which needs "
                  "`model` and `hardware` and no `costs.profile` (a profile's times are "
                  "measured per piece, not per operation)",
                  config.source)};
}

// `simulate --ops`: where each piece's time goes, as the analytic model
// prices it. REQUIRES: check_op_table(config).
Status print_op_table(const Config& config) {
  Result<std::vector<PricedPiece>> pieces = priced_pieces(config);
  if (!pieces) return pieces.error();
  const TokenSlice slice = context_rank_slice(config.model->seq_len, config.parallel.context);
  std::string heading = fmt::format(
      "\nwhere the time goes: one GPU of the tensor group (t={}), one microbatch of {} x {} "
      "tokens, each operation timed alone",
      config.parallel.tensor, config.training.micro_batch, slice.tokens);
  if (config.training.recompute != Recompute::kNone) {
    heading +=
        fmt::format("; recompute {} runs {} again before the input gradient",
                    to_string(config.training.recompute),
                    config.training.recompute == Recompute::kFull ? "the forward"
                                                                  : "the attention core's forward");
  }
  std::cout << format_op_table(heading, *pieces);
  return {};
}

// The summary's JSON, with the sensitivity probes (--sensitivity) as its
// `sensitivity` field.
std::string simulate_json(const Summary& summary, const std::optional<Sensitivity>& sensitivity) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object();
  write_summary_fields(w, summary);
  if (sensitivity) {
    w.key("sensitivity");
    write_sensitivity(w, *sensitivity);
  }
  w.end_object();
  return out + '\n';
}

// What a reader had to interpret, one "note:" line each on stderr.
void print_notes(const std::vector<std::string>& notes) {
  for (const std::string& note : notes) std::cerr << "note: " << note << '\n';
}

// The schedule as CSV in `format`: ppsim's (a comment line naming it) or
// PyTorch's compute-only form (what torch.distributed.pipelining reads).
Result<std::string> schedule_csv(const Schedule& schedule, const std::string& format) {
  if (format == "pytorch") return schedule_to_pytorch_csv(schedule);
  return schedule_to_csv(schedule);
}

}  // namespace

int run_simulate(const std::vector<std::string>& args) {
  ConfigArgs config_args;
  std::string json_path;
  std::string trace_path;
  bool show_ops = false;
  bool show_sensitivity = false;
  po::options_description desc("Options");
  add_config_options(desc, &config_args);
  desc.add_options()("json", po::value(&json_path)->value_name("FILE|-"),
                     "write the summary as JSON to FILE, or to stdout for '-'")(
      "trace", po::value(&trace_path)->value_name("FILE"),
      "write a Chrome trace (open in ui.perfetto.dev)")(
      "ops", po::bool_switch(&show_ops),
      "after the summary, each piece's operations (GEMMs, memory-bound kernels, attention, "
      "collectives) by phase, with their shapes and times")(
      "sensitivity", po::bool_switch(&show_sensitivity),
      "after the summary, the iteration time with each hardware efficiency parameter moved "
      "down and up by a tenth of its range (the parameters `calibrate --measured` fits); with "
      "--json, in the summary's `sensitivity` field too");
  const std::string usage =
      "usage: ppsim simulate CONFIG [--set KEY.PATH=VALUE]... [--json FILE|-] [--trace FILE] "
      "[--ops] [--sensitivity]\n\n"
      "Replays training iterations of CONFIG's schedule on modelled devices and links,\n"
      "and reports iteration time, bubble fraction, throughput and memory per rank.\n\n"
      "examples:\n"
      "  ppsim simulate configs/examples/ideal.yaml\n"
      "  ppsim simulate configs/examples/gpt3-1.3b-8gpu.yaml --set schedule.kind=gpipe\n"
      "  ppsim simulate configs/examples/gpt3-175b-64gpu.yaml --json - --trace out.json\n"
      "  ppsim simulate configs/published/zero-bubble/14.6b-zb2p-m48.yaml --ops\n"
      "  ppsim simulate configs/published/megatron-bridge-25.11/b200-llama3-8b.yaml "
      "--sensitivity\n\n";
  po::variables_map vm;
  if (int code = parse_command_line(args, desc, "simulate", usage, &vm); code >= 0) return code;
  if (Status st = check_outputs({{"--json", json_path}, {"--trace", trace_path}}); !st)
    return error_exit(st.message());

  Result<Config> config = load(config_args);
  if (!config) return error_exit(config.error().message);
  if (show_ops) {
    if (Status st = check_op_table(*config); !st) return error_exit(st.message());
  }
  Result<Simulation> sim =
      simulate(*config, nullptr, nullptr, trace_path.empty() ? Keep::kSummary : Keep::kTimeline);
  if (!sim) return error_exit(sim.error().message);
  std::optional<Sensitivity> sensitivity;
  if (show_sensitivity) {
    Result<Sensitivity> probed = hardware_sensitivity(*config);
    if (!probed) return error_exit(probed.error().message);
    sensitivity = *probed;
  }
  print_notes(sim->notes);

  if (json_path != "-") {
    std::cout << format_summary_table(sim->summary) << accuracy_notes(*config)
              << host_wait_note(*config);
  }
  if (show_ops && json_path != "-") {
    if (Status st = print_op_table(*config); !st) return error_exit(st.message());
  }
  if (sensitivity && json_path != "-") std::cout << format_sensitivity(*sensitivity);
  if (!json_path.empty()) {
    if (Status st = write_output(json_path, simulate_json(sim->summary, sensitivity)); !st) {
      return error_exit(st.message());
    }
  }
  if (!trace_path.empty()) {
    if (Status st = write_output(trace_path, chrome_trace_json(sim->timeline)); !st) {
      return error_exit(st.message());
    }
    std::cerr << "trace written to " << trace_path << " (open it in ui.perfetto.dev)\n";
  }
  return 0;
}

int run_compare(const std::vector<std::string>& args) {
  ConfigArgs config_args;
  std::string schedules;
  std::string json_path;
  std::string csv_path;
  std::string report_path;
  std::string markdown_path;
  po::options_description desc("Options");
  add_config_options(desc, &config_args);
  desc.add_options()(
      "schedules", po::value(&schedules)->value_name("LIST"),
      "comma-separated schedules, each KIND or KIND:V (V virtual stages per rank); default: "
      "every kind")("json", po::value(&json_path)->value_name("FILE|-"),
                    "write the results as JSON to FILE, or to stdout for '-'")(
      "csv", po::value(&csv_path)->value_name("FILE|-"), "write the results as CSV")(
      "report", po::value(&report_path)->value_name("FILE"),
      "write a self-contained HTML report: table, Gantt chart and memory per schedule")(
      "markdown", po::value(&markdown_path)->value_name("FILE|-"),
      "write the summary table as Markdown");
  const std::string usage =
      "usage: ppsim compare CONFIG [--schedules LIST] [--set KEY.PATH=VALUE]... [--json FILE|-] "
      "[--csv FILE|-]\n\n"
      "Simulates CONFIG's workload under each schedule and prints one table: iteration time,\n"
      "throughput, bubble fraction and peak memory. GPipe and 1F1B run one stage per rank;\n"
      "interleaved-1f1b keeps the config's virtual_stages (2 when it is 1) unless given as\n"
      "KIND:V, e.g. interleaved-1f1b:4. A schedule\n"
      "that cannot run the config, or needs more memory than the device has, says why.\n\n"
      "examples:\n"
      "  ppsim compare configs/examples/gpt3-1.3b-8gpu.yaml\n"
      "  ppsim compare configs/examples/gpt3-175b-64gpu.yaml --schedules "
      "1f1b,interleaved-1f1b:2,interleaved-1f1b:3 --csv out.csv\n\n";
  po::variables_map vm;
  if (int code = parse_command_line(args, desc, "compare", usage, &vm); code >= 0) return code;
  if (Status st = check_outputs({{"--json", json_path},
                                 {"--csv", csv_path},
                                 {"--report", report_path},
                                 {"--markdown", markdown_path}});
      !st) {
    return error_exit(st.message());
  }

  std::vector<std::string> entries;
  if (schedules.empty()) {
    for (ScheduleKind kind : config_schedule_kinds()) {
      if (kind != ScheduleKind::kCustom) entries.emplace_back(to_string(kind));
    }
  } else {
    Result<std::vector<std::string>> parsed = parse_schedule_list(schedules);
    if (!parsed) return error_exit(parsed.error().message);
    entries = std::move(*parsed);
  }
  Result<Config> config = load(config_args);
  if (!config) return error_exit(config.error().message);
  const std::vector<ComparedSchedule> rows =
      compare_schedules(*config, entries, !report_path.empty());
  if (json_path != "-" && csv_path != "-" && markdown_path != "-") {
    std::cout << format_comparison_table(rows, *config);
  }
  ReportInput report{"Schedules for " + config->source,
                     file_text(config->source),
                     {},
                     comparison_caveat(rows, *config)};
  for (const ComparedSchedule& row : rows) {
    if (!row.summary) continue;  // a report shows runs; the table above lists the rest
    report.entries.push_back({row.entry, &*row.summary, row.timeline ? &*row.timeline : nullptr,
                              row.feasible ? "" : row.reason});
  }
  if (Status st = write_reports(report, report_path, markdown_path); !st) {
    return error_exit(st.message());
  }
  if (!json_path.empty()) {
    if (Status st = write_output(json_path, comparison_to_json(rows)); !st) {
      return error_exit(st.message());
    }
  }
  if (!csv_path.empty()) {
    if (Status st = write_output(csv_path, comparison_to_csv(rows)); !st)
      return error_exit(st.message());
  }
  return 0;
}

namespace {

// Progress on stderr: a bar redrawn in place on a terminal, otherwise a
// plain line every tenth of the work (logs stay readable).
class Progress {
 public:
  Progress() : tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

  void operator()(size_t done, size_t total) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = elapsed > 0 ? done / elapsed : 0;
    const double eta = rate > 0 ? (total - done) / rate : 0;
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
      std::cerr << fmt::format("\r[{:<{}}] {}/{} candidates, {:.0f}/s, ETA {:.1f} s ",
                               std::string(filled, '='), kWidth, done, total, rate, eta);
      if (done == total) std::cerr << "\n";
    } else if (total > 0 && (done * 10 / total > last_tenth_ || done == total)) {
      last_tenth_ = done * 10 / total;
      std::cerr << fmt::format("explore: {}/{} candidates decided, {:.0f}/s, ETA {:.1f} s\n", done,
                               total, rate, eta);
    }
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  size_t last_tenth_ = 0;
};

}  // namespace

int run_explore(const std::vector<std::string>& args) {
  ConfigArgs config_args;
  std::string json_path;
  std::string csv_path;
  int top = 10;
  int threads = 0;  // one per core
  std::string report_path;
  std::string markdown_path;
  po::options_description desc("Options");
  add_config_options(desc, &config_args);
  desc.add_options()("top", po::value(&top)->value_name("K")->notifier(within("--top", 1, 1 << 20)),
                     "rows of the ranked table (10)")(
      "threads",
      po::value(&threads)->value_name("N")->notifier(within("--threads", 1, kMaxThreads)),
      "simulation threads (default: one per core)")(
      "json", po::value(&json_path)->value_name("FILE|-"), "every candidate as JSON")(
      "csv", po::value(&csv_path)->value_name("FILE|-"), "every candidate as CSV")(
      "report", po::value(&report_path)->value_name("FILE"),
      "an HTML report of the top K: table, Gantt chart and memory per candidate")(
      "markdown", po::value(&markdown_path)->value_name("FILE|-"), "the top K as a Markdown table");
  const std::string usage =
      "usage: ppsim explore SWEEP [--set KEY.PATH=VALUE]... [--top K] [--threads N] [--json "
      "FILE|-] [--csv FILE|-]\n\n"
      "Simulates every layout and schedule a sweep file's search: section allows (pipeline,\n"
      "tensor, context, expert, micro_batch, virtual_stages, schedule, recompute, zero_stage;\n"
      "data parallelism takes the remaining GPUs) and ranks them by throughput within the\n"
      "memory cap. Layers are split over stages so the slowest stage is as fast as possible.\n"
      "Candidates whose static memory exceeds the cap, or whose busiest rank alone cannot\n"
      "beat the best found, are not simulated (and listed as pruned). Results do not depend\n"
      "on --threads.\n\n"
      "examples:\n"
      "  ppsim explore configs/sweeps/gpt3-175b-1024gpu.yaml\n"
      "  ppsim explore configs/sweeps/llama-7b-64gpu.yaml --top 20 --csv all.csv\n\n";
  po::variables_map vm;
  if (int code = parse_command_line(args, desc, "explore", usage, &vm); code >= 0) return code;
  if (Status st = check_outputs({{"--json", json_path},
                                 {"--csv", csv_path},
                                 {"--report", report_path},
                                 {"--markdown", markdown_path}});
      !st) {
    return error_exit(st.message());
  }

  Result<std::vector<ConfigOverride>> overrides = parse_overrides(config_args.sets);
  if (!overrides) return error_exit(overrides.error().message);
  Result<Sweep> sweep = load_sweep(config_args.config, *overrides);
  if (!sweep) return error_exit(sweep.error().message);
  Progress progress;
  ExploreOptions options;
  options.threads = threads;
  options.progress = std::ref(progress);
  const ExploreResult result = explore(*sweep, options);
  if (json_path != "-" && csv_path != "-" && markdown_path != "-") {
    std::cout << format_explore_table(result, static_cast<size_t>(top));
  }
  if (!report_path.empty() || !markdown_path.empty()) {
    // Timelines are not kept while exploring: replay the top K for the report.
    const size_t k = std::min(static_cast<size_t>(top), result.ranking.size());
    std::vector<Simulation> runs;
    runs.reserve(k);
    ReportInput report{"Top " + std::to_string(k) + " for " + sweep->base.source,
                       file_text(config_args.config),
                       {},
                       explore_report_caveat(result, k)};
    for (size_t i = 0; i < k; ++i) {
      const size_t c = result.ranking[i];
      Result<Simulation> sim = simulate(result.configs[c]);
      if (!sim) return error_exit(sim.error().message);
      runs.push_back(std::move(*sim));
      report.entries.push_back(
          {result.candidates[c].layout(), &runs.back().summary, &runs.back().timeline, ""});
    }
    if (Status st = write_reports(report, report_path, markdown_path); !st) {
      return error_exit(st.message());
    }
  }
  if (!json_path.empty()) {
    if (Status st = write_output(json_path, explore_to_json(result)); !st)
      return error_exit(st.message());
  }
  if (!csv_path.empty()) {
    if (Status st = write_output(csv_path, explore_to_csv(result)); !st)
      return error_exit(st.message());
  }
  return 0;
}

int run_schedule(const std::vector<std::string>& args) {
  ConfigArgs config_args;
  std::string csv_out;
  std::string csv_in;
  std::string format = "ppsim";
  po::options_description desc("Options");
  add_config_options(desc, &config_args);
  desc.add_options()("csv-out", po::value(&csv_out)->value_name("FILE|-"),
                     "write the schedule as CSV, one row per rank")(
      "format", po::value(&format)->value_name("ppsim|pytorch"),
      "--csv-out's form: ppsim's (the default), or PyTorch's compute-only CSV that\n"
      "torch.distributed.pipelining's _load_csv reads")(
      "csv-in", po::value(&csv_in)->value_name("FILE"),
      "read a (hand-edited) schedule from CSV instead of generating it, check it against\n"
      "CONFIG's layout and for deadlocks, and print it; PyTorch's compute-only files are\n"
      "read too, older releases' spelling included");
  const std::string usage =
      "usage: ppsim schedule CONFIG [--set KEY.PATH=VALUE]... [--csv-out FILE|- [--format "
      "ppsim|pytorch]] [--csv-in FILE]\n\n"
      "Prints each rank's program in the compact action form: 2F0 is stage 2's forward of\n"
      "microbatch 0, 1B3 a backward, 1I3/1W3 its input- and weight-gradient halves.\n\n"
      "examples:\n"
      "  ppsim schedule configs/examples/ideal.yaml\n"
      "  ppsim schedule configs/examples/ideal.yaml --csv-out my.csv   # edit, then:\n"
      "  ppsim schedule configs/examples/ideal.yaml --csv-in my.csv\n"
      "  ppsim schedule configs/examples/ideal.yaml --csv-out zb.csv --format pytorch\n\n";
  po::variables_map vm;
  if (int code = parse_command_line(args, desc, "schedule", usage, &vm); code >= 0) return code;
  if (format != "ppsim" && format != "pytorch") {
    return error_exit(fmt::format("--format {}: expected ppsim or pytorch", printable(format)));
  }
  if (Status st = check_outputs({{"--csv-out", csv_out}}); !st) return error_exit(st.message());

  Result<Config> config = load(config_args);
  if (!config) return error_exit(config.error().message);
  const auto generated = [&]() -> Result<ScheduleFile> {
    Result<Schedule> s = schedule_for(*config);
    if (!s) return s.error();
    if (Status st = validate_coverage(*s); !st) return Error{st.message()};
    return ScheduleFile{std::move(*s), {}};
  };
  Result<ScheduleFile> schedule = csv_in.empty() ? generated() : load_schedule_csv(csv_in, *config);
  if (!schedule) return error_exit(schedule.error().message);
  print_notes(schedule->notes);

  const Schedule& s = schedule->schedule;
  if (csv_out != "-") {
    std::cout << fmt::format("schedule {}: {} ranks, {} stages, {} microbatches\n", s.name,
                             s.num_ranks, s.num_stages, s.num_microbatches);
    for (int rank = 0; rank < s.num_ranks; ++rank) {
      std::cout << fmt::format("rank {}: {}\n", rank, program_to_string(s.programs[rank]));
    }
  }
  if (!csv_out.empty()) {
    const Result<std::string> csv = schedule_csv(s, format);
    if (!csv) return error_exit(csv.error().message);
    if (Status st = write_output(csv_out, *csv); !st) return error_exit(st.message());
  }
  return 0;
}

}  // namespace ppsim::cli
