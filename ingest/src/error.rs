//! The one error type of the ingest crate.

use std::path::PathBuf;

/// Everything that can go wrong while reading a trace or assembling a job.
///
/// Every variant names the file; variants about content also name the byte
/// offset (into the decompressed JSON for gzip files) where it is known, and
/// print as `FILE: byte N: cause`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened or read.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The trace file.
        path: PathBuf,
        /// The underlying cause.
        cause: std::io::Error,
    },
    /// The gzip stream is damaged or ends early.
    #[error("{}: byte {decompressed_offset}{} (decompressed): gzip stream is damaged or truncated: {cause}", path.display(), damage_after(cause))]
    Gzip {
        /// The trace file.
        path: PathBuf,
        /// How many bytes had been inflated when the stream broke.
        decompressed_offset: u64,
        /// The underlying cause.
        cause: std::io::Error,
    },
    /// The file is empty (or holds only whitespace).
    #[error("{}: file is empty", path.display())]
    Empty {
        /// The trace file.
        path: PathBuf,
    },
    /// The JSON is invalid, truncated, or has a value of the wrong type.
    #[error("{}: byte {byte_offset}{}: {message}", path.display(), if *decompressed { " (decompressed)" } else { "" })]
    Json {
        /// The trace file.
        path: PathBuf,
        /// Offset into the (decompressed) JSON text.
        byte_offset: u64,
        /// Whether the file is gzip, so the offset is into its inflated text (said as a damaged gzip stream's is).
        decompressed: bool,
        /// What was wrong there.
        message: String,
    },
    /// Valid JSON that is not a Kineto trace (no `traceEvents`, not an object, …).
    #[error("{}: {message}", path.display())]
    Schema {
        /// The trace file.
        path: PathBuf,
        /// What is missing or unexpected.
        message: String,
    },
    /// An SQLite database (an Nsight Systems export) that SQLite cannot read:
    /// damaged, truncated, locked by a writer.
    #[error("{}: {message}", path.display())]
    Sqlite {
        /// The export.
        path: PathBuf,
        /// What SQLite reported, in words.
        message: String,
    },
    /// Two files of one job claim the same rank.
    #[error("{}: rank {rank} is also claimed by {}", second.display(), first.display())]
    DuplicateRank {
        /// The rank both files claim.
        rank: u32,
        /// The file that kept the rank.
        first: PathBuf,
        /// The file that was left out.
        second: PathBuf,
    },
    /// A file given again among a job's inputs (twice, or through a link): read once; an error
    /// as DESIGN §2 makes duplicates (its ranks would be claimed twice).
    #[error("{}: the same file as {} (given twice, through a link, or a byte-identical copy): read once", path.display(), first.display())]
    SameFile {
        /// The repeated name.
        path: PathBuf,
        /// The name it was read by.
        first: PathBuf,
    },
    /// A trace ingested into a dataset of another run: it declares another world size than the
    /// dataset's ranks (mixed in, the dataset had read as one job of unrelated ranks).
    #[error(
        "{}: declares a world size of {world}, where the dataset {} holds ranks of a world of {dataset_world} (as {}): a trace of another run, not written (give it a dataset of its own)",
        path.display(),
        dataset.display(),
        first.display()
    )]
    OtherRunInDataset {
        /// The trace not written.
        path: PathBuf,
        /// The world size it declares.
        world: u32,
        /// The dataset.
        dataset: PathBuf,
        /// The world size its ranks declare.
        dataset_world: u32,
        /// The source file of the dataset's rank declaring it.
        first: PathBuf,
    },
    /// A file of another run among a job's files: it declares another world size.
    #[error(
        "{}: declares a world size of {world}, where this job's files declare {job_world} (as {}): a trace of another run, left out (--each reads each file as a job of its own; `report --each A B` pages their diff)",
        path.display(),
        first.display()
    )]
    OtherRun {
        /// The file left out.
        path: PathBuf,
        /// The world size it declares.
        world: u32,
        /// The world size of the job.
        job_world: u32,
        /// The first file declaring the job's.
        first: PathBuf,
    },
    /// A rank file that could not be read when its dataset was ingested (`DATASET/unread.json`),
    /// or a file left out then as no rank of the job (it lost its rank to another file's): the
    /// dataset is that job less the file, and says so whenever it is read.
    #[error("{}: {} when the dataset {} was ingested: {message}", path.display(), if *rank { "could not be read" } else { "was left out" }, dataset.display())]
    UnreadAtIngest {
        /// The trace file, where it was when it was ingested.
        path: PathBuf,
        /// The dataset.
        dataset: PathBuf,
        /// Why it could not be read, as printed then.
        message: String,
        /// Whether it is a rank of the job (the world counts it), not a file that lost its
        /// rank to another's.
        rank: bool,
    },
    /// A dataset's record of the files its ingest could not take in (`DATASET/unread.json`)
    /// that cannot be read: which ranks it named is not known.
    #[error("{}: {message}", path.display())]
    DamagedRecord {
        /// The record.
        path: PathBuf,
        /// Why, in words, and what to do.
        message: String,
    },
    /// A dataset that holds no rank (its ingest wrote none, or was stopped before its first).
    #[error("{}: a dataset that holds no rank (its ingest wrote none, or was stopped before it wrote one): ingest the traces into it again", path.display())]
    EmptyDataset {
        /// The dataset.
        path: PathBuf,
    },
    /// A path given as a job holds no trace files.
    #[error("{}: no trace files (*.json, *.json.gz, *.gz, *.sqlite) in this directory", path.display())]
    NoTraces {
        /// The directory.
        path: PathBuf,
    },
    /// A user-supplied pattern (for example `--comm-pattern`) is not a valid regular expression.
    #[error("invalid pattern {pattern:?}: {message}")]
    Pattern {
        /// The pattern as given.
        pattern: String,
        /// Why it was rejected.
        message: String,
    },
    /// A step range (`--steps`) that selects none of a trace's steps.
    #[error("steps {first}..{last} select nothing in {}: it has {has}", path.display())]
    NoStepsSelected {
        /// The trace file.
        path: PathBuf,
        /// First step number of the range.
        first: i64,
        /// Last step number of the range (inclusive).
        last: i64,
        /// The steps the trace has, in words (`steps 1009–1014`).
        has: String,
    },
    /// An output file could not be written.
    // The cause is in the message, not a `source`: chained, it would print twice.
    #[error("{}: cannot write: {cause}", path.display())]
    Write {
        /// The output file.
        path: PathBuf,
        /// The underlying cause.
        cause: std::io::Error,
    },
}

impl Error {
    /// Whether this failure is of a rank of the job that could not be read (or analysed): the
    /// world size counts it. A duplicate, a file given twice, another run's file, an empty
    /// directory, a bad pattern or an output error is no rank of the job.
    pub fn is_unread_rank(&self) -> bool {
        match self {
            Error::Io { .. }
            | Error::Gzip { .. }
            | Error::Empty { .. }
            | Error::Json { .. }
            | Error::Schema { .. }
            | Error::Sqlite { .. }
            | Error::NoStepsSelected { .. } => true,
            Error::UnreadAtIngest { rank, .. } => *rank,
            Error::DuplicateRank { .. }
            | Error::SameFile { .. }
            | Error::OtherRun { .. }
            | Error::OtherRunInDataset { .. }
            | Error::NoTraces { .. }
            | Error::EmptyDataset { .. }
            | Error::DamagedRecord { .. }
            | Error::Pattern { .. }
            | Error::Write { .. } => false,
        }
    }

    /// The trace or output file this error is about, when there is one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            Error::Io { path, .. }
            | Error::Gzip { path, .. }
            | Error::Empty { path }
            | Error::Json { path, .. }
            | Error::Schema { path, .. }
            | Error::Sqlite { path, .. }
            | Error::NoTraces { path }
            | Error::EmptyDataset { path }
            | Error::DamagedRecord { path, .. }
            | Error::OtherRun { path, .. }
            | Error::OtherRunInDataset { path, .. }
            | Error::SameFile { path, .. }
            | Error::NoStepsSelected { path, .. }
            | Error::UnreadAtIngest { path, .. }
            | Error::Write { path, .. } => Some(path),
            Error::DuplicateRank { second, .. } => Some(second),
            Error::Pattern { .. } => None,
        }
    }
}

/// Result with the ingest [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A JSON reader's message without the line and column it appends (` at line 1 column 18`):
/// for text read out of a larger file, they count from the piece, not the file. Cut at the
/// last one, so that a quoted value holding the words keeps them.
pub fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) if e.line() > 0 => message.to_string(),
        _ => text,
    }
}

/// Where a gzip stream's damage lies past the offset said: a stream cut short breaks exactly
/// there; a corrupt one within the reader's last call ([`crate::kineto::GZIP_CALL`]).
fn damage_after(cause: &std::io::Error) -> String {
    if cause.kind() == std::io::ErrorKind::UnexpectedEof {
        String::new()
    } else {
        format!(" or within the {} KiB after it", crate::kineto::GZIP_CALL >> 10)
    }
}
