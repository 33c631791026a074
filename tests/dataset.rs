//! `tracecast ingest` and reading a trace dataset: every command gives the
//! same results from the dataset as from the JSON traces it was written from.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use common::{all_shared_traces, bin, copy_of_a_real_trace, run, scratch, stderr};

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `doc` without the keys that name the input path (a job's directory or first file).
fn without_paths(mut doc: serde_json::Value) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("path");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut doc);
    doc
}

fn ingest(inputs: &[&Path], out: &Path) {
    let mut args: Vec<&OsStr> = vec!["ingest".as_ref()];
    args.extend(inputs.iter().map(|p| p.as_os_str()));
    args.extend(["--out".as_ref(), out.as_os_str(), "-q".as_ref()]);
    let o = run(&args);
    assert!(o.status.success(), "ingest {inputs:?}: {}", stderr(&o));
}

/// `command INPUT -q --FLAG OUT [extra]` and its JSON output.
fn output_of(command: &str, input: &Path, flag: &str, out: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args: Vec<&OsStr> = vec![command.as_ref(), input.as_os_str(), "-q".as_ref(), flag.as_ref(), out.as_os_str()];
    args.extend(extra.iter().map(OsStr::new));
    let o = run(&args);
    assert!(o.status.success(), "{command} {}: {}", input.display(), stderr(&o));
    without_paths(json(out))
}

/// `analyze DATASET -q --json OUT --window all` of a dataset whose ingest left out a file that
/// lost its rank to another's: exit 2 naming it, as `analyze` of the files, and its JSON.
fn analyze_naming_the_file_left_out(ds: &Path, left_out: &str, out: &Path) -> serde_json::Value {
    let o =
        run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str(), "--window".as_ref(), "all".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let says = format!("{left_out}: was left out when the dataset {} was ingested: rank 0 is also claimed by", ds.display());
    assert!(stderr(&o).contains(&says), "{}", stderr(&o));
    without_paths(json(out))
}

#[test]
fn every_shared_trace_analyzes_the_same_from_its_dataset() {
    let dir = scratch("dataset-corpus");
    let traces = all_shared_traces();
    assert!(traces.len() >= 40, "the shared corpus is missing ({} traces)", traces.len());
    let mut differ = Vec::new();
    for (i, trace) in traces.iter().enumerate() {
        let ds = dir.join(format!("ds{i}"));
        ingest(&[trace], &ds);
        // With the options it was ingested with (its cached summaries), and with others (its events).
        for extra in [&[][..], &["--window", "all"][..]] {
            let a = output_of("analyze", trace, "--json", &dir.join(format!("a{i}.json")), extra);
            let b = output_of("analyze", &ds, "--json", &dir.join(format!("b{i}.json")), extra);
            if a != b {
                differ.push(format!("{} {extra:?}", trace.display()));
            }
        }
        let _ = std::fs::remove_dir_all(&ds);
    }
    assert!(differ.is_empty(), "analysis differs from the dataset on {differ:?}");
}

/// A synthetic job of 4 ranks in `dir/job` whose `rank`'s file is cut to 200 bytes (the whole
/// file kept as `dir/rank-N.whole`), ingested into `dir/ds` (exit 2): the job and the dataset.
fn ingested_with_a_rank_cut_short(dir: &Path, rank: u32) -> (PathBuf, PathBuf) {
    let job = synthetic_job(dir, 4);
    let file = job.join(format!("rank-{rank}.json.gz"));
    let whole = std::fs::read(&file).unwrap();
    std::fs::write(dir.join(format!("rank-{rank}.whole")), &whole).unwrap();
    std::fs::write(&file, &whole[..200]).unwrap();
    let ds = dir.join("ds");
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    (job, ds)
}

/// A synthetic job of `ranks` ranks of seed `seed` written to `job`.
fn synth_job_of_seed(job: &Path, ranks: u32, seed: u64) {
    let mut spec = tracecast_calibrate::synth::JobSpec::default();
    (spec.ranks, spec.layers, spec.seed) = (ranks, 4, seed);
    tracecast_calibrate::synth::write_job(&spec, job).unwrap();
}

fn synthetic_job(dir: &Path, ranks: u32) -> PathBuf {
    let job = dir.join("job");
    let mut spec = tracecast_calibrate::synth::JobSpec::default();
    spec.ranks = ranks;
    spec.layers = 4;
    tracecast_calibrate::synth::write_job(&spec, &job).unwrap();
    job
}

#[test]
fn a_synthetic_job_gives_the_same_results_from_its_dataset_in_every_command() {
    let dir = scratch("dataset-job");
    let job = synthetic_job(&dir, 8);
    let ds = dir.join("ds");
    ingest(&[&job], &ds);
    for (command, flag, extra) in [
        ("analyze", "--json", &[][..]),
        ("replay", "--json", &["--scale", "link=2"][..]),
        ("calibrate", "--out", &[][..]),
        ("replay", "--json", &["--target", "a100-80gb"][..]),
    ] {
        let a = output_of(command, &job, flag, &dir.join("a.json"), extra);
        let b = output_of(command, &ds, flag, &dir.join("b.json"), extra);
        assert_eq!(a, b, "{command} {extra:?}");
    }
    // `diff` of the job against its own dataset: nothing moved.
    let o = run(&["diff".as_ref(), job.as_os_str(), ds.as_os_str(), "--fail-if".as_ref(), "step>+1%".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("step +0.0 %"), "{out}");
    // `report` reads it.
    let page = dir.join("report.html");
    let o = run(&["report".as_ref(), ds.as_os_str(), "--out".as_ref(), page.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&page).unwrap().contains("8 rank"));
}

#[test]
fn the_dataset_layout_is_queryable_and_its_parts_are_whole() {
    use polars::prelude::*;
    let dir = scratch("dataset-layout");
    let job = synthetic_job(&dir, 4);
    let ds = dir.join("ds");
    ingest(&[&job], &ds);
    let manifest = json(&ds.join("manifest.json"));
    assert_eq!(manifest["format"], "tracecast-dataset");
    assert_eq!(manifest["version"], 1);
    let read = |table: &str, rank: u32| {
        let f = std::fs::File::open(ds.join(table).join(format!("rank-{rank:06}.parquet"))).unwrap();
        ParquetReader::new(f).finish().unwrap()
    };
    let analysis = output_of("analyze", &job, "--json", &dir.join("a.json"), &[]);
    for r in 0..4u32 {
        let ranks = read("ranks", r);
        assert_eq!(ranks.height(), 1);
        assert_eq!(ranks.column("rank").unwrap().u32().unwrap().get(0), Some(r));
        let events = read("events", r);
        let kernels = events.column("kind").unwrap().str().unwrap().iter().filter(|k| *k == Some("kernel")).count();
        assert!(kernels > 100, "rank {r}: {kernels} kernels");
        // Steps and collectives as the analysis reports them.
        let steps = read("steps", r);
        let reported = &analysis["jobs"][0]["ranks"][r as usize];
        assert_eq!(steps.height(), reported["steps"].as_array().unwrap().len());
        let collectives = read("collectives", r);
        let count: f64 = reported["collectives"].as_array().unwrap().iter().map(|c| c["count"].as_f64().unwrap()).sum();
        assert_eq!(collectives.height() as f64, count, "rank {r}");
    }
    // Nothing half-written is left behind.
    for table in ["ranks", "events", "steps", "collectives"] {
        for e in std::fs::read_dir(ds.join(table)).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(name.starts_with("rank-") && name.ends_with(".parquet"), "{table}/{name}");
        }
    }
}

#[test]
fn two_ingests_of_disjoint_files_at_once_fill_one_dataset() {
    let dir = scratch("dataset-concurrent");
    let job = synthetic_job(&dir, 8);
    let ds = dir.join("ds");
    let files = tracecast_ingest::job::trace_files(&job).unwrap();
    let (a, b) = files.split_at(files.len() / 2);
    let spawn = |part: &[PathBuf]| {
        let mut c = common::bin();
        c.arg("ingest").args(part).arg("--out").arg(&ds).arg("-q");
        c.spawn().unwrap()
    };
    let (mut pa, mut pb) = (spawn(a), spawn(b));
    assert!(pa.wait().unwrap().success() && pb.wait().unwrap().success());
    let direct = output_of("analyze", &job, "--json", &dir.join("a.json"), &[]);
    let from_dataset = output_of("analyze", &ds, "--json", &dir.join("b.json"), &[]);
    assert_eq!(direct, from_dataset);
}

#[test]
fn a_damaged_part_is_named_and_the_other_ranks_are_read() {
    let dir = scratch("dataset-damaged");
    let job = synthetic_job(&dir, 4);
    let ds = dir.join("ds");
    ingest(&[&job], &ds);
    let part = ds.join("events/rank-000002.parquet");
    let bytes = std::fs::read(&part).unwrap();
    std::fs::write(&part, &bytes[..bytes.len() / 2]).unwrap();
    let out = dir.join("a.json");
    // `--window all`: not the options the summaries were cached under, so every events part is read.
    let o =
        run(&["analyze".as_ref(), ds.as_os_str(), "--window".as_ref(), "all".as_ref(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("rank-000002.parquet"), "{}", stderr(&o));
    assert_eq!(json(&out)["jobs"][0]["ranks"].as_array().unwrap().len(), 3);
    // A directory with a manifest of another format is refused with its name.
    std::fs::write(ds.join("manifest.json"), br#"{"format": "other", "version": 9, "tables": []}"#).unwrap();
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("manifest.json"), "{}", stderr(&o));
}

/// A rank whose events part is missing (lost, or an ingest still writing it: it is
/// written last) is a bad rank named by its missing file, not left out unseen: the ranks
/// table lists it. Before, `analyze` read 3 of 4 ranks and exited 0.
#[test]
fn a_rank_without_its_events_part_is_named_and_the_others_are_read() {
    let dir = scratch("dataset-lost-part");
    let job = synthetic_job(&dir, 4);
    let ds = dir.join("ds");
    ingest(&[&job], &ds);
    std::fs::remove_file(ds.join("events/rank-000002.parquet")).unwrap();
    for command in ["analyze", "replay"] {
        let out = dir.join(format!("{command}.json"));
        // `--window all` for analyze: not the options the summaries were cached under, so it reads events.
        let mut args: Vec<&OsStr> = vec![OsStr::new(command), ds.as_os_str(), OsStr::new("--json"), out.as_os_str(), OsStr::new("-q")];
        if command == "analyze" {
            args.extend([OsStr::new("--window"), OsStr::new("all")]);
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{command}: {}", stderr(&o));
        assert!(stderr(&o).contains("events/rank-000002.parquet"), "{command}: {}", stderr(&o));
        assert_eq!(json(&out)["jobs"][0]["ranks"].as_array().unwrap().len(), 3, "{command}");
    }
}

#[test]
fn a_dataset_that_cannot_be_written_is_a_write_error_naming_the_file_in_the_way() {
    let dir = scratch("dataset-under-a-file");
    let file = dir.join("afile");
    std::fs::write(&file, b"").unwrap();
    let trace = common::shared().join("kineto/tb_plugin_test/gpu_metrics_input.json.gz");
    let ds = file.join("x.tcds");
    let o = run(&["ingest".as_ref(), trace.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // The folder cannot be made: said once, before any trace is read (it had been said once per
    // rank), naming the file in the way (not "no trace could be read").
    let err = stderr(&o);
    assert!(err.contains(&format!("{}: cannot make the folder (--out): {} is not a directory", ds.display(), file.display())), "{err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "{err}");
    assert!(!err.contains("no trace could be read"), "{err}");
}

#[test]
fn analyze_with_the_ingest_options_reads_the_cached_summaries_not_the_events() {
    let dir = scratch("dataset-cache");
    let job = synthetic_job(&dir, 4);
    let ds = dir.join("ds");
    ingest(&[&job], &ds);
    let direct = output_of("analyze", &job, "--json", &dir.join("a.json"), &[]);
    let direct_all = output_of("analyze", &job, "--json", &dir.join("b.json"), &["--window", "all"]);
    // Without its events the dataset still analyzes with the options it was ingested with …
    // (garbage of each part's length: a part of another length is read again, as damage).
    for e in std::fs::read_dir(ds.join("events")).unwrap() {
        let path = e.unwrap().path();
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        std::fs::write(&path, b"not parquet ".iter().cycle().take(len).copied().collect::<Vec<u8>>()).unwrap();
    }
    assert_eq!(output_of("analyze", &ds, "--json", &dir.join("c.json"), &[]), direct);
    // … and not with others, which need the events.
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "--window".as_ref(), "all".as_ref(), "-q".as_ref()]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("events/rank-000000.parquet"), "{}", stderr(&o));
    // Ingested with `--window all`, the dataset's cache serves that window.
    let ds_all = dir.join("ds-all");
    let o = run(&[
        "ingest".as_ref(),
        job.as_os_str(),
        "--out".as_ref(),
        ds_all.as_os_str(),
        "--window".as_ref(),
        "all".as_ref(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(output_of("analyze", &ds_all, "--json", &dir.join("d.json"), &["--window", "all"]), direct_all);
}

/// Issue 25: the summaries were keyed by the crate version, which never changes,
/// so a dataset ingested before a fix of the analysis served its old numbers.
#[test]
fn summaries_cached_under_another_analysis_schema_are_not_used() {
    let dir = scratch("dataset-schema");
    let job = synthetic_job(&dir, 2);
    let ds = dir.join("ds");
    ingest(&[&job], &ds);
    let this = format!("analysis schema {} ", tracecast_ingest::analysis::SCHEMA_VERSION);
    let other = format!("analysis schema {} ", tracecast_ingest::analysis::SCHEMA_VERSION + 1);
    for e in std::fs::read_dir(ds.join("summaries")).unwrap() {
        let path = e.unwrap().path();
        let mut cached = json(&path);
        let key = cached["key"].as_str().unwrap().to_string();
        assert!(key.starts_with(&this), "{key}");
        cached["key"] = key.replacen(&this, &other, 1).into();
        std::fs::write(&path, serde_json::to_vec(&cached).unwrap()).unwrap();
    }
    for e in std::fs::read_dir(ds.join("events")).unwrap() {
        std::fs::write(e.unwrap().path(), b"not parquet").unwrap();
    }
    // Under the ingest options, but made by another analysis: the events are needed.
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("events/rank-000000.parquet"), "{}", stderr(&o));
}

/// A dataset written into the folder of its traces shadowed them: with the traces replaced,
/// `analyze` of the folder still gave the old numbers. And a damaged events part was hidden
/// by the summary cached beside it (exit 0) until an option forced a re-read. The first is
/// refused; the second is read again and named.
#[test]
fn a_dataset_never_hides_its_traces_or_its_damage() {
    let dir = scratch("dataset-stale");
    let job = synthetic_job(&dir, 2);
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), job.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write the dataset into the folder it reads"), "{}", stderr(&o));
    assert!(!tracecast_ingest::dataset::is_dataset(&job), "nothing written");

    // Nor into a folder of other files.
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), other.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a folder of other files") && stderr(&o).contains("notes.txt), not a dataset"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1);

    // Nor beside the files given one by one.
    let rank0 = job.join("rank-0.json.gz");
    let o = run(&["ingest".as_ref(), rank0.as_os_str(), "--out".as_ref(), job.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!tracecast_ingest::dataset::is_dataset(&job), "nothing written");

    let ds = dir.join("ds");
    ingest(&[&job], &ds);
    // A dataset takes ranks again whatever else its folder holds (a report written beside its tables).
    std::fs::write(ds.join("report.html"), "mine").unwrap();
    ingest(&[&job], &ds);
    std::fs::remove_file(ds.join("report.html")).unwrap();
    // A dataset is not rewritten in place (its parts were refused one by one, after some were rewritten).
    let manifest = std::fs::read(ds.join("manifest.json")).unwrap();
    let o = run(&["ingest".as_ref(), ds.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write the dataset into the folder it reads"), "{}", stderr(&o));
    assert_eq!(std::fs::read(ds.join("manifest.json")).unwrap(), manifest);
    // Its manifest is an input like its parts.
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref(), "--json".as_ref(), ds.join("manifest.json").as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read(ds.join("manifest.json")).unwrap(), manifest);
    let part = ds.join("events/rank-000001.parquet");
    let bytes = std::fs::read(&part).unwrap();
    std::fs::write(&part, &bytes[..bytes.len() / 2]).unwrap();
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "a damaged part summarized from its cache: {}", stderr(&o));
    assert!(stderr(&o).contains("rank-000001.parquet"), "{}", stderr(&o));
}

/// Two files of one job that both declare rank 0 were written to the same parts in parallel,
/// so the dataset could hold one file's events beside the other's tables. One file's parts are
/// written whole, the other is named as a duplicate.
#[test]
fn two_files_of_one_rank_never_mix_in_a_dataset() {
    let dir = scratch("dataset-duplicate-rank");
    for (name, dur) in [("a.json", 10), ("b.json", 20)] {
        let ev = format!(r#"{{"ph": "X", "cat": "kernel", "name": "sm80_gemm", "pid": 0, "tid": 7, "ts": 5, "dur": {dur}}}"#);
        std::fs::write(dir.join(name), format!(r#"{{"distributedInfo": {{"rank": 0, "world_size": 1}}, "traceEvents": [{ev}]}}"#)).unwrap();
    }
    let ds = dir.join("ds");
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    let o = run(&["ingest".as_ref(), a.as_os_str(), b.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("rank 0 is also claimed by"), "{}", stderr(&o));
    let doc = analyze_naming_the_file_left_out(&ds, &b.canonicalize().unwrap().display().to_string(), &dir.join("an.json"));
    let rank = &doc["jobs"][0]["ranks"][0];
    // Equally strong claims: the first file keeps the rank, as `analyze` of the files does,
    // and the events (busy time) are those of the file the rank's table names.
    assert!(rank["file"].as_str().unwrap().ends_with("a.json"), "{rank}");
    assert_eq!(rank["busy_us"].as_f64(), Some(10.0), "{rank}");
}

/// A file whose rank comes from its place among the files loses that rank to a file that
/// declares it, as in `analyze` of the files; the loser's parts were written under a name
/// of their own and stayed in the dataset beside the winner's.
#[test]
fn a_file_that_loses_its_rank_leaves_nothing_in_the_dataset() {
    let dir = scratch("dataset-displaced-rank");
    let kernel = |dur: u32| format!(r#"{{"ph": "X", "cat": "kernel", "name": "sm80_gemm", "pid": 0, "tid": 7, "ts": 5, "dur": {dur}}}"#);
    // a.json: rank 0 by its place; b.json: declares rank 0.
    std::fs::write(dir.join("a.json"), format!(r#"{{"traceEvents": [{}]}}"#, kernel(10))).unwrap();
    std::fs::write(
        dir.join("b.json"),
        format!(r#"{{"distributedInfo": {{"rank": 0, "world_size": 1}}, "traceEvents": [{}]}}"#, kernel(20)),
    )
    .unwrap();
    let (a, b, ds) = (dir.join("a.json"), dir.join("b.json"), dir.join("ds"));
    let o = run(&["ingest".as_ref(), a.as_os_str(), b.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a.json: rank 0 is also claimed by"), "{}", stderr(&o));
    for table in ["events", "ranks", "steps", "collectives", "summaries"] {
        let mut names: Vec<String> =
            std::fs::read_dir(ds.join(table)).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        let part = if table == "summaries" { "rank-000000.json" } else { "rank-000000.parquet" };
        assert_eq!(names, [part], "{table}: the declared rank's part only, no temporary left");
    }
    let doc = analyze_naming_the_file_left_out(&ds, &a.canonicalize().unwrap().display().to_string(), &dir.join("an.json"));
    let ranks = doc["jobs"][0]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 1, "{ranks:?}");
    assert_eq!(ranks[0]["busy_us"].as_f64(), Some(20.0), "b.json's events: {}", ranks[0]);
}

/// `--each` over a folder that holds a dataset reads the dataset as one job, as a path
/// given on its own is read; it had read the manifest and cached summaries as traces.
#[test]
fn each_reads_a_dataset_as_one_job() {
    let dir = scratch("dataset-each");
    let corpus = dir.join("corpus");
    copy_of_a_real_trace(&corpus.join("one.json.gz"));
    ingest(&[&corpus.join("one.json.gz")], &corpus.join("one.tcds"));
    let doc = output_of("analyze", &corpus, "--json", &dir.join("each.json"), &["--each"]);
    let jobs = doc["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "the trace and its dataset: {}", doc["jobs"]);
    assert_eq!(jobs[0]["ranks"], jobs[1]["ranks"], "a dataset analyses as its trace");
    // The dataset itself given with --each: one job, not its manifest and summaries as traces.
    let alone = output_of("analyze", &corpus.join("one.tcds"), "--json", &dir.join("alone.json"), &["--each"]);
    assert_eq!(alone["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(alone["jobs"][0]["ranks"], jobs[1]["ranks"]);
}

/// A dataset's unread rank counts in its world in every replay: traces that declare no world
/// size are a world of the ranks read and unread (the Perfetto path had replayed a world of 3).
#[test]
fn a_dataset_replay_counts_its_unread_rank_with_or_without_a_timeline() {
    let dir = scratch("dataset-unread-world");
    let job = synthetic_job(&dir, 4);
    for r in 0..4 {
        let path = job.join(format!("rank-{r}.json.gz"));
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap()), &mut text).unwrap();
        let start = text.find("\"distributedInfo\": ").unwrap();
        let end = start + text[start..].find("]}]}").unwrap() + 4;
        text.replace_range(start..end, &format!("\"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {r}}}"));
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut z, text.as_bytes()).unwrap();
        std::fs::write(&path, z.finish().unwrap()).unwrap();
    }
    // The highest rank unread: only the count of unread ranks makes the world 4.
    let rank3 = job.join("rank-3.json.gz");
    let bytes = std::fs::read(&rank3).unwrap();
    std::fs::write(&rank3, &bytes[..200]).unwrap();
    let ds = dir.join("ds");
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let (plain, timeline) = (dir.join("plain.json"), dir.join("timeline.json"));
    let o = run(&["replay".as_ref(), ds.as_os_str(), "-q".as_ref(), "--json".as_ref(), plain.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let perfetto = dir.join("p.json");
    let args = [
        "replay".as_ref(),
        ds.as_os_str(),
        "-q".as_ref(),
        "--json".as_ref(),
        timeline.as_os_str(),
        "--perfetto".as_ref(),
        perfetto.as_os_str(),
    ];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    for out in [&plain, &timeline] {
        assert_eq!(json(out)["jobs"][0]["world_size"], 4, "{}", out.display());
    }
}

/// A dataset ingested with a rank that could not be read names it whenever it is read, exit 2
/// (it had read as a whole job, exit 0); ingesting that file again once it reads drops the record.
#[test]
fn a_dataset_remembers_the_ranks_its_ingest_could_not_read() {
    let dir = scratch("dataset-unread");
    let (job, ds) = ingested_with_a_rank_cut_short(&dir, 1);
    let (rank1, good) = (job.join("rank-1.json.gz"), std::fs::read(dir.join("rank-1.whole")).unwrap());
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let want = format!("error: {}: could not be read when the dataset {} was ingested: ", rank1.display(), ds.display());
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    // The outputs name it too, as they name a trace file that could not be read (they had said nothing).
    let out = dir.join("unread.json");
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let bad = json(&out)["jobs"][0]["bad_files"].clone();
    assert!(bad.as_array().unwrap().len() == 1 && bad[0]["error"].as_str().unwrap().contains(&want[7..]), "{bad}");
    // Stopped at the bad file (`--strict`), nothing is written, as no other command's `--strict`
    // writes (it had written the other 3 ranks, into a new dataset or over an existing one's).
    let strict = dir.join("strict");
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), strict.as_os_str(), "-q".as_ref(), "--strict".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!strict.exists(), "--strict left {:?}", std::fs::read_dir(&strict).map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>()));
    // Into a folder made empty beforehand: left empty (a manifest and empty tables had read as a dataset of no rank).
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), empty.as_os_str(), "-q".as_ref(), "--strict".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "--strict left files in the empty folder");
    let other = dir.join("other");
    let earlier = synthetic_job(&other, 4);
    let kept = dir.join("kept");
    ingest(&[&earlier], &kept);
    // Every file of the dataset and its bytes.
    let parts = |ds: &Path| {
        let mut files = Vec::new();
        let mut folders = vec![ds.to_path_buf()];
        while let Some(folder) = folders.pop() {
            for e in std::fs::read_dir(&folder).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() { folders.push(p) } else { files.push((p.clone(), std::fs::read(&p).unwrap())) }
            }
        }
        files.sort();
        files
    };
    let before = parts(&kept);
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), kept.as_os_str(), "-q".as_ref(), "--strict".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(parts(&kept) == before, "--strict changed the existing dataset");
    // A path that is not there, and a dataset's own record read as an input: recorded too.
    let (gone, again) = (dir.join("gone.json"), dir.join("again"));
    let o = run(&["ingest".as_ref(), ds.as_os_str(), gone.as_os_str(), "--out".as_ref(), again.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&["analyze".as_ref(), again.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    for file in [&gone, &rank1] {
        let want = format!("error: {}: could not be read when the dataset {} was ingested: ", file.display(), again.display());
        assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    }
    std::fs::write(&rank1, &good).unwrap();
    // The file given again by another spelling of its path, from another directory.
    let o = bin()
        .current_dir(&job)
        .args(["ingest".as_ref(), "./rank-1.json.gz".as_ref(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A file that lost its rank to another's (two captures of rank 0): the traces read with
    // exit 2 naming it, and so does their dataset, which holds the one rank (the world is 1).
    let resnet = common::shared().join("kineto/tb_plugin_samples/resnet50_num_workers_0");
    let (ds, json) = (dir.join("resnet"), dir.join("resnet.json"));
    let o = run(&["ingest".as_ref(), resnet.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref(), "--json".as_ref(), json.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("was left out when the dataset {} was ingested: rank 0 is also claimed by", ds.display())),
        "{}",
        stderr(&o)
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!((doc["jobs"][0]["world_size"].as_u64(), doc["jobs"][0]["ranks"].as_array().map(Vec::len)), (Some(1), Some(1)));
    // The stray copy deleted and the job ingested again: its record goes (it had stayed, the
    // dataset failing every read for a file no longer there).
    let stray = job.join("rank-9.json.gz");
    std::fs::copy(job.join("rank-0.json.gz"), &stray).unwrap();
    let ds = dir.join("stray");
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]).status.code(), Some(2));
    std::fs::remove_file(&stray).unwrap();
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A rank that could not be read, mended by ingesting its rank from another file (a fresh copy
/// elsewhere): the dataset holds the rank, and its record of the unreadable file goes (it had
/// stayed, every later read exiting 2 for a rank the dataset has).
#[test]
fn a_rank_ingested_again_from_another_file_clears_the_record_of_its_unreadable_one() {
    let dir = scratch("dataset-mended-elsewhere");
    let job = synthetic_job(&dir, 4);
    let rank2 = job.join("rank-2.json.gz");
    let fresh = dir.join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    std::fs::copy(&rank2, fresh.join("rank-2.json.gz")).unwrap();
    let good = std::fs::read(&rank2).unwrap();
    std::fs::write(&rank2, &good[..200]).unwrap();
    let ds = dir.join("ds");
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]).status.code(), Some(2));
    let o = run(&["ingest".as_ref(), fresh.join("rank-2.json.gz").as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Another rank's file does not clear it: rank 1 written again, rank 2's record stays.
    std::fs::write(&rank2, &good[..200]).unwrap();
    let o = run(&["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&["ingest".as_ref(), job.join("rank-1.json.gz").as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]).status.code(), Some(2));
    // Nor does rank 2 written from a file whose name gives another rank (PyTorch's `host_pid`
    // names: `node-worker-0_…` declaring rank 2): names that guess ranks do not say whose it is.
    let hosted = dir.join("hosted/node-worker-0_4242.json.gz");
    std::fs::create_dir_all(hosted.parent().unwrap()).unwrap();
    std::fs::copy(fresh.join("rank-2.json.gz"), &hosted).unwrap();
    let o = run(&["ingest".as_ref(), hosted.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]).status.code(), Some(2));
}

/// `--device` is an option of the command that reads, not a fact of the traces: a dataset
/// ingested with it keeps its traces as recorded, so a later `--device` names their GPU as it
/// would the traces' (a B200 named at ingest had stayed, and calibrated H100 traces as B200 in
/// silence), and a read without it says nothing of the ingest's option.
#[test]
fn a_dataset_keeps_its_traces_gpus_as_recorded_whatever_device_its_ingest_named() {
    let dir = scratch("dataset-device");
    // HTA's sampled ranks of a 128-rank job record no GPU.
    let sampled = common::shared().join("hta/trace_filter");
    let ds = dir.join("sampled");
    let o = run(&[
        "ingest".as_ref(),
        sampled.as_os_str(),
        "--device".as_ref(),
        "b200".as_ref(),
        "--out".as_ref(),
        ds.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (name, extra) in [("h100", &["--device", "h100-sxm"][..]), ("none", &[][..])] {
        let traces = output_of("analyze", &sampled, "--json", &dir.join(format!("t-{name}.json")), extra);
        let dataset = output_of("analyze", &ds, "--json", &dir.join(format!("d-{name}.json")), extra);
        assert_eq!(traces, dataset, "--device {extra:?}");
    }
    let doc = json(&dir.join("d-h100.json"));
    assert!(doc["jobs"][0]["ranks"][0]["device"].as_str().is_some_and(|d| d.contains("H100")), "{}", doc["jobs"][0]["ranks"][0]);
    // A trace that records its GPU, ingested with --device: read without it, no word of the option.
    let real = dir.join("real/rank-0.json.gz");
    copy_of_a_real_trace(&real);
    let ds = dir.join("real.tcds");
    let o =
        run(&["ingest".as_ref(), real.as_os_str(), "--device".as_ref(), "b200".as_ref(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let traces = output_of("analyze", &real, "--json", &dir.join("t-real.json"), &[]);
    let dataset = output_of("analyze", &ds, "--json", &dir.join("d-real.json"), &[]);
    assert_eq!(traces, dataset);
    assert!(!dataset.to_string().contains("--device not applied"));
}

/// A job of another world size ingested into an existing dataset is refused rank by rank, the
/// dataset left as it was (it had been mixed in, exit 0, and every later read failed).
#[test]
fn a_job_of_another_world_is_not_mixed_into_a_dataset() {
    let dir = scratch("dataset-other-world");
    let (twelve, eight) = (dir.join("twelve"), dir.join("eight"));
    for (out, ranks) in [(&twelve, 12), (&eight, 8)] {
        let mut spec = tracecast_calibrate::synth::JobSpec::default();
        (spec.ranks, spec.layers) = (ranks, 2);
        tracecast_calibrate::synth::write_job(&spec, out).unwrap();
    }
    let ds = dir.join("ds");
    ingest(&[&twelve], &ds);
    let before = output_of("analyze", &ds, "--json", &dir.join("before.json"), &[]);
    let o = run(&["ingest".as_ref(), eight.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("declares a world size of 8, where the dataset"), "{}", stderr(&o));
    assert!(stderr(&o).contains("holds ranks of a world of 12"), "{}", stderr(&o));
    let after = output_of("analyze", &ds, "--json", &dir.join("after.json"), &[]);
    assert_eq!(before, after);
}

/// What a stopped (killed) ingest leaves: its half-written parts go at the next ingest (those of
/// a running one stay), and a dataset it left without a rank says so (it had said "no trace
/// files in this directory").
#[test]
fn a_stopped_ingest_leaves_nothing_behind_and_an_empty_dataset_says_so() {
    let dir = scratch("dataset-stopped");
    let job = synthetic_job(&dir, 2);
    let ds = dir.join("ds");
    ingest(&[&job], &ds);
    // PID 4194304 is above Linux's largest (2^22): no process runs with it.
    let stopped = ds.join("events/.rank-000001.parquet.tmp-4194304-0");
    let running = ds.join(format!("events/.rank-000001.parquet.tmp-{}-0", std::process::id()));
    // Unwritten for an hour (older than any part takes to write); another host's running ingest:
    // a PID this one cannot see, written a moment ago.
    let elsewhere = ds.join("events/.rank-000000.parquet.tmp-4194305-0");
    for f in [&stopped, &running, &elsewhere] {
        std::fs::write(f, b"half a part").unwrap();
    }
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&stopped).unwrap().set_modified(hour_ago).unwrap();
    ingest(&[&job], &ds);
    assert!(!stopped.exists(), "a stopped ingest's part stayed");
    assert!(running.exists() && elsewhere.exists(), "a running ingest's part went");
    std::fs::remove_file(&running).unwrap();
    std::fs::remove_file(&elsewhere).unwrap();
    // The parts gone, the manifest left: a dataset without a rank.
    for table in ["events", "ranks", "summaries", "steps", "collectives"] {
        let _ = std::fs::remove_dir_all(ds.join(table));
    }
    std::fs::create_dir_all(ds.join("events")).unwrap();
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a dataset that holds no rank"), "{}", stderr(&o));
}

/// A dataset damaged in part is named for what it lacks: without its `events` folder it had been
/// read as a folder of traces ("manifest.json: not a Kineto trace"), without its manifest as one
/// without traces; a rank missing a derived table's part (`steps`, `collectives`: nothing a
/// command reads, but a query of that table misses it) is said on that rank, not served from the
/// cache in silence; and a rank ingested again without a summary (a `--steps` it lacks) loses its
/// earlier summary, which had stayed to be served wherever the new part had the old length.
#[test]
fn a_dataset_missing_a_part_says_which_and_a_replaced_rank_keeps_no_old_summary() {
    let dir = scratch("dataset-missing-parts");
    let job = synthetic_job(&dir, 4);
    let ds = dir.join("ds");
    ingest(&[&job], &ds);
    let copy = |name: &str| {
        let to = dir.join(name);
        let o = std::process::Command::new("cp").arg("-r").arg(&ds).arg(&to).output().unwrap();
        assert!(o.status.success());
        to
    };
    let no_events = copy("no-events");
    std::fs::remove_dir_all(no_events.join("events")).unwrap();
    let no_manifest = copy("no-manifest");
    std::fs::remove_file(no_manifest.join("manifest.json")).unwrap();
    for (damaged, missing) in [(&no_events, "events folder"), (&no_manifest, "manifest.json")] {
        let o = run(&["analyze".as_ref(), damaged.as_os_str(), "-q".as_ref()]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(&format!("a tracecast dataset without its {missing}")), "{}", stderr(&o));
    }
    // Found under a folder read with --each, it is one job with that error, not its files read as
    // traces (its manifest and summaries had been).
    let corpus = dir.join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::rename(&no_events, corpus.join("no-events")).unwrap();
    let o = run(&["analyze".as_ref(), "--each".as_ref(), corpus.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a tracecast dataset without its events folder"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("not a Kineto trace"), "{}", stderr(&o));
    // A folder of traces that happens to hold empty `events` and `ranks` folders is still one.
    std::fs::create_dir_all(job.join("events")).unwrap();
    std::fs::create_dir_all(job.join("ranks")).unwrap();
    let o = run(&["analyze".as_ref(), job.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_dir(job.join("events")).unwrap();
    std::fs::remove_dir(job.join("ranks")).unwrap();
    // A derived part gone: the numbers are the dataset's still, and the rank says what is missing.
    let no_steps = copy("no-steps");
    std::fs::remove_file(no_steps.join("steps/rank-000001.parquet")).unwrap();
    let out = dir.join("a.json");
    let o = run(&["analyze".as_ref(), no_steps.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ranks = json(&out)["jobs"][0]["ranks"].as_array().unwrap().clone();
    let said = |r: &serde_json::Value| r["notes"].to_string().contains("steps/rank-000001.parquet: missing from the dataset");
    assert!(said(&ranks[1]) && !said(&ranks[0]), "{ranks:?}");
    // Rank 3 ingested again with a step it lacks: written without a summary, the old one removed.
    let summary = ds.join("summaries/rank-000003.json");
    assert!(summary.is_file());
    let o = run(&[
        "ingest".as_ref(),
        job.join("rank-3.json.gz").as_os_str(),
        "--out".as_ref(),
        ds.as_os_str(),
        "--steps".as_ref(),
        "99".as_ref(),
        "-q".as_ref(),
    ]);
    assert!(ds.join("events/rank-000003.parquet").is_file(), "{}", stderr(&o));
    assert!(!summary.exists(), "the earlier ingest's summary of rank 3 is still there: {}", stderr(&o));
}

/// A record of unread files that cannot be read (truncated) had read as no record: the dataset
/// passed as whole, exit 0, and the next ingest deleted the record. It is named by what reads
/// the dataset and refuses an ingest into it.
#[test]
fn a_damaged_record_of_unread_files_is_named_not_read_as_none() {
    let dir = scratch("dataset-damaged-record");
    let (_, ds) = ingested_with_a_rank_cut_short(&dir, 3);
    let record = ds.join("unread.json");
    assert!(std::fs::read_to_string(&record).unwrap().contains("rank-3.json.gz"));
    std::fs::write(&record, &std::fs::read(&record).unwrap()[..20]).unwrap();
    let out = dir.join("a.json");
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let said = "unread.json: the dataset's record of the files its ingest could not take in is damaged";
    assert!(stderr(&o).contains(said), "{}", stderr(&o));
    assert!(json(&out)["jobs"][0]["bad_files"].to_string().contains(said));
    // Refused before it writes: rank 1's part stays the one of the first ingest.
    let part = ds.join("events/rank-000001.parquet");
    let before = std::fs::read(&part).unwrap();
    let changed = dir.join("changed");
    synth_job_of_seed(&changed, 4, 9);
    let o = run(&["ingest".as_ref(), changed.join("rank-1.json.gz").as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(said), "{}", stderr(&o));
    assert!(record.exists(), "the record kept for the user to mend or delete");
    assert!(std::fs::read(&part).unwrap() == before, "rank 1 rewritten");
}

/// An ingest stopped (killed) while it put its ranks in place had left ranks of two ingests
/// side by side, read as one job, exit 0. Its mark names them to every reader until an ingest
/// puts them all again.
#[test]
fn an_ingest_stopped_while_putting_ranks_in_place_is_said_until_they_are_put_again() {
    let dir = scratch("dataset-stopped-commit");
    let job = synthetic_job(&dir, 4);
    let ds = dir.join("ds");
    ingest(&[&job], &ds);
    assert!(
        !std::fs::read_dir(&ds).unwrap().flatten().any(|e| e.file_name().to_string_lossy().starts_with(".committing-")),
        "the mark ended"
    );
    let analyze = || run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref(), "--json".as_ref(), dir.join("a.json").as_os_str()]);
    // The mark of another host's ingest: running while it is recent (its process is not to be
    // looked up here), stopped once older than a put takes.
    let mark = ds.join(".committing-another-host-4242");
    std::fs::write(&mark, "rank-000001.parquet\nrank-000002.parquet").unwrap();
    assert!(analyze().status.success());
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&mark).unwrap().set_modified(hour_ago).unwrap();
    let o = analyze();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("an ingest (process 4242) was stopped while it put ranks 1–2 in place"), "{}", stderr(&o));
    assert_eq!(json(&dir.join("a.json"))["jobs"][0]["ranks"].as_array().unwrap().len(), 4, "every rank still analysed");
    // One of its ranks put again: still said; both: no more.
    ingest(&[&job.join("rank-1.json.gz")], &ds);
    assert_eq!(analyze().status.code(), Some(2));
    ingest(&[&job.join("rank-1.json.gz"), &job.join("rank-2.json.gz")], &ds);
    let o = analyze();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The hidden files under `dir`, at any depth.
fn hidden_files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(hidden_files_under(&p));
        } else if e.file_name().to_string_lossy().starts_with('.') {
            out.push(p);
        }
    }
    out
}

/// A 64-rank job in a scratch folder `name`, and the ingest `start` starts of it into `ds` there,
/// once it has staged its first part: `(folder, job, ds, the ingest)`.
#[cfg(target_os = "linux")]
fn ingest_caught_staging(
    name: &str,
    start: impl FnOnce(&Path, &Path) -> std::process::Child,
) -> (PathBuf, PathBuf, PathBuf, std::process::Child) {
    let dir = scratch(name);
    let (job, ds) = (dir.join("job"), dir.join("ds"));
    let mut spec = tracecast_calibrate::synth::JobSpec::default();
    (spec.ranks, spec.layers) = (64, 16);
    tracecast_calibrate::synth::write_job(&spec, &job).unwrap();
    let mut child = start(&job, &ds);
    let staging = || !hidden_files_under(&ds).is_empty();
    let started = std::time::Instant::now();
    while !staging() && child.try_wait().unwrap().is_none() && started.elapsed() < std::time::Duration::from_secs(300) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(staging(), "the ingest staged nothing to stop it in");
    (dir, job, ds, child)
}

/// An ingest stopped (SIGTERM; Ctrl-C's SIGINT takes the same path, but a test run in the
/// background of a script inherits it ignored) while it stages its ranks removes what it staged
/// (it had left a hidden part per rank and table, which no later ingest removed) and the
/// folders it made, and ends as the signal ends it. Another ingest then writes the dataset whole.
#[cfg(target_os = "linux")]
#[test]
fn an_ingest_stopped_by_a_signal_leaves_no_staged_part_and_no_folder_it_made() {
    use std::os::unix::process::ExitStatusExt as _;
    let (dir, job, ds, mut child) = ingest_caught_staging("ingest-stopped", |job, ds| {
        bin().args(["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]).spawn().unwrap()
    });
    let kill = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(15), "{status:?}");
    assert_eq!(hidden_files_under(&ds), Vec::<PathBuf>::new());
    // Stopped before it put a rank in place, it leaves no folder it made (as one that fails).
    assert!(
        !ds.exists() || ds.join("manifest.json").exists(),
        "{:?}",
        std::fs::read_dir(&ds).map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
    );
    ingest(&[&job], &ds);
    let out = dir.join("a.json");
    let from_dataset = output_of("analyze", &ds, "--json", &out, &[]);
    assert_eq!(from_dataset, output_of("analyze", &job, "--json", &out, &[]));
}

/// An ingest stopped in a folder the user made keeps the folder (the stop had removed every
/// folder left empty, the user's too; the ingest removes only those it made).
#[cfg(target_os = "linux")]
#[test]
fn an_ingest_stopped_in_a_folder_the_user_made_leaves_the_folder() {
    use std::os::unix::process::ExitStatusExt as _;
    let (_, _, ds, mut child) = ingest_caught_staging("ingest-stopped-user-folder", |job, ds| {
        std::fs::create_dir(ds).unwrap();
        bin().args(["ingest".as_ref(), job.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]).spawn().unwrap()
    });
    assert!(std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    assert_eq!(child.wait().unwrap().signal(), Some(15));
    assert!(ds.is_dir(), "the user's folder was removed");
    assert_eq!(hidden_files_under(&ds), Vec::<PathBuf>::new());
}

/// A command started ignoring SIGHUP (`nohup`) keeps ignoring it: the handler that removes a
/// stopped command's staged files had made the hang-up end it.
#[cfg(target_os = "linux")]
#[test]
fn an_ingest_started_under_nohup_outlives_a_hang_up() {
    use std::os::unix::process::ExitStatusExt as _;
    let (dir, job, ds, mut child) = ingest_caught_staging("ingest-nohup", |job, ds| {
        let command =
            format!("trap '' HUP; exec '{}' ingest '{}' --out '{}' -q", env!("CARGO_BIN_EXE_tracecast"), job.display(), ds.display());
        std::process::Command::new("sh").args(["-c", &command]).spawn().unwrap()
    });
    assert!(std::process::Command::new("kill").args(["-HUP", &child.id().to_string()]).status().unwrap().success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?} (signal {:?})", status.signal());
    let out = dir.join("a.json");
    assert_eq!(output_of("analyze", &ds, "--json", &out, &[]), output_of("analyze", &job, "--json", &out, &[]));
}

/// A dataset folder holding only empty table folders (an ingest stopped before its first part
/// was staged) is named as what it is, not as a folder without traces.
#[test]
fn a_folder_of_empty_dataset_tables_is_named_a_stopped_ingest() {
    let dir = scratch("empty-tables");
    for table in ["events", "ranks", "steps"] {
        std::fs::create_dir_all(dir.join("ds").join(table)).unwrap();
    }
    let o = run(&["analyze".as_ref(), dir.join("ds").as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("ds: a tracecast dataset whose ingest was stopped before it put any rank in place; ingest the traces into it again"),
        "{}",
        stderr(&o)
    );
    // A part a live process stages (this test's own) is not said to be of a stopped ingest alone.
    let live = dir.join(format!("ds/events/.rank-000000.parquet.tmp-{}-0", std::process::id()));
    std::fs::write(&live, "staging").unwrap();
    let o = run(&["analyze".as_ref(), dir.join("ds").as_os_str()]);
    assert!(
        stderr(&o).contains(
            "ds: a tracecast dataset that an ingest is still writing, or whose ingest was stopped, before any rank was put in place"
        ),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(&live).unwrap();
    // A folder of traces that holds other things beside folders of those names is not one.
    std::fs::write(dir.join("ds/notes.txt"), "x").unwrap();
    let o = run(&["analyze".as_ref(), dir.join("ds").as_os_str()]);
    assert!(!stderr(&o).contains("whose ingest was stopped"), "{}", stderr(&o));
}
