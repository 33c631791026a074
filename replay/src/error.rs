//! The one error type of the replay crate: what-if settings that do not parse,
//! plans, models, systems and runs the analytical models cannot project, and
//! runs files that cannot be read.

use std::path::PathBuf;

/// A `--scale`, `--link` or `--what-if` setting that is not valid. `flag`
/// names where it was written (`--scale`, `--what-if fast`), so every message
/// says which flag, scenario, key and value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A part between commas that is not `KEY=VALUE`.
    #[error("{flag}: {part:?} is not KEY=VALUE")]
    NotKeyValue {
        /// The flag (and scenario).
        flag: String,
        /// The part as written.
        part: String,
    },
    /// A key the flag does not take.
    #[error("{flag}: unknown key {key:?} ({known})")]
    UnknownKey {
        /// The flag (and scenario).
        flag: String,
        /// The key as written.
        key: String,
        /// The keys it takes.
        known: String,
    },
    /// A key given twice.
    #[error("{flag}: {key} is given twice")]
    DuplicateKey {
        /// The flag (and scenario).
        flag: String,
        /// The key.
        key: String,
    },
    /// A value that is not a number of the key's kind, or out of its range.
    #[error("{flag}: {key}={value:?}: {expected}")]
    BadValue {
        /// The flag (and scenario).
        flag: String,
        /// The key.
        key: String,
        /// The value as written.
        value: String,
        /// What the key takes.
        expected: &'static str,
    },
    /// α-β link keys without the bandwidth that costs the bytes.
    #[error("{flag}: the α-β link keys need busbw=GBPS (alpha defaults to 0 µs)")]
    MissingBusbw {
        /// The flag (and scenario).
        flag: String,
    },
    /// A `--what-if` without `NAME:` in front of its settings, or without settings after a name.
    #[error("--what-if {spec:?}: missing {missing} (write NAME:KEY=VALUE,…, e.g. fast:compute=2)")]
    MissingName {
        /// The argument as written.
        spec: String,
        /// What it lacks: `NAME` or its `:KEY=VALUE` settings.
        missing: &'static str,
    },
    /// A scenario name that is not one word of letters, digits, `-`, `_`, `.` or `+`.
    #[error("--what-if {name:?}: a scenario name is letters, digits, '-', '_', '.' or '+'")]
    BadName {
        /// The name as written.
        name: String,
    },
    /// A parallelization plan that does not parse, overflows, or cannot run its model on its cluster.
    #[error("{0}")]
    Plan(String),
    /// A model the analytical models cannot project (missing or invalid dimensions).
    #[error("{0}")]
    Model(String),
    /// A cluster or system description that cannot be built (unknown GPU, missing peak, bad figure).
    #[error("{0}")]
    System(String),
    /// A measured run whose task, precision or measurement cannot be compared.
    #[error("{0}")]
    Run(String),
    /// Work nothing in the catalog or the measured base can price (FP4 linear
    /// layers): a limit of the tool, where the other variants are limits of the input.
    #[error("{0}")]
    Unpriced(String),
    /// Two scenarios of one run with the same name (or one named `measured`, the identity row).
    #[error("--what-if {name}: {reason}")]
    DuplicateName {
        /// The name.
        name: String,
        /// Given twice, or reserved.
        reason: &'static str,
    },
    /// A file (a runs file) that could not be read.
    #[error("reading {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        cause: std::io::Error,
    },
    /// A file given as a runs file that is not one.
    #[error("{}: not a runs file (see `tracecast validate --help`){key}", path.display())]
    RunsFile {
        /// The file.
        path: PathBuf,
        /// Where in it, as ` (at "power_w")`, when a key precedes the error.
        key: String,
        /// What is wrong, and where in the file.
        #[source]
        cause: serde_json::Error,
    },
}
