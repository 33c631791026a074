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
echo "wrote docs/report.png"
