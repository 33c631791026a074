//! The one error type of the calibrate crate.

use std::path::PathBuf;

/// What can go wrong while calibrating.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A hardware file could not be read.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// A hardware file is not valid catalog TOML.
    #[error("{}: {message}", path.display())]
    Catalog {
        /// The file (or `<built-in>`).
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A file given as a calibration profile is not one.
    #[error("{}: {message}", path.display())]
    Profile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A measurements table (`--measurements FILE.csv`) has a bad row.
    #[error("{path}: line {line}: {message}")]
    Measurements {
        /// The file (or `shipped TABLE.csv`).
        path: String,
        /// The line (1-based; the header is line 1).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A GPU or node id is not in the catalog.
    #[error("unknown hardware {id:?}{}; `tracecast hw list` shows the known ids", closest.as_ref().map_or(String::new(), |c| format!(" (did you mean {c}?)")))]
    UnknownHardware {
        /// The id asked for.
        id: String,
        /// The known ids it may mean, quoted and joined by "or" (`h100sxm`: `"h100-sxm"`; `a100`: every `a100-…`).
        closest: Option<String>,
    },
    /// An output could not be written.
    #[error(transparent)]
    Ingest(#[from] tracecast_ingest::Error),
}

/// Result with the calibrate [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
