//! `tracecast synth`: Kineto traces of a synthetic job with known ground truth.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::Outcome;

/// The synthetic job `synth` writes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Output directory, created (default: empty, refused).
    pub out: PathBuf,
    /// Ranks (default: 4).
    pub ranks: u32,
    /// Training steps per rank (default: 3).
    pub steps: u32,
    /// Transformer-like layers per step (default: 8).
    pub layers: u32,
    /// Random seed of the noise and rank skew (default: 1).
    pub seed: u64,
    /// True all-reduce bus bandwidth, GB/s (default: 150).
    pub busbw_gbps: f64,
    /// True all-reduce latency α, µs (default: 15).
    pub alpha_us: f64,
    /// True GEMM efficiency η (default: 0.70).
    pub gemm_efficiency: f64,
    /// Write plain JSON instead of gzip (default: false).
    pub plain: bool,
    /// Layers shaped like this model, a preset or MAD-Max model file (default: none).
    pub model: Option<String>,
    /// Tokens per step and rank, with `model` (default: 4096).
    pub tokens: u64,
    /// Take the ground truth from this calibration profile (default: none).
    pub profile: Option<PathBuf>,
    /// Write nothing on the terminal (default: false).
    pub quiet: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            out: PathBuf::new(),
            ranks: 4,
            steps: 3,
            layers: 8,
            seed: 1,
            busbw_gbps: 150.0,
            alpha_us: 15.0,
            gemm_efficiency: 0.70,
            plain: false,
            model: None,
            tokens: 4096,
            profile: None,
            quiet: false,
        }
    }
}

/// Writes the job's traces and names each file on the terminal.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    crate::output::folder_outputs(&[("--out", Some(&args.out))], &[])?;
    let mut spec = tracecast_calibrate::synth::JobSpec::default();
    spec.ranks = args.ranks;
    spec.steps = args.steps;
    spec.layers = args.layers;
    spec.seed = args.seed;
    spec.allreduce_busbw_gbps = args.busbw_gbps;
    spec.allreduce_alpha_us = args.alpha_us;
    spec.gemm_efficiency = args.gemm_efficiency;
    spec.gzip = !args.plain;
    if let Some(m) = &args.model {
        let model = crate::project::model(m)?;
        spec.hidden = model.hidden as u64;
        spec.tokens = args.tokens;
        spec.layer_gemms = model.layer_gemms(args.tokens);
    }
    if let Some(p) = &args.profile {
        use tracecast_calibrate::work::KernelClass;
        let catalog = tracecast_calibrate::Catalog::builtin();
        let device = tracecast_calibrate::DeviceModel::from_profile_file(p, &catalog)?;
        // The traces name the profile's GPU, so that `calibrate` reads them against its peaks
        // (they had named an H100 whatever the profile, and an A100's η 0.5 came back as 0.158).
        let gpu = device.gpu.as_ref().with_context(|| {
            format!("{}: the profile names no catalog GPU (device.catalog_id), so its traces could not name their GPU", p.display())
        })?;
        spec.device = tracecast_calibrate::synth::SynthDevice::of(gpu, &catalog)
            .with_context(|| format!("{}: no trace device name of {} reads back as it", p.display(), gpu.id))?;
        let bf16 = Some(tracecast_calibrate::catalog::Dtype::Bf16);
        let (eta, t0, peak) = device.fit(KernelClass::Gemm, bf16).with_context(|| {
            // The traces' GEMMs are BF16: a fit of another format is no truth of theirs.
            // (A BF16 fit outside the physical bounds is none: said so.)
            let gemms = device.profile.iter().flat_map(|pr| &pr.kernels).filter(|k| k.class == KernelClass::Gemm);
            let others: Vec<&str> =
                gemms.map(|k| k.dtype.map_or("an unknown format", tracecast_calibrate::catalog::Dtype::as_str)).collect();
            let has = match others.as_slice() {
                [] => "it has no GEMM fit".to_string(),
                o if o.contains(&"bf16") => "its BF16 GEMM fit is outside the physical bounds".to_string(),
                o => format!("its GEMM fits are of {}", o.join(", ")),
            };
            format!("{}: no BF16 GEMM fit to take as truth (the synthetic GEMMs are BF16; {has})", p.display())
        })?;
        spec.gemm_efficiency = eta;
        spec.kernel_overhead_us = t0.max(0.0);
        spec.peak_flops = peak;
        if let Some((eta, _, peak)) = device.fit(KernelClass::Elementwise, bf16) {
            spec.memory_efficiency = eta;
            spec.peak_hbm_bytes_per_s = peak;
        }
        if let Some(m) = device.link(tracecast_ingest::collective::Collective::AllReduce, None, "intra") {
            spec.allreduce_alpha_us = m.fit.alpha_us;
            spec.allreduce_busbw_gbps = m.fit.busbw_gbps;
        }
    }
    if let Some(why) = spec.invalid() {
        anyhow::bail!("synth: {why}");
    }
    let written = tracecast_calibrate::synth::write_job_with_truth(&spec, &args.out)?;
    if !args.quiet {
        for w in &written {
            writeln!(out, "{}", w.path.display())?;
        }
        // The truth the traces were made from, to check what `analyze` and `calibrate` recover.
        writeln!(
            out,
            "truth: GEMM η {:.3} of {:.0} TFLOP/s plus {:.1} µs a kernel; memory-bound kernels at η {:.3} of {:.0} GB/s; all-reduce α {} µs, bus bandwidth {} GB/s",
            spec.gemm_efficiency,
            spec.peak_flops / 1e12,
            spec.kernel_overhead_us,
            spec.memory_efficiency,
            spec.peak_hbm_bytes_per_s / 1e9,
            spec.allreduce_alpha_us,
            spec.allreduce_busbw_gbps
        )?;
        writeln!(
            out,
            "truth per rank: the correction its clock needs (what analyze's clock_offset_us finds), host time before each step, all-reduces it arrived last at, the wait it caused the others"
        )?;
        for (r, w) in written.iter().enumerate() {
            writeln!(
                out,
                "  rank {r}: {:+.1} µs, {:.1} µs, {} time(s), {:.3} GPU-ms",
                // The generator added the offset; the correction takes it away.
                -w.clock_offset_us + 0.0,
                w.data_loading_us,
                w.times_last,
                w.wait_caused_us / 1000.0
            )?;
        }
    }
    Ok(Outcome::Done)
}
