//! The `tracecast` command line: argument parsing and one library call per
//! command (the work is `tracecast_pipeline`'s).

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Command};
use tracecast_ingest::analysis;
use tracecast_pipeline::{Outcome, analyze, calibrate, demo, diff, hw, ingest, project, replay, report, search, synth, validate};

/// The bundled demo job, relative to the crate root so `cargo run` finds it anywhere.
const DEMO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/demo");

fn main() -> ExitCode {
    let cli = Cli::parse();
    let out = &mut std::io::stdout();
    let result = match cli.command {
        Command::Analyze(args) => analyze::run(&args.into_options(), out),
        Command::Calibrate(args) => calibrate::run(&args.into_options(), out),
        Command::Replay(args) => replay::run(&args.into_options(), out),
        Command::Project(args) => project::run(&args.into_options(), out),
        Command::Search(args) => search::run(&args.into_options(), out),
        Command::Validate(args) => validate::run(&args.into_options(), out),
        Command::Report(args) => report::run(&args.into_options(), out),
        Command::Diff(args) => diff::run(&args.into_options(), out),
        Command::Ingest(args) => ingest::run(&args.into_options(), out),
        Command::Synth(args) => synth::run(&args.into_options(), out),
        Command::Hw(args) => hw::run(&args.into_options(), out),
        Command::Demo => {
            let mut o = demo::Options::default();
            o.dir = PathBuf::from(DEMO_DIR);
            demo::run(&o, out)
        }
    };
    // A diagnostic for tests: how often each per-rank fact was computed.
    if std::env::var_os("TRACECAST_COUNT_FACTS").is_some() {
        eprintln!("facts computed: {}", analysis::facts::counts());
    }
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::NoPlan | Outcome::Regressed) => ExitCode::from(1),
        Ok(Outcome::BadFiles) => ExitCode::from(2),
        // A write to a closed pipe (`tracecast … | head`) ends quietly with exit status 0, as
        // ripgrep's: the reader took what it wanted (STYLE). Rust ignores SIGPIPE, so the write
        // fails with `BrokenPipe` instead of killing the process.
        Err(e) if e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)) => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
