#!/usr/bin/env python3
"""Ingest the rank traces of one job into a tracecast dataset on a Dask cluster.

Each worker runs `tracecast ingest` on a share of the rank files and writes
its part files into the one dataset directory (parts are written atomically,
so the shares never see each other's half-written files). The job-level
reduce (matching collectives across ranks, clock alignment, totals) then runs
on one machine when any tracecast command reads the dataset:

    python distributed/dask_ingest.py --scheduler local:4 --out DATASET traces/
    tracecast analyze DATASET

On a real cluster, `--scheduler tcp://HOST:8786`; the trace files and DATASET
must be at the same path on every worker (a shared filesystem, or an object
store mounted there), and `tracecast` must be on the workers' PATH (or give
`--tracecast /path/on/the/workers/tracecast`). Ranks are taken from each
file's distributedInfo or its name (`rank-N`); files whose rank would only
come from their position among all files must be ingested in one run.
Nsight Systems exports (`*.sqlite`) hold one rank per process and GPU,
numbered by their place among the job's exports, so all of a job's exports
go to one share (one `tracecast ingest` run), in the order given.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

TRACE_SUFFIXES = (".json", ".json.gz", ".gz", ".sqlite")
SQLITE_MAGIC = b"SQLite format 3\x00"


def fail(message):
    """Ends the driver as `tracecast` ends on bad input: `error: …` on standard error, exit 2."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def is_export(path):
    """Whether `path` is an Nsight Systems export (an SQLite database), by its first bytes."""
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def trace_files(paths):
    """The trace files the paths stand for, as `tracecast` lists them: a file
    itself, or the trace files of a directory (not recursive), sorted."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            names = sorted(
                n for n in os.listdir(p)
                if not n.startswith(".") and n.lower().endswith(TRACE_SUFFIXES) and os.path.isfile(os.path.join(p, n))
            )
            if not names:
                fail(f"{p}: no trace files (*.json, *.json.gz, *.gz, *.sqlite) in this directory")
            files.extend(os.path.join(p, n) for n in names)
        elif os.path.isfile(p):
            files.append(p)
        else:
            fail(f"{p}: no such file or directory")
    return [os.path.abspath(f) for f in files]


def shares(files, n):
    """`files` in `n` shares of nearly equal total size (largest first, each to the lightest share);
    the Nsight Systems exports among them all in one share, in the order given."""
    exports = [f for f in files if is_export(f)]
    others = [f for f in files if f not in set(exports)]
    out = [exports] if exports else []
    n = max(1, min(n - len(out), len(others)))
    sized = sorted(((os.path.getsize(f), f) for f in others), reverse=True)
    split = [[] for _ in range(n)]
    load = [0] * n
    for size, f in sized:
        k = load.index(min(load))
        split[k].append(f)
        load[k] += size
    return out + [sorted(s) for s in split if s]


def ingest_share(tracecast, files, out):
    """Runs on a worker: `tracecast ingest FILES --out OUT -q`; returns what happened."""
    started = time.time()
    try:
        proc = subprocess.run([tracecast, "ingest", *files, "--out", out, "-q"], capture_output=True, text=True)
    except OSError as e:
        # A binary missing or not executable on this worker: said as the share's error, not a traceback.
        return {
            "host": os.uname().nodename,
            "files": len(files),
            "returncode": 2,
            "stderr": f"cannot run {tracecast}: {e.strerror or e}",
            "seconds": time.time() - started,
        }
    return {
        "host": os.uname().nodename,
        "files": len(files),
        "returncode": proc.returncode,
        "stderr": proc.stderr.strip(),
        "seconds": time.time() - started,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="rank trace files of one job, or its directory")
    ap.add_argument("--out", required=True, help="the dataset directory (on a path every worker sees)")
    ap.add_argument("--scheduler", default="local:2", help="local:N (a LocalCluster of N workers) or tcp://HOST:PORT")
    ap.add_argument("--tracecast", default="tracecast", help="the tracecast binary on the workers (default: on PATH)")
    ap.add_argument("--shares", type=int, default=0, help="number of shares (default: 4 per worker)")
    args = ap.parse_args(argv)

    from dask.distributed import Client, LocalCluster

    files = trace_files(args.paths)
    out = os.path.abspath(args.out)
    # Checked before any share starts: each would have said it alone, and the summary named a
    # dataset that was never made.
    if os.path.exists(out) and not os.path.isdir(out):
        fail(f"--out {out}: is a file, not a dataset directory")
    local = args.scheduler.startswith("local:")
    if local:
        count = args.scheduler.split(":", 1)[1]
        if not count.isdigit() or int(count) < 1:
            # A cluster of no workers takes the shares and never runs them.
            fail(f"--scheduler {args.scheduler}: local:N takes a number of workers of at least 1")
        if shutil.which(args.tracecast) is None:
            fail(f"--tracecast {args.tracecast}: no such program (give the path of the tracecast binary)")
    cluster = None
    if local:
        workers = int(count)
        # One thread per worker: each share is one tracecast process that uses the cores itself.
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(args.scheduler)
    try:
        workers = max(1, len(client.scheduler_info()["workers"]))
        parts = shares(files, args.shares or 4 * workers)
        futures = [client.submit(ingest_share, args.tracecast, share, out, pure=False) for share in parts]
        results = client.gather(futures)
        # A share that wrote nothing (its files all unreadable) may have ended before any other made
        # the dataset, and could not record them there: run again once the dataset is made.
        if os.path.isfile(os.path.join(out, "manifest.json")):
            again = [i for i, r in enumerate(results) if r["returncode"] != 0 and "nothing was written to" in r["stderr"]]
            redone = client.gather([client.submit(ingest_share, args.tracecast, parts[i], out, pure=False) for i in again])
            for i, r in zip(again, redone):
                results[i] = r
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

    made = os.path.isfile(os.path.join(out, "manifest.json"))
    failed = [r for r in results if r["returncode"] != 0]
    for r in failed:
        print(f"error: a share of {r['files']} file(s) on {r['host']} exited {r['returncode']}:\n{r['stderr']}", file=sys.stderr)
    hosts = sorted({r["host"] for r in results})
    where = f"{len(files)} file(s) in {len(parts)} share(s) on {workers} worker(s) ({', '.join(hosts)})"
    if not made:
        # No share wrote a rank: there is no dataset to name as ingested.
        print(f"{where}: nothing was written to {out} (see the errors above)")
        return 2
    # Not "written" where a share failed: its unreadable files are not in the dataset (it records them).
    unread = f"; {len(failed)} share(s) had files that could not be read (above), which the dataset records" if failed else ""
    print(f"{where} ingested into {out}{unread}")
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
