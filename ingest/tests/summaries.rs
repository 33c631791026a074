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

/// The job's kernel table counts every kernel of every rank, not only each rank's longest
/// (a single-rank report had stopped at the rank's top 20), and the spread over ranks
/// reads its ends and median off the ranks themselves.
#[test]
fn kernels_and_spread_over_ranks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for dir in ["hta/trace_filter", "hta/trace_diff/test"] {
        let dir = root.join("../shared/traces").join(dir);
        let files = job::trace_files_under(&dir).unwrap();
        let opts = AnalyzeOptions::default();
        let a = analysis::analyze_job(&Job::read(dir.clone(), &files, &ReadOptions::default(), &|_| {}), &opts);
        let kernels = a.kernels_over_ranks();
        let names: std::collections::HashSet<&str> = a.ranks.iter().flat_map(|r| r.all_kernels.iter().map(|k| k.name.as_str())).collect();
        assert_eq!(kernels.len(), names.len(), "{}", dir.display());
        assert!(kernels.len() > opts.top_kernels, "{}: {} kernels", dir.display(), kernels.len());
        assert!(kernels.windows(2).all(|w| w[0].total_us >= w[1].total_us));
        let calls: u64 = a.ranks.iter().flat_map(|r| &r.all_kernels).map(|k| k.count).sum();
        assert_eq!(kernels.iter().map(|k| k.count).sum::<u64>(), calls);
        let top = &kernels[0];
        assert!((top.mean_us - top.total_us / top.count as f64).abs() < 1e-9);

        let s = a.spread_over_ranks(|b| b.busy_us).unwrap();
        let mut busy: Vec<f64> = a.ranks.iter().map(|r| r.breakdown.busy_us).collect();
        busy.sort_by(f64::total_cmp);
        let n = busy.len();
        let median = if n.is_multiple_of(2) { (busy[n / 2 - 1] + busy[n / 2]) / 2.0 } else { busy[n / 2] };
        assert!((s.median - median).abs() < 1e-9, "{}: {} vs {median}", dir.display(), s.median);
        assert_eq!((s.min, s.max), (busy[0], busy[n - 1]));
        let busy_of = |rank: u32| a.ranks.iter().find(|r| r.rank == rank).unwrap().breakdown.busy_us;
        assert_eq!((busy_of(s.min_rank), busy_of(s.max_rank)), (s.min, s.max));
        assert!(s.min <= s.p10 && s.p10 <= s.median && s.median <= s.p90 && s.p90 <= s.max);
    }
}
