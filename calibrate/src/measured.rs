//! The measured performance base: public measurements of GEMMs, attention
//! kernels, HBM bandwidth and collectives per GPU, each row with its source.
//!
//! The base ships embedded in the binary (`calibrate/measurements/*.csv`,
//! copied from `../shared/evidence` by `calibrate/measurements/regenerate.sh`;
//! the evidence README names every source, its license and how each number
//! was read). Users add their own measurements in the same formats with
//! `--measurements FILE.csv` (the table is recognised by its header): their
//! rows come first wherever they cover what is priced.
//!
//! GEMM columns: `source_id, gpu, dtype, batch, m, n, k, tflops, time_us, notes`
//! (one of `tflops`, `time_us` may be empty; FLOPs = 2·batch·m·n·k).
//! Attention: `source_id, gpu, kernel, direction, causal, head_dim, seqlen,
//! batch, heads, tflops, time_us, dtype, notes`. Collectives: `source_id, gpu,
//! collective, library, gpus, nodes, gpus_per_node, network, algo, size_bytes,
//! time_us, algbw_gbps, busbw_gbps, in_place, notes` (nccl-tests' columns;
//! `size_bytes` is the nccl-tests size). Memory: `source_id, gpu, metric,
//! bandwidth_gbps, value_as_published, unit_as_published, tool, notes`.

use std::path::Path;
use std::sync::Arc;

use tracecast_ingest::collective::Collective;

use crate::catalog::Dtype;
use crate::error::{Error, Result};
use crate::pricing::{CollectiveIndex, GemmIndex};

/// The columns a measurements table reads that move no price (provenance and remarks).
const UNPRICED: [&str; 7] = ["source_id", "notes", "library", "network", "value_as_published", "unit_as_published", "tool"];

/// What makes two collective rows of one file the same measurement: source, GPU, collective,
/// (GPUs, nodes, GPUs per node), algorithm, in place, size (its bits).
type CollectiveKey = (Arc<str>, Arc<str>, Collective, (u32, u32, u32), String, Option<bool>, u64);

/// The columns that move a price (a slip of one is refused; of `notes`, `tool`, … it is not).
const PRICED: [&str; 27] = [
    "gpu",
    "dtype",
    "batch",
    "m",
    "n",
    "k",
    "tflops",
    "time_us",
    "load",
    "kernel",
    "direction",
    "causal",
    "head_dim",
    "seqlen",
    "heads",
    "collective",
    "gpus",
    "nodes",
    "gpus_per_node",
    "algo",
    "size_bytes",
    "algbw_gbps",
    "busbw_gbps",
    "in_place",
    "metric",
    "bandwidth_gbps",
    "nic_gbps_per_gpu",
];

/// How near column `h` comes to being a slip of column `c`, the nearest first: another case
/// (`GPU`), a plural or an underscore more or less (`batches`, `gpu_per_node`, `inplace`,
/// `seq_len`), its unit left off (`time`, `size`), another unit (`time_ms`), a word added
/// (`batch_size`); `None` where it is none. Names under three letters (`b`, `ms`) are no slips.
fn slip_of(h: &str, c: &str) -> Option<u8> {
    let h = h.to_ascii_lowercase();
    if h.len() < 3 {
        return None;
    }
    // The words without underscores and plural endings.
    let squash = |x: &str| {
        x.split('_')
            .map(|w| w.strip_suffix("es").filter(|s| s.ends_with("ch")).or_else(|| w.strip_suffix('s')).unwrap_or(w).to_string())
            .collect::<String>()
    };
    let stem = |x: &str| x.split('_').next().unwrap_or_default().to_string();
    let rules = [
        h == c,
        squash(&h) == squash(c),
        c.strip_prefix(h.as_str()).is_some_and(|rest| rest.starts_with('_')),
        c.contains('_') && h.contains('_') && stem(&h).len() >= 3 && stem(&h) == stem(c),
        c.len() >= 3 && h.strip_prefix(c).is_some_and(|rest| rest.starts_with('_')),
    ];
    rules.iter().position(|r| *r).map(|i| i as u8)
}

/// Where a row comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    /// The source's id (`xla-matmul-perf-table`, `echo-a100`, or the user's).
    pub source_id: Arc<str>,
    /// The file it was read from (`shipped` for the embedded base).
    pub file: Arc<str>,
    /// Its line in that file (1-based; the header is line 1).
    pub line: usize,
}

/// One measured GEMM.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmRow {
    /// GPU id as the source names it (a catalog id or a `measured_as` id).
    pub gpu: Arc<str>,
    /// The input type's class for pricing (16-bit, FP8, TF32, FP32).
    pub dtype: Dtype,
    /// Independent GEMMs.
    pub batch: f64,
    /// Output rows.
    pub m: f64,
    /// Output columns.
    pub n: f64,
    /// Reduction dimension.
    pub k: f64,
    /// Measured time, µs.
    pub time_us: f64,
    /// Where it comes from.
    pub from: Provenance,
}

/// Attention direction as measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Forward only.
    Forward,
    /// Forward plus backward (the backward alone is 2.5× the forward's FLOPs).
    ForwardBackward,
    /// Not stated by the source.
    Unstated,
}

/// One measured attention kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionRow {
    /// GPU id as the source names it.
    pub gpu: Arc<str>,
    /// Kernel family (`fa2`, `fa3`, `pytorch-standard`, `aotriton`, …).
    pub kernel: Arc<str>,
    /// What was timed.
    pub direction: Direction,
    /// Causal mask.
    pub causal: bool,
    /// Head dimension.
    pub head_dim: f64,
    /// Sequence length (queries = keys).
    pub seq: f64,
    /// Batch.
    pub batch: f64,
    /// Heads.
    pub heads: f64,
    /// Achieved TFLOP/s as the source counts FLOPs (forward 4·b·h·s²·d, halved when causal; fwd+bwd 3.5×).
    pub tflops: f64,
    /// Where it comes from.
    pub from: Provenance,
}

/// One point of a collective's measured curve.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveRow {
    /// GPU id as the source names it.
    pub gpu: Arc<str>,
    /// The collective.
    pub collective: Collective,
    /// GPUs taking part.
    pub gpus: u32,
    /// Nodes they span.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// Algorithm when the source states it (`nvls`, `ring`, …); empty otherwise.
    pub algo: Arc<str>,
    /// nccl-tests size, bytes.
    pub size_bytes: f64,
    /// Time, µs (from `time_us`, else from `size_bytes / algbw`).
    pub time_us: f64,
    /// nccl-tests' in-place column (`Some(true)`), out-of-place (`Some(false)`), or a single figure.
    pub in_place: Option<bool>,
    /// Where it comes from.
    pub from: Provenance,
}

/// The network a source's multi-node collectives ran over: GB/s of NICs per
/// GPU (the `networks` table, shipped for the sources that state or name it,
/// or the user's). A curve of a source without one is taken to be on its
/// GPU's node preset network.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkRow {
    /// GPU id as the source names it.
    pub gpu: Arc<str>,
    /// GPUs per node of the measured system.
    pub gpus_per_node: u32,
    /// NIC bandwidth per GPU, GB/s (one direction).
    pub nic_gbps_per_gpu: f64,
    /// Where it comes from (`source_id` names the collectives' source).
    pub from: Provenance,
}

/// One measured memory bandwidth.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRow {
    /// GPU id as the source names it.
    pub gpu: Arc<str>,
    /// `stream_triad`, `stream_copy`, `h2d`, …
    pub metric: Arc<str>,
    /// GB/s.
    pub bandwidth_gbps: f64,
    /// Where it comes from.
    pub from: Provenance,
}

/// The measured performance base: shipped rows and the user's.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    /// GEMMs.
    pub gemm: Vec<GemmRow>,
    /// GEMMs timed under sustained load (a `load = sustained` row: seconds of calls
    /// back to back, the clock at the GPU's power limit): not shapes of a table, but the rate
    /// its silicon holds in a training step ([`crate::pricing::Pricing::sustained_gemm_rate`]).
    pub gemm_sustained: Vec<GemmRow>,
    /// Attention kernels.
    pub attention: Vec<AttentionRow>,
    /// Collective curves.
    pub collectives: Vec<CollectiveRow>,
    /// HBM and host-link bandwidths.
    pub memory: Vec<MemoryRow>,
    /// Networks of the collectives' multi-node sources.
    pub networks: Vec<NetworkRow>,
    /// Files added by the user, in order (their rows take precedence).
    pub user_files: Vec<Arc<str>>,
    /// The pricing layer's GEMM tables and rates derived from `gemm` and
    /// `user_files`: built by the first [`crate::pricing::Pricing`] over this
    /// base that needs them and shared by every later one. Empty in a default
    /// or a clone; [`Measurements::add_text`] empties it. Rows changed in
    /// place after pricing would leave it stale: change them in a clone.
    pub(crate) gemm_index: GemmIndex,
    /// The pricing layer's collective curves per GPU, built and emptied as `gemm_index` is.
    pub(crate) collective_index: CollectiveIndex,
}

const SHIPPED: [(&str, &str); 6] = [
    ("gemm", include_str!("../measurements/gemm.csv")),
    ("gemm-sustained", include_str!("../measurements/gemm-sustained.csv")),
    ("attention", include_str!("../measurements/attention.csv")),
    ("collectives", include_str!("../measurements/collectives.csv")),
    ("memory", include_str!("../measurements/memory.csv")),
    ("networks", include_str!("../measurements/networks.csv")),
];

/// Measured training runs, shipped as published (`calibrate/measurements/*.json`, copied by
/// `regenerate.sh` from the evidence's `training-runs.json` and the published validation
/// runs): tokens/s per GPU with the model, system and plan of each, and its source. The
/// format is the runs file of `tracecast validate`, which parses them; they bound what a
/// GPU class was measured to reach in training (its best MFU).
pub const SHIPPED_RUNS: [(&str, &str); 2] = [
    ("training-runs.json", include_str!("../measurements/training-runs.json")),
    ("published-runs.json", include_str!("../measurements/published-runs.json")),
];

impl Measurements {
    /// The shipped base (embedded public measurements).
    pub fn builtin() -> Measurements {
        let mut m = Measurements::default();
        for (table, text) in SHIPPED {
            // Every shipped row parses (`every_shipped_row_loads`): a refused row would stop its table there.
            let _ = m.add_text(text.as_bytes(), &format!("shipped {table}.csv"));
        }
        m
    }

    /// The shipped base, parsed once per process and shared (the analytical
    /// model builds a cluster per projected run).
    pub fn shared() -> Arc<Measurements> {
        static SHIPPED_BASE: std::sync::OnceLock<Arc<Measurements>> = std::sync::OnceLock::new();
        SHIPPED_BASE.get_or_init(|| Arc::new(Measurements::builtin())).clone()
    }

    /// The shipped base plus the user's files (their rows take precedence);
    /// without files, the [`Measurements::shared`] base, parsed once per process.
    pub fn with_files(files: &[std::path::PathBuf]) -> Result<Arc<Measurements>> {
        if files.is_empty() {
            return Ok(Measurements::shared());
        }
        let mut m = Measurements::builtin();
        for f in files {
            m.add_file(f)?;
        }
        Ok(Arc::new(m))
    }

    /// Adds a CSV file in one of the four formats (told apart by its header).
    pub fn add_file(&mut self, path: &Path) -> Result<()> {
        let text = tracecast_ingest::input::read(path).map_err(|cause| Error::Io { path: path.to_path_buf(), cause })?;
        let name = path.display().to_string();
        // A file that adds nothing (a header alone, or rows of nothing measured) would be
        // reported as added to the base while pricing nothing.
        if self.add_text(&text, &name)? == 0 {
            return Err(Error::Measurements {
                path: name,
                line: 2,
                message: "no measured rows: nothing under the header, or every row's measurement empty (an OOM bar)".into(),
            });
        }
        self.user_files.push(name.into());
        Ok(())
    }

    /// Whether a row comes from one of the user's files (which take precedence).
    pub fn is_user(&self, from: &Provenance) -> bool {
        self.user_files.contains(&from.file)
    }

    /// The user's collective rows measured across nodes, of `gpu` (its id or a `measured_as`
    /// one) where given.
    pub fn users_across_nodes<'a>(&'a self, gpu: Option<&'a crate::catalog::Gpu>) -> impl Iterator<Item = &'a CollectiveRow> + 'a {
        self.collectives
            .iter()
            .filter(move |r| r.nodes > 1 && self.is_user(&r.from) && gpu.is_none_or(|g| g.measurement_ids().any(|id| id == &*r.gpu)))
    }

    /// The node size of the user's own multi-node collective measurements of `gpu` (its id or a
    /// `measured_as` one), with their sources, where all were taken at one: the GPUs per node of
    /// the user's cluster. `None` without such rows, or where they disagree.
    pub fn users_gpus_per_node(&self, gpu: &crate::catalog::Gpu) -> Option<(u32, Vec<Arc<str>>)> {
        let mut sizes = self.users_across_nodes(Some(gpu));
        let first = sizes.next()?;
        let mut sources = vec![first.from.source_id.clone()];
        for r in sizes {
            if r.gpus_per_node != first.gpus_per_node {
                return None;
            }
            if !sources.contains(&r.from.source_id) {
                sources.push(r.from.source_id.clone());
            }
        }
        Some((first.gpus_per_node, sources))
    }

    /// The GPUs of the user's collective rows where none of them is `gpu` (its id or a
    /// `measured_as` one): rows that price none of its collectives. Empty where some are of
    /// `gpu`, or the user gave no collective rows.
    pub fn users_collectives_only_of_other_gpus(&self, gpu: &crate::catalog::Gpu) -> Vec<Arc<str>> {
        let mut others: Vec<Arc<str>> = Vec::new();
        for r in self.collectives.iter().filter(|r| self.is_user(&r.from)) {
            if gpu.measurement_ids().any(|id| id == &*r.gpu) {
                return Vec::new();
            }
            if !others.contains(&r.gpu) {
                others.push(r.gpu.clone());
            }
        }
        others
    }

    /// Whether the user's files hold GEMM rows of `gpu` (its id or a `measured_as` one) in
    /// `dtype`'s class (FP16 with BF16).
    pub fn has_user_gemms(&self, gpu: &crate::catalog::Gpu, dtype: Dtype) -> bool {
        let class = crate::pricing::table_dtype;
        self.gemm.iter().any(|r| class(r.dtype) == class(dtype) && self.is_user(&r.from) && gpu.measurement_ids().any(|id| id == &*r.gpu))
    }

    /// Parses one CSV table; `name` names it in errors and provenance.
    pub fn add_text(&mut self, text: &[u8], name: &str) -> Result<usize> {
        // New rows (and, from `add_file`, a new user file) change the GEMM tables.
        self.gemm_index = GemmIndex::default();
        self.collective_index = CollectiveIndex::default();
        let bad = |line: usize, message: String| Error::Measurements { path: name.into(), line, message };
        if text.iter().all(u8::is_ascii_whitespace) {
            return Err(bad(1, "the file is empty: a measurements table is a header line and rows (README, Measurements)".into()));
        }
        // nccl-tests' own printout names neither its collective nor its GPU in its rows: said
        // what to write instead (it had been "not a measurements table" alone). Its `#` lines
        // come first (blank lines aside); a table has none, so nothing past them is looked at.
        let has = |l: &[u8], word: &[u8]| l.windows(word.len()).any(|w| w == word);
        let printout = |l: &[u8]| l.starts_with(b"# nThread") || (has(l, b"algbw") && has(l, b"busbw"));
        if let Some(i) =
            text.split(|b| *b == b'\n').map(<[u8]>::trim_ascii_start).take_while(|l| l.is_empty() || l.starts_with(b"#")).position(printout)
        {
            return Err(bad(
                i + 1,
                "nccl-tests' printout, not a measurements table: write its sizes as rows of `gpu,collective,gpus,size_bytes,time_us` (the collective and GPU it ran, `size` and its out-of-place or in-place `time` column; README, Measurements)".into(),
            ));
        }
        let mut reader = csv::ReaderBuilder::new().has_headers(true).flexible(false).from_reader(text);
        let headers = reader.headers().map_err(|e| bad(1, e.to_string()))?.clone();
        let col = |n: &str| headers.iter().position(|h| h.trim() == n);
        let has = |names: &[&str]| names.iter().all(|n| col(n).is_some());
        let kinds: [(&str, &[&str]); 5] = [
            ("gemm", &["gpu", "dtype", "m", "n", "k"]),
            ("attention", &["gpu", "kernel", "head_dim", "seqlen"]),
            ("collectives", &["gpu", "collective", "gpus", "size_bytes"]),
            ("memory", &["gpu", "metric", "bandwidth_gbps"]),
            ("networks", &["source_id", "gpu", "gpus_per_node", "nic_gbps_per_gpu"]),
        ];
        let Some(kind) = kinds.iter().find(|(_, cols)| has(cols)).map(|k| k.0) else {
            // The table it comes nearest to (most of its columns beyond `gpu`), and what it lacks.
            let present = |cols: &[&str]| cols.iter().filter(|c| **c != "gpu" && col(c).is_some()).count();
            let nearest = kinds.iter().filter(|(_, cols)| present(cols) > 0).max_by_key(|(_, cols)| present(cols));
            let lacks = nearest.map_or_else(String::new, |(kind, cols)| {
                let missing: Vec<&str> = cols.iter().copied().filter(|c| col(c).is_none()).collect();
                format!("; as a {kind} table it lacks {}", missing.join(", "))
            });
            return Err(bad(
                1,
                format!(
                    "not a measurements table: the header has neither the GEMM, attention, collectives, memory nor networks columns{lacks} (see README, Measurements)"
                ),
            ));
        };
        // A column no table reads that is a slip of one they read (`batches`, `gpu_per_node`,
        // `inplace`, `time` for `time_us`) had been ignored, and the rows priced without it
        // (a batch of 8 read as 1: 8× the price): refused, naming both.
        for h in headers.iter().map(str::trim).filter(|h| !h.is_empty() && !PRICED.contains(h) && !UNPRICED.contains(h)) {
            // A column beside the one it resembles (`time_us_std` beside `time_us`) is another column.
            let beside = |c: &str| headers.iter().any(|x| x.trim() == c);
            let slip = PRICED.iter().filter(|c| !beside(c)).filter_map(|c| slip_of(h, c).map(|near| (near, c))).min();
            if let Some((_, meant)) = slip {
                return Err(bad(
                    1,
                    format!("column {h:?}: no measurements table reads it; did you mean {meant:?}? (README, Measurements)"),
                ));
            }
        }
        // A table whose header has no measured quantity could price nothing: every row would be skipped.
        let any = |names: &[&str]| names.iter().any(|n| col(n).is_some());
        let quantity: &[&str] = match kind {
            "gemm" => &["time_us", "tflops"],
            "attention" => &["tflops"],
            "collectives" => &["time_us", "algbw_gbps", "busbw_gbps"],
            "memory" => &["bandwidth_gbps"],
            _ => &["nic_gbps_per_gpu"],
        };
        if !any(quantity) {
            return Err(bad(1, format!("a {kind} table without a measured quantity: the header needs {}", quantity.join(" or "))));
        }
        let file: Arc<str> = name.into();
        let unnamed_source: Arc<str> = std::path::Path::new(name).file_name().map_or_else(|| name.into(), |f| f.to_string_lossy().into());
        let mut added = 0;
        // Two rows of one source that timed the same collective, size, GPUs, layout and algorithm
        // more than twice apart cannot both be right (repeated runs differ by far less): one had
        // been priced and the other dropped, without a word. Each key's first time and line.
        let mut timed: std::collections::HashMap<CollectiveKey, (f64, usize)> = std::collections::HashMap::new();
        // Collectives over one GPU, read and left out (said where nothing else was added).
        let mut single_gpu: Option<usize> = None;
        for (i, record) in reader.records().enumerate() {
            let line = i + 2;
            let record = record.map_err(|e| bad(line, e.to_string()))?;
            let get = |n: &str| col(n).and_then(|c| record.get(c)).map(str::trim).unwrap_or("");
            let num = |n: &str| -> Result<Option<f64>> {
                let v = get(n);
                if v.is_empty() {
                    return Ok(None);
                }
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .map(Some)
                    .ok_or_else(|| bad(line, format!("{n} = {v:?} is not a number ≥ 0")))
            };
            let need = |n: &str| num(n)?.ok_or_else(|| bad(line, format!("{n} is empty")));
            // A count (GPUs, nodes, bytes): a whole number a u32 (or, for bytes, an f64) holds exactly.
            let whole = |n: &str, max: f64| -> Result<Option<f64>> {
                match num(n)? {
                    Some(x) if x.fract() != 0.0 || x > max => {
                        Err(bad(line, format!("{n} = {:?} is not a whole number up to {max}", get(n))))
                    }
                    x => Ok(x),
                }
            };
            let above_zero = |n: &str| -> Result<f64> {
                match need(n)? {
                    x if x > 0.0 => Ok(x),
                    _ => Err(bad(line, format!("{n} = {:?}: above 0", get(n)))),
                }
            };
            // A measured time or rate: empty where the source measured nothing (an OOM bar), never 0.
            let measured = |n: &str| -> Result<Option<f64>> {
                match num(n)? {
                    Some(x) if x <= 0.0 => Err(bad(
                        line,
                        format!("{n} = {:?}: a measured time or rate is above 0 (leave it empty where nothing was measured)", get(n)),
                    )),
                    x => Ok(x),
                }
            };
            // A GEMM or collective timed at more than a year is no measurement (1e308 µs had priced
            // as a 300-digit time, 9.2e18 µs as 0.0 TFLOP/s): the clock a projection simulates
            // counts whole nanoseconds in 292 years.
            let longer_than_a_year = |time_us: f64| -> Result<()> {
                const YEAR_US: f64 = 365.0 * 24.0 * 3600.0 * 1e6;
                if time_us > YEAR_US {
                    // Given as a rate, the time is the rate's: said so.
                    let from = if get("time_us").is_empty() { " (the time its rate gives)" } else { "" };
                    return Err(bad(
                        line,
                        format!("{} µs{from}: more than a year, not a measurement of one operation", crate::catalog::shown(time_us)),
                    ));
                }
                Ok(())
            };
            // A row without a source is the user's file's own: named by it in every price's basis
            // (it had read "(user)", whichever of several files priced it).
            let source_id: Arc<str> = if get("source_id").is_empty() { unnamed_source.clone() } else { get("source_id").into() };
            let from = Provenance { source_id: source_id.clone(), file: file.clone(), line };
            let gpu: Arc<str> = get("gpu").to_ascii_lowercase().into();
            if gpu.is_empty() {
                return Err(bad(line, "gpu is empty".into()));
            }
            // Half a unit of a value's last written digit, relative to it: how far its rounding may move it.
            let rounding = |n: &str, x: f64| {
                let v = get(n);
                let decimals = v.split_once('.').map_or(0, |(_, d)| d.chars().take_while(char::is_ascii_digit).count());
                if v.contains(['e', 'E']) { 0.0 } else { 0.5 * 10f64.powi(-(decimals as i32)) / x }
            };
            match kind {
                "gemm" => {
                    // Sizes are whole numbers (`m = 4096.5` had become a shape of its own).
                    let size = |n: &str| whole(n, 2f64.powi(53))?.ok_or_else(|| bad(line, format!("{n} is empty")));
                    let (batch, m, n, k) = (whole("batch", 2f64.powi(53))?.unwrap_or(1.0), size("m")?, size("n")?, size("k")?);
                    let flops = 2.0 * batch * m * n * k;
                    let time_us = match (measured("time_us")?, measured("tflops")?) {
                        // Both given, they must say the same: within 2 % and what the rounding of each allows.
                        (Some(t), Some(tf))
                            if (flops / (tf * 1e12) * 1e6 / t - 1.0).abs() > 0.02 + rounding("tflops", tf) + rounding("time_us", t) =>
                        {
                            return Err(bad(
                                line,
                                format!(
                                    "time_us {t} and tflops {tf} disagree: {tf} TFLOP/s is {:.3} µs for this GEMM",
                                    flops / (tf * 1e12) * 1e6
                                ),
                            ));
                        }
                        (Some(t), _) => t,
                        (_, Some(tf)) => flops / (tf * 1e12) * 1e6,
                        // A measurement the source left empty (an OOM bar): nothing to price with.
                        _ => continue,
                    };
                    longer_than_a_year(time_us)?;
                    let Some(dtype) = gemm_dtype(get("dtype"), &source_id) else {
                        return Err(bad(line, format!("dtype {:?} is not one of bf16, fp16, fp8…, fp32, tf32", get("dtype"))));
                    };
                    if flops <= 0.0 {
                        return Err(bad(line, "a GEMM of no work".into()));
                    }
                    // `load`: how long the GPU ran before and while it was timed. A short timing
                    // (`burst`, or unstated) is a table's shape; `sustained` is its power-limited rate.
                    let row = GemmRow { gpu, dtype, batch, m, n, k, time_us, from };
                    match get("load").to_ascii_lowercase().as_str() {
                        "" | "burst" => self.gemm.push(row),
                        "sustained" => self.gemm_sustained.push(row),
                        other => return Err(bad(line, format!("load = {other:?} is neither burst nor sustained"))),
                    }
                }
                "attention" => {
                    // Attention is priced in 16 bits: an FP8 kernel's rate held against the 16-bit peak
                    // would be refused as impossible, or taken for a 16-bit one.
                    let dtype = get("dtype").to_ascii_lowercase();
                    if !matches!(dtype.as_str(), "" | "bf16" | "fp16") {
                        return Err(bad(line, format!("dtype {:?}: attention rows are 16-bit (bf16, fp16)", get("dtype"))));
                    }
                    let Some(tflops) = measured("tflops")? else { continue };
                    let direction = match get("direction") {
                        "fwd" => Direction::Forward,
                        "fwd+bwd" => Direction::ForwardBackward,
                        "" | "unstated" => Direction::Unstated,
                        other => return Err(bad(line, format!("direction {other:?} is not fwd, fwd+bwd or unstated"))),
                    };
                    let causal = match get("causal") {
                        "1" | "true" | "True" => true,
                        "" | "0" | "false" | "False" => false,
                        other => return Err(bad(line, format!("causal {other:?} is not 1 or 0"))),
                    };
                    self.attention.push(AttentionRow {
                        gpu,
                        kernel: get("kernel").into(),
                        direction,
                        causal,
                        head_dim: above_zero("head_dim")?,
                        seq: above_zero("seqlen")?,
                        batch: num("batch")?.unwrap_or(1.0),
                        heads: num("heads")?.unwrap_or(1.0),
                        tflops,
                        from,
                    });
                }
                "collectives" => {
                    let Some(collective) = Collective::from_user_name(get("collective")) else {
                        return Err(bad(
                            line,
                            format!(
                                "collective {:?} is not all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce or send_recv",
                                get("collective")
                            ),
                        ));
                    };
                    let u32_max = f64::from(u32::MAX);
                    let gpus = whole("gpus", u32_max)?.ok_or_else(|| bad(line, "gpus is empty".into()))? as u32;
                    if gpus == 0 {
                        return Err(bad(line, "gpus = 0: at least 1".into()));
                    }
                    let size_bytes = whole("size_bytes", 2f64.powi(53))?.ok_or_else(|| bad(line, "size_bytes is empty".into()))?;
                    if size_bytes == 0.0 {
                        return Err(bad(line, "size_bytes = 0: a collective of no bytes prices nothing (sizes from 1 byte)".into()));
                    }
                    // Either of nodes and GPUs per node gives the other (a two-node send/recv row may
                    // state `gpus_per_node` 1 alone); neither: one node.
                    let given_gpn = whole("gpus_per_node", u32_max)?.map(|g| g as u32);
                    if given_gpn == Some(0) {
                        return Err(bad(line, "gpus_per_node = 0: at least 1".into()));
                    }
                    let nodes = whole("nodes", u32_max)?.map_or_else(|| given_gpn.map_or(1, |g| gpus.div_ceil(g)), |n| n as u32).max(1);
                    let gpus_per_node = given_gpn.unwrap_or_else(|| gpus.div_ceil(nodes).max(1));
                    // Both stated, they must hold the GPUs: as many nodes as the GPUs fill.
                    if given_gpn.is_some() && !get("nodes").is_empty() && nodes != gpus.div_ceil(gpus_per_node) {
                        return Err(bad(
                            line,
                            format!(
                                "{gpus} GPUs over {nodes} node(s) of {gpus_per_node}: {gpus} GPUs at {gpus_per_node} to a node fill {} node(s)",
                                gpus.div_ceil(gpus_per_node)
                            ),
                        ));
                    }
                    // A bandwidth given beside the time must say about the same (a row of 100 µs at 300 GB/s
                    // bus bandwidth for 1 MiB over 8 GPUs had loaded): nccl-tests' line agrees to its
                    // rounding, a summary that averages per-call rates (TraceLens) differs from its mean time
                    // by the calls' spread (6.6–7.4 % in the shipped MI300X FSDP rows), while a wrong unit
                    // or a contradiction is a factor off, and an all-reduce's busbw given as algbw 2(n−1)/n
                    // (1.5× from 4 GPUs). Refused beyond 25 %, between the two: an all-gather's busbw given
                    // as algbw ((n−1)/n, 12.5 % at 8 GPUs) is within it and not caught.
                    let bus_factor = collective.bus_factor_in(Some(i64::from(gpus))).filter(|f| *f > 0.0);
                    let (time, algbw, busbw) = (measured("time_us")?, num("algbw_gbps")?, num("busbw_gbps")?);
                    if let Some(t) = time {
                        for (column, value, factor) in [("algbw_gbps", algbw, Some(1.0)), ("busbw_gbps", busbw, bus_factor)] {
                            let (Some(v), Some(f)) = (value.filter(|v| *v > 0.0), factor) else { continue };
                            let implied = f * size_bytes / (v * 1e3);
                            if (implied / t - 1.0).abs() > 0.25 + rounding(column, v) + rounding("time_us", t) {
                                return Err(bad(
                                    line,
                                    format!(
                                        "time_us {t} and {column} {v} disagree: {v} GB/s is {implied:.3} µs for {size_bytes} bytes over {gpus} GPUs"
                                    ),
                                ));
                            }
                        }
                    }
                    // nccl-tests rounds the bandwidths of the smallest sizes to 0.00: only the time must be above 0.
                    let time_us = match (time, algbw, busbw, bus_factor) {
                        (Some(t), _, _, _) => t,
                        (_, Some(a), _, _) if a > 0.0 => size_bytes / (a * 1e3),
                        (_, _, Some(b), Some(f)) if b > 0.0 => f * size_bytes / (b * 1e3),
                        _ => continue,
                    };
                    longer_than_a_year(time_us)?;
                    let in_place = match get("in_place") {
                        "1" => Some(true),
                        "0" => Some(false),
                        "" => None,
                        other => return Err(bad(line, format!("in_place {other:?}: 1 (nccl-tests' in-place column), 0 or empty"))),
                    };
                    // One GPU communicates with nobody: no curve (the shipped sweeps' 1-GPU rows).
                    if gpus < 2 {
                        single_gpu.get_or_insert(line);
                        continue;
                    }
                    let key = (
                        source_id.clone(),
                        gpu.clone(),
                        collective,
                        (gpus, nodes, gpus_per_node),
                        get("algo").to_ascii_lowercase(),
                        in_place,
                        size_bytes.to_bits(),
                    );
                    match timed.get(&key) {
                        Some(&(first, first_line)) if time_us.max(first) / time_us.min(first) > 2.0 => {
                            return Err(bad(
                                line,
                                format!(
                                    "{time_us} µs, where line {first_line} measured the same {} of {size_bytes} bytes over {gpus} GPUs at {first} µs: give one of them (or tell them apart by source_id or algo, which pricing keeps apart)",
                                    collective.as_str()
                                ),
                            ));
                        }
                        Some(_) => {}
                        None => {
                            timed.insert(key, (time_us, line));
                        }
                    }
                    self.collectives.push(CollectiveRow {
                        gpu,
                        collective,
                        gpus,
                        nodes,
                        gpus_per_node,
                        algo: get("algo").to_ascii_lowercase().into(),
                        size_bytes,
                        time_us,
                        in_place,
                        from,
                    });
                }
                "networks" => {
                    let nic_gbps_per_gpu = Some(need("nic_gbps_per_gpu")?)
                        .filter(|x| *x > 0.0)
                        .ok_or_else(|| bad(line, "nic_gbps_per_gpu must be above 0".into()))?;
                    let gpus_per_node = need("gpus_per_node")? as u32;
                    if gpus_per_node == 0 {
                        return Err(bad(line, "gpus_per_node must be at least 1".into()));
                    }
                    self.networks.push(NetworkRow { gpu, gpus_per_node, nic_gbps_per_gpu, from });
                }
                _ => {
                    let Some(bandwidth_gbps) = measured("bandwidth_gbps")? else { continue };
                    self.memory.push(MemoryRow { gpu, metric: get("metric").into(), bandwidth_gbps, from });
                }
            }
            added += 1;
        }
        if let Some(line) = single_gpu.filter(|_| added == 0) {
            return Err(bad(
                line,
                "no measured rows but collectives over one GPU, which communicates with nobody: collectives need 2 GPUs or more".into(),
            ));
        }
        Ok(added)
    }

    /// The network a source measured `gpu` over at `gpus_per_node` to a node:
    /// the last such row (a user's file, added after the shipped table, wins).
    pub fn network_of(&self, source_id: &str, gpu: &str, gpus_per_node: u32) -> Option<&NetworkRow> {
        self.networks.iter().rev().find(|n| &*n.from.source_id == source_id && &*n.gpu == gpu && n.gpus_per_node == gpus_per_node)
    }

    /// The networks the collectives across nodes of the measurement ids `ids`
    /// ran over: (source id, GPUs per node, GB/s of NICs per GPU where the
    /// networks table has it), one per source and node size, sorted. A source
    /// without a row is priced as on its GPU's node preset.
    pub fn networks_for(&self, ids: &[&str]) -> Vec<(Arc<str>, u32, Option<f64>)> {
        let mut out: Vec<(Arc<str>, u32, Option<f64>)> = Vec::new();
        for r in self.collectives.iter().filter(|r| r.nodes > 1 && ids.contains(&&*r.gpu)) {
            if !out.iter().any(|(s, g, _)| *s == r.from.source_id && *g == r.gpus_per_node) {
                let nic = self.network_of(&r.from.source_id, &r.gpu, r.gpus_per_node).map(|n| n.nic_gbps_per_gpu);
                out.push((r.from.source_id.clone(), r.gpus_per_node, nic));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        out
    }

    /// The attention kernel families measured on the measurement ids `ids`
    /// (every GPU's when `ids` is empty), sorted, each once.
    pub fn attention_families(&self, ids: &[&str]) -> Vec<Arc<str>> {
        let mut families: Vec<Arc<str>> =
            self.attention.iter().filter(|r| ids.is_empty() || ids.contains(&&*r.gpu)).map(|r| r.kernel.clone()).collect();
        families.sort();
        families.dedup();
        families
    }

    /// Rows per source for the measurement ids `ids`: (table, source id, rows), sorted.
    pub fn sources_for(&self, ids: &[&str]) -> Vec<(&'static str, Arc<str>, usize)> {
        let mut out: Vec<(&'static str, Arc<str>, usize)> = Vec::new();
        let mut count = |table: &'static str, gpu: &str, source: &Arc<str>| {
            if !ids.contains(&gpu) {
                return;
            }
            match out.iter_mut().find(|(t, s, _)| *t == table && s == source) {
                Some(x) => x.2 += 1,
                None => out.push((table, source.clone(), 1)),
            }
        };
        self.gemm.iter().chain(&self.gemm_sustained).for_each(|r| count("gemm", &r.gpu, &r.from.source_id));
        self.attention.iter().for_each(|r| count("attention", &r.gpu, &r.from.source_id));
        self.collectives.iter().for_each(|r| count("collectives", &r.gpu, &r.from.source_id));
        self.memory.iter().for_each(|r| count("memory", &r.gpu, &r.from.source_id));
        out.sort();
        out
    }
}

/// The pricing class of a GEMM dtype string (`bf16->bf16`, `fp8-e4m3fn x fp8-e5m2->bf16`, `fp16`, `fp32->fp32`).
/// XLA's `f32` GEMMs run on TF32 tensor cores (their values exceed the FP32 vector peaks), so that source's fp32 is TF32.
fn gemm_dtype(s: &str, source_id: &str) -> Option<Dtype> {
    let input = s.split("->").next().unwrap_or("").trim().to_ascii_lowercase();
    Some(if input.starts_with("bf16") {
        Dtype::Bf16
    } else if input.starts_with("fp16") || input.starts_with("f16") {
        Dtype::Fp16
    } else if input.starts_with("fp8") || input.starts_with("f8") {
        Dtype::Fp8
    } else if input.starts_with("tf32") {
        Dtype::Tf32
    } else if input.starts_with("fp32") || input.starts_with("f32") {
        if source_id == "xla-matmul-perf-table" { Dtype::Tf32 } else { Dtype::Fp32 }
    } else if input.starts_with("int8") {
        Dtype::Int8
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_row_parses_with_its_source() {
        let m = Measurements::builtin();
        // Row counts as the evidence README states them (gemm 5,575; attention 357 of which
        // the OOM bars have no value; collectives 895 of which the single-GPU log is no curve),
        // plus this project's own H200 recording (fixtures/h200: memory 4).
        assert_eq!(m.gemm.len(), 5575);
        assert!(m.attention.len() > 300 && m.attention.len() <= 357, "{}", m.attention.len());
        assert!(m.collectives.len() > 800 && m.collectives.len() < 895, "{}", m.collectives.len());
        assert_eq!(m.memory.len(), 31 + 4);
        // Every network names a multi-node system of the collectives (source, GPU, node size).
        assert_eq!(m.networks.len(), 5);
        for n in &m.networks {
            assert!(
                m.collectives
                    .iter()
                    .any(|r| r.from.source_id == n.from.source_id && r.gpu == n.gpu && r.gpus_per_node == n.gpus_per_node && r.nodes > 1),
                "{n:?}"
            );
        }
        // XLA's B200 bf16 256³ entry: 6.765006451612 TFLOP/s, an implied 4 960 ns.
        let r =
            m.gemm.iter().find(|r| &*r.gpu == "b200" && r.dtype == Dtype::Bf16 && r.m == 256.0 && r.k == 256.0 && r.n == 256.0).unwrap();
        assert!((r.time_us - 4.960).abs() < 1e-3, "{}", r.time_us);
        assert_eq!(&*r.from.source_id, "xla-matmul-perf-table");
        assert_eq!(r.from.line, 2);
    }

    #[test]
    fn a_user_table_is_told_apart_by_its_header_and_bad_rows_are_named() {
        let mut m = Measurements::default();
        let csv = "gpu,collective,gpus,nodes,gpus_per_node,size_bytes,time_us\nmy-gpu,all_reduce,16,2,8,1048576,120.5\n";
        assert_eq!(m.add_text(csv.as_bytes(), "mine.csv").unwrap(), 1);
        assert_eq!(m.collectives[0].gpus_per_node, 8);
        let bad = "gpu,dtype,m,n,k,time_us\nmy-gpu,bf16,1024,x,1024,10\n";
        let e = m.add_text(bad.as_bytes(), "sweep.csv").unwrap_err().to_string();
        assert!(e.contains("sweep.csv") && e.contains("line 2") && e.contains("n ="), "{e}");
        let e = m.add_text(b"source_id,gpu,gpus_per_node,nic_gbps_per_gpu\nmine,my-gpu,8,0\n", "net.csv").unwrap_err().to_string();
        assert!(e.contains("net.csv") && e.contains("line 2") && e.contains("above 0"), "{e}");
        let e = m.add_text(b"a,b\n1,2\n", "other.csv").unwrap_err().to_string();
        assert!(e.contains("not a measurements table") && !e.contains("lacks"), "{e}");
        // nccl-tests' printout, whole or from its column header on: said what to write instead.
        let printout = "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n#                                                              out-of-place                       in-place\n#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n           8             2     float     sum      -1    20.44    0.00    0.00      0    20.19    0.00    0.00      0\n";
        let e = m.add_text(printout.as_bytes(), "nccl.txt").unwrap_err().to_string();
        assert!(e.starts_with("nccl.txt: line 1: nccl-tests' printout") && e.contains("gpu,collective,gpus,size_bytes,time_us"), "{e}");
        let from_header: String = printout.lines().skip(3).map(|l| format!("{l}\n")).collect();
        let e = m.add_text(from_header.as_bytes(), "nccl.txt").unwrap_err().to_string();
        assert!(e.starts_with("nccl.txt: line 1: nccl-tests' printout"), "{e}");
        // A column short of a table: named (it had said only "not a measurements table").
        let e = m.add_text(b"gpu,collective,gpus,bytes,time_us\nmy-gpu,all_reduce,8,1024,10\n", "c.csv").unwrap_err().to_string();
        assert!(e.contains("as a collectives table it lacks size_bytes"), "{e}");
        // A measured 0 (time, rate, GPU count) was dropped without a word; an empty cell still is.
        for (table, column) in [
            ("gpu,dtype,m,n,k,time_us\nmy-gpu,bf16,1024,1024,1024,0\n", "time_us = \"0\""),
            ("gpu,dtype,m,n,k,tflops\nmy-gpu,bf16,1024,1024,1024,0\n", "tflops = \"0\""),
            ("gpu,kernel,head_dim,seqlen,tflops\nmy-gpu,fa2,128,4096,0\n", "tflops = \"0\""),
            ("gpu,collective,gpus,size_bytes,time_us\nmy-gpu,all_reduce,8,1024,0\n", "time_us = \"0\""),
            ("gpu,collective,gpus,size_bytes,time_us\nmy-gpu,all_reduce,0,1024,10\n", "gpus = 0"),
            // A row of no bytes and one of no GPUs per node had been dropped, or read as 1 per node.
            ("gpu,collective,gpus,size_bytes,time_us\nmy-gpu,all_reduce,8,0,40\n", "size_bytes = 0"),
            ("gpu,collective,gpus,gpus_per_node,size_bytes,time_us\nmy-gpu,all_reduce,8,0,1024,10\n", "gpus_per_node = 0: at least 1"),
            ("gpu,collective,gpus,size_bytes,time_us\nmy-gpu,all_reduce,1,1024,10\n", "collectives need 2 GPUs or more"),
            ("gpu,collective,gpus,size_bytes,time_us,in_place\nmy-gpu,all_reduce,8,1024,10,2\n", "in_place \"2\""),
            ("gpu,metric,bandwidth_gbps\nmy-gpu,stream,0\n", "bandwidth_gbps = \"0\""),
            // Values no measurement has, taken without a word before (a mask of 2 read as none,
            // a row of head dim 0 or 2^32 GPUs left unused, a fractional byte count used as is).
            ("gpu,kernel,causal,head_dim,seqlen,tflops\nmy-gpu,fa2,2,128,4096,100\n", "causal \"2\""),
            ("gpu,kernel,direction,head_dim,seqlen,tflops\nmy-gpu,fa2,sideways,128,4096,100\n", "direction \"sideways\""),
            ("gpu,kernel,head_dim,seqlen,tflops\nmy-gpu,fa2,0,4096,100\n", "head_dim = \"0\": above 0"),
            ("gpu,kernel,head_dim,seqlen,tflops,dtype\nmy-gpu,fa3,128,4096,1200,fp8\n", "dtype \"fp8\": attention rows are 16-bit"),
            // A fractional GEMM size became a shape of its own; a table of no measured quantity priced
            // nothing without a word; a time and a rate that disagree took the time silently; a row's
            // nodes that do not hold its GPUs at its GPUs per node.
            ("gpu,dtype,m,n,k,time_us\nmy-gpu,bf16,4096.5,4096,4096,200\n", "m = \"4096.5\" is not a whole number"),
            ("gpu,dtype,m,n,k,time_us,tflops\nmy-gpu,bf16,4096,4096,4096,200,900\n", "time_us 200 and tflops 900 disagree"),
            (
                "gpu,collective,gpus,nodes,gpus_per_node,size_bytes,time_us\nmy-gpu,all_reduce,16,2,4,1024,10\n",
                "16 GPUs over 2 node(s) of 4",
            ),
            (
                "gpu,collective,gpus,size_bytes,time_us\nmy-gpu,all_reduce,4294967296,1024,10\n",
                "gpus = \"4294967296\" is not a whole number",
            ),
            (
                "gpu,collective,gpus,size_bytes,time_us\nmy-gpu,all_reduce,8,1048576.5,10\n",
                "size_bytes = \"1048576.5\" is not a whole number",
            ),
            // A bandwidth beside the time that says another time (1 MiB over 8 GPUs in 100 µs is
            // 10.49 GB/s algorithm and 18.35 GB/s bus bandwidth): had loaded, the time taken.
            (
                "gpu,collective,gpus,size_bytes,time_us,busbw_gbps\nmy-gpu,all_reduce,8,1048576,100,300\n",
                "time_us 100 and busbw_gbps 300 disagree",
            ),
            (
                "gpu,collective,gpus,size_bytes,time_us,algbw_gbps\nmy-gpu,all_gather,8,1048576,100,30\n",
                "time_us 100 and algbw_gbps 30 disagree",
            ),
        ] {
            let e = m.add_text(table.as_bytes(), "zeros.csv").unwrap_err().to_string();
            assert!(e.contains("zeros.csv") && e.contains("line 2") && e.contains(column), "{e}");
        }
        assert_eq!(m.add_text(b"gpu,dtype,m,n,k,time_us,tflops\nmy-gpu,bf16,1024,1024,1024,,\n", "empty.csv").unwrap(), 0);
        // nccl-tests' own line agrees within its rounding (1 MiB, 8 GPUs, 100.0 µs: 10.49 / 18.35 GB/s),
        // and its 0.00 bandwidths of tiny sizes say nothing.
        let nccl = "gpu,collective,gpus,size_bytes,time_us,algbw_gbps,busbw_gbps\nh100-sxm,all_reduce,8,1048576,100.0,10.49,18.35\nh100-sxm,all_reduce,8,8,20.1,0.00,0.00\n";
        assert_eq!(m.add_text(nccl.as_bytes(), "nccl.csv").unwrap(), 2);
        let e = m.add_text(b"gpu,dtype,m,n,k\nmy-gpu,bf16,4096,4096,4096\n", "sizes.csv").unwrap_err().to_string();
        assert!(e.contains("sizes.csv") && e.contains("line 1") && e.contains("the header needs time_us or tflops"), "{e}");
        // A slip of a column it reads had been ignored, and the rows priced without it (a batch
        // of 8 read as 1); a column of no table and no slip is still ignored.
        for (header, said) in [
            ("gpu,dtype,batches,m,n,k,time_us", "column \"batches\": no measurements table reads it; did you mean \"batch\"?"),
            ("gpu,dtype,m,n,k,time", "column \"time\": no measurements table reads it; did you mean \"time_us\"?"),
            ("gpu,dtype,batch_size,m,n,k,time_us", "column \"batch_size\": no measurements table reads it; did you mean \"batch\"?"),
        ] {
            let e = m.add_text(format!("{header}\nmy-gpu,bf16,8,4096,4096,4096\n").as_bytes(), "slip.csv").unwrap_err().to_string();
            assert!(e.contains("slip.csv: line 1") && e.contains(said), "{e}");
        }
        assert_eq!(m.add_text(b"gpu,dtype,m,n,k,time_us,clock_mhz\nmy-gpu,bf16,1024,1024,1024,10,1980\n", "extra.csv").unwrap(), 1);
        // Times beyond a year are no measurement (1e308 µs had priced as a 300-digit time).
        let e = m.add_text(b"gpu,dtype,m,n,k,time_us\nmy-gpu,bf16,1024,1024,1024,1e308\n", "slow.csv").unwrap_err().to_string();
        assert!(e.contains("slow.csv: line 2: 1e308 µs: more than a year"), "{e}");
        // One source's two times of the same collective more than twice apart: refused naming
        // both lines (the 400 µs had priced and the 900 µs been dropped in silence); a repeat 50 %
        // apart loads (small sizes' runs vary), and one GPU's rows are left out before comparing.
        let twice = "gpu,collective,gpus,size_bytes,time_us\nmy-gpu,all_reduce,16,16777216,400\nmy-gpu,all_reduce,16,16777216,";
        let e = m.add_text(format!("{twice}900\n").as_bytes(), "twice.csv").unwrap_err().to_string();
        assert!(e.contains("twice.csv: line 3: 900 µs, where line 2 measured the same all_reduce"), "{e}");
        assert!(m.add_text(format!("{twice}190\n").as_bytes(), "under.csv").is_err());
        assert_eq!(m.add_text(format!("{twice}600\n").as_bytes(), "repeat.csv").unwrap(), 2);
        assert!(
            m.add_text(
                b"gpu,collective,gpus,size_bytes,time_us\nmy-gpu,all_reduce,1,8,5\nmy-gpu,all_reduce,1,8,18\nmy-gpu,all_reduce,8,8,20\n",
                "one.csv"
            )
            .is_ok()
        );
        // An empty header cell (a spreadsheet's trailing comma) and short names of other meaning load.
        assert_eq!(m.add_text(b"gpu,dtype,m,n,k,time_us,\nmy-gpu,bf16,1024,1024,1024,10,\n", "trailing.csv").unwrap(), 1);
        assert_eq!(
            m.add_text(b"gpu,dtype,m,n,k,time_us,b,ms,note,source\nmy-gpu,bf16,1024,1024,1024,10,1,2,x,y\n", "short.csv").unwrap(),
            1
        );
        // Columns beside the one they resemble, and words on a one-letter column, are other columns.
        let bench = b"gpu,dtype,m,n,k,time_us,time_us_std,n_iters,in_dtype\nmy-gpu,bf16,1024,1024,1024,10,1,100,bf16\n";
        assert_eq!(m.add_text(bench, "bench.csv").unwrap(), 1);
    }

    /// Every row of every shipped table loads: the base stops a table at its first refused row
    /// (a check of collective bandwidths against times at 2 % had silently dropped the table's
    /// last 5 rows, MI300X's FSDP ones, moving its all-gather prices by up to 28 %).
    #[test]
    fn every_shipped_row_loads() {
        for (table, text) in super::SHIPPED {
            let mut m = Measurements::default();
            if let Err(e) = m.add_text(text.as_bytes(), table) {
                panic!("shipped {table}: {e}");
            }
        }
    }
}
