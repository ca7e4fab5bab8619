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
echo "== GPT-3 1.3B on 8 A100s (p=4, t=2), 32 microbatches: five schedules =="
"$ppsim" compare "$config" --schedules gpipe,1f1b,interleaved-1f1b:2,zb-h1,zb-v \
  --report "$out/report.html" --csv "$out/compare.csv" --markdown "$out/compare.md"

echo
echo "== 1F1B in detail =="
"$ppsim" simulate "$config" --json "$out/1f1b.json" --trace "$out/1f1b.trace.json"

echo
echo "The report (tables, Gantt charts, memory over time) is $out/report.html:"
echo "open it in a browser, or render it: scripts/render_report.sh $out/report.html $out/report.png"
echo "The 1F1B trace is $out/1f1b.trace.json: open it at ui.perfetto.dev (Open trace file)."
