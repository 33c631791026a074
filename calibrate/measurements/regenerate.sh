#!/usr/bin/env bash
# Regenerates the measured performance base embedded in tracecast from the public
# evidence in ../shared/evidence (README there: sources, licenses, how each number was
# read). The rows are copied as they are: every row keeps its source_id and its
# `notes`, which name the source file, commit and line. The columns are checked, so a
# change of the evidence's format fails here rather than in the binary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
evidence="${1:-$here/../../../shared/evidence}"
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
  chmod 644 "$tmp"
  mv "$tmp" "$here/$table.csv"
  echo "$table.csv: $(($(wc -l <"$here/$table.csv") - 1)) lines of rows"
done
