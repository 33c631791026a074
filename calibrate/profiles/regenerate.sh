#!/usr/bin/env bash
# Regenerates the shipped calibration profiles (one per catalog GPU the public
# corpus covers) from ../shared/traces, each file its own job:
#   bash calibrate/profiles/regenerate.sh
# The profiles are embedded in the binary (calibrate/src/shipped.rs) and shown
# by `tracecast hw show ID`; replay --target, project and search use them when
# no --profile is given.
set -euo pipefail
cd "$(dirname "$0")/../.."
corpus=../shared/traces
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo build --release -q
# shellcheck disable=SC2046
target/release/tracecast calibrate --each -q $(find "$corpus" -name '*.json.gz' | sort) --out "$out/profile.json" || true
# The GPUs shipped.rs embeds; a profile of another GPU is reported, not written (shipping it
# is a change of its own: an entry in shipped.rs, and the projections it moves measured).
shipped=$(sed -n 's/^ *("\([a-z0-9-]*\)", include_str!.*/\1/p' calibrate/src/shipped.rs)
[ -n "$shipped" ] || { echo "regenerate.sh: no entries read from calibrate/src/shipped.rs (has its format changed?)" >&2; exit 1; }
for f in "$out"/profile.*.json; do
  id=${f##*/profile.}
  id=${id%.json}
  # Devices the catalog does not know cannot be projected onto.
  case "$id" in unknown*) continue ;; esac
  if ! grep -qx "$id" <<<"$shipped"; then
    echo "not shipped (no entry in calibrate/src/shipped.rs): $id" >&2
    continue
  fi
  cp "$f" "calibrate/profiles/$id.json"
  echo "calibrate/profiles/$id.json"
done
# A shipped GPU whose traces fit nothing now (MI210's and MI250's: a few small kernels each) gets
# no profile from `calibrate`, which writes none without a fit: its shipped file, of an earlier
# calibrate that kept a profile for the kernel floor alone, is kept and named here, so that a
# regeneration never passes over it in silence.
while read -r id; do
  [ -e "$out/profile.$id.json" ] && continue
  echo "calibrate/profiles/$id.json: not regenerated (nothing fitted from its traces); the shipped file is kept" >&2
done <<<"$shipped"
