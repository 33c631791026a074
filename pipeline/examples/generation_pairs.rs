//! Generation-to-generation speed-ups: measured against `tracecast validate`'s projection.
//!
//! Pairs of runs in `../shared/evidence/training-runs.json` and
//! `../shared/validation/published-runs.json` that measure the same model with
//! the same software stack (same source table and container, same task and
//! precision) on two GPUs; the speed-up is the ratio of tokens/s per GPU (each
//! run keeps the plan its source published for that GPU). The projection's
//! attention and "the rest" are its compute time in attention kernels and the
//! iteration less that, per token per GPU.
//!
//! `cargo run --release -p tracecast-pipeline --example generation_pairs -- [--markdown]`

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::Result;
use regex::Regex;
use tracecast_calibrate::fit::median;
use tracecast_replay::workload::carry::step_carried_s;
use tracecast_replay::workload::validate::{self, Run, RunResult};

/// GPUs from oldest to newest: a pair goes from the older to the newer.
const ORDER: [&str; 6] = ["a100-80gb", "h100-sxm", "h200", "b200", "gb200", "gb300"];

/// The runs files, read in place from the shared folder beside the repository.
fn files() -> [PathBuf; 2] {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared");
    [shared.join("evidence/training-runs.json"), shared.join("validation/published-runs.json")]
}

/// (stack, model, task and precision) of a run.
type Key = (String, String, String);

/// The run-id patterns of the `mb` tables (`mb<release>-<task and model>-<gpu>-<gpus>-<precision>`),
/// one per GPU of [`ORDER`] (its id token: `h100` for `h100-sxm`), compiled once.
fn mb_ids() -> Result<Vec<Regex>> {
    let pattern = |gpu: &str| {
        let tok = if gpu == "h100-sxm" { "h100" } else { gpu };
        Regex::new(&format!(r"^(mb[0-9.]+)-(.*)-{}-(\d+)-(.*)$", regex::escape(tok)))
    };
    Ok(ORDER.iter().map(|gpu| pattern(gpu)).collect::<Result<_, _>>()?)
}

/// The key of `run`, its GPU's run-id pattern `mb_id` from [`mb_ids`].
fn key(run: &Run, mb_id: &Regex) -> Option<Key> {
    let rid = run.id.as_str();
    if rid.starts_with("mb") {
        let m = mb_id.captures(rid)?;
        let group = |i: usize| m.get(i).map_or("", |g| g.as_str());
        let alt = if rid.ends_with("-alt") { "-alt" } else { "" };
        return Some((group(1).to_string(), group(2).to_string(), group(4).replace("-alt", "") + alt));
    }
    if rid.starts_with("mpt-") {
        let size = rid.split('-').nth(1).unwrap_or("");
        return Some(("llm-foundry".to_string(), size.to_string(), "bf16".to_string()));
    }
    None
}

/// One pair's speed-ups, target over source.
struct Pair<'a> {
    key: &'a Key,
    from: &'a Run,
    to: &'a Run,
    measured: f64,
    projected: f64,
    attention: f64,
    rest: f64,
    carried: f64,
}

/// Seconds per token per GPU in attention and in the rest of the projected iteration
/// (each keeps its share of the iteration); `None` when the run was not projected.
fn parts(p: &RunResult) -> Option<(f64, f64)> {
    let tokens = p.predicted_tokens_per_s_per_gpu.filter(|&t| t != 0.0)?;
    let times = p.times.as_ref()?;
    let it = times.iteration_ms;
    let att = times.by_kind_ms.get("attention").copied().unwrap_or(0.0);
    let per = 1.0 / tokens;
    Some((att / it * per, (it - att) / it * per))
}

fn pair<'a>(key: &'a Key, a: &'a Run, b: &'a Run, proj: &HashMap<String, RunResult>) -> Option<Pair<'a>> {
    let (pa, pb) = (proj.get(&a.id)?, proj.get(&b.id)?);
    let (ta, tb) = (pa.predicted_tokens_per_s_per_gpu.filter(|&t| t != 0.0)?, pb.predicted_tokens_per_s_per_gpu.filter(|&t| t != 0.0)?);
    let (ma, mb) = (a.measured.tokens_per_s_per_gpu?, b.measured.tokens_per_s_per_gpu?);
    let ((aa, ra), (ab, rb)) = (parts(pa)?, parts(pb)?);
    // The source run's time the model does not explain (measured − projected, per token per
    // GPU), carried to the target unchanged: a cost of the stack, not the GPU.
    let carried = (1.0 / ma) / step_carried_s(1.0 / ma, 1.0 / ta, 1.0 / tb);
    Some(Pair { key, from: a, to: b, measured: mb / ma, projected: tb / ta, attention: aa / ab, rest: ra / rb, carried })
}

fn main() -> Result<()> {
    let markdown = std::env::args().skip(1).any(|a| a == "--markdown");
    let catalog = tracecast_pipeline::hardware::catalog_with(&[])?;
    // Every run once by id, in first-seen order (a later file's run of the same id replaces it).
    let mut runs: Vec<Run> = Vec::new();
    let mut proj: HashMap<String, RunResult> = HashMap::new();
    for path in files() {
        let file = validate::RunsFile::read(&path)?;
        for r in validate::validate(&file, &catalog, &[], None).runs {
            proj.insert(r.id.clone(), r);
        }
        for r in file.runs {
            match runs.iter_mut().find(|x| x.id == r.id) {
                Some(x) => *x = r,
                None => runs.push(r),
            }
        }
    }
    let rank = |r: &Run| ORDER.iter().position(|&g| g == r.system.gpu);
    let mb_ids = mb_ids()?;
    let mut groups: BTreeMap<Key, Vec<&Run>> = BTreeMap::new();
    for r in &runs {
        // A run on a GPU outside `ORDER` pairs with nothing.
        if let Some(k) = rank(r).and_then(|i| key(r, &mb_ids[i]))
            && proj.contains_key(&r.id)
        {
            groups.entry(k).or_default().push(r);
        }
    }
    let mut rows = Vec::new();
    for (k, rs) in &mut groups {
        rs.sort_by_key(|r| rank(r));
        for (i, a) in rs.iter().enumerate() {
            for b in rs.iter().skip(i + 1) {
                if a.system.gpu == b.system.gpu {
                    continue;
                }
                rows.extend(pair(k, a, b, &proj));
            }
        }
    }
    if markdown {
        println!(
            "| stack | model | precision | from → to (GPUs) | measured | projected | error | attention | rest | source's unexplained time carried | error |"
        );
        println!("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
    }
    let (mut errs, mut cerrs) = (Vec::new(), Vec::new());
    for p in &rows {
        let err = p.projected / p.measured - 1.0;
        let cerr = p.carried / p.measured - 1.0;
        errs.push(err.abs());
        cerrs.push(cerr.abs());
        let (k, ga, gb) = (p.key, &p.from.system.gpu, &p.to.system.gpu);
        let (stack, model, precision) = (&k.0, &k.1, &k.2);
        let (na, nb) = (p.from.system.gpus, p.to.system.gpus);
        let (measured, projected, attention, rest, carried) = (p.measured, p.projected, p.attention, p.rest, p.carried);
        let (err, cerr) = (100.0 * err, 100.0 * cerr);
        if markdown {
            println!(
                "| {stack} | {model} | {precision} | {ga} ({na}) → {gb} ({nb}) | {measured:.2}× | {projected:.2}× | {err:+.1} % | {attention:.2}× | {rest:.2}× | {carried:.2}× | {cerr:+.1} % |"
            );
        } else {
            println!(
                "{stack:12} {model:28} {precision:10} {ga:>9}→{gb:<7} measured {measured:5.2}  projected {projected:5.2} ({err:+6.1} %)  attention {attention:5.2}  rest {rest:5.2}  carried {carried:5.2} ({cerr:+6.1} %)"
            );
        }
    }
    if !errs.is_empty() {
        let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let within = |v: &[f64]| v.iter().filter(|&&e| e <= 0.10).count();
        println!(
            "\n{} pairs: median |error| {:.1} %, max {:.1} %, within 10 %: {}; with the source's unexplained time carried: median {:.1} %, max {:.1} %, within 10 %: {}",
            errs.len(),
            100.0 * median(&mut errs).unwrap_or(f64::NAN),
            100.0 * max(&errs),
            within(&errs),
            100.0 * median(&mut cerrs).unwrap_or(f64::NAN),
            100.0 * max(&cerrs),
            within(&cerrs)
        );
    }
    Ok(())
}
