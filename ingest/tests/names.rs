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

/// Names shown together stay apart: HTA's `trace_filter` has two
/// `split_embedding_backward_…` kernels that differ in the middle (`cta_per_row` and
/// `warp_per_row`), which the 80-character cut removed, so `analyze` and the report listed
/// one kernel twice. Names that differ only in their parameter lists are numbered.
#[test]
fn names_shown_together_are_told_apart() {
    use tracecast_ingest::analysis::short_kernel_names;
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/hta/trace_filter/sampled_rank-0.json.gz");
    let job = Job::read(f.clone(), std::slice::from_ref(&f), &ReadOptions::default(), &|_| {});
    let t = &job.ranks[0].trace;
    let mut names: Vec<String> =
        (0..t.events.len()).filter(|&i| t.events.kind[i] == EventKind::Kernel).map(|i| t.name(i).to_string()).collect();
    names.sort();
    names.dedup();
    let kernel = |part: &str| -> &str {
        names.iter().find(|n| n.contains("split_embedding_backward_codegen_rowwise_adagrad_unweighted") && n.contains(part)).unwrap()
    };
    let backward = [kernel("cta_per_row"), kernel("warp_per_row")];
    // Cut alone, they read alike.
    assert_eq!(short_kernel_name(backward[0], 80), short_kernel_name(backward[1], 80));
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    let short = short_kernel_names(&all, 80);
    for (i, a) in short.iter().enumerate() {
        assert!(a.chars().count() <= 160 + 5, "{a}");
        for (j, b) in short.iter().enumerate() {
            assert!(i == j || a != b || all[i] == all[j], "{} and {} both read {a}", all[i], all[j]);
        }
    }
    // Those that did not clash keep the column's width.
    let alone = short_kernel_names(&all[..1], 80);
    assert_eq!(alone[0], short_kernel_name(all[0], 80));
    // Tables print bandwidths below 0.01 GB/s in significant digits, not as 0.00.
    use tracecast_ingest::analysis::bandwidth_text;
    assert_eq!([bandwidth_text(1.234e-4), bandwidth_text(13.374), bandwidth_text(0.0)], ["1.23e-4", "13.37", "0.00"]);
    let overloads = short_kernel_names(&["void f<int>(int)", "void f<int>(float)", "void g()", "void f<int>(int)"], 80);
    assert_eq!(overloads, ["f<int> [1]", "f<int> [2]", "g", "f<int> [1]"]);
}
