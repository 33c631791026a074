#!/usr/bin/env bash
# Renders the demo job's report and takes the README's screenshot of it in
# headless Chromium (Debian's `chromium`): docs/report.png.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/screenshot
rm -rf "$out" && mkdir -p "$out"
cargo run --quiet -- report fixtures/demo --scale link=2 --job-gpus 1024 --job-hours 24 --quiet --out "$out/report.html"
chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$out/profile" \
  --window-size=1200,1500 --screenshot="$PWD/docs/report.png" "file://$PWD/$out/report.html" 2>/dev/null
# The explorable timeline of a real trace (H100 TimeSformer), as the page's
# self-test leaves it: the step's longest kernel searched for and highlighted.
trace=../shared/traces/tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz
cargo run --quiet -- report "$trace" --quiet --out "$out/timesformer.html"
chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$out/profile2" \
  --window-size=1200,900 --screenshot="$PWD/docs/timeline.png" "file://$PWD/$out/timesformer.html#selftest" 2>/dev/null
echo "wrote docs/report.png docs/timeline.png"
