// A runs file: what `ppsim validate --runs-out FILE` saves for `ppsim
// calibrate`. Per schedule it pairs the simulator's prediction with the
// measured run: every action's and every cross-rank transfer's predicted
// duration against its measured one (the two timelines join on the record
// index, sim/timeline.h), the two iteration times, and what it takes to
// simulate the schedule again (the config, its --set flags, the profile and
// the schedule entry). The format is versioned JSON, documented in
// docs/calibration.md; reading errors name file:line:column and the key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/action.h"
#include "schedules/status.h"
#include "sim/core/timeline.h"

namespace ppsim {

// The format version this build writes and reads.
inline constexpr int kRunsVersion = 1;

struct ActionPair {
  int32_t index = 0;  // record index in one iteration (the schedule's program order)
  Action action;
  int32_t rank = 0;
  double predicted_s = 0;
  double measured_s = 0;  // median over the measured iterations

  bool operator==(const ActionPair&) const = default;
};

// The output of action `producer` carried to the rank of action `consumer`
// (indices as ActionPair::index).
struct TransferPair {
  int32_t producer = 0;
  int32_t consumer = 0;
  int64_t bytes = 0;
  double predicted_s = 0;
  double measured_s = 0;  // median over the measured iterations

  bool operator==(const TransferPair&) const = default;
};

// One rank's optimizer step at the end of an iteration (the Timeline's
// epilogue; an asynchronous schedule's steps are S actions instead).
struct StepPair {
  int32_t rank = 0;
  double predicted_s = 0;
  double measured_s = 0;  // median over the measured iterations

  bool operator==(const StepPair&) const = default;
};

struct RunPair {
  std::string schedule;  // the compare-style entry validated, e.g. "interleaved-1f1b:2"
  double predicted_iteration_s = 0;
  double measured_iteration_s = 0;
  std::vector<ActionPair> actions;
  std::vector<TransferPair> transfers;
  std::vector<StepPair> steps;

  bool operator==(const RunPair&) const = default;
};

struct RunsFile {
  int version = kRunsVersion;
  // The validated config and the profile the predictions came from. In the
  // file a relative path is relative to the runs file's folder; load_runs
  // resolves it, so that a runs file moves together with what it names.
  std::string config;
  std::vector<std::string> sets;  // the --set flags, "key.path=value"
  std::string profile;
  std::string backend;  // what measured the runs, e.g. "threads"; for people
  std::vector<RunPair> runs;

  bool operator==(const RunsFile&) const = default;
};

// The pairs of one schedule's prediction (its first `n` records: one run of
// the schedule's programs, all of an asynchronous schedule's stream) and
// measurement (runs [first, first + count) of `n` records each in
// `measured`, each action, transfer and optimizer step at its median over
// them). Transfers are matched on their (producer, consumer) records, steps
// on their rank; one that is in only one timeline is left out.
// REQUIRES: both timelines of the same schedule, `predicted` with at least n
// records and `measured` with (first + count) n, count >= 1.
RunPair pair_runs(std::string schedule, const Timeline& predicted, const Timeline& measured,
                  size_t n, int first, int count);

// The middle value of `values` (the mean of the two middle ones for an even
// count); 0 for none.
double median(std::vector<double> values);

// The JSON text of a runs file (paths written as they are).
std::string runs_to_json(const RunsFile& runs);
// Reads and checks one; `source` names it in messages. Besides types and
// unknown or missing keys it rejects a version other than kRunsVersion
// (checked first), an action text parse_action does not read, a negative
// time or size, and a transfer whose producer or consumer is not an action
// index of the run.
Result<RunsFile> parse_runs(std::string_view json, std::string_view source);
// parse_runs of a file, with the config and profile paths resolved against
// its folder.
Result<RunsFile> load_runs(const std::string& path);

}  // namespace ppsim
