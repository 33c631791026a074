"""Times HTA (HolisticTraceAnalysis 0.5) on one trace: parse + temporal breakdown +
comm/comp overlap, the work `tracecast analyze` does. Run with the interpreter of a
virtual environment where `pip install HolisticTraceAnalysis==0.5.0` was done:

    python bench/hta_baseline.py TRACE.json.gz

HTA reads a directory, so the trace is linked into a temporary one (not copied).
Prints wall seconds; bench/run.sh wraps it in /usr/bin/time for peak memory."""
import os
import sys
import tempfile
import time

from hta.trace_analysis import TraceAnalysis

trace = os.path.abspath(sys.argv[1])
with tempfile.TemporaryDirectory() as d:
    os.symlink(trace, os.path.join(d, "rank-0.json.gz"))
    t = time.time()
    ta = TraceAnalysis(trace_dir=d)
    ta.get_temporal_breakdown(visualize=False)
    ta.get_comm_comp_overlap(visualize=False)
    print(f"hta_s={time.time() - t:.3f}")
