//! The `tracecast` command line: argument parsing and one library call per
//! command (the work is `tracecast_pipeline`'s).

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Command};
use tracecast_ingest::analysis;
use tracecast_pipeline::{Outcome, analyze, calibrate, demo, diff, hw, ingest, output, project, replay, report, search, synth, validate};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let out = &mut output::Stdout::for_arguments(std::env::args_os().skip(1));
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
        Command::Demo => demo::run(&demo::Options::default(), out),
    };
    // A diagnostic for tests: how often each per-rank fact was computed.
    if std::env::var_os("TRACECAST_COUNT_FACTS").is_some() {
        output::stderr_line(format_args!("facts computed: {}", analysis::facts::counts()));
    }
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::NoPlan | Outcome::Regressed) => ExitCode::from(1),
        Ok(Outcome::BadFiles) => ExitCode::from(2),
        Err(e) => {
            output::stderr_line(format_args!("error: {e:#}"));
            ExitCode::from(2)
        }
    }
}
