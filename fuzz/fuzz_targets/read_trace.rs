//! Any bytes given to the trace reader must give a trace or an error, never a
//! panic; a trace that parses must also go through the whole analysis.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tracecast_ingest::analysis::{analyze_job, AnalyzeOptions};
use tracecast_ingest::{kineto, Job, ReadOptions};

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.json");
    let result = kineto::parse_bytes(data, path, &ReadOptions::default());
    let job = Job::from_traces(path.to_path_buf(), vec![result]);
    let _ = analyze_job(&job, &AnalyzeOptions::default());
});
