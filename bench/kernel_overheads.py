#!/usr/bin/env python3
"""Per-kernel overheads in real traces: the host's launch call and the device's gap between kernels.

For each Kineto trace given: the median duration of the runtime/driver launch calls, the median
idle gap on one stream between consecutive kernels when the next kernel was launched before the
previous one ended (queued: the gap is the device's own per-kernel cost, not the host's), and the
10th percentile of kernel durations. Prints file names and numbers only.

usage: bench/kernel_overheads.py TRACE.json.gz ...
"""
import gzip, json, statistics, sys


def overheads(path):
    d = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    launches = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "aunch" in e.get("name", "")]
    kernels = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
    by_corr = {e["args"]["correlation"]: e for e in launches if "correlation" in e.get("args", {})}
    streams = {}
    for k in kernels:
        streams.setdefault((k.get("pid"), k.get("tid")), []).append(k)
    gaps = []
    for ks in streams.values():
        ks.sort(key=lambda e: e["ts"])
        for a, b in zip(ks, ks[1:]):
            launch = by_corr.get(b.get("args", {}).get("correlation"))
            end = a["ts"] + a["dur"]
            if launch is not None and launch["ts"] + launch["dur"] < end <= b["ts"]:
                gaps.append(b["ts"] - end)
    durs = sorted(k["dur"] for k in kernels)
    med = lambda v: statistics.median(v) if v else float("nan")
    return len(kernels), med([e["dur"] for e in launches]), med(gaps), len(gaps), durs[len(durs) // 10] if durs else float("nan")


for path in sys.argv[1:]:
    n, launch, gap, n_gaps, p10 = overheads(path)
    print(f"{path.split('/')[-1]:60} kernels {n:6}  launch call {launch:5.2f} us  queued gap {gap:5.2f} us (n={n_gaps})  p10 kernel {p10:6.2f} us")
