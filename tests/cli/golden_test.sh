#!/usr/bin/env bash
# CLI golden tests, in the spirit of SimGrid's tesh: run ppsim, compare its
# stdout (or stderr) and exit code with files in tests/cli/expected/. Every
# expected figure comes from a hand calculation written next to it in
# tests/cli/README.md, never from the program's own output.
# usage: golden_test.sh PPSIM TESTS_CLI_DIR
set -uo pipefail
ppsim=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
dir=$(cd "$2" && pwd)
root=$(cd "$dir/../.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passed=0

# check NAME EXPECTED_CODE STREAM(stdout|stderr) -- ARGS...
check() {
  local name=$1 code=$2 stream=$3
  shift 4
  "$ppsim" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local got=$?
  if [ "$got" -ne "$code" ]; then
    echo "FAIL $name: exit code $got, expected $code"; cat "$tmp/stderr"
    failures=$((failures + 1)); return
  fi
  if ! diff -u "$dir/expected/$name.txt" "$tmp/$stream" >"$tmp/diff"; then
    echo "FAIL $name: $stream differs from expected/$name.txt"; cat "$tmp/diff"
    failures=$((failures + 1)); return
  fi
  passed=$((passed + 1))
}

ideal=configs/examples/ideal.yaml
check simulate_ideal 0 stdout -- simulate "$ideal"
check simulate_ideal_gpipe 0 stdout -- simulate "$ideal" --set schedule.kind=gpipe
check schedule_ideal 0 stdout -- schedule "$ideal"
check schedule_interleaved 0 stdout -- schedule "$ideal" --set schedule.kind=interleaved-1f1b \
  --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set training.global_batch=4
check simulate_custom 0 stdout -- simulate configs/examples/custom.yaml
check error_custom_shape 1 stderr -- simulate configs/examples/custom.yaml --set training.global_batch=2
check compare_ideal 0 stdout -- compare "$ideal" --schedules gpipe,1f1b,interleaved-1f1b
check compare_zero_bubble 0 stdout -- compare configs/examples/zero-bubble.yaml \
  --schedules 1f1b,zb-h1,zb-h2,terapipe:4,pipedream,pipedream-2bw
check error_bad_set 1 stderr -- simulate "$ideal" --set parallel.pipeline=0
check error_unknown_key 1 stderr -- simulate tests/cli/bad_unknown_key.yaml
check error_interleaved_m 1 stderr -- simulate "$ideal" --set schedule.kind=interleaved-1f1b \
  --set parallel.virtual_stages=2 --set training.global_batch=6
check error_ops_without_model 1 stderr -- simulate "$ideal" --ops
check error_sensitivity_without_model 1 stderr -- simulate "$ideal" --sensitivity
check error_no_command 2 stderr -- frobnicate
check error_calibrate_not_runs 1 stderr -- calibrate tests/cli/bad_unknown_key.yaml
check error_calibrate_no_runs 2 stderr -- calibrate
check error_calibrate_gemms_no_hardware 2 stderr -- calibrate \
  --gemms configs/microbench/h800-gemm-k-sweep.csv
check error_calibrate_gemms_dtype 2 stderr -- calibrate \
  --gemms configs/microbench/h800-gemm-k-sweep.csv --hardware h100-sxm --dtype fp8
check error_calibrate_memory_no_hardware 2 stderr -- calibrate --memory memory.csv
check error_validate_no_dir 1 stderr -- validate configs/validate/cpu-small.yaml \
  --runs-out no-such-dir/runs.json
check error_validate_one_iteration 1 stderr -- validate configs/validate/cpu-small.yaml \
  --warmup 0 --iterations 1
check error_validate_recompute 1 stderr -- validate configs/validate/cpu-small.yaml \
  --set training.recompute=full
check error_run_no_dir 1 stderr -- run configs/validate/cpu-small.yaml --trace no-such-dir/t.json
check error_profile_no_dir 1 stderr -- profile configs/validate/cpu-small.yaml \
  -o no-such-dir/p.yaml

# JSON: the fields DESIGN.md promises, with the closed-form values.
"$ppsim" simulate "$ideal" --json - >"$tmp/summary.json" 2>"$tmp/stderr"
if python3 - "$tmp/summary.json" <<'PY'; then passed=$((passed + 1)); else echo "FAIL json"; failures=$((failures + 1)); fi
import json, sys
s = json.load(open(sys.argv[1]))
# p=4, m=8, tf=1 s, tb=2 s: (m+p-1)(tf+tb) = 33 s; busy 8*3 = 24 s per rank.
assert s["schedule"] == "1f1b", s
assert abs(s["iteration_time_s"] - 33.0) < 1e-9, s
assert abs(s["bubble_fraction"] - (1 - 4 * 24 / (4 * 33))) < 1e-12, s
assert abs(s["throughput"]["samples_per_s"] - 8 / 33) < 1e-12, s
for key in ("tokens_per_s", "tflops_per_gpu", "mfu"):
    assert key in s["throughput"], key
assert [d["rank"] for d in s["devices"]] == [0, 1, 2, 3]
# 1F1B keeps min(p - i, m) microbatches of 1e9 bytes on rank i.
assert [d["peak_activation_bytes"] for d in s["devices"]] == [4e9, 3e9, 2e9, 1e9]
assert all(d["peak_memory_bytes"] == d["peak_activation_bytes"] for d in s["devices"])
assert all(abs(d["busy_s"] - 24.0) < 1e-9 for d in s["devices"])
PY

# --sensitivity with --json: the probes in the summary, at the summary's own
# iteration time, each within its parameter's bounds; the GEMM efficiency,
# on every layer's critical path, moves the run both ways.
"$ppsim" simulate configs/examples/gpt3-1.3b-8gpu.yaml --sensitivity --json - \
  >"$tmp/sensitivity.json" 2>"$tmp/stderr"
if python3 - "$tmp/sensitivity.json" <<'PY'; then passed=$((passed + 1)); else echo "FAIL sensitivity json"; failures=$((failures + 1)); fi
import json, sys
s = json.load(open(sys.argv[1]))
t = s["sensitivity"]
assert t["iteration_time_s"] == s["iteration_time_s"], (t["iteration_time_s"], s["iteration_time_s"])
names = [p["name"] for p in t["parameters"]]
assert names == ["max_gemm_efficiency", "hbm_efficiency", "kernel_launch_us",
                 "intra_node_collective_efficiency", "inter_node_collective_efficiency",
                 "flash_forward_efficiency", "flash_backward_efficiency",
                 "gemm_tile_k_overhead", "flash_key_overhead", "action_overhead_us"], names
assert all(p["lower"] <= p["value"] <= p["upper"] for p in t["parameters"])
gemm = t["parameters"][0]
assert gemm["lower_iteration_time_s"] > t["iteration_time_s"] > gemm["upper_iteration_time_s"], gemm
PY

# An independent implementation: the plain Python event simulator of
# tests/bench/python_reference_1f1b.py and ppsim agree on the uneven 1F1B
# case of docs/benchmarks.md (64 ranks, 1024 microbatches, transfers).
"$ppsim" simulate tests/bench/uneven64.yaml --json - >"$tmp/uneven.json" 2>"$tmp/stderr"
if python3 - "$tmp/uneven.json" <<'PY'; then passed=$((passed + 1)); else echo "FAIL python reference"; failures=$((failures + 1)); fi
import json, subprocess, sys
s = json.load(open(sys.argv[1]))
out = subprocess.run([sys.executable, "tests/bench/python_reference_1f1b.py",
                      "tests/bench/uneven64.yaml"], capture_output=True, text=True, check=True)
reference = float(out.stdout.split()[1])
assert abs(s["iteration_time_s"] - reference) <= 1e-9 * reference, (s["iteration_time_s"], reference)
PY

# Trace: valid JSON with a process per rank and every action once.
"$ppsim" simulate "$ideal" --trace "$tmp/trace.json" >/dev/null 2>&1
if python3 - "$tmp/trace.json" <<'PY'; then passed=$((passed + 1)); else echo "FAIL trace"; failures=$((failures + 1)); fi
import json, sys
t = json.load(open(sys.argv[1]))["traceEvents"]
names = [e for e in t if e["ph"] == "M" and e["name"] == "process_name"]
assert sorted(e["args"]["name"] for e in names) == ["rank 0", "rank 1", "rank 2", "rank 3"]
compute = [e for e in t if e["ph"] == "X" and e["cat"] in "FBIW"]
iterations = sorted({e["args"]["iteration"] for e in compute})
assert iterations == list(range(len(iterations))) and iterations, iterations
for k in iterations:  # p ranks x m microbatches x (F, B)
    assert sum(e["args"]["iteration"] == k for e in compute) == 4 * 8 * 2
flows = [e for e in t if e["ph"] in "sf"]
# (s, f) x (act, grad) x 3 boundaries x m, per iteration
assert len(flows) == 2 * 2 * 3 * 8 * len(iterations), len(flows)
assert any(e["ph"] == "C" for e in t)
PY

# Report: well-formed XML, one Gantt per schedule that ran with one row per
# rank, and the table's exact numbers equal to the JSON's.
"$ppsim" compare configs/examples/zero-bubble.yaml --schedules 1f1b,zb-h1,zb-h2,terapipe \
  --report "$tmp/report.html" --json "$tmp/compare.json" >/dev/null 2>&1
if python3 - "$tmp/report.html" "$tmp/compare.json" <<'PY'; then passed=$((passed + 1)); else echo "FAIL report"; failures=$((failures + 1)); fi
import json, sys
import xml.etree.ElementTree as ET
ns = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()  # raises on malformed XML
results = json.load(open(sys.argv[2]))["results"]
ran = [r for r in results if r["summary"]]
assert [r["entry"] for r in ran] == ["1f1b", "zb-h1", "zb-h2"], ran  # terapipe has no slices
gantts = root.findall(".//s:svg[@class='gantt']", ns)
assert [g.get("data-schedule") for g in gantts] == ["1f1b", "zb-h1", "zb-h2"]
for g in gantts:
    assert len(g.findall(".//s:g[@class='rank']", ns)) == 4  # p = 4
for r in ran:
    row = root.find(f".//h:tr[@data-entry='{r['entry']}']", ns)
    for field in ("iteration_time_s", "bubble_fraction"):
        cell = row.find(f".//*[@data-field='{field}']", ns)
        assert float(cell.get("data-value")) == r["summary"][field], (field, cell.get("data-value"))
PY
if command -v xmllint >/dev/null; then
  if xmllint --noout "$tmp/report.html"; then passed=$((passed + 1)); else echo "FAIL xmllint"; failures=$((failures + 1)); fi
fi

# --version says the version CMakeLists.txt's project() declares.
version=$(sed -nE 's/^project\(ppsim VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)
if [ -n "$version" ] && [ "$("$ppsim" --version)" = "ppsim $version" ]; then
  passed=$((passed + 1))
else
  echo "FAIL version: $("$ppsim" --version) is not ppsim ${version:-(none in CMakeLists.txt)}"
  failures=$((failures + 1))
fi

# ppsim run: the schedule runs for real (a tiny model) and reports in the
# simulate summary's format.
"$ppsim" run configs/validate/cpu-small.yaml --set model.hidden=32 --set model.ffn_hidden=64 \
  --set model.seq_len=16 --set model.vocab=32 --iterations 2 --json "$tmp/run.json" >/dev/null 2>&1
if python3 - "$tmp/run.json" <<'PY'; then passed=$((passed + 1)); else echo "FAIL run"; failures=$((failures + 1)); fi
import json, sys
s = json.load(open(sys.argv[1]))
assert s["schedule"] == "1f1b", s
assert s["iterations_simulated"] == 2 and s["iteration_time_s"] > 0, s
assert [d["rank"] for d in s["devices"]] == [0, 1]
assert all(d["peak_activation_bytes"] > 0 and d["busy_s"] > 0 for d in s["devices"])
assert 0 <= s["bubble_fraction"] < 1
PY

echo "cli golden: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
