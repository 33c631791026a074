//! What-if scenarios side by side: `NAME:KEY=VALUE,…` settings (the one
//! parser of `--scale`, `--link` and `--what-if`), applied on top of a base
//! [`ReplayOptions`], each replayed with [`crate::replay_parts`] and summed up in one
//! row — its speed-up, replayed step and critical-path shares.
//!
//! ```
//! use tracecast_replay::ReplayOptions;
//! use tracecast_replay::scenario::Scenario;
//! let fast: Scenario = "fast:compute=2,world-size=16".parse()?;
//! let opts = fast.apply(&ReplayOptions::default());
//! assert_eq!((fast.name.as_str(), opts.scale.compute, opts.world_size), ("fast", 2.0, Some(16)));
//! assert!("fast:gpu=2".parse::<Scenario>().unwrap_err().to_string().contains("\"gpu\""));
//! # Ok::<(), tracecast_replay::Error>(())
//! ```

use std::str::FromStr;

use serde::Serialize;
use tracecast_ingest::Job;

use crate::error::Error;
use crate::replay::{JobReplay, LinkOverride, RankPart, ReplayOptions, Scale, job_parts, replay_parts};

/// The name of the first row of every what-if table: the identity replay
/// (measured durations); no scenario may take it.
pub const MEASURED: &str = "measured";

/// The largest world size a what-if takes: 2^20 ranks, ten times the largest training jobs run
/// (about 10^5 GPUs); beyond it a typo, not a cluster (`--world-size 1000000000` had been priced).
pub const MAX_WORLD_SIZE: u32 = 1 << 20;
// The refusal's words state it as a literal (the error takes static text): kept in step here.
const _: () = assert!(MAX_WORLD_SIZE == 1_048_576);

/// A key of the `KEY=VALUE` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Compute,
    Memory,
    Link,
    WorldSize,
    Alpha,
    Busbw,
    InterAlpha,
    InterBusbw,
}

impl Key {
    /// The keys of `--scale`.
    const SCALE: &[Key] = &[Key::Compute, Key::Memory, Key::Link];
    /// The keys of `--link`.
    const LINK: &[Key] = &[Key::Alpha, Key::Busbw, Key::InterAlpha, Key::InterBusbw];
    /// The keys of a `--what-if` scenario.
    const ALL: &[Key] = &[Key::Compute, Key::Memory, Key::Link, Key::WorldSize, Key::Alpha, Key::Busbw, Key::InterAlpha, Key::InterBusbw];

    fn name(self) -> &'static str {
        match self {
            Key::Compute => "compute",
            Key::Memory => "memory",
            Key::Link => "link",
            Key::WorldSize => "world-size",
            Key::Alpha => "alpha",
            Key::Busbw => "busbw",
            Key::InterAlpha => "inter-alpha",
            Key::InterBusbw => "inter-busbw",
        }
    }

    /// The key written `name` (`comm` is the old name of `link`).
    fn of(name: &str) -> Option<Key> {
        if name == "comm" {
            return Some(Key::Link);
        }
        Key::ALL.iter().copied().find(|k| k.name() == name)
    }
}

/// The settings a `--scale`, `--link` or `--what-if` names; `None` leaves
/// the base's value as it is.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Overrides {
    /// Compute speed-up (`compute=`).
    pub compute: Option<f64>,
    /// Memcpy/memset speed-up (`memory=`).
    pub memory: Option<f64>,
    /// Communication speed-up (`link=`, also `comm=`).
    pub link: Option<f64>,
    /// Data-parallel scale-out to this many ranks (`world-size=`).
    pub world_size: Option<u32>,
    /// α-β latency inside a node, µs (`alpha=`).
    pub alpha_us: Option<f64>,
    /// α-β bus bandwidth inside a node, GB/s (`busbw=`).
    pub busbw_gbps: Option<f64>,
    /// α-β latency of groups that span nodes, µs (`inter-alpha=`).
    pub inter_alpha_us: Option<f64>,
    /// α-β bus bandwidth of groups that span nodes, GB/s (`inter-busbw=`).
    pub inter_busbw_gbps: Option<f64>,
}

impl Overrides {
    /// Parses `KEY=VALUE,…` taking only `keys`; `flag` names the setting in errors.
    /// `busbw_elsewhere`: a `busbw` given elsewhere (a scenario's, in `--link`) stands in for
    /// one not named here.
    fn parse(flag: &str, spec: &str, keys: &[Key], busbw_elsewhere: bool) -> Result<Overrides, Error> {
        let mut o = Overrides::default();
        let mut seen: Vec<Key> = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| Error::NotKeyValue { flag: flag.to_string(), part: part.to_string() })?;
            let (k, v) = (k.trim(), v.trim());
            let key = Key::of(k).filter(|key| keys.contains(key)).ok_or_else(|| Error::UnknownKey {
                flag: flag.to_string(),
                key: k.to_string(),
                known: keys.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
            })?;
            if seen.contains(&key) {
                return Err(Error::DuplicateKey { flag: flag.to_string(), key: key.name().to_string() });
            }
            seen.push(key);
            let bad = |expected| Error::BadValue { flag: flag.to_string(), key: key.name().to_string(), value: v.to_string(), expected };
            // Bounded so that a replayed step stays within the simulator's clock (i64 ns):
            // `compute=1e-12` had replayed 2.5e12 ms, clamped.
            let number = |(low, high, expected): (f64, f64, &'static str)| {
                v.parse::<f64>().ok().filter(|x| (low..=high).contains(x)).ok_or_else(|| bad(expected))
            };
            const SPEEDUP: (f64, f64, &str) = (1e-3, 1e3, "a speed-up must be a number from 0.001 to 1000 (2 = twice as fast)");
            const LATENCY: (f64, f64, &str) = (0.0, 1e6, "a latency must be a number of µs from 0 to 1000000");
            const BANDWIDTH: (f64, f64, &str) = (1e-3, 1e6, "a bandwidth must be a number of GB/s from 0.001 to 1000000");
            match key {
                Key::Compute => o.compute = Some(number(SPEEDUP)?),
                Key::Memory => o.memory = Some(number(SPEEDUP)?),
                Key::Link => o.link = Some(number(SPEEDUP)?),
                Key::WorldSize => {
                    o.world_size = Some(
                        v.parse::<u32>()
                            .ok()
                            .filter(|&n| (1..=MAX_WORLD_SIZE).contains(&n))
                            .ok_or_else(|| bad("a world size must be a whole number of ranks from 1 to 1048576 (2^20)"))?,
                    )
                }
                Key::Alpha => o.alpha_us = Some(number(LATENCY)?),
                Key::Busbw => o.busbw_gbps = Some(number(BANDWIDTH)?),
                Key::InterAlpha => o.inter_alpha_us = Some(number(LATENCY)?),
                Key::InterBusbw => o.inter_busbw_gbps = Some(number(BANDWIDTH)?),
            }
        }
        if o.names_link() && o.busbw_gbps.is_none() && !busbw_elsewhere {
            // Without a bandwidth the α-β model has nothing to cost the bytes with.
            return Err(Error::MissingBusbw { flag: flag.to_string() });
        }
        Ok(o)
    }

    /// Whether any α-β link key is named.
    fn names_link(&self) -> bool {
        self.alpha_us.is_some() || self.busbw_gbps.is_some() || self.inter_alpha_us.is_some() || self.inter_busbw_gbps.is_some()
    }

    /// The α-β keys named here over `base`'s link override, one by one; `None` when none
    /// is named, or no `busbw` is named here or in `base`.
    fn link_override(&self, base: Option<LinkOverride>) -> Option<LinkOverride> {
        if !self.names_link() {
            return None;
        }
        let busbw_gbps = self.busbw_gbps.or(base.map(|b| b.busbw_gbps))?;
        let b = base.unwrap_or_default();
        Some(LinkOverride {
            alpha_us: self.alpha_us.unwrap_or(b.alpha_us),
            busbw_gbps,
            inter_alpha_us: self.inter_alpha_us.or(b.inter_alpha_us),
            inter_busbw_gbps: self.inter_busbw_gbps.or(b.inter_busbw_gbps),
        })
    }

    /// `base` with the settings named here in place of its own.
    fn apply(&self, base: &ReplayOptions) -> ReplayOptions {
        let mut opts = base.clone();
        opts.scale = Scale {
            compute: self.compute.unwrap_or(base.scale.compute),
            memory: self.memory.unwrap_or(base.scale.memory),
            link: self.link.unwrap_or(base.scale.link),
        };
        opts.world_size = self.world_size.or(base.world_size);
        opts.link = self.link_override(base.link).or(base.link);
        opts
    }
}

/// `--scale compute=2,memory=1.5,link=2`: speed-ups, 1 for the keys not named.
impl FromStr for Scale {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Scale, Error> {
        // `--scale ""` had replayed the identity as if something were scaled (a scenario
        // naming nothing is a row of the base options, by design; a flag is not).
        let o = Overrides::parse("--scale", spec, Key::SCALE, false)?;
        if o == Overrides::default() {
            return Err(Error::NotKeyValue { flag: "--scale".to_string(), part: spec.to_string() });
        }
        Ok(o.apply(&ReplayOptions::default()).scale)
    }
}

/// `--link alpha=US,busbw=GBPS[,inter-alpha=US,inter-busbw=GBPS]`: `busbw` is
/// required, `alpha` defaults to 0 µs, the inter-node pair to the intra-node one.
impl FromStr for LinkOverride {
    type Err = Error;

    fn from_str(spec: &str) -> Result<LinkOverride, Error> {
        let o = Overrides::parse("--link", spec, Key::LINK, false)?;
        o.link_override(None).ok_or_else(|| Error::MissingBusbw { flag: "--link".to_string() })
    }
}

/// One what-if of a `replay --what-if` run: a name and the settings it
/// changes, written `NAME:KEY=VALUE,…`.
///
/// Keys: `compute`, `memory`, `link` (speed-ups, as `--scale`; 2 = twice as
/// fast), `world-size` (ranks, as `--world-size`), `alpha`, `busbw`,
/// `inter-alpha`, `inter-busbw` (α-β link costs in µs and GB/s, as `--link`;
/// naming any of them needs `busbw`, the scenario's or `--link`'s). A name is letters, digits, `-`, `_`,
/// `.` or `+`; `measured` is the identity row's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    /// The scenario's name (the table's first column).
    pub name: String,
    /// What it changes.
    pub overrides: Overrides,
}

impl FromStr for Scenario {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Scenario, Error> {
        let Some((name, settings)) = spec.split_once(':') else {
            // `compute=2` lacks its name; `fast`, its settings.
            let missing = if spec.contains('=') { "NAME" } else { "its :KEY=VALUE settings" };
            return Err(Error::MissingName { spec: spec.to_string(), missing });
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(Error::MissingName { spec: spec.to_string(), missing: "NAME" });
        }
        if !name.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '+')) {
            return Err(Error::BadName { name: name.to_string() });
        }
        if name == MEASURED {
            return Err(Error::DuplicateName { name: name.to_string(), reason: "\"measured\" is the identity row's name" });
        }
        // Its `busbw` may come from `--link` ([`parse_scenarios`] checks, knowing the base).
        let overrides = Overrides::parse(&format!("--what-if {name}"), settings, Key::ALL, true)?;
        Ok(Scenario { name: name.to_string(), overrides })
    }
}

impl Scenario {
    /// The options of this scenario: `base` (the run's `--scale`, `--link`,
    /// `--world-size`, `--target`, … — they apply to every scenario) with
    /// each setting the scenario names in place of the base's. Per key: a
    /// scenario `compute=2` over `--scale compute=3,memory=2` replays compute
    /// ×2 and memory ×2; its α-β keys replace those of `--link` one by one
    /// (`busbw` the scenario's, else `--link`'s).
    pub fn apply(&self, base: &ReplayOptions) -> ReplayOptions {
        self.overrides.apply(base)
    }
}

/// Parses the `--what-if` arguments of one run: every one a [`Scenario`],
/// no name twice; α-β keys without `busbw` only over a `base_link` (`--link`) that has it.
pub fn parse_scenarios<S: AsRef<str>>(specs: &[S], base_link: Option<&LinkOverride>) -> Result<Vec<Scenario>, Error> {
    let mut scenarios: Vec<Scenario> = Vec::with_capacity(specs.len());
    for spec in specs {
        let s: Scenario = spec.as_ref().parse()?;
        // `--link busbw=75 --what-if x:alpha=5` keeps --link's bandwidth, as every other key
        // of the base is kept; it had been refused for lack of a `busbw`.
        if s.overrides.names_link() && s.overrides.busbw_gbps.is_none() && base_link.is_none() {
            return Err(Error::MissingBusbw { flag: format!("--what-if {}", s.name) });
        }
        if scenarios.iter().any(|t| t.name == s.name) {
            return Err(Error::DuplicateName { name: s.name, reason: "two scenarios have this name" });
        }
        scenarios.push(s);
    }
    Ok(scenarios)
}

/// What `opts` changes from the measured run, in words (`compute ×2, world
/// size 16`; `as measured` when nothing).
pub fn describe(opts: &ReplayOptions) -> String {
    let mut parts = Vec::new();
    for (what, x) in [("compute", opts.scale.compute), ("memory", opts.scale.memory), ("link", opts.scale.link)] {
        if x != 1.0 {
            parts.push(format!("{what} ×{x}"));
        }
    }
    if let Some(n) = opts.world_size {
        parts.push(format!("world size {n}"));
    }
    if let Some(l) = &opts.link {
        let mut s = format!("links α {} µs, busbw {} GB/s", l.alpha_us, l.busbw_gbps);
        if l.inter_alpha_us.is_some() || l.inter_busbw_gbps.is_some() {
            s += &format!(" (across nodes α {} µs, busbw {} GB/s)", l.inter().alpha_us, l.inter().busbw_gbps);
        }
        parts.push(s);
    }
    if let Some(t) = &opts.target {
        parts.push(format!("on {}", t.gpu.as_ref().map_or("the target GPU", |g| g.id.as_str())));
    }
    if parts.is_empty() { "as measured".to_string() } else { parts.join(", ") }
}

/// Shares of a replay's critical path, percent (they sum to 100 for a non-empty path).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct CriticalShares {
    /// Compute kernels.
    pub compute_pct: f64,
    /// Communication nothing hid.
    pub comm_pct: f64,
    /// Memcpy / memset.
    pub memory_pct: f64,
    /// Runtime calls and CPU time between them.
    pub cpu_pct: f64,
    /// Launch latency, queue gaps and event-wait latencies.
    pub launch_pct: f64,
    /// Delays nothing in the trace explains.
    pub unexplained_pct: f64,
}

/// One row of a what-if table.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioRow {
    /// The scenario's name ([`MEASURED`] for the identity replay).
    pub name: String,
    /// What it replayed, in words ([`describe`]).
    pub settings: String,
    /// Measured ÷ replayed job step time ([`JobReplay::speedup`]).
    pub speedup: f64,
    /// The measured job step time, µs (the slowest rank's per step, mean over
    /// the steps: what `analyze` reports and the speed-up is of).
    pub measured_step_us: f64,
    /// The replayed job step time, µs.
    pub replayed_step_us: f64,
    /// Where the replayed critical path's time went.
    pub critical_path: CriticalShares,
    /// The replay's remarks.
    pub notes: Vec<String>,
}

impl ScenarioRow {
    /// The row of `replay`, replayed as `settings` say, named `name`.
    pub fn of(name: &str, settings: String, replay: &JobReplay) -> ScenarioRow {
        let [compute_pct, comm_pct, memory_pct, cpu_pct, launch_pct, unexplained_pct] = replay.critical_path.percent();
        ScenarioRow {
            name: name.to_string(),
            settings,
            speedup: replay.speedup,
            measured_step_us: replay.measured_job_step_us,
            replayed_step_us: replay.replayed_job_step_us,
            critical_path: CriticalShares { compute_pct, comm_pct, memory_pct, cpu_pct, launch_pct, unexplained_pct },
            notes: replay.notes.clone(),
        }
    }
}

/// Replays `job` once per scenario, each with [`Scenario::apply`] over
/// `base`, after one identity replay (measured durations: `base` without its
/// speed-ups, `--link`, `--world-size` or target), which is the first row,
/// named [`MEASURED`]. No scenarios, no rows.
pub fn replay_scenarios(job: &Job, base: &ReplayOptions, scenarios: &[Scenario]) -> Vec<ScenarioRow> {
    if scenarios.is_empty() {
        return Vec::new();
    }
    let builtin;
    let catalog = match &base.catalog {
        Some(c) => c,
        None => {
            builtin = tracecast_calibrate::Catalog::builtin();
            &builtin
        }
    };
    let (parts, collectives) = job_parts(job, base, catalog);
    scenario_rows(&job.path.display().to_string(), &parts, &collectives, base, scenarios, catalog)
}

/// [`replay_scenarios`] of a job's replay parts built with `base` and its
/// collectives ([`job_parts`]): every replay of the table from copies of the
/// same parts, each rank's facts computed once.
pub fn scenario_rows(
    path: &str,
    parts: &[RankPart<'_>],
    collectives: &tracecast_ingest::analysis::JobCollectives,
    base: &ReplayOptions,
    scenarios: &[Scenario],
    catalog: &tracecast_calibrate::Catalog,
) -> Vec<ScenarioRow> {
    if scenarios.is_empty() {
        return Vec::new();
    }
    let mut identity = base.clone();
    identity.scale = Scale::default();
    identity.world_size = None;
    identity.link = None;
    identity.target = None;
    let measured = replay_parts(path.to_string(), parts.iter().map(RankPart::without_target).collect(), collectives, &identity, catalog);
    let mut rows = vec![ScenarioRow::of(MEASURED, "identity replay (measured durations)".into(), &measured.report)];
    for s in scenarios {
        let opts = s.apply(base);
        let replayed = replay_parts(path.to_string(), parts.to_vec(), collectives, &opts, catalog);
        rows.push(ScenarioRow::of(&s.name, describe(&opts), &replayed.report));
    }
    rows
}

/// Writes the what-if table: a row per scenario (speed-up, replayed mean
/// step, critical-path shares, settings), then each row's notes. Nothing
/// for no rows.
pub fn write_table(out: &mut dyn std::io::Write, rows: &[ScenarioRow]) -> std::io::Result<()> {
    let Some(first) = rows.first() else { return Ok(()) };
    let w = rows.iter().map(|r| r.name.chars().count()).max().unwrap_or(0).max("scenario".len());
    writeln!(
        out,
        "What-ifs (measured job step {:.3} ms, the slowest rank's per step as analyze reports it; speed-up = measured ÷ replayed job step; critical path in %):",
        first.measured_step_us / 1000.0
    )?;
    writeln!(
        out,
        "{:<w$} {:>9} {:>12} {:>8} {:>6} {:>7} {:>6} {:>7} {:>8}  settings",
        "scenario", "speed-up", "step ms", "compute", "comm", "memory", "CPU", "launch", "unexpl."
    )?;
    for r in rows {
        let c = &r.critical_path;
        writeln!(
            out,
            "{:<w$} {:>9} {:>12.3} {:>8.1} {:>6.1} {:>7.1} {:>6.1} {:>7.1} {:>8.1}  {}",
            r.name,
            crate::speedup_in_words(r.speedup),
            r.replayed_step_us / 1000.0,
            c.compute_pct,
            c.comm_pct,
            c.memory_pct,
            c.cpu_pct,
            c.launch_pct,
            c.unexplained_pct,
            r.settings
        )?;
    }
    for r in rows {
        for n in &r.notes {
            writeln!(out, "note [{}]: {n}", r.name)?;
        }
    }
    Ok(())
}

/// A job's replay with its what-if table, as `replay --json` writes it: the
/// replay's keys, then `what_if` (left out when there are no rows).
#[derive(Debug, Serialize)]
pub struct JobWithScenarios<'a> {
    /// The job's replay (with the run's base options).
    #[serde(flatten)]
    pub replay: &'a JobReplay,
    /// Its what-if rows.
    #[serde(skip_serializing_if = "<[ScenarioRow]>::is_empty")]
    pub what_if: &'a [ScenarioRow],
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &str) -> String {
        spec.parse::<Scenario>().unwrap_err().to_string()
    }

    #[test]
    fn a_slowdown_of_more_than_a_hundredfold_keeps_two_significant_digits() {
        // alpha=1e6 µs on a synthetic job is a 7 400-fold slowdown; it had read "0.000×".
        let words = [1.23456, 1.0 / 7400.0, 0.05].map(crate::speedup_in_words);
        assert_eq!(words, ["1.235×", "1.4e-4×", "0.050×"]);
    }

    #[test]
    fn scenarios_parse_every_key() {
        let s: Scenario = " net-2 : link=2, world-size=16 ,alpha=8,busbw=40,inter-alpha=25,inter-busbw=20".parse().unwrap();
        assert_eq!(s.name, "net-2");
        let o = s.overrides;
        assert_eq!((o.compute, o.memory, o.link, o.world_size), (None, None, Some(2.0), Some(16)));
        assert_eq!((o.alpha_us, o.busbw_gbps, o.inter_alpha_us, o.inter_busbw_gbps), (Some(8.0), Some(40.0), Some(25.0), Some(20.0)));
        let s: Scenario = "fast:compute=2,memory=1.5,comm=3".parse().unwrap();
        assert_eq!((s.overrides.compute, s.overrides.memory, s.overrides.link), (Some(2.0), Some(1.5), Some(3.0)));
        // No keys: the base options as they are.
        assert_eq!("base:".parse::<Scenario>().unwrap().overrides, Overrides::default());
    }

    #[test]
    fn bad_scenarios_name_the_bad_part() {
        let e = err("fast:gpu=2");
        assert!(e.contains("--what-if fast") && e.contains("unknown key \"gpu\"") && e.contains("world-size"), "{e}");
        let e = err("compute=2");
        assert!(e.contains("missing NAME") && e.contains("compute=2"), "{e}");
        assert!(err(":compute=2").contains("missing NAME"));
        // A name alone lacks its settings, not its name.
        assert!(err("fast").contains("\"fast\": missing its :KEY=VALUE settings"), "{}", err("fast"));
        for (spec, key, value) in [
            ("slow:compute=0", "compute", "0"),
            ("slow:memory=-1", "memory", "-1"),
            ("slow:link=inf", "link", "inf"),
            ("slow:link=NaN", "link", "NaN"),
            ("slow:compute=fast", "compute", "fast"),
            ("big:world-size=0", "world-size", "0"),
            ("big:world-size=1.5", "world-size", "1.5"),
            ("big:world-size=1000000000", "world-size", "1000000000"),
            ("net:alpha=-1,busbw=40", "alpha", "-1"),
            ("net:busbw=0", "busbw", "0"),
            // Beyond the simulator's clock: compute=1e-12 had replayed 2.5e12 ms, clamped.
            ("slow:compute=1e-12", "compute", "1e-12"),
            ("net:busbw=1e-300", "busbw", "1e-300"),
            ("net:alpha=1e300,busbw=40", "alpha", "1e300"),
        ] {
            let e = err(spec);
            assert!(e.contains(&format!("{key}=\"{value}\"")) && e.contains(spec.split(':').next().unwrap()), "{spec}: {e}");
        }
        let e = parse_scenarios(&["net:alpha=5"], None).unwrap_err().to_string();
        assert!(e.contains("--what-if net") && e.contains("busbw"), "{e}");
        assert!(err("x:compute").contains("\"compute\" is not KEY=VALUE"));
        // A --scale naming nothing had replayed the identity as a what-if.
        assert!("".parse::<Scale>().unwrap_err().to_string().contains("--scale"));
        assert!(" , ".parse::<Scale>().unwrap_err().to_string().contains("--scale"));
        assert!(err("x:compute=2,compute=3").contains("compute is given twice"));
        assert!(err("a=b:compute=2").contains("scenario name"));
        assert!(err("measured:compute=2").contains("identity"));
        let e = parse_scenarios(&["fast:compute=2", "net:link=2", "fast:memory=2"], None).unwrap_err().to_string();
        assert!(e.contains("fast") && e.contains("two scenarios"), "{e}");
        assert_eq!(parse_scenarios(&["fast:compute=2", "net:link=2"], None).unwrap().len(), 2);
    }

    #[test]
    fn scale_and_link_share_the_parser() {
        let s: Scale = "compute=2, memory=1.5".parse().unwrap();
        assert_eq!(s, Scale { compute: 2.0, memory: 1.5, link: 1.0 });
        assert_eq!("comm=2".parse::<Scale>().unwrap().link, 2.0);
        let e = "gpu=2".parse::<Scale>().unwrap_err().to_string();
        assert!(e.starts_with("--scale: unknown key \"gpu\"") && e.contains("compute, memory, link"), "{e}");
        assert!("world-size=2".parse::<Scale>().unwrap_err().to_string().contains("unknown key"));
        assert!("compute=0".parse::<Scale>().unwrap_err().to_string().contains("--scale: compute=\"0\""));
        let l: LinkOverride = "alpha=8,busbw=40,inter-busbw=20".parse().unwrap();
        assert_eq!(l, LinkOverride { alpha_us: 8.0, busbw_gbps: 40.0, inter_alpha_us: None, inter_busbw_gbps: Some(20.0) });
        assert!("alpha=8".parse::<LinkOverride>().unwrap_err().to_string().contains("--link"));
        assert!("compute=2,busbw=1".parse::<LinkOverride>().unwrap_err().to_string().contains("unknown key \"compute\""));
    }

    #[test]
    fn scenario_keys_override_the_base_one_by_one() {
        let base = ReplayOptions {
            scale: Scale { compute: 3.0, memory: 2.0, link: 1.0 },
            world_size: Some(32),
            link: Some(LinkOverride { alpha_us: 8.0, busbw_gbps: 40.0, inter_alpha_us: Some(25.0), inter_busbw_gbps: None }),
            ..ReplayOptions::default()
        };
        let s: Scenario = "x:compute=2,busbw=100".parse().unwrap();
        let o = s.apply(&base);
        assert_eq!(o.scale, Scale { compute: 2.0, memory: 2.0, link: 1.0 });
        assert_eq!(o.world_size, Some(32));
        assert_eq!(o.link, Some(LinkOverride { alpha_us: 8.0, busbw_gbps: 100.0, inter_alpha_us: Some(25.0), inter_busbw_gbps: None }));
        assert_eq!(
            describe(&o),
            "compute ×2, memory ×2, world size 32, links α 8 µs, busbw 100 GB/s (across nodes α 25 µs, busbw 100 GB/s)"
        );
        // α-β keys without `busbw`: --link's bandwidth, with the keys named replacing its own.
        let s = &parse_scenarios(&["x:alpha=5"], base.link.as_ref()).unwrap()[0];
        assert_eq!(
            s.apply(&base).link,
            Some(LinkOverride { alpha_us: 5.0, busbw_gbps: 40.0, inter_alpha_us: Some(25.0), inter_busbw_gbps: None })
        );
        // Nothing named: the base as it is.
        assert_eq!("y:".parse::<Scenario>().unwrap().apply(&base).scale, base.scale);
        assert_eq!(describe(&ReplayOptions::default()), "as measured");
    }
}
