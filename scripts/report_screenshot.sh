#!/usr/bin/env bash
# A screenshot of the HTML report, to look at what a user sees: the report of TRACE at BUDGET,
# rendered by headless Chromium (Debian's chromium) into OUT.png, the page cut to its first HEIGHT
# pixels (the resident-bytes charts). No network: the report is one self-contained file.
#   bash scripts/report_screenshot.sh [TRACE] [BUDGET] [OUT.png] [HEIGHT]
set -euo pipefail
trace=${1:-samples/traces/gpt-1.3b.vctrace}
budget=${2:-12G}
out=${3:-report.png}
height=${4:-1400}
build=${BUILD:-build}
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || { echo "report_screenshot: $chromium not found (apt-get install chromium)" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/vramcache" report --budget "$budget" -o "$tmp/report.html" "$trace" >/dev/null
# --no-sandbox: run as root in a container; the page is our own file and runs no script.
"$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/profile" \
  --window-size=1140,"$height" --screenshot="$out" "file://$tmp/report.html" >/dev/null 2>&1
[ -s "$out" ] || { echo "report_screenshot: no screenshot written" >&2; exit 1; }
echo "report_screenshot: $out"
