//! `tracecast validate`: projections of published, measured training runs
//! compared with their measurement — how users check the analytical model
//! against clusters they know (the format of
//! `shared/validation/published-runs.json`).

use std::path::Path;

use serde::{Deserialize, Serialize};
use tracecast_calibrate::DeviceModel;
use tracecast_calibrate::catalog::{Catalog, Dtype};

use super::llm::{Cluster, Plan, StatedKeys, SystemOverrides, Task, Transformer, project_timeline};

/// A file of measured runs.
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "a JSON object with a `runs` list (and optionally `about`)")]
pub struct RunsFile {
    /// What the file is.
    #[serde(default)]
    pub about: Option<String>,
    /// The runs.
    pub runs: Vec<Run>,
    /// Lists of other top-level keys, which are not read (a file may keep
    /// runs the model cannot describe apart, as `training-runs.json` keeps
    /// MoE and LoRA runs): each key and the ids of its entries.
    #[serde(skip)]
    pub unread_lists: Vec<(String, Vec<String>)>,
    /// Other top-level keys that hold no list, which are not read either.
    #[serde(skip)]
    pub unread_keys: Vec<String>,
}

impl RunsFile {
    /// Reads the runs file at `path` (JSON in the format of
    /// `shared/validation/published-runs.json`); its errors name the file.
    pub fn read(path: &Path) -> Result<RunsFile, crate::Error> {
        let text = tracecast_ingest::input::read(path).map_err(|cause| crate::Error::Io { path: path.to_path_buf(), cause })?;
        RunsFile::parse(&text, path)
    }

    /// A runs file's text, read from `path` (which its errors name).
    pub fn parse(text: &[u8], path: &Path) -> Result<RunsFile, crate::Error> {
        // A bare list of runs would be read as the object's fields in order (its first run as
        // `about`: "invalid type: map, expected a string").
        let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        if text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
            return Err(crate::Error::Run(format!(
                "{}: the top level is a list; a runs file is an object whose `runs` holds the list: {{\"runs\": [...]}}",
                path.display()
            )));
        }
        // The file's frame first (an object with a `runs` list); then each run on its own, so
        // that a run that does not read (a string for a number, a misspelt key) is refused in its
        // row and the others compared: one such run had stopped the command, one mistake a rerun.
        #[derive(Deserialize)]
        #[serde(expecting = "a JSON object with a `runs` list (and optionally `about`)")]
        struct Frame {
            #[serde(default)]
            about: Option<String>,
            runs: Vec<Box<serde_json::value::RawValue>>,
            /// The other top-level keys, which are not read.
            #[serde(flatten)]
            others: serde_json::Map<String, serde_json::Value>,
        }
        let frame: Frame = serde_json::from_slice(text).map_err(|cause| crate::Error::RunsFile {
            path: path.to_path_buf(),
            key: key_before(text, cause.line(), cause.column()).map(|k| format!(" (at {k:?})")).unwrap_or_default(),
            cause,
        })?;
        // Each run read once into its value, a key it gives twice refused (a value keeps the
        // last: a second `id` had renamed its run in silence).
        let values: Vec<(serde_json::Value, Option<String>)> = frame
            .runs
            .iter()
            .map(|raw| match value_once(raw.get()) {
                Ok(value) => (value, None),
                // (Read again only to name the run whose key is given twice.)
                Err(twice) => (serde_json::from_str(raw.get()).unwrap_or(serde_json::Value::Null), Some(twice)),
            })
            .collect();
        let runs: Vec<Run> = values
            .iter()
            .enumerate()
            .map(|(i, (value, twice))| match twice {
                // The repeated key, or what else kept the entry from reading (nesting past serde's limit).
                Some(why) => Run::unreadable(value, i, format!("the entry does not read as a run: {why}")),
                None => Run::of_value(value, i),
            })
            .collect();
        let frame_runs: Vec<&serde_json::Value> = values.iter().map(|(v, _)| v).collect();
        // Ids name runs in tables, fits and `project --from FILE:ID`: one run each (of the ids the
        // entries give: a name made for an entry without one is not the file's).
        let given = |v: &serde_json::Value| v.get("id").is_some_and(serde_json::Value::is_string);
        let mut ids: Vec<&str> = runs.iter().zip(&frame_runs).filter(|(_, v)| given(v)).map(|(r, _)| r.id.as_str()).collect();
        ids.sort_unstable();
        let mut twice: Vec<&str> = ids.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
        twice.dedup();
        match twice.as_slice() {
            [] => {}
            [one] => return Err(crate::Error::Run(format!("{}: run id {one:?} names more than one run", path.display()))),
            many => {
                let many: Vec<String> = many.iter().map(|id| format!("{id:?}")).collect();
                return Err(crate::Error::Run(format!("{}: run ids {} each name more than one run", path.display(), many.join(", "))));
            }
        }
        let unread_lists = frame
            .others
            .iter()
            .filter_map(|(key, value)| {
                let ids = value.as_array()?.iter().map(|r| r.get("id").and_then(|i| i.as_str()).unwrap_or("?").to_string()).collect();
                Some((key.clone(), ids))
            })
            .collect();
        // A key that holds no list is no runs left out, but a misspelt key (`abuot`) all the same.
        let unread_keys = frame.others.iter().filter(|(_, v)| !v.is_array()).map(|(k, _)| k.clone()).collect();
        Ok(RunsFile { about: frame.about, runs, unread_lists, unread_keys })
    }

    /// What the file holds beside `runs` that is not read, in words (`None` when nothing):
    /// validating it, a user should know that runs were left out.
    pub fn unread_lists_in_words(&self) -> Option<String> {
        if self.unread_lists.is_empty() && self.unread_keys.is_empty() {
            return None;
        }
        let mut lists: Vec<String> = self.unread_lists.iter().map(|(key, ids)| format!("`{key}` ({} entries)", ids.len())).collect();
        lists.extend(self.unread_keys.iter().map(|key| format!("`{key}`")));
        Some(format!("{} not read: only the `runs` list is", lists.join(" and ")))
    }

    /// The list other than `runs` that holds the run `id`, if one does.
    pub fn unread_list_of(&self, id: &str) -> Option<&str> {
        self.unread_lists.iter().find(|(_, ids)| ids.iter().any(|i| i == id)).map(|(key, _)| key.as_str())
    }
}

/// How far above the fastest floating-point peak the catalog holds a measured training throughput
/// may lie before it is refused as impossible: the formats the catalog lacks (FP4) reach ~3× FP8.
const FP4_OVER_FASTEST: f64 = 4.0;

/// A training run's measured model FLOPs utilization: its tokens/s per GPU × the model's
/// FLOPs per token ([`Transformer::model_flops_per_token`], the count `project` and `search`
/// print) ÷ its GPU's 16-bit peak.
#[derive(Debug, Clone, Serialize)]
pub struct MeasuredMfu {
    /// The run's id.
    pub run: String,
    /// Where its throughput was published.
    pub source: Option<String>,
    /// Its GPU (catalog id) and how many.
    pub gpu: String,
    /// GPUs of the run.
    pub gpus: u32,
    /// The utilization, a fraction of the 16-bit peak.
    pub mfu: f64,
    /// The same by its source's own count (its published model TFLOP/s), where published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_mfu: Option<f64>,
}

impl MeasuredMfu {
    /// The run in words: its id, GPUs and the first words of its source (repository and
    /// file, without the reading notes).
    pub fn cited(&self) -> String {
        let source = self.source.as_deref().map(|s| s.split([';', '(']).next().unwrap_or(s).trim()).unwrap_or("source not stated");
        format!("{}, {} × {}; {source}", self.run, self.gpus, self.gpu)
    }
}

impl Run {
    /// The run's measured MFU and its linear layers' format; `None` for an inference run,
    /// a model or plan that does not parse, a GPU the catalog lacks, or formats the model
    /// does not price (FP4).
    pub fn measured_mfu(&self, catalog: &Catalog) -> Option<(MeasuredMfu, Dtype)> {
        if self.task.as_deref().is_some_and(|t| t != "train") {
            return None;
        }
        // A precision that does not parse or names no priced format (FP4) has no MFU here.
        let stated = match &self.precision {
            Some(p) => p.linear().ok()?.0,
            None => None,
        };
        let model = self.model.transformer(&self.id).ok()?;
        let plan = Plan::parse(&self.plan).ok()?;
        let gpu = catalog.gpu(&self.system.gpu).ok()?;
        let peak = gpu.peak_flops(Dtype::Bf16).or_else(|| gpu.peak_flops(Dtype::Fp16))?;
        let per_gpu = self.measured.tokens_per_s_per_gpu.filter(|t| t.is_finite() && *t > 0.0)?;
        let mfu = per_gpu * model.model_flops_per_token(plan.frozen as usize) / peak;
        let published_mfu = self.measured.model_tflops_per_gpu.map(|tflops| tflops * 1e12 / peak);
        let run = MeasuredMfu {
            run: self.id.clone(),
            source: self.source.clone(),
            gpu: gpu.id.clone(),
            gpus: self.system.gpus,
            mfu,
            published_mfu,
        };
        Some((run, linear_dtype_of(&plan, stated, gpu)))
    }
}

/// The shipped runs ([`tracecast_calibrate::measured::SHIPPED_RUNS`]), parsed once; a test
/// checks that every file parses.
pub fn shipped_runs() -> &'static [RunsFile] {
    static RUNS: std::sync::OnceLock<Vec<RunsFile>> = std::sync::OnceLock::new();
    RUNS.get_or_init(|| {
        tracecast_calibrate::measured::SHIPPED_RUNS
            .iter()
            .filter_map(|(name, text)| RunsFile::parse(text.as_bytes(), Path::new(name)).ok())
            .collect()
    })
}

/// What a training projection's MFU is held against: the best MFU measured in training among
/// the shipped runs on a GPU of its compute ([`tracecast_calibrate::catalog::Gpu::same_compute`]:
/// an H200 counts H100 SXM's runs) with their linear layers in its format, and how many such
/// runs there are.
#[derive(Debug, Clone, Serialize)]
pub struct MfuBound {
    /// The best run.
    pub best: MeasuredMfu,
    /// The runs of that compute and format.
    pub runs: usize,
    /// The linear layers' format, in words (`16-bit`, `FP8`).
    pub format: &'static str,
}

/// The [`MfuBound`] of `gpu` and `linear`, leaving out run `except` (a projection carried from a
/// run is not held against itself). A run counts at the lesser of its MFU by this tool's
/// count and by its source's published model TFLOP/s, where published: packed fine-tuning
/// sequences attend within their documents only, which a count over the full length
/// overstates (NeMo's Llama 2 13B SFT on 8 H100: 84.5 % by the full length, 79.5 % as published).
pub fn mfu_bound(catalog: &Catalog, gpu: &tracecast_calibrate::catalog::Gpu, linear: Dtype, except: Option<&str>) -> Option<MfuBound> {
    let format = linear.class_words();
    let mut runs = 0;
    let mut best: Option<MeasuredMfu> = None;
    for run in shipped_runs().iter().flat_map(|f| &f.runs).filter(|r| Some(r.id.as_str()) != except) {
        let Some((mut m, d)) = run.measured_mfu(catalog) else { continue };
        if d.class_words() != format || !catalog.gpu(&m.gpu).is_ok_and(|g| g.id == gpu.id || g.same_compute(gpu)) {
            continue;
        }
        m.mfu = m.published_mfu.map_or(m.mfu, |p| m.mfu.min(p));
        runs += 1;
        if best.as_ref().is_none_or(|b| m.mfu > b.mfu) {
            best = Some(m);
        }
    }
    Some(MfuBound { best: best?, runs, format })
}

/// The last object key that begins before `line`:`column` of a JSON text (serde's error
/// position, 1-based): the field a type error is in, which serde's message leaves out
/// ("invalid type: string \"500\", expected f64 at line 20 column 20").
fn key_before(text: &[u8], line: usize, column: usize) -> Option<String> {
    if line == 0 {
        return None;
    }
    let start = text.split(|&b| b == b'\n').take(line - 1).map(|l| l.len() + 1).sum::<usize>();
    let end = (start + column).min(text.len());
    let before = std::str::from_utf8(&text[..end]).ok()?;
    // A key is a string followed by a colon: the last `"…":` before the position.
    let colon = before.rfind("\":")?;
    let open = before[..colon].rfind('"')?;
    Some(before[open + 1..colon].to_string())
}

/// Keys a run, its `system` and its `measured` take (the model's are checked by its own type).
/// `notes`, `as_published` and `mfu` are the sources' words and figures, kept
/// for the reader, not read.
const RUN_KEYS: [&str; 13] =
    ["id", "source", "model", "system", "plan", "task", "batch", "prompt", "context", "measured", "framework", "precision", "notes"];
const SYSTEM_KEYS: [&str; 7] = ["gpu", "gpus", "gpus_per_node", "nic_gbps_per_gpu", "hbm_gb", "hbm_gbps", "power_w"];
const MEASURED_KEYS: [&str; 6] = ["tokens_per_s_per_gpu", "ttft_ms", "tpot_ms", "as_published", "mfu", "model_tflops_per_gpu"];

/// An error naming the first key of a run, its `system` or its `measured` that no field
/// reads: a misspelled `gpus_per_nodes` or `precison` had been ignored without a word
/// (the projection 3× off). `system` flattens its overrides, which serde cannot check itself.
fn unknown_keys(run: &serde_json::Value) -> Result<(), String> {
    let check = |obj: Option<&serde_json::Value>, known: &[&str], what: &str| -> Result<(), String> {
        for key in obj.and_then(|o| o.as_object()).into_iter().flat_map(|o| o.keys()) {
            if !known.contains(&key.as_str()) {
                return Err(format!("unknown key {key:?} in {what} (known: {})", known.join(", ")));
            }
        }
        Ok(())
    };
    check(Some(run), &RUN_KEYS, "the run")?;
    check(run.get("system"), &SYSTEM_KEYS, "its system")?;
    check(run.get("measured"), &MEASURED_KEYS, "its measured")
}

/// One measured run.
#[derive(Debug, Clone, Deserialize)]
pub struct Run {
    /// Unique name.
    pub id: String,
    /// Where the numbers come from.
    #[serde(default)]
    pub source: Option<String>,
    /// The model.
    pub model: RunModel,
    /// The cluster (missing: the run is refused in its row, the others compared).
    #[serde(default)]
    pub system: RunSystem,
    /// The plan, in `--parallel` syntax (missing: refused in its row).
    #[serde(default)]
    pub plan: String,
    /// `train` (default), `prefill` or `decode`.
    #[serde(default)]
    pub task: Option<String>,
    /// Inference: sequences per replica (default 1).
    #[serde(default)]
    pub batch: Option<u32>,
    /// Prefill: prompt tokens (default: the model's sequence length).
    #[serde(default)]
    pub prompt: Option<u32>,
    /// Decode: context tokens whose KV cache each step reads (default: the model's sequence length).
    #[serde(default)]
    pub context: Option<u32>,
    /// What was measured (missing: refused in its row).
    #[serde(default)]
    pub measured: Measured,
    /// The training framework and version as published (`torchtitan`, `NeMo 24.07`, …):
    /// reported beside the run's error; runs of one framework share a software stack.
    #[serde(default)]
    pub framework: Option<String>,
    /// Number formats as published: one string for the linear layers
    /// (`BF16`, `FP8`, `MXFP8`, `NVFP4`, …), or per op class
    /// (`{"linear": "FP8", "attention": "BF16"}`). See [`Precision`].
    #[serde(default)]
    pub precision: Option<Precision>,
    /// Why the run's entry did not read as a run (a string for a number, an unknown key): it is
    /// refused in its row ([`Run::of_value`]).
    #[serde(skip)]
    pub unreadable: Option<String>,
}

impl Run {
    /// The `index`-th entry of a runs file's `runs` as a run; one that does not read is a run
    /// of its id (else `runs[index]`) whose `unreadable` says why, by key.
    fn of_value(value: &serde_json::Value, index: usize) -> Run {
        // One that does not read is read again from its own text, so that the error's position
        // names the key it stopped at.
        let read = Run::deserialize(value).map_err(|first| {
            let text = serde_json::to_string_pretty(value).unwrap_or_default();
            let e = serde_json::from_str::<Run>(&text).err();
            let at = e
                .as_ref()
                .and_then(|e| key_before(text.as_bytes(), e.line(), e.column()))
                .map(|k| format!(" (at {k:?})"))
                .unwrap_or_default();
            format!("{}{at}", e.map_or_else(|| first.to_string(), |e| tracecast_ingest::json_message(&e)))
        });
        match read.and_then(|run| unknown_keys(value).map(|()| run)) {
            Ok(run) => run,
            Err(why) => Run::unreadable(value, index, format!("the entry does not read as a run: {why}")),
        }
    }

    /// The row of an entry that does not read as a run (`value`, the `index`-th), saying `why`.
    fn unreadable(value: &serde_json::Value, index: usize, why: String) -> Run {
        let id = value.get("id").and_then(|i| i.as_str()).map_or_else(|| format!("runs[{index}]"), str::to_string);
        Run {
            id,
            source: None,
            model: RunModel::Incomplete(serde_json::Value::Null),
            system: RunSystem::default(),
            plan: String::new(),
            task: None,
            batch: None,
            prompt: None,
            context: None,
            measured: Measured::default(),
            framework: None,
            precision: None,
            unreadable: Some(why),
        }
    }
}

/// `text` (one JSON value) read once into a value, refusing a key an object gives twice (a
/// value keeps the last, silently): the error names it (`key "id"`).
fn value_once(text: &str) -> Result<serde_json::Value, String> {
    use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
    use serde_json::Value;
    struct Once;
    impl<'de> DeserializeSeed<'de> for Once {
        type Value = Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(Once)
        }
    }
    impl<'de> Visitor<'de> for Once {
        type Value = Value;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut list = Vec::new();
            while let Some(v) = seq.next_element_seed(Once)? {
                list.push(v);
            }
            Ok(Value::Array(list))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut object = serde_json::Map::new();
            while let Some(key) = map.next_key::<String>()? {
                if object.contains_key(&key) {
                    return Err(A::Error::custom(format!("key {key:?} is given twice")));
                }
                let v = map.next_value_seed(Once)?;
                object.insert(key, v);
            }
            Ok(Value::Object(object))
        }
    }
    let mut d = serde_json::Deserializer::from_str(text);
    Once.deserialize(&mut d).map_err(|e| tracecast_ingest::json_message(&e))
}

/// A run's number formats: the linear layers' (one string), or per op class.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "a precision: a format name such as \"BF16\" or \"FP8\", or formats by op class ({\"linear\": \"FP8\", \"attention\": \"BF16\"})"
)]
pub enum Precision {
    /// The linear layers' format; attention and the rest in BF16.
    Linear(String),
    /// Per op class: `linear`, `attention` (others are ignored with a note).
    PerClass(std::collections::BTreeMap<String, String>),
}

/// What a published format name means to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Bf16,
    Fp8,
    /// FP4 (NVFP4, MXFP4): no FP4 peak in the catalog and no FP4 GEMM measured.
    Fp4,
}

impl Format {
    /// `BF16`, `FP16` → 16-bit; anything naming FP8 (`FP8-CS`, `MXFP8`, `Float8`) → FP8; FP4 names → FP4.
    /// The narrowest format `text` names ([`Format::named`]).
    fn parse(text: &str) -> Option<Format> {
        Self::named(text).0.first().copied()
    }

    /// The formats `text` names, narrowest first, and whether it names FP32 too (which the
    /// model prices no linear layer in).
    fn named(text: &str) -> (Vec<Format>, bool) {
        let t = text.to_ascii_uppercase();
        let formats = [
            (Format::Fp4, t.contains("FP4")),
            (Format::Fp8, t.contains("FP8") || t.contains("FLOAT8")),
            (Format::Bf16, t.contains("BF16") || t.contains("FP16")),
        ];
        (formats.into_iter().filter_map(|(f, named)| named.then_some(f)).collect(), t.contains("FP32"))
    }

    /// In words.
    fn words(self) -> &'static str {
        match self {
            Format::Fp4 => "FP4",
            Format::Fp8 => "FP8",
            Format::Bf16 => "16 bits",
        }
    }
}

impl Precision {
    /// Whether the linear layers' format it names is FP8.
    pub fn linear_names_fp8(&self) -> bool {
        matches!(self.linear(), Ok((Some(Format::Fp8), _)))
    }

    /// The linear layers' format and notes; an error where the model cannot price it.
    fn linear(&self) -> Result<(Option<Format>, Vec<String>), crate::Error> {
        let mut notes = Vec::new();
        let linear = match self {
            Precision::Linear(s) => s.as_str(),
            Precision::PerClass(m) => {
                for (class, f) in m {
                    match class.as_str() {
                        "linear" => {}
                        // Flash attention in FP8 is not modelled: attention is priced in 16-bit.
                        "attention" if Format::parse(f) != Some(Format::Bf16) => {
                            notes.push(format!("attention in {f}: priced in 16-bit (no FP8 attention in the model)"))
                        }
                        "attention" => {}
                        // A slip of a class the model prices is refused by name (`lineer` had priced
                        // the run in BF16 under "not modelled"); another class is noted.
                        other => match tracecast_calibrate::catalog::closest(other, ["linear", "attention"].into_iter()) {
                            Some(meant) => {
                                return Err(crate::Error::Run(format!(
                                    "precision key {other:?}: did you mean {meant}? (the op classes it prices: linear, attention; others are noted as not modelled)"
                                )));
                            }
                            None => notes.push(format!("precision of {other} ({f}) is not modelled")),
                        },
                    }
                }
                match m.get("linear") {
                    Some(s) => s.as_str(),
                    None => return Ok((None, notes)),
                }
            }
        };
        // A text naming several formats ("BF16 + Float8 linears", "fp32 parameters, bf16 autocast")
        // is read as its narrowest: said, with how to state it otherwise.
        let (formats, fp32) = Format::named(linear);
        if let Some(f) = formats.first().filter(|_| formats.len() + usize::from(fp32) > 1) {
            notes.push(format!(
                "precision {linear:?} names several formats: linear layers priced in {} (the narrowest named; `\"precision\": {{\"linear\": …}}` states one)",
                f.words()
            ));
        }
        match formats.first().copied() {
            Some(Format::Fp4) => Err(crate::Error::Unpriced(format!(
                "linear layers in {linear}: the catalog has no FP4 peak and the measured base no FP4 GEMM, so FP4 is not priced"
            ))),
            Some(f) => Ok((Some(f), notes)),
            None => Err(crate::Error::Run(format!("precision {linear:?}: BF16, FP16, FP8 (FP8-CS, MXFP8, Float8) or FP4"))),
        }
    }
}

/// A run's model: a preset with its sequence length, or a transformer's figures.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RunModel {
    /// A built-in preset (`tracecast project --model NAME`) at a sequence length.
    Preset(PresetModel),
    /// A transformer, dense or a mixture of experts.
    Spec(Box<ModelSpec>),
    /// Anything else (a model named but without its dimensions): refused
    /// with a message, never guessed.
    Incomplete(serde_json::Value),
}

/// A built-in model at a sequence length, `{"preset": …, "seq": …}` (and
/// optionally its `name`); any other key makes the model [`RunModel::Incomplete`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetModel {
    /// Name (default: the preset's).
    #[serde(default)]
    pub name: Option<String>,
    /// Preset name.
    pub preset: String,
    /// Training sequence length.
    pub seq: f64,
}

/// A transformer's figures in a runs file (or a `project --model` file). A key
/// it does not know makes the model [`RunModel::Incomplete`] — refused by
/// name, never read as a dense model.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Name (default: the run's id, or the file's name).
    #[serde(default)]
    pub name: Option<String>,
    /// Layers.
    pub layers: usize,
    /// Model width.
    pub hidden: f64,
    /// Attention heads.
    pub heads: f64,
    /// Key/value heads (GQA).
    pub kv_heads: f64,
    /// Width of one attention head (default: hidden / heads; Qwen3: 128).
    #[serde(default)]
    pub head_dim: Option<f64>,
    /// FFN width; of one expert with `experts`.
    pub ffn: f64,
    /// Vocabulary.
    pub vocab: f64,
    /// Sequence length.
    pub seq: f64,
    /// `gelu` or `swiglu`.
    pub activation: String,
    /// Input embedding and output head share their weights (not stated: an output head of its own,
    /// said in the run's notes).
    #[serde(default)]
    pub tied_embeddings: Option<bool>,
    /// Experts of every layer's mixture (default 1: dense).
    #[serde(default)]
    pub experts: Option<f64>,
    /// Experts each token is routed to (needed with `experts`).
    #[serde(default)]
    pub top_k: Option<f64>,
    /// Sliding-window attention: the window in tokens (with `windowed_layers`).
    #[serde(default)]
    pub sliding_window: Option<f64>,
    /// Layers whose attention is windowed (GPT-OSS: half of them).
    #[serde(default)]
    pub windowed_layers: Option<usize>,
    /// Experts every token runs through besides its routed ones, `ffn` wide each (DeepSeek: 1).
    #[serde(default)]
    pub shared_experts: Option<f64>,
    /// Multi-head latent attention (DeepSeek): the query's bottleneck rank (with the four below).
    #[serde(default)]
    pub q_lora_rank: Option<f64>,
    /// Latent attention: the key/value latent's rank.
    #[serde(default)]
    pub kv_lora_rank: Option<f64>,
    /// Latent attention: per-head query/key width without rotary embedding.
    #[serde(default)]
    pub qk_nope_head_dim: Option<f64>,
    /// Latent attention: per-head rotary query/key width.
    #[serde(default)]
    pub qk_rope_head_dim: Option<f64>,
    /// Latent attention: per-head value width.
    #[serde(default)]
    pub v_head_dim: Option<f64>,
    /// Of a mixture of experts, the first layers whose MLP is one dense FFN
    /// (`first_k_dense_replace` in DeepSeek's config; with `dense_ffn`).
    #[serde(default)]
    pub dense_layers: Option<usize>,
    /// Their FFN width (`intermediate_size` in DeepSeek's config).
    #[serde(default)]
    pub dense_ffn: Option<f64>,
}

/// A run's cluster: a catalog GPU, how many, and what differs from the catalog.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RunSystem {
    /// Catalog GPU id.
    pub gpu: String,
    /// GPUs in the run (missing: the run is refused in its row).
    #[serde(default)]
    pub gpus: u32,
    /// `gpus_per_node`, `nic_gbps_per_gpu`, `hbm_gb`, `hbm_gbps`.
    #[serde(flatten)]
    pub overrides: SystemOverrides,
    /// A power limit below the GPU's, W. Read and reported; it does not change
    /// the projection: no measurement in the evidence ties a power limit to
    /// kernel speed, and its effect would otherwise be a guess.
    #[serde(default)]
    pub power_w: Option<f64>,
}

/// What a run measured: tokens per second per GPU, or for inference runs
/// the latency (`ttft_ms` for prefill, `tpot_ms` for decode), which is
/// turned into tokens per second per GPU (batch × tokens per request over the
/// latency, over the GPUs of one replica) so that every run compares alike.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Measured {
    /// Tokens of the global batch per second, per GPU.
    #[serde(default)]
    pub tokens_per_s_per_gpu: Option<f64>,
    /// Prefill: time to first token, ms.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// Decode: time per output token, ms.
    #[serde(default)]
    pub tpot_ms: Option<f64>,
    /// The model TFLOP/s per GPU its source published (by the source's own count), where it did.
    #[serde(default)]
    pub model_tflops_per_gpu: Option<f64>,
}

/// One run, projected.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// The run's id.
    pub id: String,
    /// Its GPU, as the run names it.
    pub gpu: String,
    /// Measured throughput.
    pub measured_tokens_per_s_per_gpu: f64,
    /// Projected throughput (`None` when the plan cannot be projected).
    pub predicted_tokens_per_s_per_gpu: Option<f64>,
    /// predicted / measured − 1.
    pub error: Option<f64>,
    /// Whether the projected memory per GPU fits the HBM.
    pub fits_memory: Option<bool>,
    /// Projected iteration, ms.
    pub iteration_ms: Option<f64>,
    /// Training: the measured throughput as MFU ([`Run::measured_mfu`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_mfu: Option<f64>,
    /// Training: the projection's MFU (the same count and peak).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projected_mfu: Option<f64>,
    /// Where the projected iteration goes: compute per kind, communication,
    /// exposed communication and pipeline bubble (`project --json`'s keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub times: Option<super::IterationTimes>,
    /// Projected memory per GPU, by part, GB; and the HBM it is held against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<super::Memory>,
    /// HBM per GPU the memory is checked against, GB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hbm_gb: Option<f64>,
    /// Why the run was not projected, or remarks.
    pub notes: Vec<String>,
    /// Whether the run was not projected because its own description is wrong
    /// or incomplete (a model of 0 layers, an unknown GPU, a plan that does not
    /// fit its GPUs, no positive measurement) — not because of work the tool
    /// cannot price (FP4) or a fit with nothing to fit to. Written only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
    /// Whether the run holds work the tool cannot price (linear layers in FP4): not
    /// the file's fault, its note says what. Written only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unpriced: bool,
}

impl RunResult {
    /// A run that was not projected, and why.
    fn not_projected(run: &Run, measured: f64, why: String) -> RunResult {
        RunResult {
            refused: false,
            unpriced: false,
            id: run.id.clone(),
            gpu: run.system.gpu.clone(),
            measured_tokens_per_s_per_gpu: measured,
            predicted_tokens_per_s_per_gpu: None,
            error: None,
            fits_memory: None,
            iteration_ms: None,
            measured_mfu: None,
            projected_mfu: None,
            times: None,
            memory: None,
            hbm_gb: None,
            notes: vec![why],
        }
    }
}

/// All runs, with the summary.
#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    /// Per run.
    pub runs: Vec<RunResult>,
    /// Median of |error| over the projected runs (`None`: no run projected).
    pub median_abs_error: Option<f64>,
    /// Largest |error| (`None`: no run projected).
    pub max_abs_error: Option<f64>,
    /// Runs the model projects faster than measured.
    pub optimistic: usize,
    /// Runs it projects slower.
    pub pessimistic: usize,
    /// The same per GPU (as the runs name it), by GPU id; empty when the runs are of one GPU.
    pub by_gpu: Vec<GpuSummary>,
}

/// The projected runs of one GPU, summarized as [`Validation`] summarizes them all.
#[derive(Debug, Clone, Serialize)]
pub struct GpuSummary {
    /// The GPU, as the runs name it.
    pub gpu: String,
    /// Projected runs.
    pub runs: usize,
    /// Median of |error|.
    pub median_abs_error: f64,
    /// Median of the signed error: which way the model leans on this GPU.
    pub median_error: f64,
    /// Runs projected faster than measured.
    pub optimistic: usize,
    /// Runs projected slower.
    pub pessimistic: usize,
}

/// A model's sizes (a width, a count of heads, experts or tokens) are whole numbers of at
/// least one; the first that is not is named: "seq 0: must be a positive number", "heads 32.5:
/// must be a whole number" (a fractional width had been priced as if a GPU could run it).
fn at_least_one(sizes: &[(&str, f64)]) -> Result<(), crate::Error> {
    let shown = tracecast_calibrate::catalog::shown;
    if let Some((key, v)) = sizes.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
        return Err(crate::Error::Model(format!("{key} {}: must be a positive number", shown(*v))));
    }
    // A fraction of one (a head width of hidden 2.5 over 24 heads) had been called "not positive".
    if let Some((key, v)) = sizes.iter().find(|(_, v)| *v < 1.0) {
        return Err(crate::Error::Model(format!("{key} {}: must be at least 1", shown(*v))));
    }
    // A size beyond a 32-bit count (hidden 1e308) had squared to infinity and projected NaN
    // with exit 0; no model has a width, count or sequence of four billion.
    if let Some((key, v)) = sizes.iter().find(|(_, v)| *v > f64::from(u32::MAX)) {
        // A whole number as written; a huge one (1e308) in exponent form.
        let given = if *v < 1e16 && v.fract() == 0.0 { format!("{v}") } else { shown(*v) };
        return Err(crate::Error::Model(format!("{key} {given}: must be at most {}", u32::MAX)));
    }
    match sizes.iter().find(|(_, v)| v.fract() != 0.0) {
        Some((key, v)) => Err(crate::Error::Model(format!("{key} {v}: must be a whole number"))),
        None => Ok(()),
    }
}
impl RunModel {
    /// The transformer (BF16); `id` names it unless the model has a name.
    pub fn transformer(&self, id: &str) -> Result<Transformer, crate::Error> {
        match self {
            RunModel::Preset(PresetModel { name, preset, seq }) => {
                let mut m = Transformer::preset(preset).ok_or_else(|| {
                    crate::Error::Model(format!("unknown preset {preset:?} (presets: {})", Transformer::preset_names().join(", ")))
                })?;
                // As a model's own `seq`: a sequence of no tokens would project a step without attention.
                at_least_one(&[("seq", *seq)])?;
                m.seq = *seq;
                if let Some(n) = name {
                    m.name.clone_from(n);
                }
                Ok(m)
            }
            RunModel::Spec(m) => {
                let swiglu = match m.activation.as_str() {
                    "swiglu" => true,
                    "gelu" => false,
                    other => return Err(crate::Error::Model(format!("activation {other:?}: gelu or swiglu"))),
                };
                let mla = match (m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim) {
                    (None, None, None, None, None) => None,
                    (Some(q_lora), Some(kv_lora), Some(qk_nope), Some(qk_rope), Some(v_head)) => {
                        let all =
                            [("q_lora_rank", q_lora), ("kv_lora_rank", kv_lora), ("qk_nope_head_dim", qk_nope), ("v_head_dim", v_head)];
                        at_least_one(&all)?;
                        if !(qk_rope.is_finite() && qk_rope >= 0.0 && qk_rope.fract() == 0.0) {
                            return Err(crate::Error::Model(format!("qk_rope_head_dim {qk_rope}: must be a whole number, 0 or more")));
                        }
                        Some(super::llm::Mla { q_lora, kv_lora, qk_nope, qk_rope, v_head })
                    }
                    _ => {
                        return Err(crate::Error::Model(
                            "latent attention takes all of q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim"
                                .into(),
                        ));
                    }
                };
                if mla.is_some() && m.kv_heads != m.heads {
                    return Err(crate::Error::Model(format!(
                        "kv_heads {} with latent attention: every head has its own keys and values from the latent (kv_heads = heads = {})",
                        m.kv_heads, m.heads
                    )));
                }
                if mla.is_some() && m.head_dim.is_some() {
                    return Err(crate::Error::Model(
                        "head_dim with latent attention: its widths are qk_nope_head_dim, qk_rope_head_dim and v_head_dim".into(),
                    ));
                }
                // Latent attention: the attention core's FLOPs see the mean of the query/key and value widths.
                let head_dim = match mla {
                    Some(a) => a.head_dim(),
                    None => m.head_dim.unwrap_or(m.hidden / m.heads),
                };
                let shared_experts = m.shared_experts.unwrap_or(0.0);
                if !(shared_experts.is_finite() && shared_experts >= 0.0 && shared_experts.fract() == 0.0)
                    || (shared_experts > 0.0 && m.experts.is_none())
                {
                    return Err(crate::Error::Model(format!("shared_experts {shared_experts}: a whole number, 0 or more, with experts")));
                }
                let (experts, top_k) = match (m.experts, m.top_k) {
                    (None, None) => (1.0, 1.0),
                    (Some(e), Some(k)) => (e, k),
                    (Some(_), None) => return Err(crate::Error::Model("experts without top_k (experts each token is routed to)".into())),
                    (None, Some(_)) => return Err(crate::Error::Model("top_k without experts".into())),
                };
                // A head width not given is the hidden size over the heads: it must come out whole.
                // Latent attention's is the mean of its widths, checked above (it may be a half).
                let head_width = match (&mla, m.head_dim) {
                    (Some(_), _) => None,
                    (None, Some(_)) => Some(("head_dim", head_dim)),
                    (None, None) => Some(("head_dim (hidden / heads)", head_dim)),
                };
                let positive: Vec<(&str, f64)> = [("hidden", m.hidden), ("heads", m.heads), ("kv_heads", m.kv_heads)]
                    .into_iter()
                    .chain(head_width)
                    .chain([("ffn", m.ffn), ("vocab", m.vocab), ("seq", m.seq), ("experts", experts), ("top_k", top_k)])
                    .collect();
                at_least_one(&positive)?;
                if m.layers == 0 {
                    return Err(crate::Error::Model("layers 0: must be positive".into()));
                }
                if m.heads % m.kv_heads != 0.0 {
                    return Err(crate::Error::Model(format!("heads {} do not divide into kv_heads {} groups", m.heads, m.kv_heads)));
                }
                if top_k > experts {
                    return Err(crate::Error::Model(format!("top_k {top_k} of {experts} experts: more than there are")));
                }
                let (window, windowed_layers) = match (m.sliding_window, m.windowed_layers) {
                    (None, None) => (0.0, 0),
                    (Some(w), Some(n)) if w.is_finite() && w >= 1.0 && w.fract() == 0.0 && n <= m.layers => (w, n),
                    (Some(w), Some(n)) => {
                        return Err(crate::Error::Model(format!(
                            "sliding_window {w} on {n} layers: a whole positive window on at most the {} layers",
                            m.layers
                        )));
                    }
                    _ => return Err(crate::Error::Model("sliding_window and windowed_layers go together".into())),
                };
                let (dense_layers, dense_ffn) = match (m.dense_layers, m.dense_ffn) {
                    (None, None) => (0, 0.0),
                    (Some(n), Some(f)) if experts > 1.0 && n <= m.layers && f.is_finite() && f >= 1.0 && f.fract() == 0.0 => (n, f),
                    (Some(n), Some(f)) => {
                        return Err(crate::Error::Model(format!(
                            "dense_layers {n} of dense_ffn {f}: a mixture of experts' first layers, at most the {} layers, with a whole positive width",
                            m.layers
                        )));
                    }
                    _ => return Err(crate::Error::Model("dense_layers and dense_ffn go together".into())),
                };
                Ok(Transformer {
                    name: m.name.clone().unwrap_or_else(|| id.to_string()),
                    layers: m.layers,
                    hidden: m.hidden,
                    heads: m.heads,
                    kv_heads: m.kv_heads,
                    head_dim,
                    ffn: m.ffn,
                    vocab: m.vocab,
                    seq: m.seq,
                    swiglu,
                    experts,
                    top_k,
                    bytes: 2.0,
                    causal: true,
                    tied_embeddings: m.tied_embeddings.unwrap_or(false),
                    window,
                    windowed_layers,
                    shared_experts,
                    mla,
                    dense_layers,
                    dense_ffn,
                })
            }
            RunModel::Incomplete(v) => {
                // What serde says of the figures (an unknown key, a wrong type), when it is that.
                let why = if v.get("preset").is_some() { serde_error_at::<PresetModel>(v) } else { serde_error_at::<ModelSpec>(v) };
                // Every required key it lacks at once (serde names the first: a model of a name and a
                // seq had been told `layers`, then `hidden`, … one run of the command each).
                const FULL: [&str; 8] = ["layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "activation"];
                let required: &[&str] = if v.get("preset").is_some() { &["preset", "seq"] } else { &FULL };
                let missing: Vec<String> = required.iter().filter(|k| v.get(**k).is_none()).map(|k| format!("`{k}`")).collect();
                let why = match why {
                    Some(e) if e.starts_with("missing field") && missing.len() > 1 => {
                        Some(format!("missing fields {}", missing.join(", ")))
                    }
                    other => other,
                };
                // The cause first: a terminal line is cut at 400 characters, and the list of keys is long.
                Err(crate::Error::Model(format!(
                    "model{}: {}neither a preset with its seq nor full dimensions ({}; optionally name, head_dim, tied_embeddings, experts with top_k and shared_experts, sliding_window with windowed_layers, latent attention's q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, dense_layers with dense_ffn; no other keys)",
                    // Its name, never its text: a file of another kind (a trace) holds metadata not to echo.
                    v.get("name").and_then(|n| n.as_str()).map_or_else(String::new, |n| format!(" {n:?}")),
                    why.map_or_else(String::new, |e| format!("{e}; ")),
                    FULL.join(", ")
                )))
            }
        }
    }
}

/// What serde says of `v` as a `T`, naming the key at fault where it is a value of the wrong type
/// (`(at "layers") invalid type: string "4", expected usize`: serde's words alone had named none):
/// the key without which the error goes, or becomes that key's absence.
fn serde_error_at<T: serde::de::DeserializeOwned>(v: &serde_json::Value) -> Option<String> {
    let e = serde_json::from_value::<T>(v.clone()).err()?.to_string();
    let wrong_value = e.starts_with("invalid type") || e.starts_with("invalid value");
    let key = v.as_object().filter(|_| wrong_value).and_then(|o| {
        o.keys().find(|k| {
            let mut without = o.clone();
            without.remove(*k);
            serde_json::from_value::<T>(serde_json::Value::Object(without))
                .err()
                .is_none_or(|e| e.to_string() == format!("missing field `{k}`"))
        })
    });
    Some(key.map_or(e.clone(), |k| format!("(at {k:?}) {e}")))
}

impl RunSystem {
    /// The cluster, priced by `device` (the GPU's profile) where given.
    pub fn cluster(&self, catalog: &Catalog, device: Option<&DeviceModel>) -> Result<Cluster, crate::Error> {
        self.overrides.apply(Cluster::for_model(catalog, &self.gpu, self.gpus, 2.0, device)?)
    }
}

/// The device model that prices runs on GPU `gpu_id`: its profile among
/// `devices`, else the GPU's shipped one (or the most similar traced GPU's).
pub(crate) fn device_for(gpu_id: &str, catalog: &Catalog, devices: &[DeviceModel]) -> Option<DeviceModel> {
    devices
        .iter()
        .find(|d| d.gpu.as_ref().is_some_and(|g| g.id == gpu_id))
        .cloned()
        .or_else(|| catalog.gpu(gpu_id).ok().and_then(|g| tracecast_calibrate::shipped::for_gpu(g, catalog)))
}

pub(crate) fn gpu_id(run: &Run, catalog: &Catalog) -> String {
    catalog.gpu(&run.system.gpu).map(|g| g.id.clone()).unwrap_or_else(|_| run.system.gpu.clone())
}

impl Run {
    /// The run's task and the tokens one sequence of it produces per step
    /// (training: the sequence; prefill: the prompt; decode: one).
    fn task(&self, model: &Transformer) -> Result<(Task, f64), crate::Error> {
        let batch = self.batch.unwrap_or(1);
        let seq = model.seq as u32;
        let zero = [("batch", self.batch), ("prompt", self.prompt), ("context", self.context)]
            .into_iter()
            .find(|(_, v)| *v == Some(0))
            .map(|(k, _)| k);
        match self.task.as_deref().unwrap_or("train") {
            "train" => {
                // What only inference runs state would be read as nothing: refused, as `project
                // --batch` is for a training step.
                let inference: Vec<&str> = [
                    ("batch", self.batch.is_some()),
                    ("prompt", self.prompt.is_some()),
                    ("context", self.context.is_some()),
                    ("measured ttft_ms", self.measured.ttft_ms.is_some()),
                    ("measured tpot_ms", self.measured.tpot_ms.is_some()),
                ]
                .into_iter()
                .filter_map(|(key, set)| set.then_some(key))
                .collect();
                if !inference.is_empty() {
                    return Err(crate::Error::Run(format!(
                        "{}: inference runs' keys (task prefill or decode); a training run's batch is its plan's gbs and mb",
                        inference.join(", ")
                    )));
                }
                Ok((Task::Train, model.seq))
            }
            "prefill" if self.measured.tpot_ms.is_some() || self.context.is_some() => {
                Err(crate::Error::Run("tpot_ms and context are a decode run's keys, not a prefill run's (ttft_ms, prompt)".into()))
            }
            "decode" if self.measured.ttft_ms.is_some() || self.prompt.is_some() => {
                Err(crate::Error::Run("ttft_ms and prompt are a prefill run's keys, not a decode run's (tpot_ms, context)".into()))
            }
            // A zero had been run as one (`project --batch 0` is refused).
            "prefill" | "decode" if zero.is_some() => Err(crate::Error::Run(format!("{} 0: must be at least 1", zero.unwrap_or_default()))),
            "prefill" => {
                let prompt = self.prompt.unwrap_or(seq);
                Ok((Task::Prefill { batch, prompt }, f64::from(prompt)))
            }
            "decode" => Ok((Task::Decode { batch, context: self.context.unwrap_or(seq) }, 1.0)),
            other => Err(crate::Error::Run(format!("task {other:?}: train, prefill or decode"))),
        }
    }

    /// The measured tokens per second per GPU (see [`Measured`]).
    fn measured_per_gpu(&self, model: &Transformer, plan: &Plan) -> Result<f64, crate::Error> {
        let (_, tokens) = self.task(model)?;
        let latency = match self.task.as_deref().unwrap_or("train") {
            "prefill" => Some(("ttft_ms", self.measured.ttft_ms)),
            "decode" => Some(("tpot_ms", self.measured.tpot_ms)),
            _ => None,
        };
        // Two measurements of one run would be compared as one, silently: which is meant is the file's to say.
        if let (Some(t), Some((key, Some(l)))) = (self.measured.tokens_per_s_per_gpu, latency) {
            return Err(crate::Error::Run(format!("measured: tokens_per_s_per_gpu {t} and {key} {l}: give one of them")));
        }
        if let Some(t) = self.measured.tokens_per_s_per_gpu {
            // A throughput nothing can be compared with is the file's error, not a projection's.
            return if t.is_finite() && t > 0.0 {
                Ok(t)
            } else {
                Err(crate::Error::Run(format!("measured tokens_per_s_per_gpu {t}: must be a positive number")))
            };
        }
        let latency_ms = match latency {
            Some((_, Some(l))) if l.is_finite() && l > 0.0 => l,
            Some((key, Some(l))) => return Err(crate::Error::Run(format!("measured {key} {l}: must be a positive number"))),
            _ => return Err(crate::Error::Run("measured: tokens_per_s_per_gpu (or ttft_ms for prefill, tpot_ms for decode)".into())),
        };
        let replica_gpus = f64::from(self.system.gpus.max(1)) / f64::from(plan.dp.max(1));
        Ok(f64::from(self.batch.unwrap_or(1)) * tokens / (latency_ms / 1e3) / replica_gpus)
    }
}

/// A framework whose performance recipes set parallelism defaults that
/// published tables leave unsaid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framework {
    /// NeMo 1.x (NeMo-Framework-Launcher configs, e.g. `conf/training/llama/llama2_70b.yaml`):
    /// `sequence_parallel: true`, the `distributed_fused_adam` optimizer (ZeRO-1) with
    /// `overlap_grad_sync` and `overlap_param_sync`; `ub_tp_comm_overlap: false`.
    NeMo,
    /// Megatron-Bridge (and NeMo 2 on Megatron-Core): its performance configs
    /// (`scripts/performance/configs/llama/llama3_llm_pretrain.py`) set
    /// `CommOverlapConfig(tp_comm_overlap=...)` with userbuffers per GPU, off for NVFP4; the
    /// Communication Overlap guide (docs.nvidia.com/nemo/megatron-bridge, *Communication
    /// Overlap*) gates TP overlap on sequence parallelism and enables the distributed
    /// optimizer (`use_distributed_optimizer`) for the data-parallel overlap.
    MegatronBridge,
    /// torchtitan: its `selective` activation checkpointing in the llama3 train configs is
    /// `selective_ac_option = "op"` (`models/llama3/train_configs/llama3_8b.toml` @820504e), the
    /// per-op policy of `models/llama3/parallelize_llama.py`: save matmul, attention and
    /// reduce-scatter outputs except every second matmul; a runs file's `recompute=selective`
    /// means that (`recompute=op`), not tracecast's attention-core recomputation. Its attention is
    /// PyTorch SDPA at its default backend: flash (FlashAttention-2) on Ampere and Hopper while
    /// cuDNN attention was opt-in (pytorch/pytorch#138522, PyTorch 2.5.1) until PyTorch 2.11's
    /// cuDNN > 9.15 made it preferred on sm90/sm100 (`check_prefer_cudnn_attention`; a trace of
    /// PyTorch 2.11 on an H200 in fixtures/h200 runs cuDNN's kernels) — after every published run.
    Torchtitan,
    /// llm-foundry's benchmark tables (`scripts/train/benchmarking/README.md`): every commit
    /// that wrote them (2023-05 … 2024-01) ran `submit_benchmarks.py`, whose `--attn_impl`
    /// defaulted to `triton` (`flash` from 2024-03-26, 7f0fdae): MPT's Triton FlashAttention
    /// (`llmfoundry/models/layers/flash_attn_triton.py` on `triton-pre-mlir`, a copy of Tri Dao's
    /// `flash_attn_triton.py`). No chart measured it: it is priced as the nearest measured Triton
    /// kernel, the "FlashAttention Triton" of FlashAttention-2's A100 chart (`fa-triton`: OpenAI
    /// Triton's `triton.ops.flash_attention`, within 4 % of FlashAttention 1 there).
    LlmFoundryBenchmarks,
}

impl Framework {
    /// Each framework whose defaults the model knows: its name, and what names it in a run's
    /// `framework` or `source` (every text of one of its sets, in lower case). One table for
    /// [`Framework::of`] and the words that list them.
    const NAMED: [(Framework, &'static str, &'static [&'static [&'static str]]); 4] = [
        (Framework::Torchtitan, "torchtitan", &[&["torchtitan"]]),
        (Framework::MegatronBridge, "Megatron-Bridge", &[&["megatron-bridge"], &["megatron bridge"]]),
        (Framework::NeMo, "NeMo", &[&["nemo"]]),
        (Framework::LlmFoundryBenchmarks, "llm-foundry (benchmark tables)", &[&["llm-foundry", "benchmarking"]]),
    ];

    /// The frameworks [`Framework::of`] knows, in words.
    fn known() -> String {
        Framework::NAMED.iter().map(|f| f.1).collect::<Vec<_>>().join(", ")
    }

    /// The run's framework: its `framework` field, else the repository its
    /// `source` names; and whether it came from the source.
    fn of(run: &Run) -> Option<(Framework, &'static str, bool)> {
        let find = |text: &str| {
            let t = text.to_ascii_lowercase();
            Framework::NAMED
                .iter()
                .find(|(_, _, sets)| sets.iter().any(|set| set.iter().all(|s| t.contains(s))))
                .map(|&(f, name, _)| (f, name))
        };
        match &run.framework {
            Some(f) => find(f).map(|(k, n)| (k, n, false)),
            None => run.source.as_deref().and_then(find).map(|(k, n)| (k, n, true)),
        }
    }

    /// Applies the framework's defaults to what `plan` does not state (`stated`: the keys of the run's text); notes what changed.
    fn apply_defaults(self, plan: &mut Plan, stated: &StatedKeys, model: &Transformer) -> Vec<String> {
        let bytes = model.bytes;
        let mut applied: Vec<String> = Vec::new();
        match self {
            Framework::Torchtitan => {
                if plan.selective && !plan.op_sac && !plan.recompute {
                    plan.op_sac = true;
                    applied.push("recompute=op for recompute=selective (its per-op selective activation checkpointing)".into());
                }
                // Its FSDP2 mixed precision reduces in FP32 (`mixed_precision_reduce = "float32"`).
                if !plan.grad_reduce_fp32 && !stated.contains("grad_reduce") {
                    plan.grad_reduce_fp32 = true;
                    applied.push("grad_reduce=fp32 (its FSDP2 default, mixed_precision_reduce = \"float32\")".into());
                }
                if !plan.materialized_attention && plan.attention_kernel.is_none() && !stated.contains("attention") {
                    plan.attention_kernel = Some("fa2".into());
                    applied.push(
                        "attention=fa2 (PyTorch SDPA's default flash backend: cuDNN attention was opt-in from PyTorch 2.5.1 until 2.11)"
                            .into(),
                    );
                }
            }
            Framework::LlmFoundryBenchmarks => {
                if !plan.materialized_attention && plan.attention_kernel.is_none() && !stated.contains("attention") {
                    plan.attention_kernel = Some("fa-triton".into());
                    applied.push("attention=fa-triton (`attn_impl: triton`, the default of the script that measured them)".into());
                }
            }
            Framework::NeMo | Framework::MegatronBridge => {
                if plan.tp > 1 && !plan.sp && !stated.contains("sp") {
                    plan.sp = true;
                    applied.push("sp (sequence parallelism with TP)".into());
                }
                if plan.dp * plan.cp > 1
                    && plan.zero == 0
                    && !stated.contains("zero")
                    && !stated.contains("fsdp")
                    && !stated.contains("ddp")
                {
                    plan.zero = 1;
                    applied.push("zero=1 (the distributed optimizer)".into());
                }
                // Both set `overlap_p2p_comm` with interleaved 1F1B (NeMo launcher: `overlap_p2p_comm: true`,
                // `batch_p2p_comm: false`; Megatron-Bridge's comm_overlap: on when the virtual pipeline size > 1).
                if plan.interleaved_chunks() > 1 && !plan.p2p_overlap && !stated.contains("p2p_overlap") {
                    plan.p2p_overlap = true;
                    applied.push("p2p_overlap (pipeline sends and receives beside compute, interleaved 1F1B)".into());
                }
                // Its MoE performance recipes keep whole experts on each GPU
                // (`expert_tensor_parallel_size=1` in the Qwen3 and DeepSeek-V3 workload base
                // configs, `scripts/performance/configs/{qwen,deepseek}/*_workload_base_configs.py`).
                if self == Framework::MegatronBridge && model.experts > 1.0 && plan.ep > 1 && plan.tp > 1 && plan.sp && plan.etp.is_none() {
                    plan.etp = Some(1);
                    applied.push("etp=1 (its MoE recipes' expert_tensor_parallel_size=1: whole experts on each GPU)".into());
                }
                if self == Framework::MegatronBridge && plan.tp > 1 && plan.sp && !stated.contains("tp_overlap") {
                    plan.tp_overlap = true;
                    applied.push("tp_overlap (TP communication overlap, userbuffers)".into());
                }
                // Megatron-Core's gradient buckets (`DistributedDataParallelConfig.bucket_size`):
                // max(40 M, 1 M × dp) parameters, of the gradients the model reduces.
                if plan.zero <= 1 && plan.replicas() > 1 && plan.bucket_bytes.is_none() && !stated.contains("bucket") {
                    let params = 40_000_000u64.max(1_000_000 * u64::from(plan.replicas()));
                    let bucket = (params as f64 * plan.grad_bytes(bytes)).round() as u64;
                    plan.bucket_bytes = Some(bucket);
                    applied.push(format!(
                        "bucket={:.1} (Megatron-Core's gradient buckets: max(40 M, 1 M × dp) = {} M parameters)",
                        bucket as f64 / super::llm::MIB,
                        params / 1_000_000
                    ));
                }
            }
        }
        applied
    }
}

/// A run projected: its projection and timeline, and the projected tokens per
/// second per GPU (what it measured comes back through [`projected`]'s `measured`).
pub(crate) struct Projected {
    pub(crate) projection: super::Projection,
    pub(crate) timeline: super::Timeline,
    pub(crate) per_gpu: f64,
}

/// Projects `run` with `device`; `measured` is set to the run's measured
/// tokens per second per GPU once they are read (an error before leaves it as
/// it was).
pub(crate) fn projected(
    run: &Run,
    catalog: &Catalog,
    device: Option<&DeviceModel>,
    measurements: Option<&std::sync::Arc<tracecast_calibrate::measured::Measurements>>,
    measured: &mut f64,
) -> Result<Projected, crate::Error> {
    let model = run.model.transformer(&run.id)?;
    if run.system.gpu.is_empty() || run.system.gpus == 0 {
        let what = if run.system.gpu.is_empty() { "no system" } else { "system gpus missing or 0" };
        return Err(crate::Error::Run(format!("{what}: a run states its GPU and how many (`\"system\": {{\"gpu\": ID, \"gpus\": N}}`)")));
    }
    if run.plan.trim().is_empty() {
        return Err(crate::Error::Run(
            "no plan: a run states its parallel layout in `--parallel` syntax (`\"plan\": \"fsdp=8,mb=2\"`)".into(),
        ));
    }
    let mut cluster = run.system.cluster(catalog, device)?;
    if let Some(m) = measurements {
        cluster.use_measurements(m.clone(), run.system.overrides.gpus_per_node.is_some());
    }
    let (mut plan, stated) = Plan::parse_stated(&run.plan)?;
    // An inference run's plan with a training setting (gbs, zero, recompute) had been projected
    // without it, as `project --task decode` refuses it.
    stated.refuse_training_keys(run.task(&model)?.0)?;
    *measured = run.measured_per_gpu(&model, &plan)?;
    let mut notes = Vec::new();
    // A default that moves the parameter count (a vocabulary × hidden matrix), said.
    if let RunModel::Spec(m) = &run.model
        && m.tied_embeddings.is_none()
    {
        notes.push(format!(
            "tied_embeddings not stated: the output head has weights of its own ({:.2} B parameters beside the input embedding's; `\"tied_embeddings\": true` shares them)",
            m.vocab * m.hidden / 1e9
        ));
    }
    if let Some(precision) = &run.precision {
        let (linear, more) = precision.linear()?;
        notes.extend(more);
        // The plan's `fp8` key and the published precision must agree; the precision wins.
        match linear {
            Some(Format::Fp8) if !plan.fp8 => {
                plan.fp8 = true;
                let plan_said = if stated.contains("fp8") { "the plan said fp8=off" } else { "the plan lacked it" };
                notes.push(format!("precision says FP8 linears: projected with fp8 ({plan_said})"));
            }
            Some(Format::Bf16) if plan.fp8 => {
                plan.fp8 = false;
                notes.push("precision says 16-bit linears: projected without fp8 (the plan had it)".into());
            }
            _ => {}
        }
    }
    // A training throughput whose model FLOPs no format of the GPU could compute is a typo in the
    // file, not a measurement: refused by name (1e300 tokens/s had been projected, and fitted, as
    // one). Above FP4_OVER_FASTEST × the fastest floating-point peak the catalog holds: FP4, which
    // it lacks, is at most ~3× FP8 (B300 / GB300 datasheets: 15 dense NVFP4 PFLOP/s, 5 FP8).
    // Inference runs' FLOPs depend on their prompt or context, not the model's seq: not checked.
    // Where the run states its linear layers' format, that format's peak bounds it (no margin:
    // model FLOPs above the peak they ran at cannot be).
    if run.task.as_deref().unwrap_or("train") == "train"
        && let Some(prices) = &cluster.prices
    {
        let flops = *measured * model.model_flops_per_token(plan.frozen as usize);
        let stated = match run.precision.as_ref().and_then(|p| p.linear().ok()).and_then(|(f, _)| f) {
            Some(Format::Bf16) => prices.gpu.peak_flops(Dtype::Bf16).or_else(|| prices.gpu.peak_flops(Dtype::Fp16)).map(|p| (p, "16-bit")),
            Some(Format::Fp8) => prices.gpu.peak_flops(Dtype::Fp8).map(|p| (p, "FP8")),
            _ => None,
        };
        // Floating-point peaks only: INT8's are operations, not FLOPs.
        let floats = Dtype::ALL.into_iter().filter(|d| *d != Dtype::Int8);
        let fastest = floats.filter_map(|d| prices.gpu.peak_flops(d)).fold(0.0, f64::max);
        let (bound, words) = match stated {
            Some((peak, format)) => {
                (peak, format!("above its stated {format} linears' peak on {} ({:.0} TFLOP/s)", prices.gpu.id, peak / 1e12))
            }
            None => (
                FP4_OVER_FASTEST * fastest,
                format!(
                    "over {FP4_OVER_FASTEST}× the fastest peak of {} ({:.0} TFLOP/s; FP4 is at most ~3× FP8)",
                    prices.gpu.id,
                    fastest / 1e12
                ),
            ),
        };
        if bound > 0.0 && flops > bound {
            return Err(crate::Error::Run(format!(
                "measured {} tokens/s per GPU: {:.3e} model FLOP/s per GPU, {words}: not a throughput it could run",
                tracecast_calibrate::catalog::shown(*measured),
                flops
            )));
        }
    }
    if let Some(w) = run.system.power_w {
        if !(w.is_finite() && w > 0.0) {
            return Err(crate::Error::Run(format!("system power_w {w}: must be a positive number of watts")));
        }
        let mut note = format!("power limit {w} W: not modelled (no measurement in the evidence ties it to kernel speed)");
        // Where the GPU's GEMMs are held to a rate its silicon sustained at a higher limit, that
        // rate bounds this run's from above: said, since the run's error then leans optimistic.
        let linear = if plan.fp8 { Dtype::Fp8 } else { Dtype::Bf16 };
        if let Some(prices) = &cluster.prices
            && let Some(tdp) = prices.gpu.tdp_w.filter(|&tdp| w < tdp)
            && let Some((rate, _)) = prices.pricing.sustained_gemm_rate(&prices.gpu, linear)
        {
            note.push_str(&format!(
                "; below {}'s {tdp:.0} W, at which its {} GEMMs are held to {:.1} TFLOP/s: an upper bound here",
                prices.gpu.id,
                linear.class_words(),
                rate / 1e12
            ));
        }
        notes.push(note);
    }
    let framework = Framework::of(run);
    if let Some(f) = &run.framework {
        // A name the model knows no defaults of is said so: a misspelt "torchtittan" had projected
        // without torchtitan's defaults under the note "framework: torchtittan".
        notes.push(match framework {
            Some(_) => format!("framework: {f}"),
            None => format!("framework {f:?}: none whose defaults the model knows ({}): the plan as the run states it", Framework::known()),
        });
    }
    // Without a framework whose defaults the model knows, what the plan leaves unsaid is said at
    // tracecast's defaults (a run without `recompute` had been priced without it, unsaid).
    if framework.is_none() && run.task.as_deref().unwrap_or("train") == "train" {
        let mut unsaid = Vec::new();
        if !stated.contains("recompute") {
            unsaid.push("no activation recomputation");
        }
        if !stated.contains("grad_sync") {
            unsaid.push("gradients reduced during the backward, overlapped with it");
        }
        if !unsaid.is_empty() {
            notes.push(format!("what the plan does not state, at tracecast's defaults: {}", unsaid.join("; ")));
        }
    }
    if let Some((fw, name, from_source)) = framework {
        let applied = fw.apply_defaults(&mut plan, &stated, &model);
        if !applied.is_empty() {
            let how = if from_source { " (framework named by the source)" } else { "" };
            notes.push(format!("{name} defaults the plan does not state{how}: {}", applied.join(", ")));
        }
    }
    let (task, tokens_per_seq) = run.task(&model)?;
    let (mut p, timeline) = project_timeline(&model, &cluster, &plan, task)?;
    let tokens = p.global_batch * tokens_per_seq;
    let per_gpu = tokens / (p.times.iteration_ms / 1e3) / f64::from(run.system.gpus.max(1));
    notes.append(&mut p.notes);
    p.notes = notes;
    Ok(Projected { projection: p, timeline, per_gpu })
}

/// One run projected with `device`.
fn project_run(
    run: &Run,
    catalog: &Catalog,
    device: Option<&DeviceModel>,
    measurements: Option<&std::sync::Arc<tracecast_calibrate::measured::Measurements>>,
) -> RunResult {
    if let Some(why) = &run.unreadable {
        return RunResult { refused: true, ..RunResult::not_projected(run, 0.0, format!("not projected: {why}")) };
    }
    let mut measured = run.measured.tokens_per_s_per_gpu.unwrap_or(0.0);
    match projected(run, catalog, device, measurements, &mut measured) {
        // A measurement so small that no projection divides by it (1e-308 tokens/s had
        // summarized the file as "median |error| inf %"): the file's error, said in its row.
        // (A million-fold apart is no comparison either: a unit, not the model.)
        Ok(Projected { per_gpu: predicted, .. }) if measured > 0.0 && !(1e-6..=1e6).contains(&(predicted / measured)) => RunResult {
            refused: true,
            ..RunResult::not_projected(
                run,
                measured,
                format!(
                    "not projected: measured {} tokens/s per GPU against {predicted:.1} projected: a million-fold apart or more, no comparison (check its unit)",
                    tracecast_calibrate::catalog::shown(measured)
                ),
            )
        },
        Ok(Projected { projection: p, per_gpu: predicted, .. }) => RunResult {
            id: run.id.clone(),
            gpu: run.system.gpu.clone(),
            measured_tokens_per_s_per_gpu: measured,
            predicted_tokens_per_s_per_gpu: Some(predicted),
            error: (measured > 0.0).then(|| predicted / measured - 1.0),
            fits_memory: Some(p.fits_memory),
            iteration_ms: Some(p.times.iteration_ms),
            measured_mfu: run.measured_mfu(catalog).map(|m| m.0.mfu),
            projected_mfu: p.mfu,
            times: Some(p.times),
            memory: Some(p.memory),
            hbm_gb: Some(p.hbm_gb),
            notes: p.notes,
            refused: false,
            unpriced: false,
        },
        Err(e) => RunResult {
            refused: !matches!(e, crate::Error::Unpriced(_)),
            unpriced: matches!(e, crate::Error::Unpriced(_)),
            ..RunResult::not_projected(run, measured, format!("not projected: {e}"))
        },
    }
}

/// An error smaller than this (0.05 %, what prints as ±0.0 %) is on the measurement.
const ON_THE_MEASUREMENT: f64 = 5e-4;

/// Errors (projected ÷ measured − 1) summarized: their count, the median and largest |error|,
/// the median signed error and how many fall on each side.
struct ErrorSummary {
    runs: usize,
    median_abs: Option<f64>,
    max_abs: Option<f64>,
    median: Option<f64>,
    optimistic: usize,
    pessimistic: usize,
}

impl ErrorSummary {
    fn of(mut errors: Vec<f64>) -> ErrorSummary {
        // A projection within the printed precision of its measurement is on it, on neither side
        // (a run fitted to itself, +1e-8, had counted as projected faster).
        let (optimistic, pessimistic) =
            (errors.iter().filter(|e| **e >= ON_THE_MEASUREMENT).count(), errors.iter().filter(|e| **e <= -ON_THE_MEASUREMENT).count());
        let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        // Sorted by the median: its last is the largest.
        let median_abs = tracecast_calibrate::fit::median(&mut abs);
        ErrorSummary {
            runs: errors.len(),
            median_abs,
            max_abs: abs.last().copied(),
            median: tracecast_calibrate::fit::median(&mut errors),
            optimistic,
            pessimistic,
        }
    }
}

/// The summary of projected runs, overall and per GPU where they are of several.
fn summarize(runs: Vec<RunResult>) -> Validation {
    let all = ErrorSummary::of(runs.iter().filter_map(|r| r.error).collect());
    let mut gpus: Vec<&str> = runs.iter().filter(|r| r.error.is_some()).map(|r| r.gpu.as_str()).collect();
    gpus.sort_unstable();
    gpus.dedup();
    let by_gpu = if gpus.len() < 2 {
        Vec::new()
    } else {
        gpus.iter()
            .filter_map(|g| {
                let e = ErrorSummary::of(runs.iter().filter(|r| r.gpu == *g).filter_map(|r| r.error).collect());
                Some(GpuSummary {
                    gpu: g.to_string(),
                    runs: e.runs,
                    median_abs_error: e.median_abs?,
                    median_error: e.median?,
                    optimistic: e.optimistic,
                    pessimistic: e.pessimistic,
                })
            })
            .collect()
    };
    Validation {
        runs,
        median_abs_error: all.median_abs,
        max_abs_error: all.max_abs,
        optimistic: all.optimistic,
        pessimistic: all.pessimistic,
        by_gpu,
    }
}

/// Projects every run of `file`; `devices` are calibration profiles, each
/// used for the runs on its GPU (else the GPU's shipped profile).
/// `measurements`: the shipped base plus the user's files, when they gave some.
pub fn validate(
    file: &RunsFile,
    catalog: &Catalog,
    devices: &[DeviceModel],
    measurements: Option<&std::sync::Arc<tracecast_calibrate::measured::Measurements>>,
) -> Validation {
    let runs = file
        .runs
        .iter()
        .map(|run| project_run(run, catalog, device_for(&gpu_id(run, catalog), catalog, devices).as_ref(), measurements))
        .collect();
    summarize(runs)
}

/// What `validate --fit` fitted for one GPU.
#[derive(Debug, Clone, Serialize)]
pub struct GpuFit {
    /// Catalog id.
    pub gpu: String,
    /// The runs it was fitted to.
    pub runs: Vec<String>,
    /// The fitted GEMM correction: measured ÷ table time of the GPU's GEMMs
    /// (the model's one free parameter per GPU; the GEMMs are priced at their
    /// shapes by the pricing layer × this).
    pub gemm_correction: f64,
    /// The correction the model had before (its profile's traces, else 1).
    pub previous_gemm_correction: f64,
    /// Where the previous correction came from.
    pub previous_source: String,
    /// Per number format of the runs' linear layers: its correction (the first
    /// is the one `gemm_correction` repeats).
    pub by_dtype: Vec<DtypeFit>,
    /// The profile with the fitted corrections (what `--fit` writes).
    #[serde(skip)]
    pub profile: tracecast_calibrate::Profile,
}

/// The GEMM table correction fitted for one number format on one GPU.
#[derive(Debug, Clone, Serialize)]
pub struct DtypeFit {
    /// `bf16`, `fp16` or `fp8`.
    pub dtype: String,
    /// The runs it was fitted to.
    pub runs: Vec<String>,
    /// Measured ÷ table time of the GPU's GEMMs in that format.
    pub gemm_correction: f64,
    /// The correction the model had before.
    pub previous_gemm_correction: f64,
    /// Where that came from.
    pub previous_source: String,
    /// Where the correction stopped at a limit rather than at the runs' best fit, why in words:
    /// the runs are further from the model than GEMM speed explains (`None`: a fit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

/// `validate --fit`: the fitted parameters, the runs with them, and the
/// leave-one-run-out projections (each run priced by an η fitted to the
/// other runs of its GPU) that say whether the fit generalizes.
#[derive(Debug, Clone, Serialize)]
pub struct Fit {
    /// Per GPU.
    pub gpus: Vec<GpuFit>,
    /// Every run with the fitted profiles.
    pub fitted: Validation,
    /// Every run with an η fitted without it (runs alone on their GPU are not projected).
    pub leave_one_out: Validation,
    /// The GPUs and number formats whose runs no correction moves, and why: nothing was fitted
    /// for them, and their leave-one-out rows are priced as `validate` prices them.
    pub not_fitted: Vec<NotFitted>,
}

/// A GPU and number format of runs [`fit`] fitted nothing to.
#[derive(Debug, Clone, Serialize)]
pub struct NotFitted {
    /// Catalog GPU id.
    pub gpu: String,
    /// The runs' linear layers' number format.
    pub dtype: String,
    /// The runs.
    pub runs: Vec<String>,
    /// Why, in words.
    pub why: String,
}

/// The search range of a GEMM table correction: a factor 4 either way.
const CORRECTION_RANGE: (f64, f64) = (0.25, 4.0);

/// The GEMM table correction that best explains `runs` (least squares of
/// log(projected / measured)), on `base`, and where it stopped at a limit
/// instead (why, in words).
fn fit_gemm_correction(
    runs: &[&Run],
    catalog: &Catalog,
    base: &tracecast_calibrate::Profile,
    dtype: Dtype,
    measurements: Option<&std::sync::Arc<tracecast_calibrate::measured::Measurements>>,
) -> Option<(f64, Option<String>)> {
    let cost = |ln_c: f64| -> f64 {
        let mut p = base.clone();
        p.set_gemm_correction(dtype, ln_c.exp(), runs.len(), "");
        let device = DeviceModel::from_profile(&p, catalog);
        runs.iter().filter_map(|r| project_run(r, catalog, Some(&device), measurements).error).map(|e| (1.0 + e).ln().powi(2)).sum::<f64>()
    };
    if runs.is_empty() {
        return None;
    }
    // Golden-section search over ln c in [ln ¼, ln 4]: the projection is monotone in c.
    let (mut lo, mut hi) = (CORRECTION_RANGE.0.ln(), CORRECTION_RANGE.1.ln());
    let range = (lo, hi);
    // A correction that moves no run (their GEMMs are not priced by the tables) is not a fit.
    if (cost(lo) - cost(hi)).abs() <= 1e-12 {
        return None;
    }
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (hi - g * (hi - lo), lo + g * (hi - lo));
    let (mut fa, mut fb) = (cost(a), cost(b));
    for _ in 0..40 {
        if fa < fb {
            hi = b;
            b = a;
            fb = fa;
            a = hi - g * (hi - lo);
            fa = cost(a);
        } else {
            lo = a;
            a = b;
            fa = fb;
            b = lo + g * (hi - lo);
            fb = cost(b);
        }
    }
    let ln_c = (lo + hi) / 2.0;
    // A fit at the range's end, or where a smaller correction moves no run (their GEMMs held at a
    // bound of the GPU: its sustained rate or its peak), is a limit, not the runs' best fit: said
    // (a run measured at 2× or 1e9 tokens/s had fitted the same 0.827, a 10× slower one 4.000).
    let limit = if ln_c - range.0 < 1e-3 || range.1 - ln_c < 1e-3 {
        Some(format!(
            "at the fit's limit ({}× to {}×): the runs are further from the model than the speed of their GEMMs explains (check their setup)",
            CORRECTION_RANGE.0, CORRECTION_RANGE.1
        ))
    } else if (cost(ln_c - 0.05) - cost(ln_c)).abs() <= 1e-9 * cost(ln_c).max(1e-12) && cost(ln_c) > 0.01 {
        Some(
            "where a smaller correction moves no run (their GEMMs are held at a bound of the GPU: its sustained rate or its peak): the runs are faster than the model allows at any GEMM speed (check their setup)"
                .to_string(),
        )
    } else {
        None
    };
    Some((ln_c.exp(), limit))
}

/// Fits each GPU's GEMM table correction to the runs on it (see [`Fit`]).
pub fn fit(
    file: &RunsFile,
    catalog: &Catalog,
    devices: &[DeviceModel],
    runs_path: &str,
    measurements: Option<&std::sync::Arc<tracecast_calibrate::measured::Measurements>>,
) -> Fit {
    let mut by_gpu: std::collections::BTreeMap<String, Vec<&Run>> = std::collections::BTreeMap::new();
    for r in &file.runs {
        by_gpu.entry(gpu_id(r, catalog)).or_default().push(r);
    }
    let mut gpus = Vec::new();
    let mut not_fitted = Vec::new();
    let mut loo_results: std::collections::HashMap<String, RunResult> = std::collections::HashMap::new();
    for (id, runs) in &by_gpu {
        let Ok(gpu) = catalog.gpu(id) else { continue };
        let from = device_for(id, catalog, devices);
        let from = from.as_ref();
        let base = from.and_then(|d| d.profile.clone()).unwrap_or_else(|| tracecast_calibrate::Profile::of_catalog_gpu(gpu, catalog));
        // One correction per number format of the runs' linear layers: a 16-bit
        // correction does not move an FP8 run, whose GEMMs the FP8 table prices.
        let mut by_dtype: std::collections::BTreeMap<Dtype, Vec<&Run>> = std::collections::BTreeMap::new();
        // Only runs the model prices enter a fit and its counts (a refused run or an FP4 one had
        // been counted, and an FP4 run bucketed as 16-bit).
        for r in runs.iter().filter(|r| project_run(r, catalog, from, measurements).error.is_some()) {
            by_dtype.entry(linear_dtype(r, gpu)).or_default().push(r);
        }
        let mut profile = base.clone();
        // The peaks and HBM of the catalog this command read (a `--hw` entry's, not those the
        // shipped profile was fitted on): read back with the same catalog they are its GPU's, where
        // a profile written with `--hw` had been refused by the same `--hw`. Its links and node
        // stay the profile's (a `--profile` of the user's cluster).
        let device = tracecast_calibrate::Profile::of_catalog_gpu(gpu, catalog).device;
        (profile.device.catalog_id, profile.device.peak_tflops, profile.device.hbm_gbps) =
            (device.catalog_id, device.peak_tflops, device.hbm_gbps);
        let mut fits = Vec::new();
        for (&dtype, group) in &by_dtype {
            let (previous, previous_source) = match from
                .and_then(|d| d.profile.as_ref())
                .and_then(|p| p.table_correction(tracecast_calibrate::work::KernelClass::Gemm, Some(dtype)))
            {
                Some(c) => (c.ratio, from.map_or(String::new(), |d| d.source.clone())),
                None => (1.0, "none: the tables as measured".to_string()),
            };
            // Fitted on the profile as fitted so far (the other formats' corrections in place).
            let Some((correction, limit)) = fit_gemm_correction(group, catalog, &profile, dtype, measurements) else {
                // Said, not skipped: a user's GEMM table of the GPU (their own stack's times) is
                // what a correction would otherwise rescale.
                let users = measurements.is_some_and(|m| m.has_user_gemms(gpu, dtype));
                let why = if users {
                    format!(
                        "your measurements price {id}'s {} GEMMs (their own stack's times): no table correction moves these runs",
                        dtype.as_str()
                    )
                } else {
                    format!("no measured GEMM table prices {id}'s {} GEMMs: no table correction moves these runs", dtype.as_str())
                };
                for r in group {
                    let mut res = project_run(r, catalog, from, measurements);
                    res.notes.insert(0, format!("not fitted: {why}"));
                    loo_results.insert(r.id.clone(), res);
                }
                not_fitted.push(NotFitted {
                    gpu: id.clone(),
                    dtype: dtype.as_str().to_string(),
                    runs: group.iter().map(|r| r.id.clone()).collect(),
                    why,
                });
                continue;
            };
            let ids: Vec<String> = group.iter().map(|r| r.id.clone()).collect();
            // Leave one run out: the correction from the other runs of this GPU and format.
            for (k, r) in group.iter().enumerate() {
                let others: Vec<&Run> = group.iter().enumerate().filter(|(j, _)| *j != k).map(|(_, r)| *r).collect();
                let result = match fit_gemm_correction(&others, catalog, &profile, dtype, measurements) {
                    Some((c, _)) if !others.is_empty() => {
                        let mut p = profile.clone();
                        p.set_gemm_correction(dtype, c, others.len(), tracecast_calibrate::profile::FITTED_TO_RUNS);
                        let mut res = project_run(r, catalog, Some(&DeviceModel::from_profile(&p, catalog)), measurements);
                        res.notes.insert(
                            0,
                            format!("{} GEMM table correction {c:.3} fitted to the other {} run(s) on {id}", dtype.as_str(), others.len()),
                        );
                        res
                    }
                    _ => RunResult::not_projected(
                        r,
                        r.measured.tokens_per_s_per_gpu.unwrap_or(0.0),
                        format!("the only {} run on {id}: nothing to fit without it", dtype.as_str()),
                    ),
                };
                loo_results.insert(r.id.clone(), result);
            }
            profile.set_gemm_correction(dtype, correction, group.len(), tracecast_calibrate::profile::FITTED_TO_RUNS);
            profile.notes.push(format!(
                "{} GEMM table correction fitted by `tracecast validate --fit` to {} measured run(s) of {runs_path}: {}",
                dtype.as_str(),
                ids.len(),
                ids.join(", ")
            ));
            fits.push(DtypeFit {
                dtype: dtype.as_str().to_string(),
                runs: ids,
                gemm_correction: correction,
                previous_gemm_correction: previous,
                previous_source,
                limit,
            });
        }
        let Some(first) = fits.first().cloned() else { continue };
        gpus.push(GpuFit {
            gpu: id.clone(),
            runs: runs.iter().map(|r| r.id.clone()).collect(),
            gemm_correction: first.gemm_correction,
            previous_gemm_correction: first.previous_gemm_correction,
            previous_source: first.previous_source,
            by_dtype: fits,
            profile,
        });
    }
    // The fitted GPUs' profiles; the others keep the ones given (a GPU not fitted had been priced
    // without its --profile in the fitted table, with it in the leave-one-out one).
    let mut fitted_devices: Vec<DeviceModel> = gpus.iter().map(|g| DeviceModel::from_profile(&g.profile, catalog)).collect();
    fitted_devices.extend(devices.iter().filter(|d| d.gpu.as_ref().is_none_or(|g| !gpus.iter().any(|f| f.gpu == g.id))).cloned());
    let fitted = validate(file, catalog, &fitted_devices, measurements);
    let loo = file.runs.iter().map(|r| loo_results.remove(&r.id).unwrap_or_else(|| project_run(r, catalog, None, measurements))).collect();
    Fit { gpus, fitted, leave_one_out: summarize(loo), not_fitted }
}

/// The number format of a run's linear layers on `gpu`: FP8 where the plan (or
/// its published precision) says so and the GPU has an FP8 peak, else its 16-bit format.
fn linear_dtype(run: &Run, gpu: &tracecast_calibrate::catalog::Gpu) -> Dtype {
    let stated = run.precision.as_ref().and_then(|p| p.linear().ok()).and_then(|(f, _)| f);
    linear_dtype_of(&Plan::parse(&run.plan).unwrap_or_default(), stated, gpu)
}

/// [`linear_dtype`] of a parsed plan and the format the run's precision states, if any (it wins).
fn linear_dtype_of(plan: &Plan, stated: Option<Format>, gpu: &tracecast_calibrate::catalog::Gpu) -> Dtype {
    let fp8 = stated.map_or(plan.fp8, |f| f == Format::Fp8);
    if fp8 && gpu.peak_flops(Dtype::Fp8).is_some() {
        Dtype::Fp8
    } else if gpu.peak_flops(Dtype::Bf16).is_some() {
        Dtype::Bf16
    } else {
        Dtype::Fp16
    }
}

#[cfg(test)]
mod tests {
    /// Both shipped runs files parse, every run of theirs with model dimensions.
    /// An unknown preset lists the presets there are.
    #[test]
    fn an_unknown_preset_lists_the_presets() {
        let m: RunModel = serde_json::from_str(r#"{"preset": "llama9-8b", "seq": 4096}"#).unwrap();
        let e = m.transformer("x").unwrap_err().to_string();
        assert!(e.contains("unknown preset \"llama9-8b\" (presets: ") && e.contains("llama3-8b"), "{e}");
    }

    /// A run projected within 0.05 % of its measurement (a run fitted to itself: +1e-8) is on it,
    /// on neither side: it had counted as projected faster.
    #[test]
    fn a_run_on_its_measurement_is_on_neither_side() {
        let s = ErrorSummary::of(vec![1e-8, -2e-4, 0.1, -0.2, 5e-4]);
        assert_eq!((s.runs, s.optimistic, s.pessimistic), (5, 2, 1));
    }

    /// A model dimension of the wrong type is named: serde's "invalid type: string \"4\",
    /// expected usize" had named no key, where a system's or a measurement's did.
    #[test]
    fn a_model_dimension_of_the_wrong_type_is_named() {
        let model = r#"{"layers": 4, "hidden": 4096, "heads": "32", "kv_heads": 8, "ffn": 14336, "vocab": 128256, "seq": 8192, "activation": "swiglu"}"#;
        let m: RunModel = serde_json::from_str(model).unwrap();
        let e = m.transformer("x").unwrap_err().to_string();
        assert!(e.contains("(at \"heads\") invalid type: string \"32\""), "{e}");
        let m: RunModel = serde_json::from_str(&model.replace("\"32\"", "32").replace("4096", "\"4096\"")).unwrap();
        assert!(m.transformer("x").unwrap_err().to_string().contains("(at \"hidden\")"));
    }

    /// A precision text naming several formats is read as its narrowest, and says so: "BF16 then
    /// FP8" and "fp32 parameters, bf16 autocast" had been priced as FP8 and BF16 without a word.
    #[test]
    fn a_precision_naming_several_formats_says_which_it_priced() {
        let said = |text: &str| {
            let (f, notes) = Precision::Linear(text.into()).linear().unwrap();
            (f, notes.join(" "))
        };
        let (f, notes) = said("BF16 then FP8");
        assert!(
            f == Some(Format::Fp8) && notes.contains("names several formats: linear layers priced in FP8 (the narrowest named"),
            "{notes}"
        );
        let (f, notes) = said("fp32 parameters, bf16 autocast");
        assert!(f == Some(Format::Bf16) && notes.contains("priced in 16 bits"), "{notes}");
        let (f, notes) = said("BF16");
        assert!(f == Some(Format::Bf16) && notes.is_empty(), "{notes}");
    }

    #[test]
    fn the_shipped_runs_parse() {
        let files = super::shipped_runs();
        // The evidence README counts 129 runs with model dimensions; the published file has 17.
        assert_eq!(files.iter().map(|f| f.runs.len()).collect::<Vec<_>>(), [129, 17]);
        // Every one reads as a run (one that does not is kept, refused in its row).
        let unreadable: Vec<(&str, &str)> =
            files.iter().flat_map(|f| &f.runs).filter_map(|r| Some((r.id.as_str(), r.unreadable.as_deref()?))).collect();
        assert!(unreadable.is_empty(), "{unreadable:?}");
    }

    /// Measured MFU is the run's tokens/s per GPU × the model's FLOPs per token ÷ the 16-bit
    /// peak. MPT-7B on 8 A100 (llm-foundry's table, 4 641 tokens/s per GPU): 32 layers of
    /// hidden 4096 and FFN 16384 hold 32 × (4 × 4096² + 2 × 4096 × 16384) = 6 442.5 M matmul
    /// parameters, the tied head 50 368 × 4096 = 206.3 M more: 6 × 6 648.8 M = 39.89 GFLOP a
    /// token; the causal attention 12 × 32 × 4096 × 2048 / 2 = 1.61 GFLOP; 41.50 GFLOP ×
    /// 4 641 / 312 TFLOP/s = 61.73 %.
    #[test]
    fn measured_mfu_is_the_runs_model_flops_over_the_16_bit_peak() {
        let catalog = Catalog::builtin();
        let runs = &super::shipped_runs()[1].runs;
        let run = runs.iter().find(|r| r.id == "mpt-7b-8xa100-80gb").unwrap();
        let (m, linear) = run.measured_mfu(&catalog).unwrap();
        assert!((m.mfu - 0.6173).abs() < 5e-4, "{}", m.mfu);
        assert_eq!((linear, m.gpus, m.gpu.as_str()), (Dtype::Bf16, 8, "a100-80gb"));
        // The best 16-bit A100 run of both files is this one (MPT-13B 57.7 %, torchtitan's Llama 2 70B
        // 48.7 %; the SC21 runs' published figures count recomputation, their model FLOPs at most 39 %).
        let a100 = catalog.gpu("a100-80gb").unwrap();
        assert_eq!(super::mfu_bound(&catalog, a100, Dtype::Bf16, None).unwrap().best.run, "mpt-7b-8xa100-80gb");
        // FP16 is the same 16-bit class.
        assert_eq!(super::mfu_bound(&catalog, a100, Dtype::Fp16, None).unwrap().best.run, "mpt-7b-8xa100-80gb");
    }

    /// The measured and projected MFU of a run are one count at one peak: their ratio is the
    /// throughputs' (every shipped training run the model projects).
    #[test]
    fn measured_and_projected_mfu_are_one_count() {
        let catalog = Catalog::builtin();
        let mut checked = 0;
        for file in super::shipped_runs() {
            for r in super::validate(file, &catalog, &[], None).runs {
                let (Some(m), Some(p), Some(predicted)) = (r.measured_mfu, r.projected_mfu, r.predicted_tokens_per_s_per_gpu) else {
                    continue;
                };
                let (a, b) = (p / m, predicted / r.measured_tokens_per_s_per_gpu);
                assert!((a / b - 1.0).abs() < 1e-9, "{}: MFU ratio {a}, throughput ratio {b}", r.id);
                checked += 1;
            }
        }
        assert!(checked > 100, "{checked}");
    }

    /// A projection carried from a run is not held against that run: MPT-7B on 8 A100 (61.7 %)
    /// left out, the best of the other 15 A100 runs in 16 bits is MPT-13B's 57.7 %.
    #[test]
    fn a_carried_run_is_not_its_own_bound() {
        let catalog = Catalog::builtin();
        let a100 = catalog.gpu("a100-80gb").unwrap();
        let all = super::mfu_bound(&catalog, a100, Dtype::Bf16, None).unwrap();
        let others = super::mfu_bound(&catalog, a100, Dtype::Bf16, Some("mpt-7b-8xa100-80gb")).unwrap();
        assert_eq!((all.runs, others.runs), (16, 15));
        assert_eq!(others.best.run, "mpt-13b-8xa100-80gb");
        assert!((others.best.mfu - 0.577).abs() < 1e-3, "{}", others.best.mfu);
    }

    /// A GPU of the same compute is held against the other's runs (H200 against H100 SXM's), a
    /// format against runs in that format, and a GPU nobody trained on against none.
    #[test]
    fn a_gpu_is_held_against_the_runs_of_its_compute_and_format() {
        let catalog = Catalog::builtin();
        let best = |id: &str, d: Dtype| super::mfu_bound(&catalog, catalog.gpu(id).unwrap(), d, None).map(|b| b.best);
        let (h100, h200) = (best("h100-sxm", Dtype::Bf16).unwrap(), best("h200", Dtype::Bf16).unwrap());
        assert_eq!(h100.run, h200.run);
        let fp8 = best("h200", Dtype::Fp8).unwrap();
        assert_ne!(fp8.run, h200.run);
        let fp8_run = super::shipped_runs().iter().flat_map(|f| &f.runs).find(|r| r.id == fp8.run).unwrap();
        assert_eq!(super::linear_dtype(fp8_run, catalog.gpu("h100-sxm").unwrap()), Dtype::Fp8);
        assert!(best("mi300x", Dtype::Bf16).is_none(), "no MI300X training run is shipped");
    }

    /// A run the model does not price (FP4 linear layers) enters no fit and no count: it had
    /// been counted among a 16-bit fit's runs.
    #[test]
    fn a_fit_counts_only_the_runs_it_prices() {
        let run = |id: &str, precision: &str, tps: f64| {
            format!(
                r#"{{"id": "{id}", "model": {{"preset": "llama2-7b", "seq": 4096}}, "system": {{"gpu": "h100-sxm", "gpus": 8}}, "plan": "fsdp=8", "precision": "{precision}", "measured": {{"tokens_per_s_per_gpu": {tps}}}}}"#
            )
        };
        let text = format!(r#"{{"runs": [{}, {}, {}]}}"#, run("a", "BF16", 3000.0), run("b", "BF16", 3300.0), run("fp4", "NVFP4", 9000.0));
        let file: RunsFile = serde_json::from_str(&text).unwrap();
        let f = super::fit(&file, &Catalog::builtin(), &[], "runs.json", None);
        let h100 = f.gpus.iter().find(|g| g.gpu == "h100-sxm").unwrap();
        assert_eq!(h100.by_dtype.len(), 1, "{:?}", h100.by_dtype.iter().map(|d| &d.dtype).collect::<Vec<_>>());
        assert_eq!(h100.by_dtype[0].runs, vec!["a".to_string(), "b".to_string()]);
    }

    /// A misspelled key of a run, its system or its measurement is named (a `gpus_per_nodes`
    /// had been ignored); the keys of the shipped runs files pass.
    #[test]
    fn unknown_run_keys_are_named() {
        let run = |extra: &str| {
            format!(
                r#"{{"runs": [{{"id": "r", "model": {{"preset": "llama2-7b"}}, "system": {{"gpu": "h100-sxm", "gpus": 8{}}}, "plan": "fsdp=8", "measured": {{"tokens_per_s_per_gpu": 1{}}}{}}}]}}"#,
                extra.strip_prefix("system:").unwrap_or(""),
                extra.strip_prefix("measured:").unwrap_or(""),
                extra.strip_prefix("run:").unwrap_or(""),
            )
        };
        // The file's one run, checked.
        let keys = |text: &str| super::unknown_keys(&serde_json::from_str::<serde_json::Value>(text).unwrap()["runs"][0]);
        for (extra, says) in [
            ("run:, \"precison\": \"FP8\"", "unknown key \"precison\" in the run"),
            ("system:, \"gpus_per_nodes\": 4", "unknown key \"gpus_per_nodes\" in its system"),
            ("measured:, \"tokens_per_sec_per_gpu\": 2", "unknown key \"tokens_per_sec_per_gpu\" in its measured"),
        ] {
            let e = keys(&run(extra)).unwrap_err();
            assert!(e.contains(says), "{extra}: {e}");
        }
        let known = "system:, \"gpus_per_node\": 4, \"power_w\": 500";
        assert_eq!(keys(&run(known)), Ok(()));
        assert_eq!(keys(&run("run:, \"notes\": \"x\", \"framework\": \"torchtitan\"")), Ok(()));
    }

    use super::*;

    fn runs(json: &str) -> RunsFile {
        serde_json::from_str(json).unwrap()
    }

    /// A run whose entry does not read (a negative GPU count, a string for a number, a misspelt
    /// key) is refused in its row by key, and the others are compared: each such run had stopped
    /// the whole file, one mistake found per rerun.
    #[test]
    fn a_run_that_does_not_read_is_refused_in_its_row() {
        let good = run("good", MODEL, "");
        let negative = run("negative-gpus", MODEL, "").replace("\"gpus\": 8", "\"gpus\": -8");
        let string = run("string-gpus", MODEL, "").replace("\"gpus\": 8", "\"gpus\": \"8\"");
        let typo = run("typo", MODEL, "").replace("\"plan\"", "\"framwork\": \"NeMo\", \"plan\"");
        let text = format!(r#"{{"runs": [{good}}}, {negative}}}, {string}}}, {typo}}}, {{"model": {{}}}}]}}"#);
        let file = RunsFile::parse(text.as_bytes(), Path::new("mine.json")).unwrap();
        let why: Vec<(&str, Option<&str>)> = file.runs.iter().map(|r| (r.id.as_str(), r.unreadable.as_deref())).collect();
        assert_eq!(why[0], ("good", None));
        assert!(why[1].1.is_some_and(|w| w.contains("invalid value: integer `-8`") && w.ends_with("(at \"gpus\")")), "{why:?}");
        assert!(why[2].1.is_some_and(|w| w.contains("invalid type: string \"8\"") && w.ends_with("(at \"gpus\")")), "{why:?}");
        assert!(why[3].1.is_some_and(|w| w.contains("unknown key \"framwork\" in the run")), "{why:?}");
        assert!(why[4].0 == "runs[4]" && why[4].1.is_some_and(|w| w.contains("missing field `id`")), "{why:?}");
        let v = validate(&file, &Catalog::builtin(), &[], None);
        let refused: Vec<&str> = v.runs.iter().filter(|r| r.refused).map(|r| r.id.as_str()).collect();
        assert_eq!(refused, ["negative-gpus", "string-gpus", "typo", "runs[4]"]);
        assert!(v.runs[0].error.is_some(), "{:?}", v.runs[0]);
        assert!(v.runs[2].notes[0].starts_with("not projected: the entry does not read as a run: invalid type"), "{:?}", v.runs[2].notes);
        // The name made for an entry without an id is not one of the file's: a run that has it
        // is no second run of that id.
        let clash = run("runs[0]", MODEL, "");
        let file = RunsFile::parse(format!(r#"{{"runs": [{{"model": {{}}}}, {clash}}}]}}"#).as_bytes(), Path::new("clash.json")).unwrap();
        assert_eq!(file.runs.iter().map(|r| r.unreadable.is_some()).collect::<Vec<_>>(), [true, false]);
    }

    /// A bare list of runs is told what a runs file is, not "expected a string at line 1".
    #[test]
    fn a_bare_list_of_runs_is_told_the_file_format() {
        let e = RunsFile::parse(b"  [{\"id\": \"x\"}]", std::path::Path::new("runs.json")).unwrap_err().to_string();
        assert!(e.starts_with("runs.json: the top level is a list; a runs file is an object"), "{e}");
        assert!(RunsFile::parse(b"{\"runs\": []}", std::path::Path::new("runs.json")).is_ok());
    }

    const MODEL: &str =
        r#"{"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 128256, "seq": 8192, "activation": "swiglu"}"#;

    fn run(id: &str, model: &str, extra: &str) -> String {
        format!(
            r#"{{"id": "{id}", "model": {model}, "system": {{"gpu": "h100-sxm", "gpus": 8{extra}}}, "plan": "fsdp=8,mb=1,gbs=8", "measured": {{"tokens_per_s_per_gpu": 5000}}"#
        )
    }

    #[test]
    fn runs_file_fields_are_read_and_what_cannot_be_priced_is_refused() {
        let catalog = Catalog::builtin();
        let file = runs(&format!(
            r#"{{"runs": [{}, "precision": "BF16", "framework": "torchtitan"}}, {}, "precision": "FP8-CS", "framework": "torchtittan"}}, {}, "precision": "NVFP4"}}, {}}}, {}, "precision": {{"linear": "BF16", "attention": "FP8"}}, "framework": "torchtitan"}}]}}"#,
            run("bf16", MODEL, r#", "power_w": 500"#),
            run("fp8", MODEL, ""),
            run("fp4", MODEL, ""),
            run("nodims", r#"{"name": "DeepSeek-V3"}"#, ""),
            run("classes", MODEL, ""),
        ));
        let v = validate(&file, &catalog, &[], None);
        let by = |id: &str| v.runs.iter().find(|r| r.id == id).unwrap();
        let notes = |id: &str| by(id).notes.join(" | ");
        // A 16-bit run: projected, its power limit and framework said.
        assert!(by("bf16").predicted_tokens_per_s_per_gpu.is_some());
        assert!(notes("bf16").contains("power limit 500 W: not modelled"), "{}", notes("bf16"));
        assert!(notes("bf16").contains("below h100-sxm's 700 W, at which its 16-bit GEMMs are held to 665.7 TFLOP/s"), "{}", notes("bf16"));
        assert!(notes("bf16").contains("framework: torchtitan"), "{}", notes("bf16"));
        // FP8 linears run at the FP8 peak: faster than the same run in 16-bit.
        assert!(by("fp8").predicted_tokens_per_s_per_gpu > by("bf16").predicted_tokens_per_s_per_gpu);
        assert!(notes("fp8").contains("projected with fp8"), "{}", notes("fp8"));
        // A framework name the model knows no defaults of is said to be one.
        assert!(notes("fp8").contains("framework \"torchtittan\": none whose defaults the model knows"), "{}", notes("fp8"));
        // FP4 and a model without dimensions are refused, by name, never guessed.
        assert!(by("fp4").predicted_tokens_per_s_per_gpu.is_none());
        assert!(notes("fp4").contains("NVFP4"), "{}", notes("fp4"));
        // FP4 is work the tool cannot price, not the file's fault: unpriced, not refused.
        assert!(by("fp4").unpriced && !by("fp4").refused, "{:?}", by("fp4"));
        assert!(by("nodims").refused && !by("nodims").unpriced, "{:?}", by("nodims"));
        assert!(!by("bf16").unpriced);
        assert!(by("nodims").predicted_tokens_per_s_per_gpu.is_none());
        assert!(notes("nodims").contains("\"DeepSeek-V3\"") && notes("nodims").contains("full dimensions"), "{}", notes("nodims"));
        // Per op class: 16-bit linears, FP8 attention said to be priced in 16-bit.
        assert_eq!(by("classes").predicted_tokens_per_s_per_gpu, by("bf16").predicted_tokens_per_s_per_gpu);
        assert!(notes("classes").contains("attention in FP8: priced in 16-bit"), "{}", notes("classes"));
        // Refused runs are not in the summary.
        assert_eq!(v.optimistic + v.pessimistic, 3);
    }

    /// A measured throughput that is not a positive number is refused by name: it was
    /// projected, compared with nothing, and its row showed its notes as if they were a reason.
    #[test]
    fn a_run_measured_at_no_positive_throughput_is_refused_by_name() {
        let catalog = Catalog::builtin();
        let with = |t: &str| run(t, MODEL, "").replace("\"tokens_per_s_per_gpu\": 5000", &format!("\"tokens_per_s_per_gpu\": {t}"));
        let file = runs(&format!(r#"{{"runs": [{}}}, {}}}, {}}}, {}}}]}}"#, with("0"), with("-5"), with("5000"), with("1e-308")));
        let v = validate(&file, &catalog, &[], None);
        for id in ["0", "-5"] {
            let r = v.runs.iter().find(|r| r.id == id).unwrap();
            assert!(r.predicted_tokens_per_s_per_gpu.is_none(), "{id}");
            assert!(r.notes.join(" ").contains(&format!("measured tokens_per_s_per_gpu {id}: must be a positive number")), "{:?}", r.notes);
        }
        // Positive but too small to divide by: the file had summarized as "median |error| inf %".
        let tiny = v.runs.iter().find(|r| r.id == "1e-308").unwrap();
        assert!(tiny.refused && tiny.error.is_none(), "{tiny:?}");
        assert!(tiny.notes.join(" ").contains("measured 1e-308 tokens/s per GPU against"), "{:?}", tiny.notes);
        assert_eq!(v.optimistic + v.pessimistic, 1);
        assert!(v.median_abs_error.is_some_and(f64::is_finite), "{:?}", v.median_abs_error);
    }

    /// A model that does not say whether its head shares the embedding's weights gets a head of its
    /// own, and the run says so with the parameters that adds (128 256 × 4096 = 0.53 B); stated,
    /// nothing is said, and tying removes them.
    #[test]
    fn an_unstated_tied_embeddings_is_said_with_what_it_adds() {
        let catalog = Catalog::builtin();
        let tied = MODEL.replace("\"activation\"", "\"tied_embeddings\": true, \"activation\"");
        let untied = MODEL.replace("\"activation\"", "\"tied_embeddings\": false, \"activation\"");
        let file = runs(&format!(
            r#"{{"runs": [{}}}, {}}}, {}}}]}}"#,
            run("unsaid", MODEL, ""),
            run("tied", &tied, ""),
            run("untied", &untied, "")
        ));
        let v = validate(&file, &catalog, &[], None);
        let of = |id: &str| v.runs.iter().find(|r| r.id == id).unwrap();
        assert!(
            of("unsaid").notes.iter().any(|n| n.contains("tied_embeddings not stated") && n.contains("0.53 B")),
            "{:?}",
            of("unsaid").notes
        );
        for id in ["tied", "untied"] {
            assert!(!of(id).notes.iter().any(|n| n.contains("tied_embeddings not stated")), "{id}");
        }
        assert_eq!(of("unsaid").predicted_tokens_per_s_per_gpu, of("untied").predicted_tokens_per_s_per_gpu);
        assert!(of("tied").predicted_tokens_per_s_per_gpu.unwrap() > of("untied").predicted_tokens_per_s_per_gpu.unwrap());
    }

    /// A throughput above what any peak of the GPU computes for the model is refused in its row
    /// (1e300 had been projected, and `--fit` had fitted a correction of 4.0 to it); one under it
    /// is compared.
    #[test]
    fn a_run_measured_above_every_peak_of_its_gpu_is_refused_by_name() {
        let catalog = Catalog::builtin();
        let with = |t: &str| run(t, MODEL, "").replace("\"tokens_per_s_per_gpu\": 5000", &format!("\"tokens_per_s_per_gpu\": {t}"));
        // 8 B parameters, 6 FLOPs each a token, and attention: 100 000 tokens/s is ~5 PFLOP/s, above
        // H100's 989 TFLOP/s BF16 but under 4× its FP8 peak; refused where the run states BF16.
        let bf16 = |t: &str| with(t).replace(r#""plan""#, r#""precision": "bf16", "plan""#);
        let file = runs(&format!(
            r#"{{"runs": [{}}}, {}}}, {}}}, {}}}]}}"#,
            with("1e300"),
            with("10000000"),
            with("5000"),
            bf16("100000").replace(r#""id": "100000""#, r#""id": "bf16-100000""#)
        ));
        let v = validate(&file, &catalog, &[], None);
        for (id, said) in [
            ("1e300", "the fastest peak of h100-sxm"),
            ("10000000", "the fastest peak of h100-sxm"),
            ("bf16-100000", "above its stated 16-bit linears' peak on h100-sxm"),
        ] {
            let r = v.runs.iter().find(|r| r.id == id).unwrap();
            assert!(r.predicted_tokens_per_s_per_gpu.is_none(), "{id}");
            assert!(r.notes.join(" ").contains(said), "{id}: {:?}", r.notes);
        }
        assert_eq!(v.optimistic + v.pessimistic, 1);
    }

    /// A run without its system, plan or measurement, or a training run with inference's keys, or
    /// one measured twice, is refused in its own row; the others are compared (one such run had
    /// refused the whole file, pointing at the key before the object's end).
    #[test]
    fn a_run_missing_what_it_needs_or_stating_two_measurements_is_refused_in_its_row() {
        let catalog = Catalog::builtin();
        let ok = run("ok", MODEL, "");
        let no_plan = ok.replace("\"ok\"", "\"no-plan\"").replace(r#", "plan": "fsdp=8,mb=1,gbs=8""#, "");
        let no_system = ok.replace("\"ok\"", "\"no-system\"").replace(r#", "system": {"gpu": "h100-sxm", "gpus": 8}"#, "");
        let no_measured = ok.replace("\"ok\"", "\"no-measured\"").replace(r#", "measured": {"tokens_per_s_per_gpu": 5000}"#, "");
        let tpot = ok.replace("\"ok\"", "\"train-tpot\"").replace("5000}", "5000, \"tpot_ms\": 20}");
        let decode = |id: &str, measured: &str, extra: &str| {
            ok.replace("\"ok\"", &format!("{id:?}"))
                .replace("fsdp=8,mb=1,gbs=8", "dp=8")
                .replace("5000}", &format!("{measured}}}, \"task\": \"decode\"{extra}"))
        };
        let twice = decode("decode-twice", "5000, \"tpot_ms\": 20", "");
        // An inference run's training setting, zero batch or negative latency had been projected
        // (without the setting, as batch 1, or refused as if no latency were given).
        let decode_gbs = ok.replace("\"ok\"", "\"decode-gbs\"").replace("5000}", "5000}, \"task\": \"decode\"");
        let decode_batch0 = decode("decode-batch0", "5000", ", \"batch\": 0");
        let decode_negative = decode("decode-negative", "5000", "").replace("\"tokens_per_s_per_gpu\": 5000", "\"tpot_ms\": -6");
        let decode_ok = decode("decode-ok", "5000", ", \"batch\": 2");
        let batch = format!("{}, \"batch\": 4", ok.replace("\"ok\"", "\"train-batch\""));
        let no_gpus = ok.replace("\"ok\"", "\"no-gpus\"").replace(", \"gpus\": 8", "");
        let prefill_tpot = ok.replace("\"ok\"", "\"prefill-tpot\"").replace("5000}", "5000, \"tpot_ms\": 20}, \"task\": \"prefill\"");
        let decode_ttft = ok.replace("\"ok\"", "\"decode-ttft\"").replace("5000}", "5000, \"ttft_ms\": 20}, \"task\": \"decode\"");
        let all = [
            &no_plan,
            &no_system,
            &no_measured,
            &tpot,
            &twice,
            &batch,
            &no_gpus,
            &prefill_tpot,
            &decode_ttft,
            &decode_gbs,
            &decode_batch0,
            &decode_negative,
            &decode_ok,
            &ok,
        ];
        assert!([&no_plan, &no_system, &no_measured, &tpot, &twice, &no_gpus, &prefill_tpot, &decode_ttft].iter().all(|r| **r != ok));
        let file = runs(&format!(r#"{{"runs": [{}}}]}}"#, all.map(|r| r.as_str()).join("}, ")));
        let v = validate(&file, &catalog, &[], None);
        let why = |id: &str| v.runs.iter().find(|r| r.id == id).unwrap().notes.join(" ");
        assert!(why("no-plan").contains("no plan"), "{}", why("no-plan"));
        assert!(why("no-system").contains("no system"), "{}", why("no-system"));
        assert!(why("no-measured").contains("measured: tokens_per_s_per_gpu"), "{}", why("no-measured"));
        assert!(why("train-tpot").contains("measured tpot_ms: inference runs' keys"), "{}", why("train-tpot"));
        assert!(why("train-batch").contains("batch: inference runs' keys"), "{}", why("train-batch"));
        assert!(why("decode-twice").contains("tokens_per_s_per_gpu 5000 and tpot_ms 20: give one"), "{}", why("decode-twice"));
        assert!(why("no-gpus").contains("system gpus missing or 0"), "{}", why("no-gpus"));
        assert!(why("prefill-tpot").contains("tpot_ms and context are a decode run's keys"), "{}", why("prefill-tpot"));
        assert!(why("decode-ttft").contains("ttft_ms and prompt are a prefill run's keys"), "{}", why("decode-ttft"));
        assert!(why("decode-gbs").contains("are training settings"), "{}", why("decode-gbs"));
        assert!(why("decode-batch0").contains("batch 0: must be at least 1"), "{}", why("decode-batch0"));
        assert!(why("decode-negative").contains("measured tpot_ms -6: must be a positive number"), "{}", why("decode-negative"));
        assert_eq!((v.optimistic + v.pessimistic, v.runs.iter().filter(|r| r.refused).count()), (2, 12));
    }

    /// A slip of an op class the model prices is refused by name (`lineer` had priced an FP8 run
    /// in BF16 under "not modelled"); another class is noted. A run that names no framework the
    /// model knows says what its plan leaves at tracecast's defaults.
    #[test]
    fn a_misspelt_op_class_is_refused_and_unstated_defaults_are_said() {
        let catalog = Catalog::builtin();
        let file = runs(&format!(
            r#"{{"runs": [{}, "precision": {{"lineer": "FP8"}}}}, {}, "precision": {{"optimizer": "FP8"}}}}, {}, "framework": "torchtitan"}}]}}"#,
            run("slip", MODEL, ""),
            run("other", MODEL, ""),
            run("titan", MODEL, "")
        ));
        let v = validate(&file, &catalog, &[], None);
        let notes = |id: &str| v.runs.iter().find(|r| r.id == id).unwrap().notes.join(" | ");
        assert!(v.runs[0].refused && notes("slip").contains("precision key \"lineer\": did you mean \"linear\"?"), "{}", notes("slip"));
        assert!(!v.runs[1].refused && notes("other").contains("precision of optimizer (FP8) is not modelled"), "{}", notes("other"));
        let unsaid =
            "what the plan does not state, at tracecast's defaults: no activation recomputation; gradients reduced during the backward";
        assert!(notes("other").contains(unsaid), "{}", notes("other"));
        assert!(!notes("titan").contains("what the plan does not state"), "{}", notes("titan"));
    }

    /// A model missing several dimensions is told all of them at once.
    #[test]
    fn a_model_missing_dimensions_is_told_all_of_them() {
        let catalog = Catalog::builtin();
        let file = runs(&format!(r#"{{"runs": [{}}}]}}"#, run("m", r#"{"name": "x", "seq": 4096, "layers": 32}"#, "")));
        let notes = validate(&file, &catalog, &[], None).runs[0].notes.join(" ");
        assert!(notes.contains("missing fields `hidden`, `heads`, `kv_heads`, `ffn`, `vocab`, `activation`;"), "{notes}");
    }

    /// A power limit of no watts is the file's error, refused by name (it had been noted as
    /// "power limit -5 W" and projected); a precision of the wrong type says what it takes.
    #[test]
    fn a_non_positive_power_limit_and_a_precision_of_the_wrong_type_are_refused_by_name() {
        let catalog = Catalog::builtin();
        for w in ["0", "-5"] {
            let file = runs(&format!(r#"{{"runs": [{}}}]}}"#, run("bf16", MODEL, &format!(r#", "power_w": {w}"#))));
            let r = &validate(&file, &catalog, &[], None).runs[0];
            assert!(r.refused && r.predicted_tokens_per_s_per_gpu.is_none(), "{w}: {r:?}");
            assert!(r.notes.join(" ").contains(&format!("system power_w {w}: must be a positive number of watts")), "{:?}", r.notes);
        }
        let text = format!(r#"{{"runs": [{}, "precision": 42}}]}}"#, run("bf16", MODEL, ""));
        let e = serde_json::from_str::<RunsFile>(&text).unwrap_err().to_string();
        assert!(e.contains("a precision: a format name such as \"BF16\""), "{e}");
        let e = serde_json::from_str::<RunsFile>("[]").unwrap_err().to_string();
        assert!(e.contains("a JSON object with a `runs` list"), "{e}");
        // A value of the wrong type is named by its key, which serde's message leaves out.
        let text = format!("{{\"runs\": [{}}}]}}", run("bf16", MODEL, ", \"power_w\": \"500\""));
        let e = serde_json::from_str::<RunsFile>(&text).unwrap_err();
        assert_eq!(key_before(text.as_bytes(), e.line(), e.column()).as_deref(), Some("power_w"), "{e}");
        let text = text.replace("\"power_w\": \"500\"", "\"power_w\": 500").replace("\"gpus\": 8", "\"gpus\": 8.5");
        let e = serde_json::from_str::<RunsFile>(&text).unwrap_err();
        assert_eq!(key_before(text.as_bytes(), e.line(), e.column()).as_deref(), Some("gpus"), "{e}");
    }

    /// A preset given a sequence of no tokens projected a step without attention; a model's
    /// own `seq` 0 was already refused.
    #[test]
    fn a_preset_of_no_sequence_is_refused_by_name() {
        for seq in ["0", "-1"] {
            let m: RunModel = serde_json::from_str(&format!(r#"{{"preset": "llama2-7b", "seq": {seq}}}"#)).unwrap();
            let e = m.transformer("run").unwrap_err().to_string();
            assert!(e.contains(&format!("seq {seq}: must be a positive number")), "{e}");
        }
        let m: RunModel = serde_json::from_str(r#"{"preset": "llama2-7b", "seq": 4096}"#).unwrap();
        assert_eq!(m.transformer("run").unwrap().seq, 4096.0);
    }

    /// A fractional width, head count or sequence (a typo's `32.5` heads) was priced as if a GPU
    /// could run it; it is refused by name, as is a hidden size the heads do not divide.
    #[test]
    fn fractional_model_dimensions_are_refused_by_name() {
        let model = |change: &str| {
            let (key, value) = change.split_once('=').unwrap();
            let mut m: serde_json::Value = serde_json::from_str(MODEL).unwrap();
            m[key] = serde_json::from_str(value).unwrap();
            serde_json::from_value::<RunModel>(m).unwrap().transformer("run")
        };
        for (change, said) in [
            ("heads=32.5", "heads 32.5: must be a whole number"),
            ("seq=8192.5", "seq 8192.5: must be a whole number"),
            ("ffn=14336.25", "ffn 14336.25: must be a whole number"),
            ("heads=48", "head_dim (hidden / heads) 85.33333333333333: must be a whole number"),
            // A width of four billion or more had squared to infinity: "Iteration NaN ms", exit 0.
            ("hidden=1e308", "hidden 1e308: must be at most 4294967295"),
            ("ffn=4294967296", "ffn 4294967296: must be at most 4294967295"),
            // A fraction of one is not "not positive".
            ("hidden=2.5", "head_dim (hidden / heads) 0.078125: must be at least 1"),
        ] {
            let e = model(change).unwrap_err().to_string();
            assert!(e.contains(said), "{change}: {e}");
        }
        assert_eq!(model("seq=4096").unwrap().head_dim, 128.0);
    }

    /// Where the source names NeMo or Megatron-Bridge, what their recipes default to and the plan leaves unsaid
    /// is applied and said: sequence parallelism with TP and the distributed optimizer (NeMo-Framework-Launcher
    /// `conf/training/llama/llama2_70b.yaml`: `sequence_parallel: true`, `distributed_fused_adam`); TP overlap
    /// for Megatron-Bridge (its performance configs set `tp_comm_overlap`).
    #[test]
    fn framework_defaults_fill_what_the_plan_leaves_unsaid() {
        let catalog = Catalog::builtin();
        let run = |id: &str, source: &str, plan: &str| {
            format!(
                r#"{{"id": "{id}", "source": "{source}", "model": {MODEL}, "system": {{"gpu": "h100-sxm", "gpus": 16}}, "plan": "{plan}", "measured": {{"tokens_per_s_per_gpu": 5000}}}}"#
            )
        };
        let file = runs(&format!(
            r#"{{"runs": [{}, {}, {}, {}]}}"#,
            run("bridge", "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md", "tp=2,dp=8,mb=1,gbs=16"),
            run("nemo", "NVIDIA/NeMo docs/source/performance/performance_summary.md", "tp=2,dp=8,mb=1,gbs=16"),
            run(
                "stated",
                "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md",
                "tp=2,dp=8,mb=1,gbs=16,sp,zero=2,tp_overlap=off,bucket=25"
            ),
            run("other", "a lab's own benchmarks", "tp=2,dp=8,mb=1,gbs=16"),
        ));
        let v = validate(&file, &catalog, &[], None);
        let notes = |id: &str| v.runs.iter().find(|r| r.id == id).unwrap().notes.join(" | ");
        let bridge = notes("bridge");
        assert!(bridge.contains("Megatron-Bridge defaults the plan does not state (framework named by the source): sp"), "{bridge}");
        assert!(!bridge.contains("etp=1"), "a dense model: {bridge}");
        assert!(bridge.contains("zero=1") && bridge.contains("tp_overlap (TP communication overlap"), "{bridge}");
        // Megatron-Core's gradient buckets: 40 M parameters at dp = 8 (16-bit: 80 MB = 76.3 MiB).
        assert!(bridge.contains("bucket=76.3 (Megatron-Core's gradient buckets: max(40 M, 1 M × dp) = 40 M parameters)"), "{bridge}");
        let nemo = notes("nemo");
        assert!(nemo.contains("NeMo defaults") && nemo.contains("sp") && nemo.contains("zero=1"), "{nemo}");
        assert!(!nemo.contains("tp_overlap"), "{nemo}");
        // What the plan states wins; a framework without such defaults gets none.
        assert!(!notes("stated").contains("defaults the plan does not state"), "{}", notes("stated"));
        assert!(!notes("other").contains("defaults the plan does not state"), "{}", notes("other"));
        // Megatron-Bridge's MoE recipes keep whole experts (`expert_tensor_parallel_size=1`); a
        // dense model, a stated `etp` and another framework get no such default.
        let moe = |id: &str, source: &str, plan: &str| {
            format!(
                r#"{{"id": "{id}", "source": "{source}", "model": {{"preset": "mixtral-8x7b", "seq": 4096}}, "system": {{"gpu": "h100-sxm", "gpus": 64}}, "plan": "{plan}", "measured": {{"tokens_per_s_per_gpu": 3000}}}}"#
            )
        };
        let bridge_source = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md";
        let moe_file = runs(&format!(
            r#"{{"runs": [{}, {}, {}]}}"#,
            moe("moe", bridge_source, "tp=2,dp=32,ep=8,mb=1,gbs=32"),
            moe("moe-stated", bridge_source, "tp=2,dp=32,ep=8,etp=2,mb=1,gbs=32"),
            moe("moe-other", "a lab's own benchmarks", "tp=2,dp=32,ep=8,sp,mb=1,gbs=32"),
        ));
        let with_experts = validate(&moe_file, &catalog, &[], None);
        let moe_notes = |id: &str| with_experts.runs.iter().find(|r| r.id == id).unwrap().notes.join(" | ");
        assert!(moe_notes("moe").contains("etp=1 (its MoE recipes' expert_tensor_parallel_size=1"), "{}", moe_notes("moe"));
        assert!(!moe_notes("moe-stated").contains("etp=1"), "{}", moe_notes("moe-stated"));
        assert!(!moe_notes("moe-other").contains("etp=1"), "{}", moe_notes("moe-other"));
        // torchtitan's `selective` is its per-op checkpointing.
        let tt =
            runs(&format!(r#"{{"runs": [{}]}}"#, run("tt", "pytorch/torchtitan benchmarks", "fsdp=16,mb=1,gbs=16,recompute=selective")));
        let tt = validate(&tt, &catalog, &[], None);
        assert!(
            tt.runs[0]
                .notes
                .join(" | ")
                .contains("torchtitan defaults the plan does not state (framework named by the source): recompute=op for recompute=selective (its per-op selective activation checkpointing), grad_reduce=fp32 (its FSDP2 default, mixed_precision_reduce = \"float32\"), attention=fa2"),
            "{:?}",
            tt.runs[0].notes
        );
        // llm-foundry's benchmark tables ran its Triton FlashAttention; a stated kernel wins,
        // and llm-foundry outside those tables (its later default is `flash`) gets nothing.
        let foundry = runs(&format!(
            r#"{{"runs": [{}, {}, {}]}}"#,
            run("tables", "mosaicml/llm-foundry scripts/train/benchmarking/README.md", "fsdp=16,mb=1,gbs=16"),
            run("stated", "mosaicml/llm-foundry scripts/train/benchmarking/README.md", "fsdp=16,mb=1,gbs=16,attention=fa2"),
            run("later", "mosaicml/llm-foundry", "fsdp=16,mb=1,gbs=16"),
        ));
        let foundry = validate(&foundry, &catalog, &[], None);
        let notes = |id: &str| foundry.runs.iter().find(|r| r.id == id).unwrap().notes.join(" | ");
        assert!(
            notes("tables").contains(
                "llm-foundry (benchmark tables) defaults the plan does not state (framework named by the source): attention=fa-triton"
            ),
            "{}",
            notes("tables")
        );
        assert!(notes("tables").contains("fa-triton not measured on h100-sxm"), "{}", notes("tables"));
        for id in ["stated", "later"] {
            assert!(!notes(id).contains("defaults the plan does not state") && !notes(id).contains("fa-triton"), "{}", notes(id));
        }
        // The distributed optimizer shards the Adam state over the 8 data-parallel ranks.
        let mem = |id: &str| v.runs.iter().find(|r| r.id == id).unwrap().memory.clone().unwrap();
        assert!((mem("other").optimizer_gb / mem("nemo").optimizer_gb - 8.0).abs() < 1e-9);
    }

    #[test]
    fn a_mixture_of_experts_is_read_with_its_experts_and_head_width_and_unknown_keys_are_refused() {
        // Qwen3-30B-A3B's config.json (hidden 2048, 32 heads of 128, 4 KV heads, 128 experts of
        // 768, 8 per token): its model card says 30.5 B parameters, 3.3 B activated.
        let qwen = r#"{"layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4, "head_dim": 128, "ffn": 768, "vocab": 151936, "seq": 4096, "activation": "swiglu", "experts": 128, "top_k": 8}"#;
        let m = |json: &str| serde_json::from_str::<RunModel>(json).unwrap().transformer("t");
        let t = m(qwen).unwrap();
        assert!((t.params() / 30.5e9 - 1.0).abs() < 0.01, "{} parameters", t.params());
        assert!((t.active_params() / 3.3e9 - 1.0).abs() < 0.02, "{} active", t.active_params());
        // The preset is the same model.
        assert_eq!(t.params(), Transformer::preset("qwen3-30b-a3b").unwrap().params());
        // Without head_dim the heads are hidden / heads wide: a dense model's figures as before.
        let dense = m(MODEL).unwrap();
        assert_eq!((dense.head_dim, dense.experts, dense.top_k), (128.0, 1.0, 1.0));
        // A key the format does not have is refused by name, never read as a dense model.
        let hf = qwen.replace(r#""experts": 128"#, r#""num_experts": 128"#).replace(r#", "top_k": 8"#, "");
        let e = m(&hf).unwrap_err().to_string();
        assert!(e.contains("no other keys") && e.contains("unknown field `num_experts`"), "{e}");
        let e = m(r#"{"preset": "qwen3-30b-a3b", "seq": 4096, "experts": 64}"#).unwrap_err().to_string();
        assert!(e.contains("unknown field `experts`"), "{e}");
        assert_eq!(m(r#"{"preset": "qwen3-30b-a3b", "seq": 4096, "name": "mine"}"#).unwrap().name, "mine");
        let e = m(&qwen.replace(r#", "top_k": 8"#, "")).unwrap_err().to_string();
        assert!(e.contains("experts without top_k"), "{e}");
        let e = m(&qwen.replace(r#""top_k": 8"#, r#""top_k": 200"#)).unwrap_err().to_string();
        assert!(e.contains("more than there are"), "{e}");
        // Sliding windows: both keys or neither.
        let windowed = m(&qwen.replace(r#""top_k": 8"#, r#""top_k": 8, "sliding_window": 128, "windowed_layers": 24"#)).unwrap();
        assert_eq!((windowed.window, windowed.windowed_layers), (128.0, 24));
        let e = m(&qwen.replace(r#""top_k": 8"#, r#""top_k": 8, "sliding_window": 128"#)).unwrap_err().to_string();
        assert!(e.contains("go together"), "{e}");
        // Latent attention and a shared expert: DeepSeek-V3's figures give the preset's parameters.
        let deepseek = r#"{"layers": 61, "hidden": 7168, "heads": 128, "kv_heads": 128, "ffn": 2048, "vocab": 129280, "seq": 4096, "activation": "swiglu", "experts": 256, "top_k": 8, "shared_experts": 1, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "dense_layers": 3, "dense_ffn": 18432}"#;
        assert_eq!(m(deepseek).unwrap().params(), Transformer::preset("deepseek-v3").unwrap().params());
        let e = m(&deepseek.replace(r#", "dense_ffn": 18432"#, "")).unwrap_err().to_string();
        assert!(e.contains("go together"), "{e}");
        let e = m(&deepseek.replace(r#""dense_layers": 3"#, r#""dense_layers": 62"#)).unwrap_err().to_string();
        assert!(e.contains("at most the 61 layers"), "{e}");
        let e = m(&deepseek.replace(r#", "v_head_dim": 128"#, "")).unwrap_err().to_string();
        assert!(e.contains("takes all of"), "{e}");
        let e = m(&deepseek.replace(r#""kv_heads": 128"#, r#""kv_heads": 1"#)).unwrap_err().to_string();
        assert!(e.contains("kv_heads 1 with latent attention"), "{e}");
        let e = m(&deepseek.replace(r#""heads": 128,"#, r#""heads": 128, "head_dim": 192,"#)).unwrap_err().to_string();
        assert!(e.contains("head_dim with latent attention"), "{e}");
        let e = m(&qwen.replace(r#", "experts": 128, "top_k": 8"#, r#", "shared_experts": 1"#)).unwrap_err().to_string();
        assert!(e.contains("with experts"), "{e}");
    }
}
