//! `tracecast ingest`: the traces of one job written as a Parquet dataset
//! that every command reads, with each rank's analysis summary cached in it.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use tracecast_ingest::Job;
use tracecast_ingest::analysis;

use crate::Outcome;
use crate::hardware::{catalog_with, rank_analysis};
use crate::inputs::{JobInput, TraceOptions, WindowOptions, for_each_input};

/// What `ingest` reads and where it writes the dataset.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// Trace files of one job, or its directory (default: none).
    pub paths: Vec<PathBuf>,
    /// The dataset directory, made when missing; a rank already in it is replaced (default: empty, refused).
    pub out: PathBuf,
    /// How the traces are read.
    pub read: TraceOptions,
    /// The window of the summaries kept in the dataset (`analyze DATASET` with the same window reads them).
    pub window: WindowOptions,
}

/// Writes every readable rank into the dataset, one rank at a time.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    crate::output::folder_outputs(&[("--out", Some(&args.out))], &[])?;
    let catalog = catalog_with(&args.read.hw)?;
    // A dataset keeps its traces as recorded: `--device` names their GPU when the dataset is
    // read, as it does a trace's, so it is checked here and not applied to what is written.
    let mut read_opts = args.read.read_options(&catalog)?;
    read_opts.device = None;
    let analyze = args.window.analyze_options(&args.read)?;
    let dataset = &args.out;
    // A dataset in a folder of the traces it is made from would shadow them: reading the
    // folder reads the dataset, which says nothing when the traces change.
    // Its own dataset, too: its parts would be refused one by one as inputs, after the first were rewritten.
    let same = |p: &Path| std::fs::canonicalize(p).ok().is_some_and(|c| std::fs::canonicalize(dataset).ok() == Some(c));
    let folder_of = |p: &Path| {
        if p.is_dir() { p.to_path_buf() } else { p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf() }
    };
    if let Some(p) = args.paths.iter().find(|p| same(&folder_of(p))) {
        anyhow::bail!(
            "{}: cannot write the dataset into the folder it reads (reading the folder would read the dataset, not the traces; a dataset is not rewritten in place): give --out another folder",
            p.display()
        );
    }
    // Another folder of files would end up holding a dataset among them: an existing folder must
    // be empty or a dataset (whose ranks are replaced).
    if let Some(other) = tracecast_ingest::dataset::foreign_entry(dataset) {
        anyhow::bail!(
            "{}: a folder of other files ({}), not a dataset: give --out a new or empty folder, or a dataset to add ranks to",
            dataset.display(),
            other.display()
        );
    }
    // The folders this command makes (the dataset's and its missing parents, deepest first) go
    // again if it writes no rank into them, whatever ends it, with the table folders its staged
    // ranks made (remove_dir removes only empty ones: another ingest's parts keep theirs; the
    // manifest comes only with a committed rank).
    struct Made {
        folders: Vec<PathBuf>,
        dataset: PathBuf,
        written: bool,
    }
    impl Drop for Made {
        fn drop(&mut self) {
            if !self.written {
                tracecast_ingest::output::remove_empty_folders(&self.dataset, &self.folders);
            }
        }
    }
    let mut made = Made {
        folders: dataset.ancestors().take_while(|p| !p.as_os_str().is_empty() && !p.exists()).map(Path::to_path_buf).collect(),
        dataset: dataset.clone(),
        written: false,
    };
    // And so does a stop (Ctrl-C) before any rank is put in place (a folder the user made stays).
    tracecast_ingest::output::remove_empty_folders_when_stopped(dataset.clone(), made.folders.clone());
    // A folder that cannot be made fails once, here, not once per rank (`--out /proc/ds` had
    // printed the same error for each of them).
    tracecast_ingest::output::create_dir(dataset)
        .map_err(|e| anyhow::anyhow!("{}: cannot make the dataset folder: {e}", dataset.display()))?;
    // Ranks written, and ranks read but not written (their analysis or their write failed); the
    // rank files written and those that could not be read: the dataset records the latter, so
    // that reading it names the ranks it lacks (it had read as a whole job, exit 0).
    let (mut written, mut unwritten) = (0usize, 0usize);
    // Ranks written without a cached summary: the --steps range selects nothing in them.
    let mut uncached = 0usize;
    let (mut sources, mut unread) = (Vec::new(), Vec::new());
    // And the files that lost their rank to another's: reading the dataset names them, as
    // reading the traces does (exit 2), not a whole job (exit 0). Once a file.
    let record = |unread: &mut Vec<(String, String, bool)>, failures: &[tracecast_ingest::Error]| {
        let kept = |e: &&tracecast_ingest::Error| {
            (e.is_unread_rank() && !matches!(e, tracecast_ingest::Error::NoStepsSelected { .. }))
                || matches!(e, tracecast_ingest::Error::DuplicateRank { .. } | tracecast_ingest::Error::SameFile { .. })
        };
        for e in failures.iter().filter(kept) {
            if let Some(p) = e.path() {
                let file = p.display().to_string();
                if unread.iter().any(|(f, _, _)| *f == file) {
                    continue;
                }
                let why = e.to_string();
                let why = why.strip_prefix(&format!("{file}: ")).unwrap_or(&why).to_string();
                unread.push((file, why, e.is_unread_rank()));
            }
        }
    };
    // What an ingest that was stopped (killed) left half-written goes.
    tracecast_ingest::dataset::remove_stopped_staging(dataset);
    tracecast_ingest::dataset::check_unread_record(dataset)?;
    // A trace of another run (another declared world) is not mixed into an existing dataset's job.
    let dataset_world = tracecast_ingest::dataset::declared_world(dataset);
    // One rank at a time: each trace is written as its part files and dropped.
    let read = |input: &mut JobInput<'_>| {
        let job_ranks = Job::ranks_in(&input.files);
        let write = |rank: &tracecast_ingest::job::Rank| {
            if let (Some((dataset_world, first)), Some(world)) = (&dataset_world, rank.trace.declared_world_size())
                && world != *dataset_world
            {
                return Err(tracecast_ingest::Error::OtherRunInDataset {
                    path: rank.trace.path.clone(),
                    world,
                    dataset: dataset.clone(),
                    dataset_world: *dataset_world,
                    first: first.clone(),
                });
            }
            // The summary `analyze` would make of this rank with these options. A `--steps`
            // range the rank does not have is an error, but the dataset holds the rank's
            // trace all the same (as `analyze` of the dataset reads it), without a summary.
            let ctx = analysis::RankContext::new(rank, &analyze.classifier);
            let (o, world, unselected) = match rank_analysis(&ctx, job_ranks, &analyze, &catalog, args.read.gpus_per_node) {
                Ok((o, world)) => (o, world, None),
                Err(e @ tracecast_ingest::Error::NoStepsSelected { .. }) => {
                    let mut every_step = analyze.clone();
                    every_step.steps = None;
                    let (o, world) = rank_analysis(&ctx, job_ranks, &every_step, &catalog, args.read.gpus_per_node)?;
                    (o, world, Some(e))
                }
                Err(e) => return Err(e),
            };
            let summary = analysis::summarize(&ctx, world, &o);
            let key = unselected.is_none().then(|| analysis::summary_key(&o, world));
            let staged = tracecast_ingest::dataset::write_rank(dataset, rank, ctx.steps(), key.as_deref(), &summary)?;
            Ok((staged, unselected, (rank.trace.path.display().to_string(), rank.rank)))
        };
        // Staged: a file that loses its rank to another (a declared rank outranks one taken
        // from a file's name or place) is dropped by the job's reduce, and its parts with it.
        let (parts, mut failures) = input.summarize(&read_opts, &|rank| Ok(write(rank)));
        let mut ranks = Vec::with_capacity(parts.len());
        for p in parts {
            match p {
                Ok((staged, unselected, source)) => {
                    // Counted once it is written (below): a rank whose commit fails is not among them.
                    ranks.push((staged, source, unselected.is_some()));
                    failures.extend(unselected);
                }
                Err(e) => {
                    unwritten += 1;
                    failures.push(e);
                }
            }
        }
        // The job's failures, what failed before any file was read among them (a path that is
        // not there, a dataset's own unread records).
        record(&mut unread, &failures);
        (Some(ranks), failures)
    };
    // Put in place only once every job is read: a `--strict` stop writes nothing (the
    // staged ranks go), as every other command's does.
    let mut staged = Vec::new();
    let failed = for_each_input(&args.paths, false, &args.read, read, |ranks, _| staged.extend(ranks))?.failed;
    let mut commit_failed = false;
    // Two input jobs holding one rank: a dataset holds one job, and the later had replaced the
    // earlier's part in silence ("4 rank(s) written" of a dataset of 2).
    let mut first_of: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut refused = false;
    staged.retain(|(rank, (file, number), _)| {
        let Some(part) = rank.events_name() else { return true };
        if let Some(first) = first_of.get(&part) {
            crate::output::stderr_line(format_args!(
                "error: {file}: rank {number} is also {first}'s, another input of this ingest: a dataset holds one job's ranks (ingest each job into its own); not written"
            ));
            (unwritten, refused) = (unwritten + 1, true);
            return false;
        }
        first_of.insert(part, file.clone());
        true
    });
    // Marked while the ranks go in place: a stop between them leaves a dataset of two ingests'
    // ranks, which the mark then says to every reader.
    let parts: Vec<String> = staged.iter().filter_map(|(rank, _, _)| rank.events_name()).collect();
    let mark = if staged.is_empty() { None } else { Some(tracecast_ingest::dataset::begin_commit(dataset, &parts)?) };
    for (rank, source, no_summary) in staged {
        match rank.commit() {
            Ok(_) => {
                written += 1;
                uncached += usize::from(no_summary);
                sources.push(source);
            }
            Err(e) => {
                unwritten += 1;
                commit_failed = true;
                crate::output::stderr_line(format_args!("error: {e}"));
            }
        }
    }
    // A rank that failed half-way may mix its parts: the mark stays, and says so once this run ends.
    if let Some(mark) = mark.filter(|_| !commit_failed) {
        mark.end(dataset);
    }
    // A run that wrote no rank still records its unreadable files in a dataset other runs made
    // (a Dask share of bad files alone: the dataset had read as whole, exit 0).
    if written > 0 || (!unread.is_empty() && tracecast_ingest::dataset::is_dataset(dataset)) {
        tracecast_ingest::dataset::record_unread(dataset, &sources, &unread)?;
    }
    made.written = written > 0;
    let failed = failed || commit_failed || refused;
    if written == 0 && unwritten > 0 {
        anyhow::bail!("{unwritten} rank(s) read, none written: nothing was written to {} (see the errors above)", dataset.display());
    }
    if written == 0 {
        anyhow::bail!("no trace could be read: nothing was written to {}", dataset.display());
    }
    if !args.read.quiet {
        // What the errors above did not stop, said with the count (it had read as a whole success).
        let uncached = match uncached {
            0 => String::new(),
            n => format!(" ({n} of them without a summary cached: the --steps range selects nothing in them; their events are kept)"),
        };
        writeln!(out, "{written} rank(s) written to the dataset {}{uncached}", dataset.display())?;
        // A dataset keeps its traces as recorded: the option names their GPU when the dataset is read.
        if let Some(id) = &args.read.device {
            writeln!(
                out,
                "note: --device {id} is not stored in the dataset (it keeps the traces as recorded): give it when reading the dataset"
            )?;
        }
    }
    Ok(Outcome::bad_files_if(failed))
}
