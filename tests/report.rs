//! `tracecast report` and `tracecast diff` end to end: the page of a real
//! multi-rank trace and of the synthetic job is self-contained and has every
//! chart; the diff of two runs adds up; the page renders in headless Chromium.

mod common;

use std::path::{Path, PathBuf};

use common::*;

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo")
}

fn report(inputs: &[&Path], extra: &[&str], out: &Path) -> String {
    let mut args: Vec<std::ffi::OsString> = vec!["report".into(), "--quiet".into(), "--out".into(), out.into()];
    args.extend(inputs.iter().map(|p| p.as_os_str().to_owned()));
    args.extend(extra.iter().map(Into::into));
    let o = bin().args(&args).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::read_to_string(out).unwrap()
}

/// Figure captions of a page, in order.
fn captions(html: &str) -> Vec<String> {
    html.split("<figcaption>").skip(1).map(|s| s.split(['<']).next().unwrap_or_default().trim().to_string()).collect()
}

/// Nothing on the page reaches the network.
fn assert_self_contained(html: &str) {
    // The SVG namespace is a name the script creates elements in, never fetched.
    let html = html.replace("'http://www.w3.org/2000/svg'", "");
    for bad in ["http://", "https://", "//cdn", "<link", "src=", "@import", "url("] {
        assert!(!html.contains(bad), "the page refers to something outside it: {bad}");
    }
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn report_of_the_synthetic_job_has_every_chart() {
    let dir = scratch("report-demo");
    let charts = dir.join("charts");
    let html = report(
        &[&demo()],
        &["--scale", "link=2", "--job-gpus", "1024", "--job-hours", "24", "--png", charts.to_str().unwrap()],
        &dir.join("r.html"),
    );
    assert_self_contained(&html);
    let caps = captions(&html);
    // On request, every chart also as SVG and PNG files.
    let files: Vec<_> = std::fs::read_dir(&charts).unwrap().map(|e| e.unwrap().path()).collect();
    let count = |ext: &str| files.iter().filter(|f| f.extension().is_some_and(|e| e == ext)).count();
    assert_eq!((count("svg"), count("png")), (caps.len(), caps.len()));
    for want in [
        "GPU time by rank",
        "GPU time per step",
        "GPU timeline of step",
        "all_reduce: bus bandwidth by message size",
        "gemm bf16: η = ",
        "elementwise bf16: η",
        "Measured and replayed step time per rank",
        "Measured and projected onto link ×2",
    ] {
        assert!(caps.iter().any(|c| c.contains(want)), "no chart {want:?} in {caps:?}");
    }
    // The GEMM fit's chart gives the generator's truth, η 0.70.
    let gemm = caps.iter().find_map(|c| c.split("gemm bf16: η = ").nth(1)).unwrap();
    let eta: f64 = gemm.split_whitespace().next().unwrap().parse().unwrap();
    assert!((eta - 0.70).abs() < 0.005, "{gemm}");
    // One inline SVG per figure, and the summary in words with the job's GPU-hours.
    assert_eq!(html.matches("<svg").count(), caps.len());
    assert!(html.contains("of GPU time was communication with nothing overlapping it:"));
    assert!(html.contains("GPU-hours on this job (1024 GPUs"));
    // Tables can be sorted; the replay says what bounds the step.
    assert!(html.contains("class=\"sortable\""));
    // With a projection (link ×2) the measured replay's path is said to be of the run as measured.
    assert!(html.contains("The critical path of the replay as measured (the chain of dependencies that sets the last GPU end) is"));
}

/// A job with a file that cannot be read: the page said "1 rank(s) of a world of 128" and
/// nothing of the other file, which only the terminal named.
#[test]
fn the_page_names_the_files_it_could_not_read() {
    let dir = scratch("report-bad-file");
    let job = dir.join("job");
    copy_of_a_real_trace(&job.join("rank-0.json.gz"));
    std::fs::write(job.join("rank-1.json.gz"), b"not a trace").unwrap();
    let out = dir.join("r.html");
    let o = bin().args(["report".as_ref(), "--quiet".as_ref(), "--out".as_ref(), out.as_os_str(), job.as_os_str()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("1 file(s) of this job could not be read"), "the page does not say a file is missing");
    assert!(html.contains("rank-1.json.gz: byte 0"), "the page does not name the file and why");
}

#[test]
fn report_of_a_real_multi_rank_trace_and_of_two_runs() {
    let dir = scratch("report-real");
    let html = report(&[&shared().join("hta/trace_filter")], &[], &dir.join("r.html"));
    assert_self_contained(&html);
    let caps = captions(&html);
    for want in ["GPU time by rank", "GPU time per step", "GPU timeline of step", "Measured and replayed step time per rank"] {
        assert!(caps.iter().any(|c| c.contains(want)), "no chart {want:?} in {caps:?}");
    }
    assert!(html.contains("rank 0 · stream") || html.contains("Per rank (ms)"));
    // The ranks of the world not read, as the terminal names them (the page had said the count alone).
    assert!(html.contains("Not read: ranks 2–127 of the world's 128 (the totals are of the ranks read)."), "no ranks not read");
    // Two runs: the diff comes first, with its chart and tables.
    let (a, b) = (shared().join("hta/trace_diff/control/control.json.gz"), shared().join("hta/trace_diff/test/test.json.gz"));
    let html = report(&[&a, &b], &["--each"], &dir.join("two.html"));
    assert_self_contained(&html);
    // The title names both runs, in order.
    let title = html.split("<title>").nth(1).and_then(|t| t.split("</title>").next()).unwrap();
    assert!(title.contains("control.json.gz · ") && title.ends_with("test.json.gz"), "{title}");
    assert!(html.find("<h2>Diff:").unwrap() < html.find("<h2>Job 1:").unwrap());
    assert!(captions(&html).iter().any(|c| c.contains("Time per rank by kernel class: A against B")));
    for table in ["Per kernel class, per rank", "Per collective, per rank", "Step time (the slowest rank per step)"] {
        assert!(html.contains(table), "{table}");
    }
    // The page's diff leads as `diff` does: the share of kernel time both ran, and its note
    // when that is little.
    let o = bin().args(["diff".as_ref(), a.as_os_str(), b.as_os_str()]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let shared_line = text.lines().find(|l| l.starts_with("Kernels both ran:")).unwrap();
    assert!(html.contains(&format!("{shared_line}.")), "{shared_line}");
    assert_eq!(text.contains("the runs have little in common"), html.contains("the runs have little in common"), "{text}");
    let other = shared().join("kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz");
    let html = report(&[&a, &other], &["--each"], &dir.join("unrelated.html"));
    assert!(html.contains("the runs have little in common"), "an A100 transformer job against a ResNet");
}

/// A trace without GPU activity (HTA's CPU-only sample): the page says there is nothing to chart
/// instead of drawing empty charts under captions (a speed-up of 1.000×, an error of 0.00 %).
#[test]
fn a_job_without_gpu_activity_draws_no_empty_charts() {
    let dir = scratch("report-cpu-only");
    let html = report(&[&shared().join("hta/cpu_only")], &[], &dir.join("r.html"));
    let caps = captions(&html);
    for empty in ["GPU time by rank", "GPU time per step", "Measured and replayed step time per rank"] {
        assert!(!caps.iter().any(|c| c.contains(empty)), "an empty chart {empty:?} in {caps:?}");
    }
    assert!(html.contains("No chart of GPU time: the analysed window holds no GPU activity."));
    assert!(html.contains("No kernel, copy or set ran on a GPU in the analysed window."));
    assert!(!html.contains("<caption>Kernels with the most time"), "a table of headers alone");
    assert!(html.contains("No chart of step times: no rank has GPU work in the analysed window to replay."));
}

/// A job of more streams than the timeline draws says which it draws: its note had counted only
/// the left-out streams of the few ranks kept past the drawn ones ("32 more" of a job's 96).
#[test]
fn the_timeline_says_which_streams_it_draws() {
    let dir = scratch("report-many-streams");
    let job = dir.join("job");
    synth(&job, &["--ranks", "40", "--steps", "1", "--layers", "1"]);
    let html = report(&[&job], &[], &dir.join("r.html"));
    assert!(html.contains("Only the first 32 streams are drawn, up to rank 15: the later ones are not."), "the timeline's note");
    assert!(!html.contains("more streams are not drawn"));
}

/// Cells of the page's table whose caption starts with `caption`, row by row.
fn table_rows(html: &str, caption: &str) -> Vec<Vec<String>> {
    let Some(start) = html.find(&format!("<caption>{caption}")) else { return Vec::new() };
    let body = &html[start..];
    let body = &body[..body.find("</table>").unwrap_or(body.len())];
    body.split("<tr>")
        .skip(2)
        .map(|row| row.split("<td").skip(1).map(|c| c.split('>').nth(1).unwrap_or_default().trim_end_matches("</td").to_string()).collect())
        .collect()
}

/// The page's job-level collectives table is the terminal's: the same rows (type, group,
/// kernels) and bus bandwidth over all ranks, where it once showed the last rank's bus
/// bandwidth (all_reduce 0.3 where the job moved 13.37 GB/s) and had no process group.
#[test]
fn report_collectives_over_ranks_agree_with_analyze() {
    let dir = scratch("report-collectives");
    let job = shared().join("hta/trace_filter");
    let html = report(&[&job], &[], &dir.join("r.html"));
    let page = table_rows(&html, "Collectives over all ranks");
    let o = bin().arg("analyze").arg(&job).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let terminal: Vec<Vec<&str>> = stdout
        .split("Collectives (all ranks):")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .skip(2)
        .take_while(|l| !l.trim().is_empty() && !l.trim_start().starts_with("wait% is"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    // The all-reduce's bus bandwidth from its definition over the per-rank rows of
    // `analyze --json`: Σ bytes ÷ Σ time of the sized kernels × 2(n−1)/n.
    let out = dir.join("a.json");
    let o = bin().arg("analyze").arg(&job).arg("--json").arg(&out).arg("-q").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let (mut bytes, mut us, mut n) = (0.0, 0.0, 0.0);
    for c in doc["jobs"][0]["ranks"].as_array().unwrap().iter().flat_map(|r| r["collectives"].as_array().unwrap()) {
        if c["collective"] == "all_reduce"
            && let (Some(b), Some(bw)) = (c["bytes"].as_f64(), c["algbw_gbps"].as_f64())
        {
            bytes += b;
            us += b / bw / 1e3;
            n = c["group_size"].as_f64().unwrap();
        }
    }
    let busbw = bytes / us / 1e3 * 2.0 * (n - 1.0) / n;
    // The wait column says what analyze's wait% says it is of.
    assert!(stdout.contains("wait% is of the kernels matched across ranks"), "{stdout}");
    assert!(html.contains("<caption>Collectives over all ranks (wait ms is of the kernels matched across ranks"));
    // A measured bandwidth below 0.01 GB/s (an all-to-all of 3 KiB) is not shown as 0.00.
    let sizes = table_rows(&html, "Collectives per message size");
    assert!(sizes.iter().all(|r| r[6] != "0.00") && sizes.iter().any(|r| r[6].contains('e')), "{sizes:?}");
    let row = page.iter().find(|r| r[0] == "all_reduce").expect("an all_reduce row");
    assert!((row[6].parse::<f64>().unwrap() - busbw).abs() <= 0.05 + 1e-9, "page {} GB/s, by definition {busbw:.2}", row[6]);
    assert_eq!(page.len(), terminal.len(), "{page:?} against {terminal:?}");
    assert!(terminal.len() >= 3);
    for (p, t) in page.iter().zip(&terminal) {
        // collective, group, kernels
        assert_eq!((p[0].as_str(), p[2].as_str(), p[3].as_str()), (t[0], t[2], t[3]), "{p:?} against {t:?}");
        let (page_bw, terminal_bw): (f64, f64) = (p[6].parse().unwrap(), t[7].parse().unwrap());
        assert!((page_bw - terminal_bw).abs() <= 0.05 + 1e-9, "{}: busbw {page_bw} on the page, {terminal_bw} in the terminal", t[0]);
    }
}

/// The analysis window applies to the whole page: the per-message-size table and the
/// ops table count what the collectives table counts — kernels starting inside each
/// rank's window — where they once counted the whole trace under `--drop-last-step`.
#[test]
fn the_window_narrows_every_table_of_the_page() {
    let dir = scratch("report-window");
    let job = shared().join("hta/trace_filter");
    let kernels = |rows: &[Vec<String>], col: usize| -> u64 { rows.iter().map(|r| r[col].parse::<u64>().unwrap()).sum() };
    let mut seen = Vec::new();
    for (n, extra) in [&[][..], &["--drop-last-step"]].into_iter().enumerate() {
        let html = report(&[&job], extra, &dir.join(format!("r{n}.html")));
        let over_ranks = kernels(&table_rows(&html, "Collectives over all ranks"), 3);
        let by_size = kernels(&table_rows(&html, "Collectives per message size"), 3);
        assert_eq!(by_size, over_ranks, "{extra:?}: message sizes count {by_size} kernels, the collectives table {over_ranks}");
        let ops = table_rows(&html, "Ops with the most kernel time");
        let calls = kernels(&ops, 3);
        assert!(calls > 0, "{extra:?}: no ops");
        seen.push((over_ranks, calls));
    }
    assert!(seen[1].0 < seen[0].0 && seen[1].1 < seen[0].1, "the last step left out: {seen:?}");
    // The timeline draws a step the page analyses: steps 1010–1015 in the trace, the
    // median-length one of all of them (1010) was drawn whatever `--steps` chose.
    let control = shared().join("hta/trace_diff/control/control.json.gz");
    let title = |html: &str| {
        html.split("GPU timeline of step ").nth(1).and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next()).map(str::to_owned)
    };
    assert_eq!(title(&report(&[&control], &[], &dir.join("all.html"))).as_deref(), Some("1010"));
    for (steps, allowed) in [("1013-1014", &["1013", "1014"][..]), ("1012", &["1012"][..])] {
        let page = report(&[&control], &["--steps", steps], &dir.join(format!("s{steps}.html")));
        let drawn = title(&page);
        assert!(drawn.as_deref().is_some_and(|d| allowed.contains(&d)), "--steps {steps}: timeline of step {drawn:?}");
        // The replay's steps and critical path are the page's; its simulation is the whole trace's, and it says so.
        assert!(
            page.contains(
                "cover the analysed steps (--steps, --drop-last-step), and so does the critical path; the simulation runs the whole trace"
            ),
            "--steps {steps}"
        );
    }
}

#[test]
fn diff_of_a_run_with_itself_is_zero_and_deltas_add_up() {
    let dir = scratch("diff");
    let a = shared().join("hta/trace_diff/control/control.json.gz");
    let b = shared().join("hta/trace_diff/test/test.json.gz");
    let read = |x: &Path, y: &Path, name: &str| {
        let out = dir.join(name);
        let o = bin().args(["diff", "--quiet", "--json"]).arg(&out).arg(x).arg(y).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        v
    };
    let same = read(&a, &a, "same.json");
    for section in ["summary", "kernel_classes", "collectives", "steps", "kernels"] {
        for d in same[section].as_array().unwrap() {
            assert_eq!(d["delta_us"].as_f64().unwrap(), 0.0, "{section}: {d}");
        }
    }
    let d = read(&a, &b, "ab.json");
    // A summary metric or a step counts no kernels (it had said 1); a class counts its kernels.
    for section in ["summary", "steps"] {
        assert!(d[section].as_array().unwrap().iter().all(|r| r["count_a"].is_null() && r["count_b"].is_null()), "{}", d[section]);
    }
    assert!(d["kernel_classes"].as_array().unwrap().iter().all(|r| r["count_a"].as_f64().is_some()), "{}", d["kernel_classes"]);
    for d in d["kernel_classes"].as_array().unwrap() {
        let (ta, tb, delta) = (d["time_a_us"].as_f64().unwrap(), d["time_b_us"].as_f64().unwrap(), d["delta_us"].as_f64().unwrap());
        assert!((tb - ta - delta).abs() < 1e-6);
    }
    // The classes cover every kernel of the window: their time adds up to at least the
    // GPU activity in it, which `analyze` (the same window) reports as compute + comm + memory.
    let classes: f64 = d["kernel_classes"].as_array().unwrap().iter().map(|x| x["time_b_us"].as_f64().unwrap()).sum();
    let out = dir.join("b.json");
    let o = bin().args(["analyze", "--quiet", "--json"]).arg(&out).arg(&b).output().unwrap();
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let r = &v["jobs"][0]["ranks"][0];
    let sum = r["compute_us"].as_f64().unwrap() + r["comm_us"].as_f64().unwrap() + r["memory_us"].as_f64().unwrap();
    assert!(classes >= sum - 1.0, "classes {classes} < union of kinds {sum}");
    // A trace that is not there: a clear error, non-zero exit.
    let o = bin().args(["diff"]).arg(&a).arg(dir.join("missing.json")).output().unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("missing.json"), "{}", stderr(&o));
}

#[test]
fn diff_gates_on_the_job_step_time_analyze_reports() {
    // Two ranks whose steps differ: the job's step is the slowest rank's (615.6 ms mean
    // on hta/trace_filter); diff gated on the mean over ranks (613.5 ms) instead.
    let dir = scratch("diff-step");
    let job = shared().join("hta/trace_filter");
    let (analysis, diff) = (dir.join("a.json"), dir.join("d.json"));
    assert!(bin().args(["analyze", "--json"]).arg(&analysis).arg(&job).output().unwrap().status.success());
    assert!(bin().args(["diff", "--json"]).arg(&diff).arg(&job).arg(&job).output().unwrap().status.success());
    let read = |p: &std::path::Path| -> serde_json::Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let steps: Vec<f64> =
        read(&analysis)["jobs"][0]["totals"]["steps"].as_array().unwrap().iter().map(|s| s["step_us"].as_f64().unwrap()).collect();
    assert!(steps.len() >= 2);
    let job_step = steps.iter().sum::<f64>() / steps.len() as f64;
    let d = read(&diff);
    assert_eq!(d["summary"][0]["name"], "step");
    let gated = d["summary"][0]["time_a_us"].as_f64().unwrap();
    assert!((gated - job_step).abs() < 1e-6 * job_step, "diff's step {gated} µs, analyze's job step {job_step} µs");
    let per_step: Vec<f64> = d["steps"].as_array().unwrap().iter().map(|s| s["time_a_us"].as_f64().unwrap()).collect();
    assert_eq!(per_step, steps);
}

#[test]
fn diff_leads_with_the_step_and_gates_regressions() {
    // Two ResNet-50 runs of the Kineto samples: B has the same kernels but
    // less idle GPU time between steps, so its step is 12 % shorter.
    let dir = scratch("gate");
    let t = shared().join("kineto/tb_plugin_samples/resnet50_num_workers_0");
    let (a, b) = (t.join("worker0.1623143089861.pt.trace.json.gz"), t.join("worker0.1623143566756.pt.trace.json.gz"));
    let out = dir.join("d.json");
    let o = bin().args(["diff", "--json"]).arg(&out).arg(&a).arg(&b).args(["--fail-if", "step>+3%,exposed>+5%,idle>+1%"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let headline = stdout.lines().find(|l| l.starts_with("Headline")).unwrap_or_default().to_string();
    assert!(headline.contains("step -12.1 %") && headline.contains("idle -30.3 %"), "{headline}");
    // No communication on either side: 0.0, not "new".
    assert!(headline.contains("exposed 0.0 %"), "{headline}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["summary"][0]["name"], "step");
    // The other way round B regresses: exit 1, naming the metric.
    let o = bin().args(["diff", "--quiet"]).arg(&b).arg(&a).args(["--fail-if", "step>+3%"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("regression: step changed by +13.7 %"), "{}", stderr(&o));
    // A negative bound that B stays above is a regression in the bound's own words, not "grew".
    let o = bin().args(["diff", "--quiet"]).arg(&a).arg(&b).args(["--fail-if", "step>-20%"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("regression: step changed by -12.1 %") && stderr(&o).contains("above the -20.0 % allowed"),
        "{}",
        stderr(&o)
    );
    // Identical runs: nothing moved, said so.
    let o = bin().args(["diff"]).arg(&a).arg(&a).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("No kernel class moved."), "{}", String::from_utf8_lossy(&o.stdout));
    // A run read in part (the folder holds two files claiming rank 0) is bad input, exit 2,
    // whatever the gates say.
    let o = bin().args(["diff", "--quiet"]).arg(&t).arg(&a).args(["--fail-if", "step>-50%"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("regression: "), "the gates are still reported: {}", stderr(&o));
    // A bound that cannot be read is an error before anything is analysed.
    let o = bin().args(["diff"]).arg(&a).arg(&b).args(["--fail-if", "latency>+3%"]).output().unwrap();
    assert!(!o.status.success() && stderr(&o).contains("not a metric"), "{}", stderr(&o));
}

/// Headless Chromium: the page renders (every chart's title is in the DOM
/// Chromium built) and a screenshot is taken. `.ci/run` installs Chromium and
/// sets TRACECAST_REQUIRE_BROWSER=1; elsewhere a missing browser skips the test.
#[test]
fn report_renders_in_headless_chromium() {
    let browser = ["chromium", "chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|b| std::process::Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()));
    let Some(browser) = browser else {
        assert!(
            std::env::var_os("TRACECAST_REQUIRE_BROWSER").is_none(),
            "Chromium is required (TRACECAST_REQUIRE_BROWSER) but not installed"
        );
        eprintln!("skipped: no chromium on this machine (`.ci/run` installs it)");
        return;
    };
    let dir = scratch("browser");
    let page = dir.join("report.html");
    let html = report(&[&demo()], &["--scale", "link=2"], &page);
    let chromium = |extra: &[&std::ffi::OsStr], profile: &str| {
        std::process::Command::new(&browser)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"])
            .args(["--disable-component-update", "--disable-sync", "--hide-scrollbars"])
            .arg(format!("--user-data-dir={}", dir.join(profile).display()))
            .args(extra)
            .output()
            .unwrap()
    };
    let url = format!("file://{}", page.display());
    let dom = chromium(&["--dump-dom".as_ref(), url.as_ref()], "profile-dom");
    assert!(dom.status.success(), "{}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8_lossy(&dom.stdout);
    let caps = captions(&html);
    assert!(caps.len() >= 8, "{caps:?}");
    for c in &caps {
        // The DOM as Chromium parsed it: every chart's SVG title text is there.
        let title = c.split(" Each lane").next().unwrap().replace('&', "&amp;");
        assert!(dom.contains(&title), "{title:?} not in the rendered DOM");
    }
    assert_eq!(dom.matches("<svg").count(), caps.len(), "every chart became an SVG element");
    // The page's own script, driven as a user would (`#selftest` dispatches a wheel event on the
    // timeline and types a kernel name into its search box), reports what the DOM then holds.
    let selftest = |page: &Path, profile: &str| -> serde_json::Value {
        let url = format!("file://{}#selftest", page.display());
        let dom = chromium(&["--dump-dom".as_ref(), url.as_ref()], profile);
        assert!(dom.status.success(), "{}", String::from_utf8_lossy(&dom.stderr));
        let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
        let start = dom.find("<pre id=\"selftest-result\">").expect("the self-test ran") + "<pre id=\"selftest-result\">".len();
        let end = start + dom[start..].find("</pre>").unwrap();
        serde_json::from_str(&dom[start..end].replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\""))
            .unwrap()
    };
    let single = dir.join("single.html");
    report(&[&shared().join("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz")], &[], &single);
    for (page, profile) in [(&page, "profile-selftest"), (&single, "profile-single")] {
        let t = selftest(page, profile);
        let (before, after) = (&t["before"], &t["after"]);
        let width = |v: &serde_json::Value| v[1].as_f64().unwrap() - v[0].as_f64().unwrap();
        assert_eq!(t["timelines"], 1, "{t}");
        assert!(width(after) < 0.9 * width(before), "the wheel zoomed in: {t}");
        assert!((width(&t["reset"]) - width(before)).abs() < 1e-6, "the button shows the whole step again: {t}");
        assert!(t["highlighted"].as_u64().unwrap() >= 1, "the search highlights the kernel: {t}");
        assert!(t["charts"].as_u64().unwrap() >= 3, "{t}");
        assert_eq!(t["charts"], t["chartsWithTips"], "every chart has tooltips: {t}");
        assert_eq!(t["negative"], 0, "no mark with a negative size: {t}");
        assert!(t["replayBars"].as_u64().unwrap() >= 2, "the replay chart has measured and replayed bars: {t}");
    }
    let shot = dir.join("shot.png");
    let o =
        chromium(&[format!("--screenshot={}", shot.display()).as_ref(), "--window-size=1200,3000".as_ref(), url.as_ref()], "profile-shot");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // A blank page compresses to a few kilobytes; charts and text do not.
    assert!(png.len() > 50_000, "screenshot of {} bytes: blank page?", png.len());
}

/// Closing the loop: traces written from a workload model (LLaMA-2 7B's layer
/// GEMMs) with the ground truth of a calibration profile calibrate back to
/// that profile.
#[test]
fn synth_from_a_workload_model_and_profile_calibrates_back_to_the_profile() {
    let dir = scratch("roundtrip");
    let ok = |args: &[&std::ffi::OsStr]| {
        let o = bin().args(args).output().unwrap();
        assert!(o.status.success(), "{:?}: {}", args, stderr(&o));
    };
    let p1 = dir.join("p1.json");
    ok(&["calibrate".as_ref(), "-q".as_ref(), "--out".as_ref(), p1.as_os_str(), demo().as_os_str()]);
    let fits = |p: &Path| -> serde_json::Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let kernel = |v: &serde_json::Value, class: &str| -> Option<(f64, f64)> {
        v["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["class"] == class)
            .map(|k| (k["efficiency"].as_f64().unwrap(), k["overhead_us"].as_f64().unwrap()))
    };
    let truth = fits(&p1);
    let (eta, t0) = kernel(&truth, "gemm").unwrap();
    let (mem_eta, _) = kernel(&truth, "elementwise").unwrap();
    let link = |v: &serde_json::Value| (v["links"][0]["alpha_us"].as_f64().unwrap(), v["links"][0]["busbw_gbps"].as_f64().unwrap());
    let (alpha, busbw) = link(&truth);
    // Small GEMMs (1024 tokens) pin the fixed cost; large ones (4096) give memory-bound ops past the cache.
    for tokens in ["1024", "4096"] {
        let job = dir.join(format!("job-{tokens}"));
        let p2 = dir.join(format!("p2-{tokens}.json"));
        ok(&[
            "synth".as_ref(),
            "--model".as_ref(),
            "llama2-7b".as_ref(),
            "--tokens".as_ref(),
            tokens.as_ref(),
            "--profile".as_ref(),
            p1.as_os_str(),
            "--seed".as_ref(),
            "3".as_ref(),
            "--out".as_ref(),
            job.as_os_str(),
        ]);
        ok(&["calibrate".as_ref(), "-q".as_ref(), "--out".as_ref(), p2.as_os_str(), job.as_os_str()]);
        let got = fits(&p2);
        let (e, t) = kernel(&got, "gemm").unwrap();
        println!("tokens {tokens}: GEMM η {e:.4} (truth {eta:.4}), t0 {t:.3} µs (truth {t0:.3})");
        assert!((e - eta).abs() / eta < 0.02);
        let (a, b) = link(&got);
        assert!((b - busbw).abs() / busbw < 0.02, "B {b} vs {busbw}");
        assert!((a - alpha).abs() / alpha < 0.05, "α {a} vs {alpha}");
        if tokens == "1024" {
            assert!((t - t0).abs() / t0 < 0.05, "t0 {t} vs {t0}");
        } else {
            let (m, _) = kernel(&got, "elementwise").expect("memory-bound ops past the cache");
            assert!((m - mem_eta).abs() / mem_eta < 0.02, "HBM η {m} vs {mem_eta}");
        }
    }
}

#[test]
fn every_shared_trace_gets_a_report() {
    // One page with a section per trace: whatever the trace holds (no GPU,
    // no steps, no collectives, MTIA, ROCm), the page is written, never a panic.
    let dir = scratch("report-all");
    let traces = all_shared_traces();
    let out = dir.join("all.html");
    let o = bin().args(["report", "--quiet", "--each", "--out"]).arg(&out).args(&traces).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&out).unwrap();
    assert_self_contained(&html);
    assert_eq!(html.matches("<h2>Job ").count(), traces.len());
    // A chart that cannot be drawn is said so, never silently missing.
    for section in html.split("<h2>Job ").skip(1) {
        let title = &section[..section.find("</h2>").unwrap()];
        assert!(
            section.contains("<figcaption>GPU time per step")
                || section.contains("No per-step chart")
                || section.contains("No chart of GPU time"),
            "{title}"
        );
        assert!(section.contains("<figcaption>GPU timeline of") || section.contains("No timeline"), "{title}");
    }
}

#[test]
fn report_takes_the_replay_what_ifs() {
    // The same what-if options as `replay`: --world-size and --link.
    let dir = scratch("report-whatif");
    let out = dir.join("r.html");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let o =
        bin().args(["report", "-q", "--world-size", "8", "--link", "alpha=10,busbw=100", "--out"]).arg(&out).arg(&demo).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("8 ranks, link alpha=10,busbw=100"), "the projection names its what-if");
    let o = bin().args(["report", "-q", "--world-size", "0", "--out"]).arg(&out).arg(&demo).output().unwrap();
    assert!(!o.status.success());
}

#[test]
fn scale_out_is_priced_by_the_users_measurements_in_replay_and_report() {
    let dir = scratch("report-measurements");
    let demo = demo();
    // The demo's 4 H100 ranks are below the shipped H100 curves' smallest GPU count (8), in one
    // node: priced from the 8-GPU curve by the bus factor, and 64 GPUs by the scale-out rule; the
    // note says which rule priced them (the nominal links' ratio had made them 10× slower).
    let json = dir.join("replay.json");
    let o = bin().args(["replay", "-q", "--world-size", "64", "--json"]).arg(&json).arg(&demo).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let notes = doc["jobs"][0]["notes"].to_string();
    assert!(notes.contains("96 of 96 resized collective(s) scaled by the pricing layer's price at both sizes"), "{notes}");
    // The user's all-reduce sweeps of an H100 cluster: 100 GB/s bus bandwidth
    // in a node, and across nodes either 100 GB/s too or 2 GB/s. With 2 GB/s a
    // 402 MB gradient all-reduce over 64 ranks moves 2 × 63/64 × 402 MB, ≥ 0.39 s:
    // over four times the demo's ~95 ms step, so that step is at most a quarter
    // as fast, and the report's projection must say so.
    let sweep = |across_gbps: f64| {
        let mut csv = String::from("gpu,collective,gpus,nodes,gpus_per_node,size_bytes,time_us\n");
        for (gpus, nodes) in [(4u32, 1u32), (8, 1), (16, 2), (32, 4), (64, 8)] {
            let busbw = if nodes == 1 { 100.0 } else { across_gbps };
            for size in (0..11).map(|k| 1024u64 << (2 * k)) {
                let bus = 2.0 * f64::from(gpus - 1) / f64::from(gpus) * size as f64;
                csv.push_str(&format!("h100-sxm,all_reduce,{gpus},{nodes},8,{size},{:.3}\n", 10.0 + bus / (busbw * 1e9) * 1e6));
            }
        }
        let path = dir.join(format!("nccl-tests-{across_gbps}.csv"));
        std::fs::write(&path, csv).unwrap();
        path
    };
    let speedup = |mine: &Path| -> f64 {
        let out = dir.join("r.html");
        let html = report(&[&demo], &["--world-size", "64", "--measurements", mine.to_str().unwrap()], &out);
        let caption = captions(&html).into_iter().find(|c| c.contains("speed-up of the step")).expect("a projection chart");
        let x = caption.rsplit_once(": ").unwrap().1.split('×').next().unwrap();
        x.trim().parse().unwrap()
    };
    let (fast, slow) = (speedup(&sweep(100.0)), speedup(&sweep(2.0)));
    assert!(slow <= 0.25, "2 GB/s across nodes: {slow}× (100 GB/s: {fast}×)");
    assert!(fast > 2.0 * slow, "{fast}× against {slow}×");
}

#[test]
fn single_rank_charts_have_bars_and_shares_end_at_100() {
    let dir = scratch("single-rank-charts");
    let t = shared().join("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz");
    let o = bin().args(["report", "-q", "--out"]).arg(dir.join("r.html")).arg("--png").arg(&dir).arg(&t).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = |stem: &str| {
        let f = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.contains(stem) && n.ends_with(".svg")
        });
        std::fs::read_to_string(f.unwrap_or_else(|| panic!("{stem} chart"))).unwrap()
    };
    let replay = svg("measured-and-replayed");
    assert!(!replay.contains("width=\"-"), "negative bar widths");
    // Two bars (measured, replayed) of the one rank, wider than a pixel.
    let rects = replay.matches("<rect").count();
    assert!(rects >= 3, "{rects} rects");
    // The share axis ends at 100 (tick labels are `>\nN\n<` in plotters' SVG).
    let shares = svg("gpu-time-by-rank");
    let ticks: Vec<f64> = shares.split(">\n").filter_map(|t| t.split("\n<").next()?.trim().parse().ok()).collect();
    assert_eq!(ticks.iter().copied().fold(0.0, f64::max), 100.0, "{ticks:?}");
}

/// The per-op table: work per call from the shapes, achieved rate over the
/// kernel time, on a real trace (checked against the arithmetic by hand).
#[test]
fn op_and_message_size_tables_are_exact() {
    let t = shared().join("tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz");
    let job = tracecast_ingest::Job::read(t.clone(), &[t], &tracecast_ingest::ReadOptions::default(), &|_| {});
    let classifier = tracecast_ingest::analysis::Classifier::default();
    let rows = tracecast_calibrate::work::op_rows(&job, &classifier);
    let bmm = rows.iter().find(|r| r.op == "aten::bmm" && r.shapes == "[[96,3137,64],[96,64,3137]]").expect("the attention bmm");
    // (96 × 3137 × 64) · (96 × 64 × 3137): 2·b·m·k·n FLOPs per call.
    let flops = 2.0 * 96.0 * 3137.0 * 64.0 * 3137.0;
    assert_eq!(bmm.flops, Some(flops));
    assert_eq!(bmm.calls, 12);
    let achieved = bmm.achieved().unwrap();
    assert!((achieved - flops * 12.0 / 1e12 / (bmm.time_us / 1e6)).abs() < 1e-9, "{achieved}");
    assert!(rows.windows(2).all(|w| w[0].time_us >= w[1].time_us), "longest first");
    // Collectives per message size on the synthetic demo job (all-reduce over 12 GB/s, 4 ranks).
    let demo = demo();
    let files = tracecast_ingest::job::trace_files(&demo).unwrap();
    let job = tracecast_ingest::Job::read(demo, &files, &tracecast_ingest::ReadOptions::default(), &|_| {});
    let sizes = tracecast_ingest::analysis::message_size_rows(&job, &classifier);
    let largest = sizes.iter().filter(|m| m.collective == "all_reduce").max_by_key(|m| m.bytes).expect("all-reduces");
    assert_eq!(largest.group_size, 4);
    let busbw = largest.busbw_gbps.unwrap();
    assert!(busbw <= 12.0 * 1.02 && busbw > 12.0 * 0.8, "{busbw} GB/s on the largest buckets (truth 12)");
    let kernels: u64 = sizes.iter().map(|m| m.count).sum();
    let sized = tracecast_ingest::analysis::collective_samples(&job, &classifier).iter().filter(|c| c.bytes.is_some()).count();
    assert_eq!(kernels as usize, sized, "every sized collective of every rank is in one row");
}

/// A large job gets the spread across ranks, not a row per rank.
#[test]
fn many_ranks_get_a_distribution_instead_of_a_row_each() {
    let dir = scratch("report-many");
    let job = dir.join("job");
    synth(&job, &["--ranks", "24", "--steps", "2", "--layers", "2"]);
    let html = report(&[&job], &[], &dir.join("r.html"));
    assert!(html.contains("Across the 24 ranks (ms)"), "distribution table");
    assert!(!html.contains("<caption>Per rank (ms)</caption>"), "no row per rank");
    let i = html.find("Across the 24 ranks").unwrap();
    let table = &html[i..i + html[i..].find("</table>").unwrap()];
    assert_eq!(table.matches("<tr>").count(), 1 + 7, "header and seven metrics");
    // The median of 24 ranks is the mean of the 12th and 13th (it had shown the 13th), from analyze's spans.
    let a = dir.join("a.json");
    let o = bin().args(["analyze", "-q", "--json"]).arg(&a).arg(&job).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    let mut spans: Vec<f64> = doc["jobs"][0]["ranks"].as_array().unwrap().iter().map(|r| r["gpu_span_us"].as_f64().unwrap()).collect();
    spans.sort_by(f64::total_cmp);
    let median = format!("{:.3}", (spans[11] + spans[12]) / 2.0 / 1000.0);
    let row = table_rows(&html, "Across the 24 ranks (ms): the spread of each part of the breakdown")
        .into_iter()
        .find(|r| r[0] == "GPU span")
        .unwrap();
    assert_eq!(row[4], median, "{row:?}");
}

/// The headline names memory copies beside compute, communication and idle (an export whose GPUs
/// spent 97 % in host-to-device copies had read as 3 % of its time), and the page says which
/// window its numbers are of.
#[test]
fn the_headline_names_memory_copies_and_the_window() {
    let dir = scratch("report-headline");
    let export = shared().join("nsys/h100_2gpu_1s.sqlite");
    let html = report(&[&export], &[], &dir.join("n.html"));
    assert!(html.contains("memory copies and sets ran 97.0 % of the time"), "headline");
    assert!(html.contains("the analysed window is each rank's whole GPU window"), "window");
    // Without steps the timeline's button goes back to the whole window, and a job that ran
    // no collective says so (it had said its collectives lacked sizes).
    assert!(html.contains("class=\"tl-reset\">whole window</button>") && !html.contains(">whole step<"), "timeline button");
    assert!(html.contains("<p>This job ran no collective.</p>") && !html.contains("No collective in this job has a known"), "collectives");
    let job = shared().join("hta/trace_filter");
    let html = report(&[&job], &["--steps", "552"], &dir.join("s.html"));
    assert!(html.contains("the analysed window is the profiler step 552"), "window of --steps");
    assert!(html.contains("class=\"tl-reset\">whole step</button>"), "timeline button of a step");
    let html = report(&[&job], &["--window", "all"], &dir.join("a.html"));
    assert!(html.contains("the analysed window is each rank's whole GPU window"), "--window all");
}

/// `diff --top N` kept N kernels in its JSON but printed at most 15 on the terminal.
#[test]
fn diff_prints_as_many_kernels_as_top_asks() {
    let t = shared().join("hta/trace_filter");
    for top in [5usize, 30] {
        let o = bin().args(["diff".as_ref(), t.as_os_str(), t.as_os_str(), "--top".as_ref(), top.to_string().as_ref()]).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        let rows =
            text.split("Kernels that moved most").nth(1).unwrap_or_default().lines().skip(2).filter(|l| !l.trim().is_empty()).count();
        assert_eq!(rows, top, "{text}");
    }
}

/// The op table's "% of peak" of FP32 GEMMs that ran on an A100's TF32 tensor cores
/// (`cutlass_80_tensorop_s1688gemm`) was taken of the FP32 peak: 220–564 %. A job whose FP32
/// work went faster than the FP32 peak ran it on TF32 (the rule a calibration fits by): its FP32
/// FLOP work is a share of the TF32 peak, and the cells say so; none exceeds 100.
#[test]
fn no_op_runs_above_the_peak_it_ran_on() {
    let dir = scratch("report-peaks");
    let html = report(&[&shared().join("hta/trace_diff/control/control.json.gz")], &[], &dir.join("r.html"));
    let rows = table_rows(&html, "Ops with the most kernel time");
    assert!(rows.len() > 10, "{rows:?}");
    let mut of_tf32 = 0;
    for r in &rows {
        let cell = r.last().unwrap();
        let Ok(pct) = cell.split(' ').next().unwrap().parse::<f64>() else { continue };
        assert!(pct <= 100.0, "{r:?}");
        // Every FP32 FLOP row of the job, not only those above the FP32 peak.
        let fp32_flops = r[2] == "fp32" && r[6].ends_with("TFLOP/s");
        assert_eq!(cell.ends_with("of tf32"), fp32_flops, "{r:?}");
        of_tf32 += usize::from(fp32_flops);
    }
    assert!(of_tf32 > 0, "{rows:?}");
}

/// `--png` onto the folder of traces the job is read from is refused, the folder untouched
/// (the charts had been dropped among the traces).
#[test]
fn charts_are_not_written_into_the_traces_folder() {
    let dir = scratch("png-into-input");
    let job = dir.join("job");
    synth(&job, &["--ranks", "2"]);
    let before = std::fs::read_dir(&job).unwrap().count();
    let o = bin().args(["report", "-q", "--out"]).arg(dir.join("r.html")).arg("--png").arg(&job).arg(&job).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("that folder is an input"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&job).unwrap().count(), before);
    assert!(!dir.join("r.html").exists());
    // The same one rule for every command that writes a folder of files (analyze and calibrate had written there).
    for args in [&["analyze", "-q", "--csv"][..], &["analyze", "-q", "--plots"], &["calibrate", "-q", "--out", "p.json", "--plots"]] {
        let o = bin().current_dir(&dir).args(args).arg(&job).arg(&job).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("that folder is an input"), "{args:?}: {}", stderr(&o));
        assert_eq!(std::fs::read_dir(&job).unwrap().count(), before, "{args:?}");
    }
}

/// Two jobs asked for, one of which no rank survives (`--steps` selects nothing in it): the page
/// names it at the top and says that no diff is shown; it had been a one-job page saying nothing.
#[test]
fn a_job_that_gives_no_section_is_named_on_the_page() {
    let dir = scratch("report-unread-job");
    let samples = shared().join("kineto/tb_plugin_samples/resnet50_num_workers_0");
    let (a, b) = (samples.join("worker0.1623143089861.pt.trace.json.gz"), samples.join("worker0.1623143566756.pt.trace.json.gz"));
    let out = dir.join("r.html");
    let o = bin().args(["report", "--quiet", "--each", "--steps", "6-8", "--out"]).arg(&out).arg(&a).arg(&b).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let html = std::fs::read_to_string(&out).unwrap();
    let want = format!("Job {} was given, but none of its ranks could be read or analysed (steps 6..8 select nothing", b.display());
    assert!(html.contains(&want), "{}", &html[..html.len().min(3000)]);
    assert!(html.contains("it has steps 16–21): it is not on this page, and no diff is shown."));
    assert!(!html.contains("<h2>Diff"));
}

/// An op whose rate comes out above the GPU's peak (ResNet-50's 3×3 convolutions on a V100:
/// cuDNN's Winograd kernels do fewer multiplications than the direct convolution counted) is
/// marked in the op table and the mark explained, never shown as 168 % of the peak unexplained.
#[test]
fn op_rates_above_the_peak_are_marked_and_explained() {
    let dir = scratch("report-above-peak");
    let trace = shared().join("kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz");
    let html = report(&[&trace], &["--drop-last-step"], &dir.join("r.html"));
    let table = &html[html.find("Ops with the most kernel time").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    let mut marked = 0;
    for row in table.split("<tr>").skip(2) {
        let last = row.rsplit("<td").next().unwrap();
        let cell = &last[last.find('>').unwrap() + 1..last.find("</td>").unwrap()];
        let value: Option<f64> = cell.split_whitespace().next().and_then(|v| v.parse().ok());
        if let Some(v) = value.filter(|v| *v > 100.0) {
            assert!(cell.ends_with(" *"), "{v} % of the peak unmarked: {row}");
            marked += 1;
        }
    }
    assert!(marked > 0, "no op above the peak in {table}");
    assert!(html.contains("* above the GPU's peak, which no kernel reaches"));
}

/// A page with a projection gives the projection's critical path and step time as `replay`
/// prints them (it had given the measured replay's path alone, beside the projection's speed-up).
#[test]
fn a_projection_on_the_page_has_its_own_critical_path() {
    let dir = scratch("report-projected-path");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let o = bin().arg("replay").arg(&demo).args(["--scale", "compute=2,link=2"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let path = text.lines().find_map(|l| l.strip_prefix("Critical path ")).and_then(|l| l.split(' ').next()).unwrap().to_string();
    let page = report(&[&demo], &["--scale", "compute=2,link=2"], &dir.join("p.html"));
    assert!(page.contains(&format!("its critical path {path} ms: compute")), "{path}");
    assert!(page.contains("The critical path of the replay as measured"));
    // The window narrows the tables, not the fits, and the page says so.
    let narrowed = report(&[&demo], &["--steps", "2"], &dir.join("s.html"));
    assert!(narrowed.contains("The fits use every kernel of the trace"));
}

/// The page's projection says what `replay --target` says with the same options: it had carried
/// `--source-profile` notes nobody gave (its own calibration passed on as if given), and named
/// an unknown GPU's fits "(none)" where the replay says the trace's own calibration.
#[test]
fn the_pages_projection_notes_are_the_replays() {
    let dir = scratch("report-projection-notes");
    let cases: [(PathBuf, &str); 2] = [
        (shared().join("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"), "mi300x"),
        (shared().join("hta/trace_filter"), "h100-sxm"),
    ];
    for (trace, target) in cases {
        let page = report(&[&trace], &["--target", target], &dir.join("r.html"));
        let o = bin().args(["replay".as_ref(), trace.as_os_str(), "--target".as_ref(), target.as_ref()]).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let replay = String::from_utf8_lossy(&o.stdout).into_owned();
        for said in ["--source-profile", "the source profile is of"] {
            assert!(!page.contains(said) && !replay.contains(said), "{target}: {said}");
        }
        let priced = |text: &str| text.split("priced from ").nth(1).map(|s| s.split(" onto").next().unwrap_or_default().to_string());
        let (on_page, in_replay) = (priced(&page.replace("Priced from ", "priced from ")), priced(&replay));
        assert!(in_replay.is_some() && on_page == in_replay, "{target}: {on_page:?} against {in_replay:?}");
    }
}
