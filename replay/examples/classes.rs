//! Per kernel class: a trace's measured time, its projection onto another
//! GPU through the cost model, and the measured time there (diagnosis of the
//! leave-one-out projection).
use tracecast_calibrate::cost::CrossDevice;
use tracecast_calibrate::work::kernel_work;
use tracecast_calibrate::{CalibrateOptions, Catalog, DeviceModel, calibrate};
use tracecast_ingest::analysis::Classifier;
use tracecast_ingest::{Job, ReadOptions};

fn job(p: &str) -> Job {
    let p = std::path::PathBuf::from(p);
    Job::read(p.clone(), &[p], &ReadOptions::default(), &|_| {})
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (src, tgt) = (job(&args[0]), job(&args[1]));
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let training = &args[2..split];
    let source_training: Vec<Job> = args.iter().skip(split + 1).map(|p| job(p)).collect();
    let catalog = Catalog::builtin();
    let training: Vec<Job> = training.iter().map(|p| job(p)).collect();
    let target = DeviceModel::from_profile(&calibrate(&training, &catalog, &CalibrateOptions::default()).remove(0), &catalog);
    let source_jobs = if source_training.is_empty() { vec![job(&args[0])] } else { source_training };
    let source = DeviceModel::from_profile(&calibrate(&source_jobs, &catalog, &CalibrateOptions::default()).remove(0), &catalog);
    let model = CrossDevice { source: &source, target: &target };
    println!("floors {:?}", model.latencies());
    let mut by: std::collections::BTreeMap<String, [f64; 3]> = Default::default();
    let t = &src.ranks[0].trace;
    for (i, k) in kernel_work(t, &Classifier::default()).iter().enumerate() {
        let Some(k) = k else { continue };
        let c = model.kernel(k, t.events.dur_us(i));
        let op = k.op_row.map_or("-", |r| t.name(r as usize));
        let e = by.entry(format!("{}/{:?}/{}", k.class.as_str(), c.rule, op)).or_default();
        e[0] += t.events.dur_us(i);
        e[1] += c.us;
    }
    let t = &tgt.ranks[0].trace;
    let mut tby: std::collections::BTreeMap<String, f64> = Default::default();
    for (i, k) in kernel_work(t, &Classifier::default()).iter().enumerate() {
        let Some(k) = k else { continue };
        *tby.entry(k.class.as_str().to_string()).or_default() += t.events.dur_us(i);
    }
    for (c, v) in &by {
        println!("  {c:<32} measured {:>10.1}  projected {:>10.1}", v[0], v[1]);
    }
    for (c, v) in &tby {
        println!("  target {c:<25} {:>10.1}", v);
    }
}
