// Writes seed inputs for the harnesses whose formats have few or no examples
// in the tree: every generator's schedule as CSV, and cost profiles and runs
// files built with the writers the readers round-trip (schedule_to_csv,
// profile_to_yaml, runs_to_json). scripts/fuzz.sh runs it into the build
// directory's corpus; nothing it writes is kept in the repository.
//
//   fuzz_seeds DIR   writes DIR/schedule_csv/*.csv, DIR/cost_profile/*.yaml and
//                    DIR/runs_file/*.json (the folders must exist)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "schedules/csv.h"
#include "schedules/generators.h"
#include "sim/cost/cost_profile.h"
#include "sim/fit/runs_file.h"

namespace ppsim {
namespace {

namespace fs = std::filesystem;

bool write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

// Small shapes, so that the mutated seeds stay small and fast: each kind at
// (p, m, v, slices, step_every) its generator accepts.
std::vector<Schedule> schedules() {
  std::vector<Schedule> all;
  for (ScheduleKind kind : generated_schedule_kinds()) {
    for (const ScheduleParams& params :
         {ScheduleParams{2, 4, 2, 2, 4}, ScheduleParams{4, 8, 2, 2, 4}}) {
      ScheduleParams p = params;
      p.virtual_stages = fixed_virtual_stages(kind).value_or(p.virtual_stages);
      if (kind != ScheduleKind::kTeraPipe) p.slices = 1;
      Result<Schedule> s = make_schedule(kind, p);
      if (s.ok()) all.push_back(std::move(*s));
    }
  }
  return all;
}

KernelSample kernel(KernelKind kind, KernelPart part, int tokens, int context, double s) {
  KernelSample k;
  k.kind = kind;
  k.part = part;
  k.micro_batch = 1;
  k.tokens = tokens;
  k.context = context;
  k.hidden = 1024;
  k.tensor = 1;
  if (k.part == KernelPart::kBlock) {
    k.ffn = 4096;
    k.heads = 16;
  } else {
    k.vocab = 32000;
  }
  k.median_s = s;
  k.min_s = 0.9 * s;
  k.max_s = 1.1 * s;
  k.repetitions = 5;
  return k;
}

std::vector<CostProfile> profiles() {
  CostProfile v2;
  v2.provenance = {"node-7", "Xeon \"Gold\"", "Release", "2025-01-01T00:00:00Z", "ppsim-profile", 5,
                   1};
  for (const KernelKind kind : kLayerKernelKinds) {
    v2.kernels.push_back(kernel(kind, KernelPart::kBlock, 512, 0, 1e-3));
    v2.kernels.push_back(kernel(kind, KernelPart::kBlock, 512, 512, 2e-3));
  }
  v2.kernels.front().activation_bytes = 1 << 20;
  v2.kernels.front().weight_grad_bytes = 1 << 21;
  v2.kernels.push_back(kernel(KernelKind::kOptimizerStep, KernelPart::kBlock, 512, 0, 5e-4));
  v2.kernels.push_back(kernel(KernelKind::kForward, KernelPart::kEmbedding, 512, 0, 1e-4));
  v2.kernels.push_back(kernel(KernelKind::kForward, KernelPart::kHead, 512, 0, 3e-4));
  v2.kernels.push_back(kernel(KernelKind::kBackward, KernelPart::kHead, 512, 0, 6e-4));
  v2.links = {{"nvlink", 3e-6, 1.8e11, {{65536, 3.5e-6}, {16777216, 9.6e-5}}},
              {"thread-copy", 1e-6, 1e10, {}}};
  Calibration calibration;
  calibration.forward = KindCalibration{1.1, 1e-5};
  calibration.backward_input = KindCalibration{0.9, 0};
  calibration.optimizer_step = KindCalibration{1, 2e-4};
  calibration.link = LinkCalibration{2e-6, 5e10};
  v2.calibration = calibration;

  CostProfile v1;  // blocks only, no calibration
  v1.version = 1;
  v1.provenance.tool = "ppsim-profile";
  v1.kernels = {kernel(KernelKind::kForward, KernelPart::kBlock, 256, 0, 1e-3),
                kernel(KernelKind::kBackward, KernelPart::kBlock, 256, 0, 2e-3)};
  v1.links = {{"nccl", 1e-5, 2e10, {{1024, 1e-5}, {1 << 20, 6e-5}}}};
  return {v2, v1};
}

// One run per schedule: every action with made-up times, a transfer for each
// stage boundary of microbatch 0, and a step per rank.
RunsFile runs_file(const std::vector<Schedule>& from) {
  RunsFile file;
  file.config = "../configs/validate/cpu-small.yaml";
  file.sets = {"training.global_batch=4", "schedule.kind=1f1b"};
  file.profile = "runs.profile.yaml";
  file.backend = "threads";
  for (const Schedule& s : from) {
    RunPair run;
    run.schedule = s.name;
    run.predicted_iteration_s = 0.75;
    run.measured_iteration_s = 0.73;
    std::vector<int32_t> forward0;  // record index of F(mb 0, stage) per stage
    forward0.assign(s.num_stages, -1);
    for (int rank = 0; rank < s.num_ranks; ++rank) {
      for (const Action& a : s.programs[rank]) {
        const auto index = static_cast<int32_t>(run.actions.size());
        if (a.kind == ActionKind::kForward && a.microbatch == 0 && a.slice == 0)
          forward0[a.stage] = index;
        run.actions.push_back({index, a, rank, 0.01 + 1e-4 * index, 0.0102 + 1e-4 * index});
      }
      run.steps.push_back({rank, 0.002, 0.0021});
    }
    for (int stage = 1; stage < s.num_stages; ++stage) {
      if (forward0[stage - 1] >= 0 && forward0[stage] >= 0)
        run.transfers.push_back({forward0[stage - 1], forward0[stage], 262144, 3.1e-5, 4.4e-5});
    }
    file.runs.push_back(std::move(run));
  }
  return file;
}

int run(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  bool ok = true;
  const std::vector<Schedule> all = schedules();
  for (size_t i = 0; i < all.size(); ++i) {
    ok &= write(dir / "schedule_csv" / (all[i].name + "-" + std::to_string(i) + ".csv"),
                schedule_to_csv(all[i]));
  }
  const std::vector<CostProfile> profs = profiles();
  for (size_t i = 0; i < profs.size(); ++i) {
    ok &= write(dir / "cost_profile" / ("profile-" + std::to_string(i) + ".yaml"),
                profile_to_yaml(profs[i]));
  }
  // A file per 2-rank schedule (a few KB each; the harness's max_len is
  // 8 KB), and one with two runs.
  std::vector<Schedule> small;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].num_ranks != 2) continue;
    ok &= write(dir / "runs_file" / ("runs-" + std::to_string(i) + ".json"),
                runs_to_json(runs_file({all[i]})));
    if (small.size() < 2) small.push_back(all[i]);
  }
  ok &= write(dir / "runs_file" / "runs-two.json", runs_to_json(runs_file(small)));
  if (!ok) std::fprintf(stderr, "fuzz_seeds: could not write under %s\n", dir.c_str());
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace ppsim

int main(int argc, char** argv) { return ppsim::run(argc, argv); }
