#!/usr/bin/env bash
# Installs what is missing, builds, and compares schedules on a shipped config.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build" Release
ppsim="$root/build/bin/ppsim"
config="$root/configs/examples/gpt3-1.3b-8gpu.yaml"
out="$root/out/demo"
mkdir -p "$out"

echo
echo "== GPT-3 1.3B on 8 A100s (p=4, t=2), 32 microbatches: three schedules =="
for kind in gpipe 1f1b interleaved-1f1b; do
  extra=()
  [ "$kind" = interleaved-1f1b ] && extra=(--set parallel.virtual_stages=2)
  echo
  echo "-- $kind"
  "$ppsim" simulate "$config" --set schedule.kind="$kind" "${extra[@]}" \
    --json "$out/$kind.json" --trace "$out/$kind.trace.json"
done
echo
echo "Summaries (JSON) and Chrome traces are in $out/"
echo "Open a trace, e.g. $out/1f1b.trace.json, at ui.perfetto.dev (Open trace file)."
