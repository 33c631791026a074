//! A job summarized one rank at a time (each trace dropped once summarized)
//! and reduced gives the same analysis as the whole job held in memory.

use std::path::{Path, PathBuf};

use tracecast_ingest::analysis::{self, AnalyzeOptions};
use tracecast_ingest::{Job, ReadOptions, job};

fn same_both_ways(dir: &Path) {
    let files = job::trace_files_under(dir).unwrap();
    let opts = AnalyzeOptions::default();
    let whole = Job::read(dir.to_path_buf(), &files, &ReadOptions::default(), &|_| {});
    let world = whole.world_size();
    let direct = analysis::analyze_job(&whole, &opts);
    drop(whole);
    let (summaries, failures) = Job::summarize(&files, &ReadOptions::default(), &|_| {}, &|r| analysis::summarize_rank(r, world, &opts));
    // Bad files (here: two unrelated runs claiming rank 0) are reported the same way.
    let bad = failures.iter().map(analysis::BadFile::of).collect();
    let reduced = analysis::reduce(dir.display().to_string(), summaries, bad, &opts);
    assert_eq!(serde_json::to_string(&reduced).unwrap(), serde_json::to_string(&direct).unwrap(), "{}", dir.display());
}

#[test]
fn one_rank_at_a_time_equals_the_whole_job() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The synthetic 4-rank job (matched collectives, clock alignment, stragglers) and real jobs of the corpus.
    same_both_ways(&root.join("fixtures/demo"));
    for dir in ["hta/trace_filter", "hta/trace_diff/control", "tracelens/b200", "kineto/tb_plugin_samples/resnet50_num_workers_0"] {
        let d: PathBuf = root.join("../shared/traces").join(dir);
        same_both_ways(&d);
    }
}

/// The counts the replay sizes its graph by (`JobCollectives::joined_counts`, from the
/// matching's own tallies) are those of the joins it then walks: instances on at least
/// two ranks, and their kernels.
#[test]
fn joined_counts_are_those_of_the_joins() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for dir in [root.join("fixtures/demo"), root.join("../shared/traces/hta/trace_filter")] {
        let files = job::trace_files_under(&dir).unwrap();
        let opts = AnalyzeOptions::default();
        let whole = Job::read(dir.clone(), &files, &ReadOptions::default(), &|_| {});
        let world = whole.world_size();
        let summaries = whole.ranks.iter().map(|r| analysis::summarize_rank(r, world, &opts)).collect();
        let (_, matched) = analysis::reduce_matched(dir.display().to_string(), summaries, Vec::new(), &opts);
        let instances: std::collections::HashSet<u32> = matched.joins().map(|j| j.2).collect();
        let counts = matched.joined_counts();
        assert!(counts.0 > 0, "{}: no joins", dir.display());
        assert_eq!(counts, (instances.len(), matched.joins().count()), "{}", dir.display());
    }
}
