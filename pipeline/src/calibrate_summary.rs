//! The terminal summary of `tracecast calibrate` and `tracecast hw`.

use std::io::{self, Write};

use tracecast_calibrate::Profile;
use tracecast_calibrate::catalog::{Catalog, Gpu};

/// A catalog number as its file writes it (`537.6`, `1.25`; they had shown as 538 and 1.2), `-` where absent.
fn as_written(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

/// Writes one profile: device, kernel fits, link fits, what could not be fitted.
/// `given`: the GPU `--device` named (for the traces that record none).
pub fn write_profile(w: &mut dyn Write, p: &Profile, given: Option<&str>) -> io::Result<()> {
    let d = &p.device;
    // One entry per rank: an export holds several.
    let mut files: Vec<&String> = p.traces.iter().collect();
    files.sort();
    files.dedup();
    if d.name.is_empty()
        && let Some(id) = &d.catalog_id
    {
        // ROCm's traces may leave the name empty; the catalog knows the GPU by its compute units.
        writeln!(w, "Device unnamed in the traces → {id}, by its compute units and gfx version ({} trace file(s))", files.len())?;
    } else if d.name.is_empty() {
        writeln!(
            w,
            "Device not recorded in the traces → not in the catalog ({} trace file(s); give the GPU with --device ID, an id of `tracecast hw list`)",
            files.len()
        )?;
    } else if given.is_some_and(|g| d.catalog_id.as_deref().is_some_and(|id| id.eq_ignore_ascii_case(g))) {
        // The name may be --device's, not the traces': an export records no GPU name.
        writeln!(
            w,
            "Device {} ({} trace file(s); --device names the GPU of those that record none)",
            d.catalog_id.as_deref().unwrap_or_default(),
            files.len()
        )?;
    } else {
        writeln!(w, "Device {:?} → {} ({} trace file(s))", d.name, d.catalog_id.as_deref().unwrap_or("not in the catalog"), files.len())?;
    }
    if !p.kernels.is_empty() {
        writeln!(w, "\nKernel efficiency  t = t0 + W / (η · peak)")?;
        writeln!(
            w,
            "  {:<12} {:<6} {:>10} {:>8} {:>17} {:>9} {:>7} {:>7}  fitted over",
            "class", "dtype", "peak", "η", "η 95 % CI", "t0 µs", "R²", "n"
        )?;
        for k in &p.kernels {
            let unit = if k.unit == "flop" { "TF/s" } else { "GB/s" };
            // The work the fit spans: outside it its prices extrapolate (it had been in the JSON alone).
            let [least, most] = k.work_range;
            use tracecast_ingest::analysis::three_figures;
            let over = if k.unit == "flop" {
                format!("{}–{} GFLOP", three_figures(least / 1e9), three_figures(most / 1e9))
            } else {
                format!("{}–{} MB", three_figures(least / 1e6), three_figures(most / 1e6))
            };
            writeln!(
                w,
                "  {:<12} {:<6} {:>5.0} {unit} {:>8.3} {:>8.3}–{:<8.3} {:>9.2} {:>7.3} {:>7}  {over}",
                k.class.as_str(),
                k.dtype.map_or("-", |d| d.as_str()),
                k.peak,
                k.efficiency,
                k.efficiency_ci95[0],
                k.efficiency_ci95[1].min(99.0),
                k.overhead_us,
                k.r2,
                k.samples
            )?;
        }
        // How a fit was constrained (a negative t0 held at 0), said under the table.
        for k in p.kernels.iter().filter(|k| !k.notes.is_empty()) {
            writeln!(w, "  {} {}: {}", k.class.as_str(), k.dtype.map_or("-", |d| d.as_str()), k.notes.join("; "))?;
        }
    }
    if !p.table_corrections.is_empty() {
        // What projections multiply the pricing layer's measured tables by (`Pricing::gemm_corrected`).
        writeln!(w, "\nAgainst the measured tables  (measured ÷ table time; ln spread = interquartile range of ln ratio)")?;
        for c in &p.table_corrections {
            let of = c.basis_in_words();
            writeln!(
                w,
                "  {:<12} {:<6} × {:.3}  ln spread {:.2}  {of}",
                c.class.as_str(),
                c.dtype.map_or("-", |d| d.as_str()),
                c.ratio,
                c.ln_spread,
            )?;
            if let Some(m) = &c.misaligned {
                writeln!(
                    w,
                    "  {:<12} {:<6} × {:.3}  ln spread {:.2}  median of {} traced GEMMs whose rows are not whole 16-byte units (at any size)",
                    "", "", m.ratio, m.ln_spread, m.samples
                )?;
            }
        }
    }
    if !p.links.is_empty() {
        writeln!(w, "\nLinks  t = α + k · S / B")?;
        writeln!(
            w,
            "  {:<15} {:>5} {:<7} {:<14} {:>9} {:>10} {:>7} {:>7} {:>5}  fitted on",
            "collective", "ranks", "domain", "algo/proto", "α µs", "B GB/s", "of nom.", "R²", "n"
        )?;
        for l in &p.links {
            let ap = format!("{}/{}", l.algo.as_deref().unwrap_or("-"), l.proto.as_deref().unwrap_or("-"));
            writeln!(
                w,
                "  {:<15} {:>5} {:<7} {:<14} {:>9.2} {:>10.2} {:>7} {:>7.3} {:>5}  {}",
                l.collective.as_str(),
                l.group_size.map_or("-".into(), |n| n.to_string()),
                l.domain,
                ap,
                l.alpha_us,
                l.busbw_gbps,
                l.efficiency.map_or("-".into(), |e| format!("{:.0}%", e * 100.0)),
                l.r2,
                l.samples,
                l.fitted_on
            )?;
        }
    }
    if !p.unfitted.is_empty() {
        writeln!(w, "\nNot fitted:")?;
        for u in &p.unfitted {
            writeln!(w, "  {:<28} {:>6} samples {:>12.1} µs  {}", u.what, u.samples, u.total_us, u.reason)?;
        }
    }
    if !p.notes.is_empty() {
        writeln!(w, "\nNotes:")?;
        for n in &p.notes {
            writeln!(w, "  {n}")?;
        }
    }
    writeln!(w)
}

/// `tracecast hw list`.
pub fn write_catalog(w: &mut dyn Write, c: &Catalog) -> io::Result<()> {
    // As wide as the longest id (`a100-pcie-40gb` had pushed its row's columns out of line).
    let width = c.gpus.iter().map(|g| g.id.chars().count()).max().unwrap_or(0).max(11);
    writeln!(
        w,
        "{:<width$} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>9}  name",
        "id", "fp64", "fp32", "tf32", "bf16", "fp8", "HBM GB", "HBM GB/s", "link GB/s"
    )?;
    for g in &c.gpus {
        writeln!(
            w,
            "{:<width$} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>9}  {}",
            g.id,
            as_written(g.fp64),
            as_written(g.fp32),
            as_written(g.tf32),
            as_written(g.bf16),
            as_written(g.fp8),
            g.memory_gb,
            g.hbm_gbps,
            g.link_gbps,
            g.name
        )?;
    }
    writeln!(w, "(peak dense TFLOP/s; `tracecast hw show ID` for sources)\n")?;
    writeln!(w, "{:<16} {:<11} {:>5} {:>5} {:>9}", "node", "gpu", "gpus", "nics", "NIC GB/s")?;
    for n in &c.nodes {
        writeln!(w, "{:<16} {:<11} {:>5} {:>5} {:>9.1}", n.id, n.gpu, n.gpus, n.nics, n.nic_gbps)?;
    }
    Ok(())
}

/// `tracecast hw show ID` of a node preset: the preset, then its GPU.
pub fn write_node(w: &mut dyn Write, node: &tracecast_calibrate::catalog::Node, c: &Catalog) -> anyhow::Result<()> {
    writeln!(
        w,
        "{} — node preset: {} × {}, {} NIC(s) of {:.1} GB/s ({:.1} GB/s a GPU)",
        node.id,
        node.gpus,
        node.gpu,
        node.nics,
        node.nic_gbps,
        node.nic_gbps_per_gpu()
    )?;
    writeln!(w, "  source {}", node.source)?;
    writeln!(w)?;
    write_gpu(w, c.gpu(&node.gpu)?, c)?;
    Ok(())
}

/// One GPU of the catalog, as `hw show` prints it.
pub fn write_gpu(w: &mut dyn Write, g: &Gpu, c: &Catalog) -> io::Result<()> {
    writeln!(w, "{} — {}{}", g.id, g.name, g.vendor().map_or(String::new(), |v| format!(" (vendor {v})")))?;
    for (name, v) in
        [("fp64", g.fp64), ("fp32", g.fp32), ("tf32", g.tf32), ("bf16", g.bf16), ("fp16", g.fp16), ("fp8", g.fp8), ("int8", g.int8)]
    {
        if let Some(v) = v {
            writeln!(w, "  {name:<5} {v:>8} TFLOP/s dense")?;
        }
    }
    writeln!(w, "  HBM   {} GB at {} GB/s", g.memory_gb, g.hbm_gbps)?;
    writeln!(w, "  link  {} GB/s per direction (intra-node)", g.link_gbps)?;
    if !g.match_names.is_empty() {
        writeln!(w, "  matches device names containing {:?}", g.match_names)?;
    }
    if let Some(n) = c.node_of(&g.id) {
        writeln!(w, "  node preset {}: {} GPUs, {} NICs × {:.1} GB/s", n.id, n.gpus, n.nics, n.nic_gbps)?;
    }
    if let Some(sms) = g.sms {
        writeln!(w, "  {sms} SMs/CUs{}", g.clock_mhz.map_or(String::new(), |c| format!(", {c:.0} MHz boost")))?;
    }
    // Every number the pricing layer reads of it, each with its source.
    match g.cache_mb {
        Some(c) if c > 0.0 => writeln!(w, "  last-level cache {c} MB")?,
        Some(_) => {}
        None => writeln!(w, "  last-level cache not stated (cache_mb): calibrate fits no memory-bound class of it")?,
    }
    if let Some(e) = g.exp_tps {
        writeln!(w, "  exponentials (SFU) {e} × 10^12 per second")?;
    }
    if let Some(p) = g.tdp_w {
        writeln!(w, "  board power limit {p:.0} W")?;
    }
    if !g.measured_as.is_empty() {
        writeln!(w, "  measured as {} in the evidence", g.measured_as.join(", "))?;
    }
    writeln!(w, "  source: {}", g.source)?;
    if let Some(s) = &g.sms_source {
        writeln!(w, "  SMs and clock: {s}")?;
    }
    if let Some(s) = &g.exp_source {
        writeln!(w, "  exponentials: {s}")?;
    }
    if let Some(s) = &g.tdp_source {
        writeln!(w, "  power limit: {s}")?;
    }
    let ids: Vec<&str> = g.measurement_ids().collect();
    // The shipped base, parsed once per process (the pricing layer below reads the same).
    let base = tracecast_calibrate::measured::Measurements::shared();
    let sources = base.sources_for(&ids);
    if sources.is_empty() {
        writeln!(w, "\nNo measurements of it in the shipped base: GEMMs are priced by the spec model learned across measured GPUs")?;
    } else {
        writeln!(w, "\nMeasured performance base (rows per table and source; calibrate/measurements, sources in README):")?;
        for (table, source, rows) in sources {
            writeln!(w, "  {table:<12} {source:<28} {rows:>5} rows")?;
        }
        for (source, gpus_per_node, nic) in base.networks_for(&ids) {
            let network = match nic {
                Some(nic) => format!("{nic} GB/s of NICs per GPU (networks table)"),
                None => "its source states no network: taken as the node preset's".to_string(),
            };
            writeln!(w, "  collectives of {source} across nodes of {gpus_per_node} GPUs: {network}; carried onto the priced network")?;
        }
        let families = base.attention_families(&ids);
        if !families.is_empty() {
            writeln!(w, "  attention kernel families (a plan's `attention=FAMILY`): {}", families.join(", "))?;
        }
    }
    let pricing = tracecast_calibrate::pricing::Pricing::new(c.clone(), base.clone());
    for dtype in [tracecast_calibrate::catalog::Dtype::Bf16, tracecast_calibrate::catalog::Dtype::Fp8] {
        if let Some(lender) = pricing.table_lender(g, dtype) {
            let class = dtype.class_words();
            writeln!(
                w,
                "  {class} GEMMs: the measured table of {lender}, the same silicon, at the shapes it covers (`hw cost` names the rule)"
            )?;
        }
    }
    if let Some((rate, from)) = pricing.sustained_gemm_rate(g, tracecast_calibrate::catalog::Dtype::Bf16) {
        writeln!(w, "  at its power limit: 16-bit GEMMs at most {:.1} TFLOP/s, the rate {from}", rate / 1e12)?;
    }
    // What training on a GPU of its compute was measured to reach: the bound `search` and `project` state.
    use tracecast_calibrate::catalog::Dtype;
    let trained: Vec<_> =
        [Dtype::Bf16, Dtype::Fp8].into_iter().filter_map(|d| tracecast_replay::workload::validate::mfu_bound(c, g, d, None)).collect();
    if !trained.is_empty() {
        writeln!(w, "\nMeasured in training (the shipped runs on GPUs of its compute; what `search` and `project` hold MFU against):")?;
        for b in trained {
            writeln!(
                w,
                "  {} linear layers: best MFU {:.1} % of the 16-bit peak ({}; {} run(s))",
                b.format,
                100.0 * b.best.mfu,
                b.best.cited(),
                b.runs
            )?;
        }
    }
    match tracecast_calibrate::shipped::profile(&g.id) {
        Some(p) => {
            writeln!(w, "\nShipped calibration profile ({} corpus traces; calibrate/profiles/regenerate.sh):", p.traces.len())?;
            write_profile(w, &p, None)
        }
        None => {
            let model = tracecast_calibrate::shipped::target(g, c);
            writeln!(
                w,
                "\nNo shipped calibration profile (no trace of it in the corpus): `replay --target {}` prices it with {}",
                g.id, model.source
            )
        }
    }
}

/// `hw cost`'s answer: time, achieved rate, rule, band, basis and whether it extrapolates.
pub fn write_quote(w: &mut dyn Write, q: &tracecast_calibrate::pricing::Quote) -> io::Result<()> {
    writeln!(w, "{} on {}: {:.2} µs", q.operation, q.gpu, q.time_us)?;
    if let Some(tf) = q.tflops {
        let of_peak = q.fraction_of_peak.map_or(String::new(), |f| format!(" ({:.0} % of peak)", 100.0 * f));
        writeln!(w, "  achieved  {tf:.1} TFLOP/s{of_peak}")?;
    }
    if let Some(bw) = q.busbw_gbps {
        writeln!(w, "  bus bandwidth  {bw:.1} GB/s")?;
    }
    writeln!(w, "  rule      {} (band ±{:.0} %)", q.rule_description, 100.0 * q.band)?;
    writeln!(w, "  basis     {}", q.basis)?;
    writeln!(
        w,
        "  {}",
        if q.extrapolated {
            "extrapolated: beyond what its basis measured (the shapes, sizes or GPU counts above)"
        } else {
            "within the measured range"
        }
    )
}
