//! Output files: JSON documents, and one file per device when a command
//! writes several (`profile.json` → `profile.h100-sxm.json`).

use std::path::{Path, PathBuf};

use anyhow::Result;

/// Writes one line of diagnostics (an error, a failed gate) to stderr. A
/// closed stderr (`2>&1 | head -1`) silences it, as a closed stdout silences
/// the terminal text: `eprintln!` would panic and end the command with
/// status 101 instead of its own.
pub fn stderr_line(line: std::fmt::Arguments) {
    use std::io::Write;
    let text = line.to_string();
    let mut err = std::io::stderr().lock();
    for l in text.lines() {
        let _ = writeln!(err, "{}", shorten(l, MAX_LINE_CHARS));
    }
}

/// Says on stderr that the outputs named (flag, path) were not written because no input
/// could be read and analysed: a command whose every input failed leaves those files as they were (an
/// empty `{"jobs": []}` had replaced the last good one).
pub fn nothing_written(outputs: &[(&str, Option<&Path>)]) {
    let named: Vec<String> = outputs.iter().filter_map(|(flag, p)| p.map(|p| format!("{flag} {}", p.display()))).collect();
    if !named.is_empty() {
        stderr_line(format_args!("no input could be analysed: nothing was written ({})", named.join(", ")));
    }
}

/// The most characters of one diagnostic line: a parser's error quotes the offending
/// line of its input, and a one-line JSON trace given as a TOML catalog made it 1.8 MB.
const MAX_LINE_CHARS: usize = 400;

/// `line`, cut after `max` characters with a count of what was left out.
fn shorten(line: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(max) {
        None => line.into(),
        Some((cut, _)) => format!("{} … ({} more characters)", &line[..cut], line[cut..].chars().count()).into(),
    }
}

/// An error when two of a command's outputs (flag, path) would land on one
/// path: the later had silently replaced the earlier (`--json r.json --perfetto r.json` kept only the
/// timeline); or when one is a trace file of its `inputs` ([`outputs_not_inputs`]). Paths are
/// compared by the file they name, as inputs are.
pub fn distinct_outputs(outputs: &[(&str, Option<&Path>)], inputs: &[PathBuf]) -> Result<()> {
    // A device or pipe (`/dev/null`) takes any number of writes; an empty path is refused by its command.
    let device = |p: &Path| std::fs::metadata(p).is_ok_and(|m| !m.is_file() && !m.is_dir());
    let given: Vec<(&str, PathBuf)> = outputs
        .iter()
        .filter_map(|(flag, p)| p.filter(|p| !p.as_os_str().is_empty() && !device(p)).map(|p| (*flag, resolved(p))))
        .collect();
    for (i, (a, pa)) in given.iter().enumerate() {
        for (b, pb) in &given[i + 1..] {
            if pa == pb {
                let what = if pa.as_os_str() == "-" { "standard output".to_string() } else { pa.display().to_string() };
                anyhow::bail!("{a} and {b} both write {what}: give each its own path");
            }
        }
    }
    // A flag that writes one file, given a folder that exists: refused before the work (the
    // write had refused it, but only once the whole result had been printed).
    if let Some((flag, p)) = outputs
        .iter()
        .find_map(|(flag, p)| p.filter(|p| matches!(*flag, "--json" | "--perfetto" | "--fit") && p.is_dir()).map(|p| (flag, p)))
    {
        anyhow::bail!("{flag} {}: a directory is in its place; give a file path", p.display());
    }
    outputs_not_inputs(outputs, inputs)
}

/// An error where an output file is one of the trace files `inputs` stand for, said before
/// anything is read: the write would be refused ([`tracecast_ingest::input`]), but only once the
/// whole job had been analysed and printed.
fn outputs_not_inputs(outputs: &[(&str, Option<&Path>)], inputs: &[PathBuf]) -> Result<()> {
    // Each output's key once: (flag, path, where it is).
    let keyed: Vec<(&str, &Path, PathBuf)> =
        outputs.iter().filter_map(|(flag, p)| p.and_then(|p| Some((*flag, p, tracecast_ingest::input::file_key(p)?)))).collect();
    if keyed.is_empty() {
        return Ok(());
    }
    for input in inputs {
        // A folder is listed only where an output lies inside it (not each trace of every job).
        let folder = resolved(input);
        if input.is_dir() && !keyed.iter().any(|k| k.2.starts_with(&folder)) {
            continue;
        }
        for trace in tracecast_ingest::job::trace_files(input).unwrap_or_default() {
            let Some(key) = tracecast_ingest::input::file_key(&trace) else { continue };
            if let Some((flag, path, _)) = keyed.iter().find(|k| k.2 == key) {
                anyhow::bail!(
                    "{flag} {}: it is an input of this command ({}); choose another output path",
                    path.display(),
                    trace.display()
                );
            }
        }
    }
    Ok(())
}

/// An error where a flag that writes a folder of files is given `-`: standard
/// output holds one stream, and `-` taken as a folder's name had made `./-` in the
/// working directory while the command said nothing of it.
///
/// Nor one of the command's `inputs`: files dropped among the traces would change the folder the
/// job is read from (`report --png` refused it; `analyze --csv` and `calibrate --plots` wrote there).
pub fn folder_outputs(outputs: &[(&str, Option<&Path>)], inputs: &[PathBuf]) -> Result<()> {
    if let Some((flag, _)) = outputs.iter().find(|(_, p)| p.is_some_and(|p| p.as_os_str() == "-")) {
        anyhow::bail!("{flag} writes a folder of files, which standard output (`-`) cannot hold: give a folder");
    }
    for (flag, dir) in outputs.iter().filter_map(|(flag, p)| Some((flag, (*p)?))) {
        // Before any output is written: a file in the folder's place had been found by the charts
        // only once `--json` had replaced its file.
        if let Some(why) = tracecast_ingest::output::not_a_directory(dir) {
            anyhow::bail!("{}: cannot make the folder ({flag}): {why}", dir.display());
        }
        // Known as inputs and outputs are ([`resolved`]).
        if let Some(input) = inputs.iter().find(|p| resolved(p) == resolved(dir)) {
            anyhow::bail!("{flag} {}: that folder is an input ({}); give the files a folder of their own", dir.display(), input.display());
        }
    }
    Ok(())
}

/// The file `path` writes: `-` as it is, else the file it names, links followed
/// ([`tracecast_ingest::input::file_key`], as inputs are known).
fn resolved(path: &Path) -> PathBuf {
    if path.as_os_str() == "-" {
        return path.to_path_buf();
    }
    tracecast_ingest::input::file_key(path).unwrap_or_else(|| path.to_path_buf())
}

/// [`write_json`], staged: put in place by its `commit`, with the other outputs of the command.
pub fn stage_json(path: &Path, value: &impl serde::Serialize) -> Result<tracecast_ingest::output::Staged> {
    Ok(tracecast_ingest::output::stage(path, &pretty_json(value)?)?)
}

/// `value` as pretty JSON with a final newline: what every JSON output holds.
fn pretty_json(value: &impl serde::Serialize) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes `value` as pretty JSON with a final newline, atomically.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    tracecast_ingest::output::write_atomic(path, &pretty_json(value)?)?;
    Ok(())
}

/// `profile.json` → `profile.h100-sxm.json`; a compressed file keeps its two extensions
/// together (`timeline.json.gz` → `timeline.job2.json.gz`, not `timeline.json.job2.gz`).
/// Standard output, devices and folders are not a file to name others by: refused (`-` had made
/// files named `-.a100-80gb` in the working folder, and `/dev/full` ones inside `/dev`).
pub fn per_device(path: &Path, id: &str) -> Result<PathBuf> {
    if path.as_os_str() == "-" || std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        anyhow::bail!(
            "{}: one file is written per GPU or job here ({id} among them), which a stream, a device or a folder cannot hold: give a file name",
            path.display()
        );
    }
    Ok(per_device_name(path, id))
}

/// [`per_device`] where the path is known to be a file's (a stream refused before).
pub(crate) fn per_device_name(path: &Path, id: &str) -> PathBuf {
    let name = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "profile".into());
    let cut = match name.strip_suffix(".gz") {
        Some(inner) => inner.rfind('.').filter(|&i| i > 0).or(Some(inner.len())),
        None => name.rfind('.'),
    };
    match cut.filter(|&i| i > 0) {
        Some(i) => path.with_file_name(format!("{}.{id}{}", &name[..i], &name[i..])),
        None => path.with_file_name(format!("{name}.{id}")),
    }
}

/// The file-name id of a profile's device: its catalog id, else its device
/// name made file-safe (so two devices the catalog lacks do not share a file).
pub fn device_file_id(p: &tracecast_calibrate::Profile) -> String {
    match &p.device.catalog_id {
        Some(id) => id.clone(),
        None => {
            let slug: String =
                p.device.name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
            let slug = slug.split('-').filter(|s| !s.is_empty()).collect::<Vec<_>>().join("-");
            if slug.is_empty() { "unknown".to_string() } else { format!("unknown-{slug}") }
        }
    }
}

/// Standard output that a closed pipe silences instead of failing: the reader
/// took what it wanted (`tracecast … | head`, STYLE), while the command still
/// writes its files and ends with its own exit status. Rust ignores SIGPIPE,
/// so such a write fails with `BrokenPipe` instead of ending the process.
/// Every command's terminal output goes through it.
pub struct Stdout {
    inner: Box<dyn std::io::Write>,
    closed: bool,
}

impl Default for Stdout {
    fn default() -> Stdout {
        Stdout { inner: Box::new(std::io::stdout()), closed: false }
    }
}

impl Stdout {
    /// The terminal text of a command given `arguments`: on standard error where
    /// an output is standard output (`--json -`, `--json=-`), which then keeps it
    /// to itself so that `| jq` reads JSON alone. No input is read from `-`.
    /// Made once per command line, it also makes each output path it writes its own
    /// ([`tracecast_ingest::output::claim_each_output_once`]).
    pub fn for_arguments(mut arguments: impl Iterator<Item = std::ffi::OsString>) -> Stdout {
        tracecast_ingest::output::claim_each_output_once();
        tracecast_ingest::output::remove_staged_when_stopped();
        let to_stdout = |a: &std::ffi::OsStr| a == "-" || a.to_str().is_some_and(|s| s.starts_with("--") && s.ends_with("=-"));
        if arguments.any(|a| to_stdout(&a)) { Stdout { inner: Box::new(std::io::stderr()), closed: false } } else { Stdout::default() }
    }
}

impl Stdout {
    fn unless_closed(&mut self, r: std::io::Result<usize>, len: usize) -> std::io::Result<usize> {
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(len)
            }
            r => r,
        }
    }
}

impl std::io::Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = if self.closed { Ok(buf.len()) } else { self.inner.write(buf) };
        self.unless_closed(r, buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = if self.closed { Ok(0) } else { self.inner.flush().map(|()| 0) };
        self.unless_closed(r, 0).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_outputs_on_one_path_are_refused() {
        let p = |s: &str| std::path::PathBuf::from(s);
        let (a, b, c) = (p("r.json"), p("./sub/../r.json"), p("out"));
        let e = super::distinct_outputs(&[("--json", Some(&p("-"))), ("--perfetto", Some(&p("-")))], &[]).unwrap_err().to_string();
        assert!(e.contains("both write standard output"), "{e}");
        let e = super::distinct_outputs(&[("--json", Some(&a)), ("--perfetto", Some(&b))], &[]).unwrap_err().to_string();
        assert!(e.contains("--json and --perfetto both write") && e.ends_with("give each its own path"), "{e}");
        let e = super::distinct_outputs(&[("--csv", Some(&c)), ("--parquet", Some(&p("sub/../out")))], &[]).unwrap_err().to_string();
        assert!(e.starts_with("--csv and --parquet both write"), "{e}");
        // Apart, inside another's directory, or not given: fine.
        let (d, e2) = (p("out.json"), p("out/a.json"));
        assert!(
            super::distinct_outputs(&[("--csv", Some(&c)), ("--json", Some(&d)), ("--plots", Some(&e2)), ("--parquet", None)], &[]).is_ok()
        );
    }

    use super::*;

    #[test]
    fn per_device_puts_the_id_before_the_extension() {
        assert_eq!(per_device_name(Path::new("out/profile.json"), "h100-sxm"), PathBuf::from("out/profile.h100-sxm.json"));
        // A stream or a device holds no file per GPU (`-` had made `./-.a100-80gb`).
        for stream in ["-", "/dev/null"] {
            let e = per_device(Path::new(stream), "a100-80gb").unwrap_err().to_string();
            assert!(e.contains("one file is written per GPU or job here"), "{e}");
        }
        assert_eq!(per_device_name(Path::new("profile"), "mi300x"), PathBuf::from("profile.mi300x"));
        // Both extensions of a compressed file stay together (a tool that reads the name reads gzip JSON).
        assert_eq!(per_device_name(Path::new("t/timeline.json.gz"), "job2"), PathBuf::from("t/timeline.job2.json.gz"));
        assert_eq!(per_device_name(Path::new("timeline.gz"), "job2"), PathBuf::from("timeline.job2.gz"));
        assert_eq!(per_device_name(Path::new(".hidden"), "job2"), PathBuf::from(".hidden.job2"));
    }

    #[test]
    fn a_long_diagnostic_line_is_cut_with_what_was_left_out() {
        assert_eq!(shorten("short", 400), "short");
        let long = "é".repeat(1000);
        assert_eq!(shorten(&long, 400), format!("{} … (600 more characters)", "é".repeat(400)));
    }
}
