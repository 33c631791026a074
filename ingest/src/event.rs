//! The columnar event model of one rank: interned names and a struct of arrays.

use rustc_hash::FxHashMap;

/// What an event is, independent of the category spelling of its era.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EventKind {
    /// A GPU kernel (`kernel`, legacy `Kernel`, MTIA `mtia_ccp_events`).
    Kernel,
    /// A GPU memory copy (`gpu_memcpy`, legacy `Memcpy`).
    Memcpy,
    /// A GPU memory set (`gpu_memset`, legacy `Memset`).
    Memset,
    /// A synchronisation row on a GPU stream (`cuda_sync`); not GPU activity.
    GpuSync,
    /// A runtime or driver call on the host (`cuda_runtime`, `cuda_driver`, legacy `Runtime`).
    Runtime,
    /// A CPU operator (`cpu_op`, legacy `Operator`).
    CpuOp,
    /// A user annotation on the host (`user_annotation`), `ProfilerStep#N` among them.
    UserAnnotation,
    /// A user annotation replayed on a GPU stream (`gpu_user_annotation`).
    GpuUserAnnotation,
    /// A Python function from the stack tracer (`python_function`).
    PythonFunction,
    /// A flow arrow (`ph` `s`/`f`, `ac2g`, `fwdbwd`): the correlation column holds its id.
    Flow,
    /// An instant event (`ph` `i`).
    Instant,
    /// Anything else (unknown categories are kept here, never an error).
    Other,
}

impl EventKind {
    /// Kernels, memcpy and memset: what occupies a GPU.
    pub fn is_gpu_activity(self) -> bool {
        matches!(self, EventKind::Kernel | EventKind::Memcpy | EventKind::Memset)
    }

    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 12] = [
        EventKind::Kernel,
        EventKind::Memcpy,
        EventKind::Memset,
        EventKind::GpuSync,
        EventKind::Runtime,
        EventKind::CpuOp,
        EventKind::UserAnnotation,
        EventKind::GpuUserAnnotation,
        EventKind::PythonFunction,
        EventKind::Flow,
        EventKind::Instant,
        EventKind::Other,
    ];

    /// The stable snake_case name used in outputs (a dataset's `kind` column).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Kernel => "kernel",
            EventKind::Memcpy => "memcpy",
            EventKind::Memset => "memset",
            EventKind::GpuSync => "gpu_sync",
            EventKind::Runtime => "runtime",
            EventKind::CpuOp => "cpu_op",
            EventKind::UserAnnotation => "user_annotation",
            EventKind::GpuUserAnnotation => "gpu_user_annotation",
            EventKind::PythonFunction => "python_function",
            EventKind::Flow => "flow",
            EventKind::Instant => "instant",
            EventKind::Other => "other",
        }
    }

    /// The kind named `name` by [`EventKind::as_str`].
    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The kind of a complete (`X`) event of category `cat`, `None` when the category is unknown.
    pub fn from_category(cat: &str) -> Option<EventKind> {
        const TABLE: [(&str, EventKind); 20] = [
            ("kernel", EventKind::Kernel),
            ("cpu_op", EventKind::CpuOp),
            ("cuda_runtime", EventKind::Runtime),
            ("python_function", EventKind::PythonFunction),
            ("user_annotation", EventKind::UserAnnotation),
            ("gpu_user_annotation", EventKind::GpuUserAnnotation),
            ("gpu_memcpy", EventKind::Memcpy),
            ("gpu_memset", EventKind::Memset),
            ("cuda_driver", EventKind::Runtime),
            ("cuda_sync", EventKind::GpuSync),
            ("operator", EventKind::CpuOp),
            ("runtime", EventKind::Runtime),
            ("memcpy", EventKind::Memcpy),
            ("memset", EventKind::Memset),
            ("mtia_runtime", EventKind::Runtime),
            ("mtia_ccp_events", EventKind::Kernel),
            ("overhead", EventKind::Other),
            ("trace", EventKind::Other),
            ("cuda_profiler_range", EventKind::Other),
            ("cpu_instant_event", EventKind::Instant),
        ];
        TABLE.iter().find(|(name, _)| name.eq_ignore_ascii_case(cat)).map(|&(_, kind)| kind)
    }
}

/// Index of a name in [`Names`].
pub type NameId = u32;

/// Interned strings: each distinct event name is stored once.
#[derive(Debug, Default, Clone)]
pub struct Names {
    strings: Vec<Box<str>>,
    index: FxHashMap<Box<str>, NameId>,
}

impl Names {
    /// The id of `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> NameId {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.strings.len() as NameId;
        self.strings.push(s.into());
        self.index.insert(s.into(), id);
        id
    }

    /// The string of `id` (empty for an unknown id).
    pub fn get(&self, id: NameId) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    /// The id of `s`, if interned.
    pub fn lookup(&self, s: &str) -> Option<NameId> {
        self.index.get(s).copied()
    }

    /// Number of distinct names.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Whether no name is interned.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// All names in id order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.strings.iter().map(|s| &**s)
    }
}

/// The events of one rank as columns; row `i` of every column is event `i`.
///
/// Missing integers (correlation, external id) are `-1`. For GPU events `pid`
/// is the device ordinal and `tid` the stream; for host events they are the
/// process and thread. String pids/tids map to numbers: numeric text as its
/// value, `"stream 7"` as 7, any other text to a negative id unique in the file.
#[derive(Debug, Default, Clone)]
pub struct Events {
    /// Kind of each event.
    pub kind: Vec<EventKind>,
    /// Interned name.
    pub name: Vec<NameId>,
    /// Start, integer nanoseconds (absolute when the trace gives `baseTimeNanoseconds`).
    pub ts_ns: Vec<i64>,
    /// Duration in nanoseconds (0 where absent).
    pub dur_ns: Vec<i64>,
    /// Process id, or device ordinal for GPU events.
    pub pid: Vec<i64>,
    /// Thread id, or stream for GPU events.
    pub tid: Vec<i64>,
    /// `args.correlation` (flow id for flow events), or -1.
    pub correlation: Vec<i64>,
    /// `args["External id"]`, or -1.
    pub external_id: Vec<i64>,
}

impl Events {
    /// Number of events.
    pub fn len(&self) -> usize {
        self.kind.len()
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }

    /// Start of event `i` in µs.
    pub fn ts_us(&self, i: usize) -> f64 {
        self.ts_ns.get(i).map_or(0.0, |&t| t as f64 / 1000.0)
    }

    /// Duration of event `i` in µs.
    pub fn dur_us(&self, i: usize) -> f64 {
        self.dur_ns.get(i).map_or(0.0, |&t| t as f64 / 1000.0)
    }

    /// End of event `i` in ns.
    pub fn end_ns(&self, i: usize) -> i64 {
        self.ts_ns.get(i).copied().unwrap_or(0) + self.dur_ns.get(i).copied().unwrap_or(0)
    }

    pub(crate) fn reserve(&mut self, n: usize) {
        self.kind.reserve(n);
        self.name.reserve(n);
        self.ts_ns.reserve(n);
        self.dur_ns.reserve(n);
        self.pid.reserve(n);
        self.tid.reserve(n);
        self.correlation.reserve(n);
        self.external_id.reserve(n);
    }

    pub(crate) fn push(&mut self, row: Row) {
        self.kind.push(row.kind);
        self.name.push(row.name);
        self.ts_ns.push(row.ts_ns);
        self.dur_ns.push(row.dur_ns);
        self.pid.push(row.pid);
        self.tid.push(row.tid);
        self.correlation.push(row.correlation);
        self.external_id.push(row.external_id);
    }

    pub(crate) fn append(&mut self, other: Events, name_map: &[NameId]) {
        self.kind.extend(other.kind);
        self.name.extend(other.name.iter().map(|&n| name_map.get(n as usize).copied().unwrap_or(n)));
        self.ts_ns.extend(other.ts_ns);
        self.dur_ns.extend(other.dur_ns);
        self.pid.extend(other.pid);
        self.tid.extend(other.tid);
        self.correlation.extend(other.correlation);
        self.external_id.extend(other.external_id);
    }
}

/// One row before it is split into columns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row {
    pub(crate) kind: EventKind,
    pub(crate) name: NameId,
    pub(crate) ts_ns: i64,
    pub(crate) dur_ns: i64,
    pub(crate) pid: i64,
    pub(crate) tid: i64,
    pub(crate) correlation: i64,
    pub(crate) external_id: i64,
}
