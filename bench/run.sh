#!/usr/bin/env bash
# Ingest + breakdown throughput and peak memory, next to `gzip -dc` of the same files.
# Usage: bench/run.sh [FILE...]   (default: the largest traces of ../shared/traces and a generated ~500 MB trace)
# With HTA_PYTHON set to the python of a venv holding HolisticTraceAnalysis 0.5, HTA is timed on the
# real traces too (one run each: it takes seconds).
# Results go to stdout as a Markdown table; BENCHMARKS.md records a run and the method.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p tracecast-ingest --example analyze_file
cargo build -q --bin tracecast
bin=target/release/examples/analyze_file
gen=target/bench-data
mkdir -p "$gen"
if [ ! -f "$gen/synth-500mb.json.gz" ]; then
  target/debug/tracecast synth --out "$gen/synth" --ranks 1 --steps 600 --layers 64 --plain >/dev/null
  mv "$gen/synth/rank-0.json" "$gen/synth-500mb.json"
  gzip -6 -c "$gen/synth-500mb.json" > "$gen/synth-500mb.json.gz"
fi
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=(
    ../shared/traces/tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz
    ../shared/traces/tracelens/mi300/google_owlv2-large-patch14-ensemble__1016001.json.gz
    ../shared/traces/hta/mtia_trace_single_rank/mtia_rank_0.json.gz
    ../shared/traces/hta/df_index_resolver/df_index_resolver.json.gz
    ../shared/traces/tracelens/inference/xdit_flux.1/split_traces/profile_trace_rank_0_annotation_iteration_0_execute_diffusion_1_256x256.json.gz
    "$gen/synth-500mb.json.gz"
    "$gen/synth-500mb.json"
  )
fi
best() { # best of 3 wall-clock seconds and the peak RSS (MiB) of that run
  local best_s=999999 best_kb=0
  for _ in 1 2 3; do
    local out
    out=$( { /usr/bin/time -f "%e %M" "$@" >/dev/null; } 2>&1 | tail -1)
    local s=${out% *} kb=${out#* }
    if awk "BEGIN{exit !($s < $best_s)}"; then best_s=$s; best_kb=$kb; fi
  done
  echo "$best_s $((best_kb / 1024))"
}
echo "| file | JSON MB | gzip -dc s | tracecast s | tracecast MB/s | peak MiB | HTA 0.5 s | HTA peak MiB | speedup |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for f in "${files[@]}"; do
  mb=$("$bin" "$f" | sed 's/.*json_mb=\([0-9.]*\).*/\1/')
  if [ "$(head -c 2 "$f" | od -An -tx1 | tr -d ' ')" = "1f8b" ]; then
    read -r gz_s _ < <(best sh -c "gzip -dc '$f' > /dev/null")
  else
    gz_s="-"
  fi
  read -r tc_s tc_mib < <(best "$bin" "$f")
  rate=$(awk "BEGIN{printf \"%.0f\", $mb / ($tc_s > 0 ? $tc_s : 0.01)}")
  hta_s="-" hta_mib="-" speedup="-"
  if [ -n "${HTA_PYTHON:-}" ] && [[ "$f" == ../shared/* ]]; then
    mem=$(mktemp)
    hta_s=$(/usr/bin/time -f "%M" -o "$mem" "$HTA_PYTHON" bench/hta_baseline.py "$f" 2>/dev/null | sed -n 's/^hta_s=//p')
    hta_mib=$(( $(tail -1 "$mem") / 1024 ))
    rm -f "$mem"
    speedup=$(awk "BEGIN{printf \"%.0f×\", $hta_s / ($tc_s > 0 ? $tc_s : 0.01)}")
  fi
  echo "| $(basename "$f") | $mb | $gz_s | $tc_s | $rate | $tc_mib | $hta_s | $hta_mib | $speedup |"
done
