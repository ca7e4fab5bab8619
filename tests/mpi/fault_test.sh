#!/usr/bin/env bash
# The MPI backend through `ppsim-run` under mpirun: a rank that throws ends
# the job with exit code 3 and "rank R, ACTION: what"; a rank killed with
# SIGKILL ends it too, named with its last action; a job of the wrong size
# is refused once; and a good run writes the threads backend's JSON summary.
# Every case must end within `timeout` (a hang fails).
#   fault_test.sh MPIEXEC PPSIM_RUN CONFIG [MPIEXEC ARGS...]
set -uo pipefail
mpiexec=$1 run=$2 config=$3
shift 3
launch=("$mpiexec" --oversubscribe "$@")
# A tiny model: the cases are about ending, not about speed.
model=(--force --set model.hidden=32 --set model.ffn_hidden=64 --set model.seq_len=16
       --set model.vocab=32 --set training.global_batch=8)
bound=60
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# expect NAME CODE (or "signal": killed, not timed out) TEXT... -- COMMAND...
expect() {
  local name=$1 code=$2
  shift 2
  local texts=()
  while [ "$1" != "--" ]; do texts+=("$1"); shift; done
  shift
  timeout "$bound" "$@" >"$out" 2>&1
  local rc=$?
  local ok=1
  if [ "$rc" -eq 124 ]; then
    echo "FAIL $name: still running after ${bound}s"; ok=0
  elif [ "$code" = "nonzero" ] && [ "$rc" -eq 0 ]; then
    echo "FAIL $name: exit code 0, expected nonzero"; ok=0
  elif [ "$code" != "nonzero" ] && [ "$rc" -ne "$code" ]; then
    echo "FAIL $name: exit code $rc, expected $code"; ok=0
  fi
  for t in "${texts[@]}"; do
    if ! grep -qF -- "$t" "$out"; then echo "FAIL $name: no '$t' in the output"; ok=0; fi
  done
  if [ "$ok" -eq 1 ]; then
    echo "ok   $name (exit code $rc)"
  else
    sed 's/^/    | /' "$out"
    failures=$((failures + 1))
  fi
}

expect "exception in a consumer" 3 "ppsim: error: rank 1, 1F3: injected failure" -- \
  "${launch[@]}" -np 2 "$run" "$config" --backend mpi "${model[@]}" --fail-at 1:1F3:1
expect "exception in the last action, the other rank at the barrier" 3 \
  "ppsim: error: rank 0, 0B3: injected failure" -- \
  "${launch[@]}" -np 2 "$run" "$config" --backend mpi "${model[@]}" --fail-at 0:0B3:0
expect "rank 1 killed" nonzero "ppsim: rank 1 died in 1F3 (iteration 1)" "rank 1" -- \
  "${launch[@]}" -np 2 "$run" "$config" --backend mpi "${model[@]}" --kill-at 1:1F3:1
expect "rank 0 killed" nonzero "ppsim: rank 0 died in 0F2 (iteration 0)" -- \
  "${launch[@]}" -np 2 "$run" "$config" --backend mpi "${model[@]}" --kill-at 0:0F2:0
expect "three processes for two ranks" 1 "schedule 1f1b has 2 ranks but this job has 3 processes" -- \
  "${launch[@]}" -np 3 "$run" "$config" --backend mpi "${model[@]}"
if [ "$(grep -c "this job has 3 processes" "$out")" -ne 1 ]; then
  echo "FAIL three processes for two ranks: the error is not reported exactly once"
  failures=$((failures + 1))
fi

# A good run: the summary of the threads backend, key for key, with the same
# (deterministic) peak activation bytes.
threads_json=$(timeout "$bound" "$run" "$config" "${model[@]}" --json -)
mpi_json=$(timeout "$bound" "${launch[@]}" -np 2 "$run" "$config" --backend mpi "${model[@]}" --json -)
if python3 - "$threads_json" "$mpi_json" <<'PY'
import json, sys
t, m = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def keys(v, path=""):
    if isinstance(v, dict):
        return {k for key, x in v.items() for k in keys(x, f"{path}.{key}")} | {path}
    if isinstance(v, list):
        return {k for x in v for k in keys(x, path + "[]")}
    return {path}
assert keys(t) == keys(m), keys(t) ^ keys(m)
peak = lambda s: [d["peak_activation_bytes"] for d in s["devices"]]
assert peak(t) == peak(m) and min(peak(m)) > 0, (peak(t), peak(m))
assert len(m["devices"]) == 2
PY
then
  echo "ok   a good run writes the threads backend's JSON summary"
else
  echo "FAIL a good run: JSON summaries differ"; echo "threads: $threads_json"; echo "mpi: $mpi_json"
  failures=$((failures + 1))
fi

[ "$failures" -eq 0 ]
