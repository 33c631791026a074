//! The hardware rules every command shares, each in one place: the catalog
//! and pricing layer with the user's files, the world size of a rank read on
//! its own, GPUs per node, the link bandwidths a replay of a job uses (intra-
//! node from the GPU, inter-node by the catalog's NIC rule), the target GPU's
//! model and "a profile of another GPU".

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use tracecast_calibrate::DeviceModel;
use tracecast_calibrate::catalog::{Catalog, Gpu};
use tracecast_calibrate::pricing::Pricing;
use tracecast_ingest::analysis::{AnalyzeOptions, RankContext};
use tracecast_ingest::device::DeviceProperties;
use tracecast_ingest::job::Rank;
use tracecast_replay::ReplayOptions;

/// The built-in hardware catalog with the user's catalog `files` added.
pub fn catalog_with(files: &[PathBuf]) -> Result<Catalog> {
    let mut catalog = Catalog::builtin();
    for f in files {
        for note in catalog.add_file(f)? {
            crate::output::stderr_line(format_args!("note: {note}"));
        }
    }
    catalog.check_node_presets()?;
    Ok(catalog)
}

/// The shipped measurements with the user's files, when they gave some (`None`: the shipped base alone).
pub fn measurements_of(files: &[PathBuf], catalog: &Catalog) -> Result<Option<Arc<tracecast_calibrate::measured::Measurements>>> {
    Ok(if files.is_empty() { None } else { Some(pricing_with(catalog, files)?.measurements.clone()) })
}

/// The pricing layer over `catalog`: the shipped measurements and the user's
/// files, refused where a row of theirs cannot be (an unknown GPU, above the peak).
pub fn pricing_with(catalog: &Catalog, files: &[PathBuf]) -> Result<Arc<Pricing>> {
    let measurements = tracecast_calibrate::measured::Measurements::with_files(files)?;
    let pricing = Pricing::new(catalog.clone(), measurements);
    let bad = pricing.impossible_user_rows();
    anyhow::ensure!(bad.is_empty(), "measurements that cannot be:\n  {}", bad.join("\n  "));
    Ok(Arc::new(pricing))
}

/// The world size a rank read on its own is analysed in ([`tracecast_ingest::job::world_size`]):
/// its `distributedInfo` world size, else the ranks its job's files hold (`job_ranks`,
/// [`tracecast_ingest::Job::ranks_in`]), as the job's header counts them, and at least its own
/// `rank` + 1.
pub fn world_of_rank(declared: Option<u32>, job_ranks: u32, rank: u32) -> u32 {
    tracecast_ingest::job::world_size(declared, job_ranks, Some(rank))
}

/// How one rank read on its own (its context `ctx`) is analysed: `base` with
/// the rank's GPUs per node ([`node_gpus_for`]), and the world size it is
/// analysed in ([`world_of_rank`]; `job_ranks` are its job's). A `--steps`
/// range the rank's steps do not have is an error naming the steps it has.
pub fn rank_analysis(
    ctx: &RankContext<'_>,
    job_ranks: u32,
    base: &AnalyzeOptions,
    catalog: &Catalog,
    given_gpus_per_node: Option<u32>,
) -> tracecast_ingest::Result<(AnalyzeOptions, u32)> {
    ctx.check_step_range(base.steps, base.drop_last_step)?;
    let mut o = base.clone();
    o.gpus_per_node = i64::from(node_gpus_for(&ctx.trace().devices, catalog, given_gpus_per_node));
    Ok((o, world_of_rank(ctx.trace().declared_world_size(), job_ranks, ctx.rank())))
}

/// The catalog entry of the job's GPU (the first of its ranks' devices the catalog knows).
pub fn job_gpu<'c>(ranks: &[Rank], catalog: &'c Catalog) -> Option<&'c Gpu> {
    ranks.iter().flat_map(|r| r.trace.devices.iter()).find_map(|d| catalog.match_device(d)).map(|(g, _)| g)
}

/// GPUs per node of a job from some of its ranks (one, when a job is read one
/// rank at a time): `given` (`--gpus-per-node`), else its GPU's node preset, else 8
/// ([`Catalog::gpus_per_node`]).
pub fn node_gpus_of(ranks: &[Rank], catalog: &Catalog, given: Option<u32>) -> u32 {
    node_gpus_for(ranks.iter().flat_map(|r| &r.trace.devices), catalog, given)
}

/// [`node_gpus_of`] ranks known by their `deviceProperties` (a dataset's `ranks` rows need no events).
pub fn node_gpus_for<'d>(devices: impl IntoIterator<Item = &'d DeviceProperties>, catalog: &Catalog, given: Option<u32>) -> u32 {
    let gpu = devices.into_iter().find_map(|d| catalog.match_device(d)).map(|(g, _)| g);
    catalog.gpus_per_node(gpu.map(|g| g.id.as_str()), given)
}

/// `base` with the job's link bandwidths and node size from the catalog entry
/// of its GPU: intra-node its link, inter-node its NIC share
/// ([`Catalog::nic_gbps_per_gpu`]), GPUs per node by [`Catalog::gpus_per_node`].
pub fn replay_options_for(gpu: Option<&Gpu>, base: &ReplayOptions, catalog: &Catalog, gpus_per_node: Option<u32>) -> ReplayOptions {
    let mut opts = base.clone();
    if let Some(g) = gpu {
        opts.intra_gbps = g.link_gbps;
        opts.inter_gbps = catalog.nic_gbps_per_gpu(&g.id).0;
    }
    // With the user's measurements, their cluster's node size where none is given.
    opts.gpus_per_node = match &base.pricing {
        Some(p) => p.gpus_per_node(gpu, gpus_per_node),
        None => catalog.gpus_per_node(gpu.map(|g| g.id.as_str()), gpus_per_node),
    };
    // Projection prices the source side with the trace's own calibration
    // (what its kernels achieved), gaps filled from the GPU's shipped profile.
    opts.catalog = Some(catalog.clone());
    opts
}

/// The target GPU's model from `--target` and `--profile`: the profile
/// given (it must be of that GPU), else the GPU's shipped profile, else its
/// catalog specs alone (the trace's efficiencies are then carried to them).
pub fn target_model(target: Option<&String>, profile: Option<&PathBuf>, catalog: &Catalog) -> Result<Option<DeviceModel>> {
    Ok(match (target, profile) {
        (Some(id), Some(p)) => {
            let gpu = catalog.gpu(id)?;
            let model = DeviceModel::from_profile_file(p, catalog)?;
            ensure_profile_of(&model, &gpu.id, p)?;
            Some(model)
        }
        (Some(id), None) => {
            let gpu = catalog.gpu(id)?;
            Some(tracecast_calibrate::shipped::target(gpu, catalog))
        }
        (None, Some(p)) => anyhow::bail!("{}: --profile is the target GPU's calibration; say which GPU with --target", p.display()),
        (None, None) => None,
    })
}

/// The catalog id of the GPU a calibration profile is of, if the catalog knows it:
/// the one rule of "a profile of another GPU" (a profile is used only for its own GPU).
pub fn profile_gpu(model: &DeviceModel) -> Option<&str> {
    model.gpu.as_ref().map(|g| g.id.as_str())
}

/// A profile of another GPU than the one it is used for is an error.
pub fn ensure_profile_of(model: &DeviceModel, gpu_id: &str, path: &Path) -> Result<()> {
    let of = profile_gpu(model);
    anyhow::ensure!(
        of == Some(gpu_id),
        "--profile {}: the profile is of {}, not {gpu_id} (calibrate traces measured on {gpu_id} and pass that profile)",
        path.display(),
        of.unwrap_or("a GPU the catalog does not know")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> DeviceProperties {
        DeviceProperties { name: Some("NVIDIA H100 80GB HBM3".into()), ..Default::default() }
    }

    #[test]
    fn gpus_per_node_given_else_node_preset_else_eight() {
        let catalog = Catalog::builtin();
        assert_eq!(node_gpus_for([&h100()], &catalog, Some(4)), 4);
        assert_eq!(node_gpus_for([&h100()], &catalog, None), catalog.node_of("h100-sxm").map_or(8, |n| n.gpus));
        let unknown = DeviceProperties { name: Some("a GPU nobody knows".into()), ..Default::default() };
        assert_eq!(node_gpus_for([&unknown], &catalog, None), 8);
        assert_eq!(node_gpus_for([], &catalog, None), 8);
    }

    #[test]
    fn replay_links_come_from_the_gpu_and_its_nic_share() {
        let catalog = Catalog::builtin();
        let gpu = catalog.gpu("h100-sxm").ok();
        let o = replay_options_for(gpu, &ReplayOptions::default(), &catalog, None);
        assert_eq!(o.intra_gbps, gpu.map_or(0.0, |g| g.link_gbps));
        assert_eq!(o.inter_gbps, catalog.nic_gbps_per_gpu("h100-sxm").0);
        assert_eq!(o.gpus_per_node, catalog.gpus_per_node(Some("h100-sxm"), None));
        assert_eq!(replay_options_for(None, &ReplayOptions::default(), &catalog, Some(2)).gpus_per_node, 2);
    }

    #[test]
    fn world_of_a_rank_is_its_declared_size_else_its_jobs_ranks() {
        assert_eq!(world_of_rank(Some(64), 2, 0), 64);
        assert_eq!(world_of_rank(None, 2, 1), 2);
        // A rank numbered 3 by its file's name, read alone: a world of 4 at least.
        assert_eq!(world_of_rank(None, 1, 3), 4);
        // An Nsight Systems export holds a rank per process and GPU: the shared one, two.
        let export = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/nsys/mfu_2gpu_before.sqlite");
        let files = [export, PathBuf::from("a.json")];
        assert_eq!(tracecast_ingest::Job::ranks_in(&files), 3);
    }

    #[test]
    fn a_profile_without_its_target_is_refused() {
        let catalog = Catalog::builtin();
        assert!(target_model(None, None, &catalog).is_ok_and(|m| m.is_none()));
        let e = target_model(None, Some(&PathBuf::from("p.json")), &catalog).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("say which GPU with --target"), "{e}");
        assert!(target_model(Some(&"h100-sxm".to_string()), None, &catalog).is_ok_and(|m| m.is_some()));
    }
}
