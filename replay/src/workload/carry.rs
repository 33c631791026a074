//! A measured training run carried to another system (`project --from`): the
//! target's projection plus the time the run's software stack spent beyond
//! what the model prices of it.

use tracecast_calibrate::DeviceModel;
use tracecast_calibrate::catalog::Catalog;

use super::llm::Plan;
use super::validate::{Projected, Run, RunSystem, device_for, gpu_id, projected};

/// Seconds per token per GPU of a software stack's step on another GPU, from
/// its measured step on the source GPU (all three per token per GPU): the
/// target's projection plus the source's time the model does not explain
/// (`measured − projected` on the source), unchanged. The model prices what
/// scales with the GPU — GEMMs, attention, memory-bound passes, collectives —;
/// a stack also spends time the model has no term for (host dispatch,
/// synchronisations, kernels it does not list), and that time does not get
/// shorter on a faster GPU: MosaicML's llm-foundry runs of MPT-7B, -13B and
/// -70B on A100 and H100 (`shared/validation/published-runs.json`) leave
/// 0.400 / 0.385 s, 0.331 / 0.308 s and 3.683 / 3.688 s per microbatch
/// unexplained on the two GPUs (BENCHMARKS.md, *Generation to generation*).
/// Where the model prices the source slower than measured, nothing is carried:
/// the excess is the model's error on that GPU, not the stack's.
pub fn step_carried_s(measured_source_s: f64, projected_source_s: f64, projected_target_s: f64) -> f64 {
    projected_target_s + (measured_source_s - projected_source_s).max(0.0)
}

/// A measured training run carried to another system: the target's
/// projection plus the source run's time the model does not explain
/// ([`step_carried_s`]), in the iteration (`stack_ms`), the throughput and the
/// first note.
pub struct Carried {
    /// The target's projection, the carried time included.
    pub projection: super::Projection,
    /// The target's simulated timeline, without the carried time (which has no place on its lanes).
    pub timeline: super::Timeline,
}

/// The system a run is carried to, and what of the run's own was left behind.
pub struct Target {
    /// The GPU (a catalog id), how many, and what differs from the catalog.
    pub system: RunSystem,
    /// Which of the run's system overrides were not carried to another GPU.
    pub note: Option<String>,
}

/// The system a run is carried to: `gpu` (default: the run's own) with
/// `gpus` (default: the run's) and `overrides` — each of the user's first,
/// then, on the run's own GPU, the run's (a variant of its GPU: HBM, NICs).
/// On another GPU the run's overrides are not carried (they describe its GPU);
/// the returned note says which were left behind.
pub fn target_system(
    run: &Run,
    gpu: Option<&str>,
    gpus: Option<u32>,
    overrides: super::llm::SystemOverrides,
    catalog: &Catalog,
) -> Result<Target, crate::Error> {
    let own = gpu_id(run, catalog);
    let id = match gpu {
        Some(g) => catalog.gpu(g).map_err(|e| crate::Error::System(e.to_string()))?.id.clone(),
        None => own.clone(),
    };
    let theirs = run.system.overrides;
    // The run's power limit is its GPU's too: kept on it (said as `validate` says it), left behind on another.
    let (merged, left, power_w) = if id == own {
        (overrides.or(theirs), None, run.system.power_w)
    } else {
        let mut left: Vec<String> = theirs.given().iter().map(|(k, v)| format!("{k} {v}")).collect();
        left.extend(run.system.power_w.map(|w| format!("power_w {w}")));
        let note = (!left.is_empty()).then(|| format!("the run's {} describe its {own}, not {id}: not carried", left.join(", ")));
        (overrides, note, None)
    };
    let system = RunSystem { gpu: id, gpus: gpus.unwrap_or(run.system.gpus), overrides: merged, power_w };
    Ok(Target { system, note: left })
}

/// Projects `source` — a measured training run — onto `target` (see
/// [`target_system`]) under `plan` (default: the run's plan), with the same
/// model, precision and framework (the same software stack), and carries the
/// run's unexplained time ([`step_carried_s`]). `device` prices whichever of
/// the two is on its GPU; the others get their GPU's shipped profile, as
/// `validate` prices a run.
pub fn carry_run(
    source: &Run,
    target: Target,
    plan: Option<&str>,
    catalog: &Catalog,
    device: Option<&DeviceModel>,
    measurements: Option<&std::sync::Arc<tracecast_calibrate::measured::Measurements>>,
) -> Result<Carried, crate::Error> {
    let task = source.task.as_deref().unwrap_or("train");
    if task != "train" {
        return Err(crate::Error::Run(format!(
            "run {:?} is a {task} run: only a training run's step carries a stack's time per token",
            source.id
        )));
    }
    let devices = device.map(std::slice::from_ref).unwrap_or_default();
    // The source's measured tokens per second per GPU (the target's call reads the same run's).
    let (mut measured, mut same) = (0.0, 0.0);
    let own = device_for(&gpu_id(source, catalog), catalog, devices);
    let src = projected(source, catalog, own.as_ref(), measurements, &mut measured)
        .map_err(|e| crate::Error::Run(format!("run {:?} on its own system: {e}", source.id)))?;
    // The run's published number format is its stack's: a GPU without it cannot run that stack,
    // and no plan given here changes the run's precision.
    let src_linear = src.projection.linear_format;
    if let Ok(gpu) = catalog.gpu(&target.system.gpu)
        && src_linear == tracecast_calibrate::catalog::Dtype::Fp8
        && gpu.peak_flops(src_linear).is_none()
    {
        return Err(crate::Error::Run(format!(
            "run {:?} trains its linear layers in {} ({}); {} has no {} peak in the catalog, so the run's stack cannot be carried onto it (project the model there without --from)",
            source.id,
            src_linear.class_words(),
            // The plan's fp8 key or the published precision decided it: the precision where it names FP8 linear layers.
            if source.precision.as_ref().is_some_and(|p| p.linear_names_fp8()) { "its precision" } else { "its plan" },
            gpu.id,
            src_linear.class_words()
        )));
    }
    let mut to = source.clone();
    to.system = target.system;
    if let Some(p) = plan {
        to.plan = p.to_string();
    }
    let theirs = device_for(&gpu_id(&to, catalog), catalog, devices);
    let tgt = projected(&to, catalog, theirs.as_ref(), measurements, &mut same).map_err(|e| match plan {
        Some(_) => e,
        None => crate::Error::Run(format!(
            "the run's plan {:?} on {} × {}: {e} (give the target's plan)",
            source.plan, to.system.gpu, to.system.gpus
        )),
    })?;
    let Projected { projection: mut p, timeline, per_gpu } = tgt;
    // The published precision, else the plan's (what `projected` priced).
    let linear = p.linear_format;
    let (m, ps, pt) = (1.0 / measured, 1.0 / src.per_gpu, 1.0 / per_gpu);
    // A target profile whose GEMM correction of the run's linear format was fitted to measured
    // runs already prices a stack's time beyond the model: carrying the run's as well would
    // count that time twice. (A correction of another format leaves these GEMMs uncorrected.)
    let fitted = theirs.as_ref().and_then(|d| d.profile.as_ref()).is_some_and(|p| p.gemm_fitted_to_runs(linear));
    let stack_ms = if fitted { 0.0 } else { p.times.iteration_ms * (step_carried_s(m, ps, pt) / pt - 1.0) };
    let (gpu, n) = (&source.system.gpu, source.system.gpus);
    let mut notes = vec![if fitted {
        format!(
            "stack time from run {:?} ({gpu} × {n}): not carried, the profile's {} GEMM correction of {} was fitted to measured runs (validate --fit) and holds their stack's time beyond the model in its place (this run's stack is priced as theirs)",
            source.id,
            linear.as_str(),
            to.system.gpu
        )
    } else if stack_ms > 0.0 {
        format!(
            "stack time carried from run {:?} ({gpu} × {n}: measured {:.0} tokens/s per GPU where the model projects {:.0}): {:.2} µs per token per GPU the model does not explain, added unchanged, {stack_ms:.2} ms per iteration (host dispatch, synchronisations, kernels the model does not list: a cost of the software stack, not of the GPU)",
            source.id,
            measured,
            src.per_gpu,
            (m - ps) * 1e6,
        )
    } else {
        format!(
            "stack time from run {:?} ({gpu} × {n}): nothing carried, the model projects it slower than measured ({:.0} against {:.0} tokens/s per GPU): the model's error on that GPU, not the stack's",
            source.id, src.per_gpu, measured,
        )
    }];
    notes.extend(target.note);
    // A 16-bit format the target lacks runs as the other (V100: BF16 as FP16), said: the carried
    // stack is one that switched its format (it had been priced so without a word).
    if let Ok(gpu) = catalog.gpu(&to.system.gpu)
        && let Some(other) = gpu.sixteen_bit_stand_in(src_linear)
    {
        notes.push(format!(
            "run {:?} trains in {}; {} has no {} path: its linear layers priced in {} (the carried stack is assumed to switch format)",
            source.id,
            src_linear.as_str(),
            gpu.id,
            src_linear.as_str(),
            other.as_str()
        ));
    }
    // A plan given in place of the run's, said with the run's (the header showed the new one alone).
    if plan.is_some() && to.plan != source.plan {
        notes.push(format!("plan {:?} given in place of the run's {:?}", to.plan, source.plan));
    }
    // The time is carried per token; a stack's per-dispatch costs follow the micro-batches instead.
    let microbatch = |text: &str| Plan::parse(text).map(|p| p.microbatch).ok();
    if stack_ms > 0.0
        && let (Some(a), Some(b)) = (microbatch(&source.plan), microbatch(&to.plan))
        && a != b
    {
        notes.push(format!(
            "carried per token: the run's micro-batch was {a} sequences, the target's is {b}; costs per dispatch would follow the micro-batches instead"
        ));
    }
    notes.append(&mut p.notes);
    p.notes = notes;
    p.times.stack_ms = stack_ms;
    let projected_ms = p.times.iteration_ms;
    p.times.iteration_ms += stack_ms;
    // The same model FLOPs over the longer step.
    p.mfu = p.mfu.map(|m| m * projected_ms / p.times.iteration_ms);
    p.tokens_per_s_per_gpu = p.tokens_per_s_per_gpu.map(|t| t * projected_ms / p.times.iteration_ms);
    p.throughput = p.global_batch / (p.times.iteration_ms / 1e3);
    Ok(Carried { projection: p, timeline })
}

#[cfg(test)]
mod tests {
    use super::step_carried_s;

    #[test]
    fn the_sources_unexplained_time_is_carried_and_its_excess_is_not() {
        // Source measured 2.0 s, projected 1.5 s: 0.5 s the model does not explain stays 0.5 s
        // on a target the model prices at 0.5 s — a speed-up of 2.0 / 1.0, not 1.5 / 0.5.
        assert!((step_carried_s(2.0, 1.5, 0.5) - 1.0).abs() < 1e-12);
        // The model slower than the measurement on the source: its excess is not carried.
        assert!((step_carried_s(1.0, 1.2, 0.4) - 0.4).abs() < 1e-12);
    }
}
