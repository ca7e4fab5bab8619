// `ppsim calibrate`: fits a cost profile's calibration (cost_profile.h,
// `calibration:`) to runs that were both predicted and measured (validate's
// runs files, sim/runs_file.h), and judges it on runs held out of the fit.
//
// The model, per action kind k (F, B, I, W, and S, the optimizer step):
// measured = s_k predicted + o_k;
// per cross-rank transfer of n bytes: measured = latency + n / bandwidth.
// Every unknown is >= 0, fitted by non-negative least squares (nnls.h) on
// relative residuals, (measured - model) / measured, so that every action
// and transfer counts by its relative error as the iteration time does, and
// the longest do not swamp the rest. docs/calibration.md has the details and
// the results.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "schedules/action.h"
#include "schedules/status.h"
#include "sim/cost/cost_profile.h"
#include "sim/fit/runs_file.h"

namespace ppsim {

// Scale and overhead (per-byte time and latency) are told apart by the
// spread of the predicted durations (the sizes): below this ratio of the
// largest to the smallest the fit cannot separate them from noise, and puts
// everything in the proportional term (overhead, latency 0), which
// reproduces the measured times at the sizes seen and scales with size
// beyond them. Above it the overhead (latency) is still held at 0 unless it
// earns its place: leaving out one run at a time, the fit with it must
// predict the left-out run's samples better than the fit without.
inline constexpr double kMinSpread = 1.25;
// The fitted bandwidth is at most this: a link whose time does not grow with
// the sizes measured still gets a finite one (its per-byte time is then at
// its floor, 1 / kMaxBandwidthBps, far below anything measurable).
inline constexpr double kMaxBandwidthBps = 1e15;

// How well a model matches its samples: the median of |measured - model| /
// measured, before (the prediction) and after (the fit).
struct FitError {
  double before = 0;
  double after = 0;
};

struct KindFit {
  ActionKind kind = ActionKind::kForward;
  int samples = 0;
  KindCalibration fit;
  bool overhead_fitted = false;  // false: held at 0 (too little spread, or no gain held out)
  FitError error;
};

struct LinkFitResult {
  int samples = 0;
  LinkCalibration fit;
  bool latency_fitted = false;  // false: held at 0 (as KindFit::overhead_fitted)
  FitError error;
};

// A calibration relative to the runs' predictions, with how it was reached.
struct CalibrationFit {
  Calibration calibration;
  std::vector<KindFit> kinds;  // F, B, I, W, S, those with samples
  std::optional<LinkFitResult> link;
};

// Fits every action kind and the link on the samples of `runs` (actions,
// optimizer steps and transfers with a measured time > 0; actions and steps
// with a predicted time > 0). F, B, I and W are fitted on their actions, S
// on the steps at the ends of iterations (an asynchronous schedule's S
// actions also hold the gradient sync, and are left out). A kind without
// samples gets no entry, nor does the link without transfers.
// Errors: no sample at all; the solver's (non-finite input).
Result<CalibrationFit> fit_calibration(const std::vector<const RunPair*>& runs);

// One run's iteration time: measured, predicted as the runs file recorded it
// (before), and predicted again with the calibration fitted on every other
// run (after). Errors are (measured - predicted) / measured, as validate's.
struct HeldOutRun {
  std::string source;  // the runs file
  std::string schedule;
  double measured_s = 0;
  double before_s = 0;
  double after_s = 0;

  double before_error() const { return (measured_s - before_s) / measured_s; }
  double after_error() const { return (measured_s - after_s) / measured_s; }
};

struct CalibrationResult {
  int runs = 0;                      // in all the files
  CalibrationFit fit;                // on every run, relative to the predictions
  Calibration calibration;           // the fit after the profile's own calibration, if it had one
  CostProfile profile;               // the runs' profile with `calibration` as its section
  std::vector<HeldOutRun> held_out;  // leave-one-run-out; empty with one run
};

// Calibrates on the runs of `files` (`sources` names them, one each), which
// must all name the same profile. Each run is simulated again from its
// config, --set flags, schedule entry and profile, first as it was, which
// must reproduce the recorded prediction (else the config, the profile or
// the model changed since validate, and the pairs are stale: an error), then
// once per held-out run with the calibration fitted on the others.
// Errors name the file and run: an unreadable config or profile, a schedule
// entry that does not parse, a simulation that fails, a stale prediction,
// different profiles, no runs.
Result<CalibrationResult> calibrate(const std::vector<RunsFile>& files,
                                    const std::vector<std::string>& sources);

}  // namespace ppsim
