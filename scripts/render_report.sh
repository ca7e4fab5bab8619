#!/usr/bin/env bash
# Renders an HTML report (sim/html_report.h) to a PNG with headless Chromium,
# to look at a report without a desktop or to attach one to an issue:
#   scripts/render_report.sh REPORT.html OUT.png [HEIGHT]
# HEIGHT is the window height in pixels (the screenshot is the window, not
# the whole page); by default it is estimated from the report's charts,
# table and config. Installs Debian's `chromium` when it is missing (as root
# or with sudo). Chromium runs with no network and a fresh temporary profile.
set -euo pipefail

die() {
  echo "render_report: error: $*" >&2
  exit 1
}

[ $# -ge 2 ] && [ $# -le 3 ] || {
  echo "usage: $0 REPORT.html OUT.png [HEIGHT]" >&2
  exit 2
}
report=$1
out=$2
[ -f "$report" ] || die "no such report: $report"
[ -r "$report" ] || die "cannot read $report"
report_abs=$(cd "$(dirname "$report")" && pwd)/$(basename "$report")
out_dir=$(dirname "$out")
[ -d "$out_dir" ] || die "no such directory for the PNG: $out_dir"
out_abs=$(cd "$out_dir" && pwd)/$(basename "$out")
case "$out_abs" in *.png) ;; *) die "the output must end in .png: $out" ;; esac

if ! command -v chromium >/dev/null 2>&1; then
  echo "render_report: installing chromium (Debian package)" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "chromium is missing and installing it needs root or sudo"
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq || die "apt-get update failed"
  $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null ||
    die "apt-get install chromium failed"
  command -v chromium >/dev/null 2>&1 || die "chromium is still missing after installing it"
fi

width=1400
if [ $# -eq 3 ]; then
  height=$3
  [[ "$height" =~ ^[0-9]+$ ]] && [ "$height" -ge 100 ] || die "HEIGHT must be a number of pixels >= 100, got \"$height\""
else
  # The charts' own heights, a row per table row and per config line, and
  # headings and captions between them; at 1400 px the 1280 px charts are
  # drawn at their natural size.
  svg_px=$(grep -o '<svg [^>]*height="[0-9]*"' "$report" | grep -o 'height="[0-9]*"' |
    tr -dc '0-9\n' | awk '{s += $1 + 16} END {print s + 0}')
  rows=$(grep -c '<tr' "$report" || true)
  config_lines=$(sed -n '/<pre class="config">/,/<\/pre>/p' "$report" | wc -l)
  blocks=$(grep -c -E '<h[123]|<p class=' "$report" || true)
  height=$((svg_px + rows * 27 + config_lines * 17 + blocks * 40 + 160))
fi
# Chromium does not draw windows much taller than this.
[ "$height" -le 16000 ] || height=16000

profile=$(mktemp -d "${TMPDIR:-/tmp}/render_report.XXXXXX")
trap 'rm -rf "$profile"' EXIT
rm -f "$out_abs"

# No network: in a network namespace of its own when the system allows one,
# and in any case with every host name unresolvable and no proxy to reach.
netns=()
if command -v unshare >/dev/null 2>&1 && unshare --net true 2>/dev/null; then
  netns=(unshare --net)
fi
log=$profile/chromium.log
if ! timeout 180 "${netns[@]}" chromium --headless --no-sandbox --disable-gpu \
  --user-data-dir="$profile" --no-first-run --no-default-browser-check \
  --disable-background-networking --disable-component-update --disable-sync \
  --disable-default-apps --disable-extensions --host-resolver-rules='MAP * ~NOTFOUND' \
  --proxy-server='127.0.0.1:9' --hide-scrollbars --force-device-scale-factor=1 \
  --window-size="$width,$height" --screenshot="$out_abs" "file://$report_abs" >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  die "chromium failed to render $report (log above)"
fi
[ -s "$out_abs" ] || {
  tail -n 20 "$log" >&2
  die "chromium wrote no screenshot to $out_abs (log above)"
}
echo "render_report: wrote $out_abs (${width}x${height})"
