#!/usr/bin/env bash
# Regenerates the measured performance base embedded in tracecast from the public
# evidence in ../shared/evidence (README there: sources, licenses, how each number was
# read), followed by the HBM measurements this project recorded itself on GPUs it was lent
# (fixtures/h200: README there, and the script that made them): its HBM rows, and its GEMM
# timed under sustained load (below). Its GEMM sweep and attention
# rows are not shipped yet (BENCHMARKS.md, *Our own H200*): on XLA's grid the sweep runs a
# median 24 % faster than XLA's table of the same silicon (not the L2: with operands read
# from HBM it moved 1.8 %), and the pricing layer takes one table per GPU, so an H200 and an
# H100 would be priced by tables that disagree by that much; the attention rows change which
# GPU Blackwell's attention is carried from and four of the pricing layer's attention rules'
# premises (tests in calibrate/tests/pricing.rs), which want revisiting first. The rows are copied as
# they are: every row keeps its source_id and its `notes`, which name the source file,
# commit and line, or the recording script. The columns are checked, so a change of the
# evidence's format fails here rather than in the binary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
evidence="${1:-$here/../../../shared/evidence}"
recorded=("$here/../../fixtures/h200")
declare -A header=(
  [gemm]="source_id,gpu,dtype,batch,m,n,k,tflops,time_us,notes"
  [attention]="source_id,gpu,kernel,direction,causal,head_dim,seqlen,batch,heads,tflops,time_us,dtype,notes"
  [collectives]="source_id,gpu,collective,library,gpus,nodes,gpus_per_node,network,algo,size_bytes,time_us,algbw_gbps,busbw_gbps,in_place,notes"
  [memory]="source_id,gpu,metric,bandwidth_gbps,value_as_published,unit_as_published,tool,notes"
)
for table in gemm attention collectives memory; do
  src="$evidence/$table.csv"
  got="$(head -1 "$src" | tr -d '\r')"
  if [ "$got" != "${header[$table]}" ]; then
    echo "$src: columns changed: $got" >&2
    exit 1
  fi
  tmp="$(mktemp "$here/.$table.XXXXXX")"
  cp "$src" "$tmp"
  for dir in "${recorded[@]}"; do
    [ "$table" = memory ] || continue
    own="$dir/$table.csv"
    [ -f "$own" ] || continue
    got="$(head -1 "$own" | tr -d '\r')"
    if [ "$got" != "${header[$table]}" ]; then
      echo "$own: columns differ from the evidence's: $got" >&2
      exit 1
    fi
    tail -n +2 "$own" >>"$tmp"
  done
  chmod 644 "$tmp"
  mv "$tmp" "$here/$table.csv"
  echo "$table.csv: $(($(wc -l <"$here/$table.csv") - 1)) lines of rows"
done
# GEMMs timed under sustained load (fixtures/h200/gemm-sustained.csv: one training GEMM over
# 8 s back to back, the clock at the power limit) are not shapes of a table but the rate the
# silicon holds in a training step: shipped with `load = sustained`. The same file's timings
# after 2 s idle are what the tables measure already, and are left out.
own="${recorded[0]}/gemm-sustained.csv"
if [ "$(head -1 "$own" | tr -d '\r')" != "${header[gemm]}" ]; then
  echo "$own: columns differ from the evidence's GEMM table" >&2
  exit 1
fi
tmp="$(mktemp "$here/.gemm-sustained.XXXXXX")"
{
  echo "source_id,gpu,dtype,batch,m,n,k,tflops,time_us,load,notes"
  # The first nine columns hold no commas; `load` goes before the quoted notes.
  grep 'back to back' "$own" | awk '{ c = 0; for (i = 1; i <= length($0); i++) if (substr($0, i, 1) == "," && ++c == 9) break;
    print substr($0, 1, i) "sustained," substr($0, i + 1) }'
} >"$tmp"
chmod 644 "$tmp"
mv "$tmp" "$here/gemm-sustained.csv"
echo "gemm-sustained.csv: $(($(wc -l <"$here/gemm-sustained.csv") - 1)) lines of rows"
# The measured training runs (tokens/s per GPU with model, system and plan; each run keeps its
# source): `search` and `project` hold an MFU against the best run measured on the GPU's class.
# Copied as they are (the evidence's and the published validation runs' files).
for runs in "$evidence/training-runs.json" "$evidence/../validation/published-runs.json"; do
  name="$(basename "$runs")"
  tmp="$(mktemp "$here/.$name.XXXXXX")"
  cp "$runs" "$tmp"
  chmod 644 "$tmp"
  mv "$tmp" "$here/$name"
  echo "$name: $(grep -c '"measured"' "$here/$name") measured runs"
done
