#include "sim/fit/calibrate.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <utility>

#include "sim/config/config.h"
#include "sim/cost/calibration.h"
#include "sim/fit/nnls.h"
#include "sim/plan/compare.h"
#include "sim/plan/simulate.h"

namespace ppsim {
namespace {

constexpr ActionKind kCalibratedActionKinds[] = {ActionKind::kForward, ActionKind::kBackward,
                                                 ActionKind::kBackwardInput,
                                                 ActionKind::kBackwardWeight, ActionKind::kStep};

// One measurement: x is what the model is linear in (a predicted duration,
// or a transfer's bytes), predicted_s what the runs file predicted, `run`
// the run it came from.
struct Sample {
  double x = 0;
  double predicted_s = 0;
  double measured_s = 0;
  int run = 0;
};

struct Line {
  double slope = 0;
  double offset = 0;
};

// measured = slope x + offset with slope >= floor and offset >= 0 (held at 0
// unless `with_offset`), least squares on the relative residuals.
Result<Line> fit_line(const std::vector<Sample>& samples, bool with_offset, double floor) {
  const int n = static_cast<int>(samples.size());
  Matrix a(n, with_offset ? 2 : 1);
  Vector b(n);
  for (int i = 0; i < n; ++i) {
    const Sample& s = samples[i];
    a(i, 0) = s.x / s.measured_s;
    if (with_offset) a(i, 1) = 1.0 / s.measured_s;
    b[i] = 1.0 - floor * s.x / s.measured_s;  // slope = floor + u, u >= 0
  }
  const Result<Vector> u = nnls(a, b);
  if (!u.ok()) return u.error();
  return Line{floor + (*u)[0], with_offset ? (*u)[1] : 0.0};
}

// Whether the samples' x spread enough to tell slope from offset.
bool spread_enough(const std::vector<Sample>& samples) {
  double low = samples[0].x, high = samples[0].x;
  for (const Sample& s : samples) {
    low = std::min(low, s.x);
    high = std::max(high, s.x);
  }
  return high >= kMinSpread * low;
}

FitError fit_error(const std::vector<Sample>& samples, const Line& line) {
  std::vector<double> before, after;
  for (const Sample& s : samples) {
    before.push_back(std::abs(s.measured_s - s.predicted_s) / s.measured_s);
    after.push_back(std::abs(s.measured_s - (line.slope * s.x + line.offset)) / s.measured_s);
  }
  return {median(std::move(before)), median(std::move(after))};
}

// Sum of the squared relative errors of `line` on the samples of `run`.
double squared_error(const std::vector<Sample>& samples, int run, const Line& line) {
  double sum = 0;
  for (const Sample& s : samples) {
    if (s.run != run) continue;
    const double r = 1.0 - (line.slope * s.x + line.offset) / s.measured_s;
    sum += r * r;
  }
  return sum;
}

// Whether the offset earns its place: leaving out one run at a time, the
// line with an offset, fitted on the other runs, must predict the left-out
// run's samples better than the proportional line does. The spread within a
// few runs can come from a shape the model mispredicts (TeraPipe's slices)
// rather than from an overhead, and an offset fitted to it then lands on
// every action of a schedule with more, shorter ones. With samples from one
// run only nothing can be left out, and the spread alone decides.
Result<bool> offset_pays(const std::vector<Sample>& samples, double floor) {
  double with = 0, without = 0;
  bool compared = false;
  for (int run = 0; run <= samples.back().run; ++run) {
    std::vector<Sample> others;
    bool present = false;
    for (const Sample& s : samples) {
      if (s.run == run) {
        present = true;
      } else {
        others.push_back(s);
      }
    }
    if (!present || others.empty()) continue;
    const Result<Line> proportional = fit_line(others, false, floor);
    const Result<Line> offset = fit_line(others, spread_enough(others), floor);
    if (!proportional.ok()) return proportional.error();
    if (!offset.ok()) return offset.error();
    with += squared_error(samples, run, *offset);
    without += squared_error(samples, run, *proportional);
    compared = true;
  }
  return !compared || with < without;
}

struct SampleFit {
  Line line;
  bool with_offset = false;
  FitError error;
};

// The line for `samples` (ordered by run): with an offset when the sizes
// spread enough to tell it from the slope and it predicts left-out runs
// better; slope >= floor.
Result<SampleFit> fit_samples(const std::vector<Sample>& samples, double floor) {
  bool with_offset = spread_enough(samples);
  if (with_offset) {
    const Result<bool> pays = offset_pays(samples, floor);
    if (!pays.ok()) return pays.error();
    with_offset = *pays;
  }
  const Result<Line> line = fit_line(samples, with_offset, floor);
  if (!line.ok()) return line.error();
  return SampleFit{*line, with_offset, fit_error(samples, *line)};
}

struct Job {
  std::string source;
  Config config;  // for the run's schedule entry, with the profile
  const RunPair* run = nullptr;
};

// The configs of every run of `files`, checked to reproduce their predictions.
Result<std::vector<Job>> jobs_for(const std::vector<RunsFile>& files,
                                  const std::vector<std::string>& sources) {
  std::vector<Job> jobs;
  for (size_t f = 0; f < files.size(); ++f) {
    const RunsFile& file = files[f];
    const std::string& source = sources[f];
    Result<std::vector<ConfigOverride>> overrides = parse_overrides(file.sets);
    if (!overrides.ok())
      return Error{fmt::format("{}: set: {}", source, overrides.error().message)};
    Result<Config> config = load_config(file.config, *overrides);
    if (!config.ok()) return Error{fmt::format("{}: config: {}", source, config.error().message)};
    config->profile_path = file.profile;
    for (const RunPair& run : file.runs) {
      const std::string where = fmt::format("{}: run \"{}\"", source, run.schedule);
      Result<std::vector<std::string>> entries = parse_schedule_list(run.schedule);
      if (!entries.ok() || entries->size() != 1) {
        return Error{
            fmt::format("{}: expected one schedule entry such as \"1f1b\" or "
                        "\"interleaved-1f1b:2\"{}",
                        where, entries.ok() ? "" : ": " + entries.error().message)};
      }
      Job job{source, config_for_entry(*config, run.schedule), &run};
      const Result<Simulation> sim = simulate(job.config, nullptr, nullptr, Keep::kSummary);
      if (!sim.ok()) return Error{fmt::format("{}: {}", where, sim.error().message)};
      const double again = sim->summary.iteration_time_s;
      if (std::abs(again - run.predicted_iteration_s) > 1e-9 * run.predicted_iteration_s) {
        return Error{fmt::format(
            "{}: simulating it again gives {} s, but the runs file recorded {} s: the config, "
            "the profile or ppsim changed since it was validated; validate again",
            where, again, run.predicted_iteration_s)};
      }
      jobs.push_back(std::move(job));
    }
  }
  return jobs;
}

// The fit on every job but `left_out`, after `base`.
Result<Calibration> fit_without(const std::vector<Job>& jobs, int left_out,
                                const Calibration& base) {
  std::vector<const RunPair*> runs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (static_cast<int>(i) != left_out) runs.push_back(jobs[i].run);
  }
  Result<CalibrationFit> fit = fit_calibration(runs);
  if (!fit.ok()) return fit.error();
  return compose(fit->calibration, base);
}

}  // namespace

Result<CalibrationFit> fit_calibration(const std::vector<const RunPair*>& runs) {
  CalibrationFit out;
  for (ActionKind kind : kCalibratedActionKinds) {
    std::vector<Sample> samples;
    for (int r = 0; r < static_cast<int>(runs.size()); ++r) {
      const auto add = [&](double predicted_s, double measured_s) {
        if (measured_s > 0 && predicted_s > 0) {
          samples.push_back({predicted_s, predicted_s, measured_s, r});
        }
      };
      // The step: the synchronous schedules' ends of iterations. (An
      // asynchronous schedule's S actions also hold the gradient sync.)
      if (kind == ActionKind::kStep) {
        for (const StepPair& s : runs[r]->steps) add(s.predicted_s, s.measured_s);
        continue;
      }
      for (const ActionPair& a : runs[r]->actions) {
        if (a.action.kind == kind) add(a.predicted_s, a.measured_s);
      }
    }
    if (samples.empty()) continue;
    const Result<SampleFit> fit = fit_samples(samples, 0);
    if (!fit.ok()) return fit.error();
    const KindFit kind_fit{kind, static_cast<int>(samples.size()),
                           KindCalibration{fit->line.slope, fit->line.offset}, fit->with_offset,
                           fit->error};
    kind_entry(out.calibration, kind) = kind_fit.fit;
    out.kinds.push_back(kind_fit);
  }
  std::vector<Sample> transfers;
  for (int r = 0; r < static_cast<int>(runs.size()); ++r) {
    for (const TransferPair& t : runs[r]->transfers) {
      if (t.measured_s > 0) {
        transfers.push_back({static_cast<double>(t.bytes), t.predicted_s, t.measured_s, r});
      }
    }
  }
  if (!transfers.empty()) {
    const Result<SampleFit> fit = fit_samples(transfers, 1.0 / kMaxBandwidthBps);
    if (!fit.ok()) return fit.error();
    const LinkFitResult link{static_cast<int>(transfers.size()),
                             LinkCalibration{fit->line.offset, 1.0 / fit->line.slope},
                             fit->with_offset, fit->error};
    out.calibration.link = link.fit;
    out.link = link;
  }
  if (out.kinds.empty() && !out.link) {
    return Error{"no action or transfer with a measured time above 0: nothing to fit"};
  }
  return out;
}

Result<CalibrationResult> calibrate(const std::vector<RunsFile>& files,
                                    const std::vector<std::string>& sources) {
  PPSIM_CHECK(files.size() == sources.size());
  if (files.empty()) return Error{"no runs files"};
  for (size_t f = 1; f < files.size(); ++f) {
    if (std::filesystem::path(files[f].profile).lexically_normal() !=
        std::filesystem::path(files[0].profile).lexically_normal()) {
      return Error{fmt::format(
          "{} names the profile {}, but {} names {}: calibrate the runs of one profile at a time",
          sources[0], files[0].profile, sources[f], files[f].profile)};
    }
  }
  Result<CostProfile> profile = load_profile(files[0].profile);
  if (!profile.ok())
    return Error{fmt::format("{}: profile: {}", sources[0], profile.error().message)};
  Result<std::vector<Job>> jobs = jobs_for(files, sources);
  if (!jobs.ok()) return jobs.error();
  if (jobs->empty()) {
    return Error{fmt::format("{}: no runs to calibrate on", fmt::join(sources, ", "))};
  }
  const Calibration base = profile->calibration.value_or(Calibration{});

  CalibrationResult result;
  result.runs = static_cast<int>(jobs->size());
  std::vector<const RunPair*> runs;
  for (const Job& job : *jobs) runs.push_back(job.run);
  Result<CalibrationFit> fit = fit_calibration(runs);
  if (!fit.ok()) return fit.error();
  result.fit = std::move(*fit);
  result.calibration = compose(result.fit.calibration, base);
  result.profile = std::move(*profile);
  result.profile.version = kProfileVersion;  // the section is version 2's
  result.profile.calibration = result.calibration;

  if (jobs->size() < 2) return result;
  for (size_t i = 0; i < jobs->size(); ++i) {
    const Job& job = (*jobs)[i];
    Result<Calibration> others = fit_without(*jobs, static_cast<int>(i), base);
    if (!others.ok()) return others.error();
    const Result<Simulation> sim = simulate(job.config, nullptr, &*others, Keep::kSummary);
    if (!sim.ok()) {
      return Error{
          fmt::format("{}: run \"{}\": {}", job.source, job.run->schedule, sim.error().message)};
    }
    result.held_out.push_back({job.source, job.run->schedule, job.run->measured_iteration_s,
                               job.run->predicted_iteration_s, sim->summary.iteration_time_s});
  }
  return result;
}

}  // namespace ppsim
