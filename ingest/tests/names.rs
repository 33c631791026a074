//! Kernel names shortened for the terminal: never empty, within the column,
//! and different names of one trace stay different as often as their full
//! names' distinguishing parts allow.

use std::path::Path;

use tracecast_ingest::analysis::short_kernel_name;
use tracecast_ingest::{EventKind, Job, ReadOptions};

#[test]
fn every_kernel_name_of_the_corpus_shortens_sanely() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces");
    let mut names = std::collections::BTreeSet::new();
    for f in tracecast_ingest::job::trace_files_under(&root).unwrap() {
        let job = Job::read(f.clone(), std::slice::from_ref(&f), &ReadOptions::default(), &|_| {});
        for r in &job.ranks {
            let t = &r.trace;
            for i in 0..t.events.len() {
                if t.events.kind[i] == EventKind::Kernel {
                    names.insert(t.name(i).to_string());
                }
            }
        }
    }
    assert!(names.len() > 500, "{}", names.len());
    let mut short = std::collections::BTreeSet::new();
    for n in &names {
        let s = short_kernel_name(n, 80);
        assert!(!s.trim().is_empty(), "{n}");
        assert!(s.chars().count() <= 80, "{s}");
        short.insert(s);
    }
    // Shortening keeps most names apart (the plain 70-character cut merged many).
    assert!(short.len() * 10 >= names.len() * 8, "{} short names for {} kernels", short.len(), names.len());
}
