#!/usr/bin/env python3
"""Generation-to-generation speed-ups: measured against `tracecast validate`'s projection.

Pairs of runs in ../shared/evidence/training-runs.json and ../shared/validation/published-runs.json
that measure the same model with the same software stack (same source table and container, same
task and precision) on two GPUs; the speed-up is the ratio of tokens/s per GPU (each run keeps the
plan its source published for that GPU). The projection's attention and "the rest" are its
compute time in attention kernels and the iteration less that, per token per GPU.

usage: bench/generation_pairs.py TRACECAST_BINARY [--markdown]
"""
import json, re, subprocess, sys, tempfile, os, statistics

ORDER = ["a100-80gb", "h100-sxm", "h200", "b200", "gb200", "gb300"]
here = os.path.dirname(os.path.abspath(__file__))
shared = os.path.join(here, "..", "..", "shared")
files = [os.path.join(shared, "evidence", "training-runs.json"), os.path.join(shared, "validation", "published-runs.json")]


def validate(binary, path):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([binary, "validate", path, "--json", f.name], check=True, capture_output=True)
        return {r["id"]: r for r in json.load(open(f.name))["runs"]}


def key(run):
    """(stack, model, task, precision) of a run; None when it pairs with nothing."""
    rid, gpu = run["id"], run["system"]["gpu"]
    tok = {"h100-sxm": "h100", "a100-80gb": "a100-80gb"}.get(gpu, gpu)
    if rid.startswith("mb"):
        m = re.match(r"(mb[0-9.]+)-(.*)-" + re.escape(tok) + r"-(\d+)-(.*)$", rid)
        if not m:
            return None
        return (m.group(1), m.group(2), m.group(4).replace("-alt", "") + ("-alt" if rid.endswith("-alt") else ""))
    if rid.startswith("mpt-"):
        return ("llm-foundry", rid.split("-")[1], "bf16")
    return None


def main():
    binary = sys.argv[1]
    runs, proj = {}, {}
    for path in files:
        for r in json.load(open(path))["runs"]:
            runs[r["id"]] = r
        proj.update(validate(binary, path))
    groups = {}
    for rid, r in runs.items():
        k = key(r)
        if k and r["system"]["gpu"] in ORDER and rid in proj:
            groups.setdefault(k, []).append(r)
    rows = []
    for k, rs in sorted(groups.items()):
        rs.sort(key=lambda r: ORDER.index(r["system"]["gpu"]))
        for i, a in enumerate(rs):
            for b in rs[i + 1:]:
                if a["system"]["gpu"] == b["system"]["gpu"]:
                    continue
                pa, pb = proj[a["id"]], proj[b["id"]]
                if not (pa.get("predicted_tokens_per_s_per_gpu") and pb.get("predicted_tokens_per_s_per_gpu")):
                    continue
                meas = b["measured"]["tokens_per_s_per_gpu"] / a["measured"]["tokens_per_s_per_gpu"]
                whole = pb["predicted_tokens_per_s_per_gpu"] / pa["predicted_tokens_per_s_per_gpu"]
                # per token per GPU: time ∝ 1 / throughput; attention and the rest keep the iteration's share
                def parts(p):
                    it = p["times"]["iteration_ms"]
                    att = p["times"]["by_kind_ms"].get("attention", 0.0)
                    per = 1.0 / p["predicted_tokens_per_s_per_gpu"]
                    return att / it * per, (it - att) / it * per
                (aa, ra), (ab, rb) = parts(pa), parts(pb)
                # The source run's time the model does not explain (measured − projected, per
                # token per GPU), carried to the target unchanged: a cost of the stack, not the GPU.
                ma, pa_t, pb_t = 1 / a["measured"]["tokens_per_s_per_gpu"], 1 / pa["predicted_tokens_per_s_per_gpu"], 1 / pb["predicted_tokens_per_s_per_gpu"]
                carried = ma / (pb_t + max(0.0, ma - pa_t))
                rows.append((k, a, b, meas, whole, aa / ab, ra / rb, carried))
    md = "--markdown" in sys.argv
    if md:
        print("| stack | model | precision | from → to (GPUs) | measured | projected | error | attention | rest | source's unexplained time carried | error |")
        print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    errs, cerrs = [], []
    for k, a, b, meas, whole, att, rest, carried in rows:
        err = whole / meas - 1
        cerr = carried / meas - 1
        errs.append(abs(err))
        cerrs.append(abs(cerr))
        ga, gb = a["system"]["gpu"], b["system"]["gpu"]
        if md:
            print(f"| {k[0]} | {k[1]} | {k[2]} | {ga} ({a['system']['gpus']}) → {gb} ({b['system']['gpus']}) | {meas:.2f}× | {whole:.2f}× | {100*err:+.1f} % | {att:.2f}× | {rest:.2f}× | {carried:.2f}× | {100*cerr:+.1f} % |")
        else:
            print(f"{k[0]:12} {k[1]:28} {k[2]:10} {ga:>9}→{gb:<7} measured {meas:5.2f}  projected {whole:5.2f} ({100*err:+6.1f} %)  attention {att:5.2f}  rest {rest:5.2f}  carried {carried:5.2f} ({100*cerr:+6.1f} %)")
    if errs:
        print(f"\n{len(errs)} pairs: median |error| {100*statistics.median(errs):.1f} %, max {100*max(errs):.1f} %, "
              f"within 10 %: {sum(e <= 0.10 for e in errs)}; with the source's unexplained time carried: median {100*statistics.median(cerrs):.1f} %, "
              f"max {100*max(cerrs):.1f} %, within 10 %: {sum(e <= 0.10 for e in cerrs)}")


if __name__ == "__main__":
    main()
