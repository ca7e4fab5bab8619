#!/usr/bin/env bash
# Fails on an #include that runs up the layers, on a main() outside a
# cli/ folder and tests/ (docs/DESIGN.md, "Layers"), and on a unit test
# file whose helpers are not in a namespace of its own. The layers, lowest
# first: schedules, sim/core, sim/config, sim/cost, sim/engine, sim/plan,
# sim/report, sim/fit, sim/cli, profiler, real_runtime, real_runtime/cli. A
# file may include its own layer and those below it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# The layer of a path, as a number.
layer() {
  case $1 in
    schedules/*) echo 0 ;;
    sim/core/*) echo 1 ;;
    sim/config/*) echo 2 ;;
    sim/cost/*) echo 3 ;;
    sim/engine/*) echo 4 ;;
    sim/plan/*) echo 5 ;;
    sim/report/*) echo 6 ;;
    sim/fit/*) echo 7 ;;
    sim/cli/*) echo 8 ;;
    profiler/*) echo 9 ;;
    real_runtime/cli/*) echo 11 ;;
    real_runtime/*) echo 10 ;;
    *) echo -1 ;;
  esac
}

status=0
while IFS= read -r file; do
  own=$(layer "$file")
  while IFS=: read -r line included; do
    theirs=$(layer "$included")
    if (( theirs > own )); then
      echo "$file:$line: includes $included, a layer above its own" >&2
      status=1
    fi
  done < <(grep -noE '^#include "[a-z_]+/[^"]+"' "$file" | sed -E 's/:#include "/:/; s/"$//')
done < <(git ls-files -co --exclude-standard -- schedules sim profiler real_runtime |
         grep -E '\.(h|cc|cu|cuh)$')

# Every source under sim/ belongs to one of its sub-libraries.
while IFS= read -r file; do
  echo "$file: in sim/ itself; put it in the sub-library it belongs to" >&2
  status=1
done < <(git ls-files -co --exclude-standard -- 'sim/*' | grep -E '^sim/[^/]+\.(h|cc)$' || true)

while IFS= read -r file; do
  case $file in
    */cli/*|tests/*) ;;
    *) echo "$file: a main() outside a cli/ folder and tests/" >&2; status=1 ;;
  esac
done < <(git ls-files -co --exclude-standard | grep -E '\.(cc|cu)$' |
         xargs grep -lE '^int main\(' 2>/dev/null || true)

# The unit tests compile several files to a compiler run (a unity build,
# tests/CMakeLists.txt): each file's helpers go in a namespace named after
# the file, so that two files' helpers never collide.
while IFS= read -r file; do
  stem=$(basename "$file" .cc)
  grep -qE "^namespace ([a-z_:]+::)?$stem \{" "$file" ||
    { echo "$file: put its tests and helpers in namespace $stem (tests/CMakeLists.txt, unity build)" >&2; status=1; }
done < <(git ls-files -co --exclude-standard -- 'tests/unit/*_test.cc')

if (( status == 0 )); then
  echo "layers: every include runs down, every main is in a cli/ folder, every unit test file in its own namespace"
fi
exit $status
