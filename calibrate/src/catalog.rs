//! The hardware catalog: GPUs and node presets as TOML data embedded in the
//! binary (`calibrate/hw/*.toml`), extendable with user files.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tracecast_ingest::device::DeviceProperties;

use crate::error::{Error, Result};

/// A data type whose peak throughput the catalog knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// 64-bit float.
    Fp64,
    /// 32-bit float (no tensor-core TF32).
    Fp32,
    /// TensorFloat-32.
    Tf32,
    /// bfloat16.
    Bf16,
    /// IEEE half.
    Fp16,
    /// 8-bit float (E4M3/E5M2).
    Fp8,
    /// 8-bit integer.
    Int8,
}

impl Dtype {
    /// The dtype of a profiler type name (`float`, `c10::BFloat16`, `c10::Half`, `double`, …).
    pub fn from_profiler(name: &str) -> Option<Dtype> {
        let n = name.trim().trim_start_matches("c10::");
        // Lower case on the stack: this runs for every typed input of every op.
        let mut buf = [0u8; 24];
        let owned;
        let n = match buf.get_mut(..n.len()) {
            Some(b) => {
                b.copy_from_slice(n.as_bytes());
                b.make_ascii_lowercase();
                std::str::from_utf8(b).unwrap_or_default()
            }
            None => {
                owned = n.to_ascii_lowercase();
                owned.as_str()
            }
        };
        Some(match n {
            "double" | "float64" => Dtype::Fp64,
            "float" | "float32" => Dtype::Fp32,
            "bfloat16" => Dtype::Bf16,
            "half" | "float16" => Dtype::Fp16,
            "signed char" | "char" | "int8" | "unsigned char" | "uint8" => Dtype::Int8,
            _ if n.starts_with("float8") => Dtype::Fp8,
            _ => return None,
        })
    }

    /// Every dtype, widest first: the order peaks are listed in.
    pub const ALL: [Dtype; 7] = [Dtype::Fp64, Dtype::Fp32, Dtype::Tf32, Dtype::Bf16, Dtype::Fp16, Dtype::Fp8, Dtype::Int8];

    /// The dtype named as [`Dtype::as_str`] writes it (any case).
    pub fn from_name(name: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.as_str().eq_ignore_ascii_case(name.trim()))
    }

    /// The dtype's class in words, as outputs name it: FP16 and BF16 run on the same tensor
    /// cores at the same peak, one `16-bit` class; the others by their upper-case name.
    pub fn class_words(self) -> &'static str {
        match self {
            Dtype::Bf16 | Dtype::Fp16 => "16-bit",
            Dtype::Fp8 => "FP8",
            Dtype::Fp64 => "FP64",
            Dtype::Fp32 => "FP32",
            Dtype::Tf32 => "TF32",
            Dtype::Int8 => "INT8",
        }
    }

    /// Lower-case name as in the catalog and the profile.
    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::Fp64 => "fp64",
            Dtype::Fp32 => "fp32",
            Dtype::Tf32 => "tf32",
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Fp8 => "fp8",
            Dtype::Int8 => "int8",
        }
    }
}

/// One GPU of the catalog (units as in `gpus.toml`); a key it does not know is
/// refused (a misspelt `bf61` would leave the peak unset, silently).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Gpu {
    /// The id users type (`h100-sxm`).
    pub id: String,
    /// Full name.
    pub name: String,
    /// Where the numbers come from.
    pub source: String,
    /// Substrings of `deviceProperties.name` that identify it.
    #[serde(default, rename = "match")]
    pub match_names: Vec<String>,
    /// Compute-unit counts that identify it when the name is empty or generic.
    #[serde(default)]
    pub match_cus: Vec<i64>,
    /// gfx / compute-capability versions (major.minor) that go with `match_cus`.
    #[serde(default)]
    pub match_gfx: Vec<f64>,
    /// Evidence GPU ids whose measurements also describe this GPU: ids that
    /// name no single catalog GPU (`hopper-sm90`, XLA's `sm_90`: H100 or H200).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured_as: Vec<String>,
    /// Peak dense TFLOP/s.
    pub fp64: Option<f64>,
    /// Peak dense TFLOP/s.
    pub fp32: Option<f64>,
    /// Peak dense TFLOP/s.
    pub tf32: Option<f64>,
    /// Peak dense TFLOP/s.
    pub bf16: Option<f64>,
    /// Peak dense TFLOP/s.
    pub fp16: Option<f64>,
    /// Peak dense TFLOP/s.
    pub fp8: Option<f64>,
    /// Peak dense TOPS.
    pub int8: Option<f64>,
    /// Last-level cache, MB (memory-bound work below twice this may not reach HBM); `None`
    /// where no source states it, and then no memory-bound op is known to measure HBM.
    #[serde(default)]
    pub cache_mb: Option<f64>,
    /// HBM capacity, GB.
    pub memory_gb: f64,
    /// HBM bandwidth, GB/s.
    pub hbm_gbps: f64,
    /// Nominal intra-node GPU-to-GPU bandwidth per direction, GB/s.
    pub link_gbps: f64,
    /// Streaming multiprocessors (NVIDIA) or compute units (AMD).
    #[serde(default)]
    pub sms: Option<u32>,
    /// Boost clock, MHz.
    #[serde(default)]
    pub clock_mhz: Option<f64>,
    /// Where `sms` and `clock_mhz` come from.
    #[serde(default)]
    pub sms_source: Option<String>,
    /// Special-function-unit base-2 exponentials, 10¹² per second: what an
    /// attention kernel's softmax runs on besides the matrix units.
    #[serde(default)]
    pub exp_tps: Option<f64>,
    /// Where `exp_tps` comes from.
    #[serde(default)]
    pub exp_source: Option<String>,
    /// Board power limit, W (the datasheet's maximum TDP): GPUs of one table
    /// (`measured_as`) hold the same rate under sustained load only at the same limit.
    #[serde(default)]
    pub tdp_w: Option<f64>,
    /// Where `tdp_w` comes from.
    #[serde(default)]
    pub tdp_source: Option<String>,
    /// Who makes it (`NVIDIA`, `AMD`, …); default: the first word of `name`
    /// when that is a vendor the catalog knows.
    #[serde(default)]
    pub vendor: Option<String>,
}

/// The known ids `asked` may mean, quoted and joined by "or": those it names the start of, up to a
/// dash (`a100` → `a100-40gb`, `a100-80gb`, …; `h100` → `h100-sxm`, where the edit distance had offered `h200`), else the one a
/// slip away (a missing dash, a typo): least edit distance, case-insensitive, at most a third of
/// its length (at least 1).
pub fn closest<'a>(asked: &str, known: impl Iterator<Item = &'a str> + Clone) -> Option<String> {
    let lower = asked.to_ascii_lowercase();
    let mut starting: Vec<&str> =
        known.clone().filter(|k| k.to_ascii_lowercase().strip_prefix(&lower).is_some_and(|rest| rest.starts_with('-'))).collect();
    if !starting.is_empty() {
        starting.sort_unstable();
        return Some(starting.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(" or "));
    }
    let a: Vec<char> = lower.chars().collect();
    let distance = |b: &str| {
        let b: Vec<char> = b.to_ascii_lowercase().chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.iter().enumerate() {
            let mut prev = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let cur = row[j + 1];
                row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
                prev = cur;
            }
        }
        row[b.len()]
    };
    let (d, id) = known.map(|k| (distance(k), k)).min()?;
    (d <= (a.len() / 3).max(1)).then(|| format!("{id:?}"))
}

/// `what = value` when `value` is not a positive finite number.
fn not_positive(what: &str, value: f64) -> Option<String> {
    (!(value.is_finite() && value > 0.0)).then(|| format!("{what} = {value}: must be a positive number"))
}

/// A number many orders of magnitude from any GPU's, most likely in another unit (TB/s in a
/// GB/s key, FLOP/s in a TFLOP/s one): refused, since it would price every operation wrong
/// by as much in silence (`hbm_gbps = 0.864` had priced a 4096³ GEMM at 99 ms, 1 % of peak).
/// The bounds are far outside every shipped GPU's, so that new hardware passes.
fn out_of_range(what: &str, value: f64, (lo, hi): (f64, f64), unit: &str) -> Option<String> {
    (!(lo..=hi).contains(&value)).then(|| format!("{what} = {value}: outside {lo}–{hi} {unit}, far from any GPU's; is it in another unit?"))
}

impl Gpu {
    /// Why the entry's numbers cannot price anything, if they cannot: a
    /// peak, capacity, bandwidth or clock that is not positive, a negative
    /// cache, no SMs, a number in another unit than its key's ([`Gpu::out_of_range`]).
    fn unusable(&self) -> Option<String> {
        let peaks = self.peaks_by_key();
        let message = peaks
            .into_iter()
            .find_map(|(what, v)| v.and_then(|v| not_positive(what, v)))
            .or_else(|| not_positive("memory_gb", self.memory_gb))
            .or_else(|| not_positive("hbm_gbps", self.hbm_gbps))
            .or_else(|| not_positive("link_gbps", self.link_gbps))
            .or_else(|| self.clock_mhz.and_then(|v| not_positive("clock_mhz", v)))
            .or_else(|| self.exp_tps.and_then(|v| not_positive("exp_tps", v)))
            .or_else(|| self.tdp_w.and_then(|v| not_positive("tdp_w", v)))
            .or_else(|| self.cache_mb.filter(|c| !(c.is_finite() && *c >= 0.0)).map(|c| format!("cache_mb = {c}: must be 0 or more")))
            .or_else(|| (self.sms == Some(0)).then(|| "sms = 0: must be at least 1".to_string()))
            .or_else(|| self.out_of_range())
            .or_else(|| self.out_of_order())?;
        Some(format!("gpu {:?}: {message}", self.id))
    }

    /// Its peaks, TFLOP/s, by their catalog key.
    fn peaks_by_key(&self) -> [(&'static str, Option<f64>); 7] {
        [
            ("fp64", self.fp64),
            ("fp32", self.fp32),
            ("tf32", self.tf32),
            ("bf16", self.bf16),
            ("fp16", self.fp16),
            ("fp8", self.fp8),
            ("int8", self.int8),
        ]
    }

    /// A tensor peak below a wider format's: every GPU with both runs TF32 at most at its 16-bit
    /// rate and 16 bits at most at its FP8 rate (halving the width at least keeps the rate), so
    /// such a pair is a number in another unit (`bf16 = 0.9894`, PFLOP/s, had priced an H100-like
    /// part 68× slower than its FP32 cores, exit 0).
    fn out_of_order(&self) -> Option<String> {
        let pairs = [
            ("tf32", self.tf32, "bf16", self.bf16),
            ("tf32", self.tf32, "fp16", self.fp16),
            ("bf16", self.bf16, "fp8", self.fp8),
            ("fp16", self.fp16, "fp8", self.fp8),
        ];
        pairs.into_iter().find_map(|(wide, w, narrow, n)| match (w, n) {
            (Some(w), Some(n)) if n < w => Some(format!(
                "{narrow} = {n} is below {wide} = {w}: no GPU's {narrow} tensor rate is below its {wide} one; is one in another unit?"
            )),
            _ => None,
        })
    }

    /// A positive number in another unit than its key's ([`out_of_range`]).
    fn out_of_range(&self) -> Option<String> {
        let peaks = self.peaks_by_key();
        peaks
            .into_iter()
            .find_map(|(what, v)| v.and_then(|v| out_of_range(what, v, (0.01, 1e5), "TFLOP/s (dense peaks are in TFLOP/s)")))
            .or_else(|| out_of_range("memory_gb", self.memory_gb, (0.5, 1e5), "GB"))
            .or_else(|| out_of_range("hbm_gbps", self.hbm_gbps, (10.0, 1e6), "GB/s"))
            .or_else(|| out_of_range("link_gbps", self.link_gbps, (0.5, 1e5), "GB/s"))
            .or_else(|| self.cache_mb.and_then(|v| out_of_range("cache_mb", v, (0.0, 1e5), "MB")))
            .or_else(|| self.clock_mhz.and_then(|v| out_of_range("clock_mhz", v, (100.0, 1e5), "MHz")))
            .or_else(|| self.exp_tps.and_then(|v| out_of_range("exp_tps", v, (0.01, 1e4), "× 10¹² exponentials per second")))
            .or_else(|| self.tdp_w.and_then(|v| out_of_range("tdp_w", v, (10.0, 1e5), "W")))
    }

    /// The 16-bit type `dtype`'s work runs as where this GPU has no path for it but has one for
    /// the other (V100: FP16, no BF16); `None` otherwise.
    pub fn sixteen_bit_stand_in(&self, dtype: Dtype) -> Option<Dtype> {
        let other = match dtype {
            Dtype::Bf16 => Dtype::Fp16,
            Dtype::Fp16 => Dtype::Bf16,
            _ => return None,
        };
        (self.peak_flops(dtype).is_none() && self.peak_flops(other).is_some()).then_some(other)
    }

    /// The peak its `dtype` work runs at, FLOP/s: its own, else its 16-bit stand-in's
    /// ([`Gpu::sixteen_bit_stand_in`]: V100's BF16 at its FP16 peak).
    pub fn peak_flops_or_stand_in(&self, dtype: Dtype) -> Option<f64> {
        self.peak_flops(dtype).or_else(|| self.peak_flops(self.sixteen_bit_stand_in(dtype)?))
    }

    /// Peak dense throughput for `dtype`, FLOP/s.
    pub fn peak_flops(&self, dtype: Dtype) -> Option<f64> {
        let tflops = match dtype {
            Dtype::Fp64 => self.fp64,
            Dtype::Fp32 => self.fp32,
            Dtype::Tf32 => self.tf32,
            Dtype::Bf16 => self.bf16,
            Dtype::Fp16 => self.fp16,
            Dtype::Fp8 => self.fp8,
            Dtype::Int8 => self.int8,
        }?;
        Some(tflops * 1e12)
    }

    /// Whether `other` is the same compute as this GPU: the same SM count, 16-bit peak and
    /// exponential rate, all stated (H100 SXM and H200, one GH100 die; A100 40 and 80 GB).
    /// Memory may differ. Kernels measured on one stand for the other's.
    pub fn same_compute(&self, other: &Gpu) -> bool {
        self.sms.is_some()
            && self.sms == other.sms
            && self.exp_tps == other.exp_tps
            && self.peak_flops(Dtype::Bf16).is_some()
            && self.peak_flops(Dtype::Bf16) == other.peak_flops(Dtype::Bf16)
    }

    /// Peak HBM bandwidth, bytes/s.
    pub fn hbm_bytes_per_s(&self) -> f64 {
        self.hbm_gbps * 1e9
    }

    /// The GPU ids under which measurements of this GPU appear: its own id
    /// first, then its `measured_as` ids (`h200`, `hopper-sm90`).
    pub fn measurement_ids(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.id.as_str()).chain(self.measured_as.iter().map(String::as_str))
    }

    /// The vendor, upper-case: `vendor` where given, else the first word of the name
    /// when it is one the catalog's GPUs come from.
    pub fn vendor(&self) -> Option<String> {
        self.vendor_words().map(str::to_ascii_uppercase)
    }

    /// Whether a bus bandwidth measured in a node passes the GPU's link rate, GB/s: a ring cannot,
    /// so the collective reduced in the switch (NVLS; 8 × H200's all-reduce at 480 GB/s over
    /// 450 GB/s links).
    pub fn above_its_links(&self, busbw_gbps: f64) -> bool {
        self.link_gbps > 0.0 && busbw_gbps > self.link_gbps
    }

    /// Whether the GPU is of vendor `name` ([`Gpu::vendor`] compared without allocating).
    pub fn is_vendor(&self, name: &str) -> bool {
        self.vendor_words().is_some_and(|w| w.eq_ignore_ascii_case(name))
    }

    /// Whether `other` comes from the same vendor ([`Gpu::vendor`], without allocating: the cost
    /// model asks it of every kernel). Two GPUs of no known vendor are not of one: a GPU
    /// without a `vendor` takes nothing of another's measurements by vendor.
    pub fn same_vendor(&self, other: &Gpu) -> bool {
        matches!((self.vendor_words(), other.vendor_words()), (Some(a), Some(b)) if a.eq_ignore_ascii_case(b))
    }

    /// [`Gpu::vendor`] as written (any case).
    fn vendor_words(&self) -> Option<&str> {
        if let Some(v) = &self.vendor {
            return Some(v.trim());
        }
        let first = self.name.split_whitespace().next()?;
        ["NVIDIA", "AMD", "INTEL"].iter().any(|k| k.eq_ignore_ascii_case(first)).then_some(first)
    }
}

/// GPUs per node when neither the user nor a node preset says: the HGX/DGX
/// boards of every preset in `nodes.toml`.
pub const DEFAULT_GPUS_PER_NODE: u32 = 8;

/// Network bandwidth per GPU when the catalog has no node preset for it:
/// one 400 Gb/s NIC per GPU, as in every HGX/DGX H100, H200, B200 and MI300X
/// preset of `nodes.toml`.
pub const DEFAULT_NIC_GBPS_PER_GPU: f64 = 50.0;

/// The least network per GPU a user may give, GB/s: 1 Gb/s Ethernet is
/// 0.125 GB/s; a figure below is a unit slip (1e-300 priced a gradient
/// all-reduce at 10²⁹⁰ s), refused by every consumer through [`nic_gbps_per_gpu_given`].
pub const MIN_NIC_GBPS_PER_GPU: f64 = 0.1;

/// The most network per GPU a user may give, GB/s: 1 PB/s, as the HBM figures' bound (today's
/// fastest is 100 GB/s, 800 Gb/s); above is a unit slip that prices communication at nothing.
pub const MAX_NIC_GBPS_PER_GPU: f64 = 1e6;

/// A network per GPU as a user gave it (`--nic-gbps-per-gpu`, a runs file's
/// `nic_gbps_per_gpu`): `Err` with the reason where it cannot be one.
pub fn nic_gbps_per_gpu_given(nic: f64) -> std::result::Result<f64, String> {
    if nic.is_finite() && (MIN_NIC_GBPS_PER_GPU..=MAX_NIC_GBPS_PER_GPU).contains(&nic) {
        Ok(nic)
    } else {
        Err(format!(
            "{} GB/s of network per GPU: from {MIN_NIC_GBPS_PER_GPU} to {MAX_NIC_GBPS_PER_GPU:.0} (1 Gb/s Ethernet is 0.125 GB/s)",
            shown(nic)
        ))
    }
}

/// A number as a user would write it, for an error that quotes it: plainly where it
/// is of everyday size, else in exponent form (5e-324, not 300 zeros).
pub fn shown(v: f64) -> String {
    if v == 0.0 || (1e-3..1e9).contains(&v.abs()) { format!("{v}") } else { format!("{v:e}") }
}

/// A node preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Node {
    /// The id users type (`dgx-h100`).
    pub id: String,
    /// GPU id.
    pub gpu: String,
    /// GPUs per node.
    pub gpus: u32,
    /// NICs per node.
    pub nics: u32,
    /// Bandwidth of one NIC, GB/s.
    pub nic_gbps: f64,
    /// Where the numbers come from.
    pub source: String,
    /// The catalog file it was read from (`None`: the built-in catalog).
    #[serde(skip)]
    pub file: Option<PathBuf>,
}

impl Node {
    /// The NIC bandwidth a GPU of the node has, GB/s: its share of the node's NICs.
    pub fn nic_gbps_per_gpu(&self) -> f64 {
        self.nic_gbps * f64::from(self.nics) / f64::from(self.gpus.max(1))
    }

    /// Why the preset's numbers cannot price anything, if they cannot.
    fn unusable(&self) -> Option<String> {
        let message = (self.gpus == 0)
            .then(|| "gpus = 0: must be at least 1".to_string())
            .or_else(|| (self.nics == 0).then(|| "nics = 0: must be at least 1".to_string()))
            .or_else(|| not_positive("nic_gbps", self.nic_gbps))?;
        Some(format!("node {:?}: {message}", self.id))
    }
}

/// A catalog file: `[[gpu]]` and `[[node]]` entries, nothing else (a `[[gpus]]` typo or keys
/// outside an entry had loaded as an empty file).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    gpu: Vec<Gpu>,
    #[serde(default)]
    node: Vec<Node>,
}

/// How a trace's device was matched to a catalog GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchKind {
    /// A `match` substring of the device name.
    Name,
    /// Compute-unit count and gfx version (the name was empty or generic): possibly ambiguous.
    ComputeUnits,
}

/// GPUs and node presets.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// GPUs, built-in first; a user entry with a known id replaces it.
    pub gpus: Vec<Gpu>,
    /// Node presets.
    pub nodes: Vec<Node>,
    /// The file each of the user's GPU entries came from, by lowercased id, and whether it
    /// replaced a shipped GPU: what a later file's entry of the same id replaces.
    user_gpus: std::collections::HashMap<String, (PathBuf, bool)>,
}

const BUILTIN: [(&str, &str); 2] = [("gpus.toml", include_str!("../hw/gpus.toml")), ("nodes.toml", include_str!("../hw/nodes.toml"))];

impl Catalog {
    /// The catalog shipped in the binary.
    pub fn builtin() -> Catalog {
        let mut c = Catalog::default();
        for (name, text) in BUILTIN {
            // The built-in files are tested; a parse failure here is a build defect.
            if let Err(e) = c.add_toml(text, Path::new(name)) {
                debug_assert!(false, "{e}");
            }
        }
        // A shipped preset has no file of the user's: theirs are told apart by one ([`Catalog::node_of`]).
        c.nodes.iter_mut().for_each(|n| n.file = None);
        c.user_gpus.clear();
        c
    }

    /// Adds (or replaces by id) the entries of a TOML file; returns what a user should hear of
    /// it: an entry that replaced one of the catalog's, a `measured_as` id nothing else names.
    pub fn add_file(&mut self, path: &Path) -> Result<Vec<String>> {
        let text = tracecast_ingest::input::read_to_string(path).map_err(|cause| Error::Io { path: path.to_path_buf(), cause })?;
        self.add_toml(&text, path)
    }

    fn add_toml(&mut self, text: &str, path: &Path) -> Result<Vec<String>> {
        let mut file: File = toml::from_str(text).map_err(|e| Error::Catalog { path: path.to_path_buf(), message: e.to_string() })?;
        // Evidence ids are matched as the measurement rows' `gpu` is read: lowercased (a
        // `measured_as` of "Hopper-SM90" had matched no row, and passed the check below).
        for g in &mut file.gpu {
            g.measured_as.iter_mut().for_each(|m| m.make_ascii_lowercase());
        }
        // Every number divides or scales a price: one that is not a positive
        // (finite) quantity would project NaN or infinite times.
        if let Some(message) = file.gpu.iter().find_map(Gpu::unusable).or_else(|| file.node.iter().find_map(Node::unusable)) {
            return Err(Error::Catalog { path: path.to_path_buf(), message });
        }
        // An entry given twice in one file had replaced the first without a word; an empty id
        // was listed as a blank row; a node preset of a GPU no catalog has priced nothing.
        let bad = |message: String| Error::Catalog { path: path.to_path_buf(), message };
        if file.gpu.is_empty() && file.node.is_empty() {
            return Err(bad("no [[gpu]] or [[node]] entry: nothing to add to the catalog".into()));
        }
        let ids = file.gpu.iter().map(|g| ("gpu", g.id.as_str())).chain(file.node.iter().map(|n| ("node", n.id.as_str())));
        let mut seen = std::collections::HashSet::new();
        for (kind, id) in ids {
            if id.trim().is_empty() {
                return Err(bad(format!("a [[{kind}]] entry with an empty id")));
            }
            if !seen.insert((kind, id.to_ascii_lowercase())) {
                return Err(bad(format!("[[{kind}]] id {id:?} given twice in this file")));
            }
        }
        // A `measured_as` id no GPU of the catalog is or is measured as, and no shipped measurement
        // is of, names only the user's own rows: said, since a misspelt `hopper-sm90` had priced
        // the GPU by the spec model in silence.
        let mut notes = Vec::new();
        for g in &file.gpu {
            let named = |id: &str| {
                self.gpus.iter().chain(&file.gpu).any(|o| {
                    !std::ptr::eq(o, g) && (o.id.eq_ignore_ascii_case(id) || o.measured_as.iter().any(|m| m.eq_ignore_ascii_case(id)))
                })
            };
            let measured = |id: &str| !crate::measured::Measurements::shared().sources_for(&[id]).is_empty();
            // Its own id names nothing more than the entry is (it had been said to be no GPU at all).
            if g.measured_as.iter().any(|id| id.eq_ignore_ascii_case(&g.id)) {
                notes.push(format!(
                    "{}: gpu {:?}: measured_as lists its own id: its measurements are its own already, so the line adds nothing",
                    path.display(),
                    g.id
                ));
            }
            for id in g.measured_as.iter().filter(|id| !id.eq_ignore_ascii_case(&g.id) && !named(id) && !measured(id)) {
                notes.push(format!(
                    "{}: gpu {:?}: measured_as {id:?} is no GPU of the catalog or its measurements: only rows of your --measurements files with that gpu price it (ids in use: `hw list`, `hw show ID`)",
                    path.display(),
                    g.id
                ));
            }
        }
        // Ids are matched as `gpu` and `node` look them up, whatever their case.
        for g in file.gpu {
            let key = g.id.to_ascii_lowercase();
            let earlier = self.user_gpus.get(&key).cloned();
            let shipped = earlier.as_ref().map_or_else(|| self.gpus.iter().any(|x| x.id.eq_ignore_ascii_case(&g.id)), |e| e.1);
            self.user_gpus.insert(key, (path.to_path_buf(), shipped));
            match self.gpus.iter_mut().find(|x| x.id.eq_ignore_ascii_case(&g.id)) {
                // Another of the user's files gave it: that entry is what it replaces (the note
                // below had spoken of a shipped entry, its measured rows and profile), and where
                // that one replaced a shipped GPU, its rows and profile still price this one.
                Some(x) if let Some((earlier, _)) = earlier => {
                    notes.push(format!(
                        "{}: gpu {:?} replaces the entry of that id in {}{}",
                        path.display(),
                        g.id,
                        earlier.display(),
                        if shipped { " (itself the catalog's replaced: rows measured under that id and its shipped calibration profile still price it)" } else { "" }
                    ));
                    *x = g;
                }
                Some(x) => {
                    // What was measured still prices it, and what no longer does, said (it had gone
                    // unsaid beside new specs: the shipped profile's correction applied, the
                    // replaced entry's `measured_as` tables silently not).
                    let dropped: Vec<&str> = x
                        .measured_as
                        .iter()
                        .filter(|m| !g.measured_as.iter().any(|n| n.eq_ignore_ascii_case(m)))
                        .map(String::as_str)
                        .collect();
                    notes.push(format!(
                        "{}: gpu {:?} replaces the catalog's entry of that id; rows measured under that id and its shipped calibration profile still price it{}",
                        path.display(),
                        g.id,
                        if dropped.is_empty() {
                            String::new()
                        } else {
                            format!(
                                ", the rows of {} (the replaced entry's measured_as) no longer do: name them in its measured_as to keep them",
                                dropped.join(", ")
                            )
                        }
                    ));
                    *x = g;
                }
                None => self.gpus.push(g),
            }
        }
        for mut n in file.node {
            n.file = Some(path.to_path_buf());
            match self.nodes.iter_mut().find(|x| x.id.eq_ignore_ascii_case(&n.id)) {
                Some(x) => {
                    notes.push(format!("{}: node {:?} replaces the catalog's preset of that id", path.display(), n.id));
                    *x = n;
                }
                None => self.nodes.push(n),
            }
        }
        Ok(notes)
    }

    /// The GPU with this id.
    pub fn gpu(&self, id: &str) -> Result<&Gpu> {
        self.gpus
            .iter()
            .find(|g| g.id.eq_ignore_ascii_case(id))
            .ok_or_else(|| Error::UnknownHardware { id: id.to_string(), closest: closest(id, self.gpus.iter().map(|g| g.id.as_str())) })
    }

    /// The node preset with this id.
    pub fn node(&self, id: &str) -> Result<&Node> {
        self.nodes
            .iter()
            .find(|n| n.id.eq_ignore_ascii_case(id))
            .ok_or_else(|| Error::UnknownHardware { id: id.to_string(), closest: closest(id, self.nodes.iter().map(|n| n.id.as_str())) })
    }

    /// The node preset of this GPU: the first a user's `--hw` file gives (their cluster's),
    /// else the first shipped one (a user's own node of a shipped GPU had been ignored unless
    /// it took a shipped preset's id).
    pub fn node_of(&self, gpu_id: &str) -> Option<&Node> {
        let mut of = self.nodes.iter().filter(|n| n.gpu.eq_ignore_ascii_case(gpu_id));
        of.clone().find(|n| n.file.is_some()).or_else(|| of.next())
    }

    /// An error naming a node preset whose GPU no entry has (it would price nothing): checked
    /// once every file is in, so a preset's file may come before its GPU's.
    pub fn check_node_presets(&self) -> Result<()> {
        // Named by its file (it had been an unknown id alone, the preset's name quoted in a quote).
        match self.nodes.iter().find(|n| self.gpu(&n.gpu).is_err()) {
            Some(n) => Err(Error::Catalog {
                path: n.file.clone().unwrap_or_else(|| PathBuf::from("<built-in>")),
                message: format!(
                    "node preset {:?}: its gpu {:?} is in no catalog file{}; `tracecast hw list` shows the known ids",
                    n.id,
                    n.gpu,
                    closest(&n.gpu, self.gpus.iter().map(|g| g.id.as_str())).map_or(String::new(), |c| format!(" (did you mean {c}?)"))
                ),
            }),
            None => Ok(()),
        }
    }

    /// GPUs per node, the one rule: `given` (a flag, a runs file), else the GPU's
    /// node preset, else [`DEFAULT_GPUS_PER_NODE`]; never 0. With the user's measurements,
    /// their node size comes before the preset ([`crate::pricing::Pricing::gpus_per_node`]).
    pub fn gpus_per_node(&self, gpu_id: Option<&str>, given: Option<u32>) -> u32 {
        given.or_else(|| gpu_id.and_then(|id| self.node_of(id)).map(|n| n.gpus)).unwrap_or(DEFAULT_GPUS_PER_NODE).max(1)
    }

    /// The network bandwidth per GPU, GB/s: the share of its node preset's
    /// NICs, else [`DEFAULT_NIC_GBPS_PER_GPU`] (the one NIC rule of every
    /// consumer; the second value names what it came from).
    pub fn nic_gbps_per_gpu(&self, gpu_id: &str) -> (f64, String) {
        match self.node_of(gpu_id) {
            Some(n) => (n.nic_gbps_per_gpu(), format!("node preset {}: {} × {} GB/s NICs for {} GPUs", n.id, n.nics, n.nic_gbps, n.gpus)),
            None => (
                DEFAULT_NIC_GBPS_PER_GPU,
                format!("no node preset for {gpu_id}: one 400 Gb/s NIC per GPU assumed ({DEFAULT_NIC_GBPS_PER_GPU} GB/s)"),
            ),
        }
    }

    /// The catalog GPU a trace device is. The longest matching name substring
    /// wins (`MI250X` over `MI250`); devices with an empty or generic name
    /// (`""`, `AMD Radeon Graphics`) are matched by compute units and gfx version.
    pub fn match_device(&self, d: &DeviceProperties) -> Option<(&Gpu, MatchKind)> {
        let name = d.name.as_deref().unwrap_or("").to_ascii_lowercase();
        let by_name = self
            .gpus
            .iter()
            .filter_map(|g| {
                let best = g.match_names.iter().filter(|m| name.contains(&m.to_ascii_lowercase())).map(String::len).max()?;
                Some((best, g))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, g)| (g, MatchKind::Name));
        if by_name.is_some() {
            return by_name;
        }
        let generic = name.is_empty() || name.contains("radeon graphics");
        if !generic {
            return None;
        }
        let cus = d.num_sms?;
        let gfx = d.compute_major.zip(d.compute_minor).map(|(a, b)| a as f64 + b as f64 / 10.0);
        self.gpus
            .iter()
            .find(|g| {
                g.match_cus.contains(&cus) && gfx.is_none_or(|v| g.match_gfx.is_empty() || g.match_gfx.iter().any(|x| (x - v).abs() < 1e-6))
            })
            .map(|g| (g, MatchKind::ComputeUnits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, cus: i64, major: i64, minor: i64) -> DeviceProperties {
        DeviceProperties {
            name: Some(name.into()),
            num_sms: Some(cus),
            compute_major: Some(major),
            compute_minor: Some(minor),
            ..Default::default()
        }
    }

    #[test]
    fn builtin_catalog_covers_the_required_ids() {
        let c = Catalog::builtin();
        let ids = "v100 a100-40gb a100-80gb a100-pcie a100-pcie-40gb h100-sxm h800 h200 gh200 b200 b300 gb200 gb300 mi250x mi300x mi325x mi355x gaudi2 gaudi3";
        for id in ids.split_whitespace() {
            let g = c.gpu(id).unwrap();
            assert!(g.hbm_gbps > 0.0 && g.link_gbps > 0.0 && !g.source.is_empty(), "{id}");
        }
        assert!(c.node("dgx-h100").is_ok());
        assert!(c.gpu("tpu").is_err());
    }

    #[test]
    fn trace_device_names_map_onto_the_catalog() {
        let c = Catalog::builtin();
        let id = |d: DeviceProperties| c.match_device(&d).map(|(g, _)| g.id.clone());
        assert_eq!(id(dev("NVIDIA A100-PG509-200", 108, 8, 0)).as_deref(), Some("a100-40gb"));
        assert_eq!(id(dev("Tesla V100-SXM2-32GB", 80, 7, 0)).as_deref(), Some("v100"));
        assert_eq!(id(dev("NVIDIA H100 80GB HBM3", 132, 9, 0)).as_deref(), Some("h100-sxm"));
        assert_eq!(id(dev("NVIDIA B200", 148, 10, 0)).as_deref(), Some("b200"));
        assert_eq!(id(dev("AMD Instinct MI300X VF", 304, 9, 4)).as_deref(), Some("mi300x"));
        assert_eq!(id(dev("AMD Instinct MI300X", 304, 9, 4)).as_deref(), Some("mi300x"));
        assert_eq!(id(dev("", 304, 9, 4)).as_deref(), Some("mi300x"));
        assert_eq!(id(dev("AMD Radeon Graphics", 104, 9, 0)).as_deref(), Some("mi250"));
        assert_eq!(id(dev("AMD Instinct MI210", 104, 9, 0)).as_deref(), Some("mi210"));
        assert_eq!(id(dev("Quadro GP100", 56, 6, 0)), None);
    }

    #[test]
    fn newer_device_names_do_not_steal_matches() {
        let c = Catalog::builtin();
        let id = |name: &str| c.match_device(&dev(name, 0, 0, 0)).map(|(g, _)| g.id.clone());
        for (name, want) in [
            ("NVIDIA B300 SXM6 AC", "b300"),
            ("NVIDIA GB300", "gb300"),
            ("NVIDIA GB200", "gb200"),
            ("NVIDIA B200", "b200"),
            ("NVIDIA GH200 480GB", "gh200"),
            ("NVIDIA GH200 144G HBM3e", "gh200"),
            ("NVIDIA H200", "h200"),
            ("NVIDIA H100 80GB HBM3", "h100-sxm"),
            ("NVIDIA A100 80GB PCIe", "a100-pcie"),
            // The 40 GB PCIe card is not the 40 GB SXM4 board: 250 W, no NVLink between cards.
            ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
            ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
            ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
            ("AMD Instinct MI325X", "mi325x"),
            ("AMD Instinct MI300X", "mi300x"),
            ("AMD Instinct MI355X", "mi355x"),
            ("GAUDI2", "gaudi2"),
            ("GAUDI3", "gaudi3"),
        ] {
            assert_eq!(id(name).as_deref(), Some(want), "{name}");
        }
        assert_eq!(c.match_device(&dev("", 256, 9, 5)).map(|(g, _)| g.id.as_str()), Some("mi355x"));
        assert_eq!(c.gpu("gaudi3").unwrap().vendor().as_deref(), Some("INTEL"));
    }

    #[test]
    fn measurement_ids_are_the_id_then_measured_as() {
        let c = Catalog::builtin();
        assert_eq!(c.gpu("h200").unwrap().measurement_ids().collect::<Vec<_>>(), ["h200", "hopper-sm90"]);
        assert_eq!(c.gpu("mi325x").unwrap().measurement_ids().collect::<Vec<_>>(), ["mi325x", "cdna3-gfx942"]);
        assert_eq!(c.gpu("b200").unwrap().measurement_ids().collect::<Vec<_>>(), ["b200"]);
    }

    /// The `gpu` column (the second field) of a CSV table; quoted fields may
    /// hold commas, newlines and doubled quotes.
    fn second_column(text: &str) -> Vec<String> {
        let (mut out, mut field, mut index, mut quoted) = (Vec::new(), String::new(), 0, false);
        let mut chars = text.chars().peekable();
        while let Some(ch) = chars.next() {
            match ch {
                '"' if quoted && chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = !quoted,
                ',' if !quoted => {
                    if index == 1 {
                        out.push(std::mem::take(&mut field));
                    }
                    field.clear();
                    index += 1;
                }
                '\n' if !quoted => {
                    field.clear();
                    index = 0;
                }
                _ => field.push(ch),
            }
        }
        out
    }

    #[test]
    fn every_evidence_gpu_is_a_catalog_id_or_measured_as() {
        let c = Catalog::builtin();
        let known: Vec<&str> = c.gpus.iter().flat_map(Gpu::measurement_ids).collect();
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/evidence"));
        for file in ["gemm.csv", "attention.csv", "collectives.csv", "memory.csv"] {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let gpus = second_column(&text);
            assert_eq!(gpus.first().map(String::as_str), Some("gpu"), "{}: the second column is not `gpu`", path.display());
            let unknown: std::collections::BTreeSet<&str> =
                gpus.iter().skip(1).map(String::as_str).filter(|g| *g != "amd-unstated" && !known.contains(g)).collect();
            assert!(unknown.is_empty(), "{}: GPU ids neither in the catalog nor measured_as: {unknown:?}", path.display());
        }
        let path = dir.join("training-runs.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let runs: serde_json::Value = serde_json::from_str(&text).unwrap();
        let gpus: Vec<&str> = ["runs", "runs_without_dims", "runs_lora"]
            .iter()
            .flat_map(|k| runs[k].as_array().into_iter().flatten())
            .filter_map(|r| r["system"]["gpu"].as_str())
            .collect();
        assert!(!gpus.is_empty(), "{}: no system.gpu", path.display());
        let unknown: std::collections::BTreeSet<&str> = gpus.into_iter().filter(|g| !known.contains(g)).collect();
        assert!(unknown.is_empty(), "{}: GPU ids neither in the catalog nor measured_as: {unknown:?}", path.display());
    }

    /// A number in another unit than its key's is refused by file and key (TB/s in `hbm_gbps`
    /// had priced a 4096³ GEMM at 99 ms, FLOP/s in `bf16` had been shown as 3.6e14 TFLOP/s),
    /// and a GPU two of the user's files give is said to replace the first file's entry, not a
    /// shipped one with measured rows and a profile.
    #[test]
    fn a_number_in_another_unit_is_refused_and_a_second_file_replaces_the_first() {
        let gpu = |id: &str, key: &str, value: &str| {
            let mut keys =
                vec![("bf16", "362.0"), ("memory_gb", "48.0"), ("hbm_gbps", "864.0"), ("link_gbps", "32.0"), ("clock_mhz", "2520.0")];
            keys.iter_mut().filter(|k| k.0 == key).for_each(|k| k.1 = value);
            let body: String = keys.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
            format!("[[gpu]]\nid = \"{id}\"\nname = \"x\"\nsource = \"s\"\n{body}")
        };
        let mut c = Catalog::builtin();
        assert_eq!(c.add_toml(&gpu("l40s", "", ""), Path::new("l40s.toml")).unwrap(), Vec::<String>::new());
        for (key, value) in [("hbm_gbps", "0.864"), ("bf16", "362050000000000.0"), ("memory_gb", "48000000000.0"), ("clock_mhz", "2.52")] {
            let e = c.clone().add_toml(&gpu("l40s", key, value), Path::new("unit.toml")).unwrap_err().to_string();
            assert!(e.contains("unit.toml") && e.contains(&format!("{key} = ")) && e.contains("another unit"), "{key}: {e}");
        }
        let notes = c.add_toml(&gpu("l40s", "hbm_gbps", "900.0"), Path::new("l40s-b.toml")).unwrap();
        assert_eq!(notes, vec!["l40s-b.toml: gpu \"l40s\" replaces the entry of that id in l40s.toml".to_string()]);
        assert_eq!(c.gpu("l40s").unwrap().hbm_gbps, 900.0);
        // A shipped GPU replaced twice: the second note still says what prices it.
        c.add_toml(&gpu("h100-sxm", "", ""), Path::new("mine.toml")).unwrap();
        let notes = c.add_toml(&gpu("h100-sxm", "bf16", "900.0"), Path::new("mine-b.toml")).unwrap();
        assert!(notes[0].contains("replaces the entry of that id in mine.toml (itself the catalog's replaced"), "{notes:?}");
        // Every shipped GPU is within the bounds.
        assert!(Catalog::builtin().gpus.iter().all(|g| g.out_of_range().is_none()));
    }

    #[test]
    fn user_files_extend_and_override() {
        let mut c = Catalog::builtin();
        let n = c.gpus.len();
        let notes = c
            .add_toml(
                "[[gpu]]\nid = \"h100-sxm\"\nname = \"x\"\nsource = \"mine\"\nbf16 = 1.0\nmemory_gb = 1.0\nhbm_gbps = 100.0\nlink_gbps = 1.0\n",
                Path::new("mine.toml"),
            )
            .unwrap();
        assert_eq!(c.gpus.len(), n);
        // Said, where it had replaced the built-in H100 in silence.
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with("mine.toml: gpu \"h100-sxm\" replaces the catalog's entry of that id"), "{notes:?}");
        assert!(
            notes[0].contains(
                "its shipped calibration profile still price it, the rows of hopper-sm90 (the replaced entry's measured_as) no longer do"
            ),
            "{notes:?}"
        );
        assert_eq!(c.gpu("h100-sxm").unwrap().bf16, Some(1.0));
        assert!(c.add_toml("[[gpu]]\nid = 3\n", Path::new("bad.toml")).is_err());
        // A misspelt key is refused, not ignored (the peak would stay unset).
        let typo =
            "[[gpu]]\nid = \"mine\"\nname = \"x\"\nsource = \"s\"\nbf61 = 100.0\nmemory_gb = 80.0\nhbm_gbps = 2000.0\nlink_gbps = 400.0\n";
        let e = c.add_toml(typo, Path::new("typo.toml")).unwrap_err().to_string();
        assert!(e.contains("typo.toml") && e.contains("unknown field `bf61`"), "{e}");
        // A misspelt table, keys outside an entry, or nothing: refused (each had loaded as an empty file).
        for (text, says) in [
            ("[[gpus]]\nid = \"mine\"\n", "unknown field `gpus`"),
            ("id = \"mine\"\n", "unknown field `id`"),
            ("# only a comment\n", "no [[gpu]] or [[node]] entry"),
        ] {
            let e = c.add_toml(text, Path::new("empty.toml")).unwrap_err().to_string();
            assert!(e.contains("empty.toml") && e.contains(says), "{text}: {e}");
        }
        // One id twice in a file, an empty id, a node preset of a GPU no catalog has: refused
        // by name (the first had been replaced, the second listed blank, the third priced nothing).
        let gpu = |id: &str| {
            format!(
                "[[gpu]]\nid = \"{id}\"\nname = \"x\"\nsource = \"s\"\nbf16 = 100.0\nmemory_gb = 80.0\nhbm_gbps = 2000.0\nlink_gbps = 400.0\n"
            )
        };
        let e = c.add_toml(&format!("{}{}", gpu("mine"), gpu("mine")), Path::new("twice.toml")).unwrap_err().to_string();
        assert!(e.contains("twice.toml") && e.contains("id \"mine\" given twice"), "{e}");
        let e = c.add_toml(&gpu(""), Path::new("blank.toml")).unwrap_err().to_string();
        assert!(e.contains("blank.toml") && e.contains("empty id"), "{e}");
        // A misspelt `measured_as` id is said (it had priced the copy by the spec model in silence);
        // an id the catalog's GPUs are measured as, or another GPU of the file, is not.
        let measured_as = |id: &str, ids: &str| format!("{}measured_as = [{ids}]\n", gpu(id));
        // Its own id is said to add nothing (it had been said to be no GPU of the catalog).
        let notes = c.add_toml(&measured_as("itself", "\"itself\""), Path::new("self.toml")).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("gpu \"itself\": measured_as lists its own id"), "{notes:?}");
        let notes = c.add_toml(&measured_as("copy", "\"hoper-sm90\""), Path::new("as.toml")).unwrap();
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("as.toml: gpu \"copy\": measured_as \"hoper-sm90\" is no GPU of the catalog or its measurements"),
            "{notes:?}"
        );
        // `amd-unstated`: GEMM rows of the shipped base only.
        let text = format!("{}{}", measured_as("copy2", "\"hopper-sm90\", \"h100-sxm\", \"twin\", \"amd-unstated\""), gpu("twin"));
        assert_eq!(c.add_toml(&text, Path::new("as.toml")).unwrap(), Vec::<String>::new());
        // Read as the rows' ids are, lowercased: "Hopper-SM90" had matched no row.
        assert_eq!(c.add_toml(&measured_as("copy3", "\"Hopper-SM90\""), Path::new("as.toml")).unwrap(), Vec::<String>::new());
        assert_eq!(c.gpu("copy3").unwrap().measured_as, ["hopper-sm90"]);
        let node = "[[node]]\nid = \"box\"\ngpu = \"nonexist\"\ngpus = 8\nnics = 8\nnic_gbps = 50.0\nsource = \"s\"\n";
        c.add_toml(node, Path::new("node.toml")).unwrap();
        let e = c.check_node_presets().unwrap_err().to_string();
        assert_eq!(
            e,
            "node.toml: node preset \"box\": its gpu \"nonexist\" is in no catalog file; `tracecast hw list` shows the known ids"
        );
        // Its GPU in a later file, in another case: found, and the preset prices it.
        c.add_toml(&gpu("NonExist"), Path::new("later.toml")).unwrap();
        assert!(c.check_node_presets().is_ok());
        assert_eq!(c.node_of("nonexist").map(|n| n.id.as_str()), Some("box"));
    }

    /// A user's entry whose numbers cannot price (a zero, negative or NaN peak,
    /// bandwidth or capacity; a node of no GPUs) is refused, naming the file,
    /// the entry and the field, and the catalog is left as it was.
    #[test]
    fn user_entries_with_numbers_that_cannot_price_are_refused() {
        let gpu = |field: &str| {
            let mut text = "[[gpu]]\nid = \"mine\"\nname = \"x\"\nsource = \"s\"\nbf16 = 100.0\nmemory_gb = 80.0\nhbm_gbps = 2000.0\nlink_gbps = 400.0\n".to_string();
            let key = field.split(" = ").next().unwrap();
            text = text.lines().filter(|l| !l.starts_with(&format!("{key} "))).map(|l| format!("{l}\n")).collect();
            text + field + "\n"
        };
        for (field, says) in [
            ("bf16 = 0.0", "bf16 = 0"),
            ("fp8 = -5.0", "fp8 = -5"),
            ("hbm_gbps = nan", "hbm_gbps = NaN"),
            ("link_gbps = 0.0", "link_gbps = 0"),
            ("memory_gb = -1.0", "memory_gb = -1"),
            ("cache_mb = -2.0", "cache_mb = -2"),
            ("clock_mhz = inf", "clock_mhz = inf"),
            ("exp_tps = 0.0", "exp_tps = 0"),
            ("tdp_w = -700.0", "tdp_w = -700"),
            ("tdp_w = nan", "tdp_w = NaN"),
            ("sms = 0", "sms = 0"),
            // Tensor rates out of order: a number in another unit (bf16 here is 100 TFLOP/s).
            ("tf32 = 494.7", "bf16 = 100 is below tf32 = 494.7"),
            ("fp8 = 0.2", "fp8 = 0.2 is below bf16 = 100"),
        ] {
            let mut c = Catalog::builtin();
            let n = c.gpus.len();
            let e = c.add_toml(&gpu(field), Path::new("mine.toml")).expect_err(field).to_string();
            assert!(e.contains("mine.toml") && e.contains("\"mine\"") && e.contains(says), "{field}: {e}");
            assert_eq!(c.gpus.len(), n, "{field}");
        }
        assert!(Catalog::builtin().add_toml(&gpu("fp8 = 200.0"), Path::new("mine.toml")).is_ok());
        let node = "[[node]]\nid = \"box\"\ngpu = \"h100-sxm\"\ngpus = 0\nnics = 8\nnic_gbps = 50.0\nsource = \"s\"\n";
        let e = Catalog::builtin().add_toml(node, Path::new("n.toml")).unwrap_err().to_string();
        assert!(e.contains("n.toml") && e.contains("\"box\"") && e.contains("gpus = 0"), "{e}");
    }
}
