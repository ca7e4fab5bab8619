// `ppsim-run CONFIG` (also `ppsim run ...`): runs the config's schedule for
// real on this CPU with the threads backend (one thread per rank, the GPT
// blocks of profiler/gpt_block.h) and reports what it measured, in the same
// table, JSON and trace formats as `ppsim simulate`.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>
#include <thread>

#include "real_runtime/runtime.h"
#include "sim/cli/options.h"
#include "sim/config.h"
#include "sim/metrics.h"
#include "sim/report.h"
#include "sim/simulate.h"
#include "sim/trace.h"

namespace po = boost::program_options;
using namespace ppsim;  // NOLINT: a tool's main, not a header
using cli::fail;

int main(int argc, char** argv) {
  std::string config_path;
  std::string json_path;
  std::string trace_path;
  std::vector<std::string> sets;
  int iterations = 3;
  double learning_rate = 0.01;
  bool force = false;
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&config_path)->value_name("CONFIG"), "YAML config (positional)")(
      "iterations", po::value(&iterations)->value_name("N"), "iterations to run (3)")(
      "learning-rate", po::value(&learning_rate)->value_name("LR"), "SGD step size (0.01)")(
      "json", po::value(&json_path)->value_name("FILE|-"), "the measured summary as JSON")(
      "trace", po::value(&trace_path)->value_name("FILE"), "the measured Chrome trace")(
      "force", po::bool_switch(&force), "run even with more ranks than cores")(
      "set", po::value(&sets)->composing()->value_name("KEY.PATH=VALUE"), "override a value");
  const std::string usage =
      "usage: ppsim run CONFIG [--iterations N] [--json FILE|-] [--trace FILE] [--set "
      "KEY.PATH=VALUE]...\n\n"
      "Runs CONFIG's schedule for real on this CPU: one thread per pipeline rank, the model's\n"
      "GPT blocks computed in fp32 (Eigen), activations and gradients handed between threads,\n"
      "an SGD step per iteration. Reports the measured iteration time (between the ends of the\n"
      "last two iterations), bubble fraction and peak activation memory per rank. The threads\n"
      "backend runs synchronous schedules (not pipedream/pipedream-2bw yet).\n\n"
      "example:\n  ppsim run configs/validate/cpu-small.yaml --trace run.json\n\n";
  po::variables_map vm;
  if (int code = ppsim::cli::parse_command_line(std::vector<std::string>(argv + 1, argv + argc),
                                                desc, "run", usage, &vm);
      code >= 0) {
    return code;
  }
  if (iterations < 2) return fail("--iterations: at least 2 (the steady period needs two ends)");
  Result<std::vector<ConfigOverride>> overrides = parse_overrides(sets);
  if (!overrides) return fail(overrides.error().message);
  Result<Config> config = load_config(config_path, *overrides);
  if (!config) return fail(config.error().message);
  if (!config->model) return fail(config_path + ": running needs a model");
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (config->parallel.pipeline > cores && !force) {
    return fail(fmt::format(
        "{} pipeline ranks on {} cores: the ranks would share cores and the timings would be "
        "meaningless; use --force to run anyway",
        config->parallel.pipeline, cores));
  }
  if (config->parallel.pipeline > cores) {
    std::cerr << "ppsim: warning: more ranks than cores: measured times are not meaningful\n";
  }
  Result<std::vector<int>> lengths = slice_lengths_for(*config);
  if (!lengths) return fail(lengths.error().message);
  Result<Schedule> schedule = schedule_for(*config, std::max(1, static_cast<int>(lengths->size())));
  if (!schedule) return fail(schedule.error().message);

  const runtime::RuntimeModel model = runtime::model_for(*config, *lengths);
  runtime::RunSettings settings;
  settings.iterations = iterations;
  settings.learning_rate = learning_rate;
  Result<runtime::RunResult> run = runtime::run_threads(*schedule, model, settings);
  if (!run) return fail(run.error().message);

  const Summary summary = summarize(*config, schedule->name, run->timeline);
  if (json_path != "-") {
    std::cout << "measured on this CPU (threads backend, fp32)\n" << format_summary_table(summary);
    std::cout << "loss per iteration:";
    for (double loss : run->losses) std::cout << fmt::format(" {:.4f}", loss);
    std::cout << "\n";
  }
  if (!json_path.empty()) {
    const std::string json = summary_to_json(summary);
    if (json_path == "-") {
      std::cout << json;
    } else {
      std::ofstream(json_path) << json;
    }
  }
  if (!trace_path.empty()) {
    std::ofstream(trace_path) << chrome_trace_json(run->timeline);
    std::cerr << "trace written to " << trace_path << " (open it in ui.perfetto.dev)\n";
  }
  return 0;
}
