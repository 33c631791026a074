//! The discrete-event simulator: one engine for graphs rebuilt from traces and
//! graphs generated from models.
//!
//! A graph is a set of tasks (a host call, a GPU kernel, a copy) with a
//! duration each, and edges between task *events* (a task's start or end):
//! "B starts no earlier than A ends plus lag", "B starts no earlier than A
//! starts plus lag" (a launch), "B ends no earlier than A ends plus lag" (a
//! synchronising call), "B ends no earlier than A starts plus lag" (a
//! collective, which ends on every rank at the latest arrival plus its
//! transfer). An event fires once all its inputs have fired (Kahn's algorithm
//! on the event graph), at the latest of their times plus lags, so a run is
//! deterministic and O(E).

/// Index of a task.
pub type TaskId = u32;

/// Which event of a task an edge leaves from or arrives at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// The task's start.
    Start,
    /// The task's end.
    End,
}

/// A constraint: event `to` happens no earlier than event `from` plus
/// `lag_ns`. Events are numbered as the simulator fires them: 2·task for a
/// task's start, 2·task + 1 for its end (16 bytes an edge: a job's graph
/// holds millions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// The earlier event.
    pub from: u32,
    /// The later event.
    pub to: u32,
    /// Minimum delay, ns.
    pub lag_ns: i64,
}

/// The event of a task: 2·task for its start, 2·task + 1 for its end.
fn event(task: TaskId, at: At) -> u32 {
    2 * task + u32::from(at == At::End)
}

impl Edge {
    /// The task the edge arrives at.
    pub fn to_task(&self) -> TaskId {
        self.to / 2
    }
}

/// Tasks and edges.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Duration of each task, ns (its end is at least its start plus this).
    pub dur_ns: Vec<i64>,
    /// Earliest start of each task, ns (the anchor of a thread's first call).
    pub release_ns: Vec<i64>,
    /// Constraints.
    pub edges: Vec<Edge>,
}

impl Graph {
    /// Adds a task; returns its id.
    pub fn task(&mut self, dur_ns: i64, release_ns: i64) -> TaskId {
        self.dur_ns.push(dur_ns.max(0));
        self.release_ns.push(release_ns);
        (self.dur_ns.len() - 1) as TaskId
    }

    /// Adds a constraint.
    pub fn edge(&mut self, from: TaskId, from_at: At, to: TaskId, to_at: At, lag_ns: i64) {
        self.edges.push(Edge { from: event(from, from_at), to: event(to, to_at), lag_ns });
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.dur_ns.len()
    }

    /// Whether there are no tasks.
    pub fn is_empty(&self) -> bool {
        self.dur_ns.is_empty()
    }
}

/// Start and end of every task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Start, ns.
    pub start_ns: Vec<i64>,
    /// End, ns.
    pub end_ns: Vec<i64>,
    /// Tasks that could not be scheduled because of a cycle in the constraints, ascending: their
    /// times are not a schedule's (inputs on the cycle never arrived) and cover no window.
    pub unscheduled: Vec<u32>,
    /// For every event (2·task = start, 2·task + 1 = end): the event that set
    /// its time, or [`NO_EVENT`] when its release did — the links of the
    /// critical path.
    pub binding: Vec<u32>,
}

/// Marks "no binding event" in [`Schedule::binding`].
pub const NO_EVENT: u32 = u32::MAX;

impl Schedule {
    /// Task starts and ends from the times of events 2·t (start) and 2·t + 1 (end).
    fn from_events(mut time: Vec<i64>, binding: Vec<u32>, unscheduled: Vec<u32>) -> Schedule {
        let start_ns: Vec<i64> = time.iter().step_by(2).copied().collect();
        // The ends in place of the event times (k ≤ 2k + 1): one list fewer at a time.
        for (k, s) in start_ns.iter().enumerate() {
            time[k] = time[2 * k + 1].max(*s);
        }
        time.truncate(start_ns.len());
        time.shrink_to_fit();
        Schedule { start_ns, end_ns: time, unscheduled, binding }
    }

    /// Whether task `t` was scheduled (not on a cycle, nor waiting on one): its times are a
    /// schedule's. The readers of a task's times (windows, critical path, timeline) ask here.
    pub fn is_scheduled(&self, t: usize) -> bool {
        self.unscheduled.is_empty() || u32::try_from(t).is_ok_and(|t| self.unscheduled.binary_search(&t).is_err())
    }

    /// How many of the tasks `tasks` (a rank's range) were not scheduled: two searches of the
    /// sorted list, not a look-up per task.
    pub fn unscheduled_in(&self, tasks: std::ops::Range<usize>) -> usize {
        let at = |t: usize| self.unscheduled.partition_point(|&u| (u as usize) < t);
        at(tasks.end) - at(tasks.start)
    }

    /// The chain of events that determined the time of `event`, latest first.
    pub fn critical_path(&self, event: u32) -> Vec<u32> {
        let mut path = vec![event];
        let mut e = event;
        while let Some(&b) = self.binding.get(e as usize) {
            if b == NO_EVENT || path.len() > self.binding.len() {
                break;
            }
            path.push(b);
            e = b;
        }
        path
    }

    /// Time of an event (2·task = start, 2·task + 1 = end), ns.
    pub fn event_ns(&self, event: u32) -> i64 {
        let t = event as usize / 2;
        if event.is_multiple_of(2) { self.start_ns[t] } else { self.end_ns[t] }
    }
}

/// Runs the graph. Events are indexed 2·task (start) and 2·task + 1 (end);
/// every end also waits for its own start plus the task's duration.
pub fn simulate(g: &Graph) -> Schedule {
    let n = g.len();
    let ev = 2 * n;
    // Generated workloads add each task with the edges into it, so every edge
    // points forward and the edges come sorted by their target: one sweep
    // over the events in index order settles each as it is reached.
    if g.edges.iter().all(|e| (e.to as usize) < ev && e.from < e.to) && g.edges.windows(2).all(|w| w[0].to <= w[1].to) {
        return sweep(g);
    }
    // Adjacency of the event graph in CSR form, without each task's own
    // start → end edge (its lag is the task's duration, applied as its
    // start fires): the lists are sized by the graph's edges alone.
    let valid = |e: &&Edge| (e.from as usize) < ev && (e.to as usize) < ev;
    let mut indeg = vec![0u32; ev];
    let mut first = vec![0u32; ev + 1];
    for e in g.edges.iter().filter(valid) {
        first[e.from as usize + 1] += 1;
        indeg[e.to as usize] += 1;
    }
    for t in 0..n {
        indeg[2 * t + 1] += 1;
    }
    for i in 0..ev {
        first[i + 1] += first[i];
    }
    // Each event's out-edges as indices into the graph's edges (4 bytes an
    // edge instead of a copy of its target and lag).
    let order = {
        let mut fill = first.clone();
        let mut order = vec![0u32; first[ev] as usize];
        for (k, e) in g.edges.iter().enumerate().filter(|(_, e)| valid(e)) {
            order[fill[e.from as usize] as usize] = k as u32;
            fill[e.from as usize] += 1;
        }
        order
    };
    // Earliest time of each event; starts begin at their release.
    let mut time = vec![i64::MIN; ev];
    let mut binding = vec![NO_EVENT; ev];
    for t in 0..n {
        time[2 * t] = g.release_ns[t];
    }
    // Kahn's algorithm in any topological order gives the same times (each
    // event is the max over its inputs); ties between inputs arriving at the
    // same time go to the earliest-firing input (then the lowest index), as a
    // time-ordered queue would, so the critical path is the same too.
    let mut ready: Vec<u32> = indeg.iter().enumerate().filter(|(_, d)| **d == 0).map(|(i, _)| i as u32).collect();
    let mut fired = 0usize;
    while let Some(i) = ready.pop() {
        fired += 1;
        let i = i as usize;
        let t = time[i];
        let (a, b) = (first[i] as usize, first[i + 1] as usize);
        let own_end = i.is_multiple_of(2).then(|| (i as u32 + 1, g.dur_ns[i / 2]));
        let out = order[a..b].iter().map(|&k| &g.edges[k as usize]).map(|e| (e.to, e.lag_ns));
        for (to, lag) in out.chain(own_end) {
            let to = to as usize;
            let at = t.saturating_add(lag);
            let b = binding[to];
            if at > time[to] || (at == time[to] && b != NO_EVENT && (t, i) < (time[b as usize], b as usize)) {
                time[to] = at;
                binding[to] = i as u32;
            }
            indeg[to] -= 1;
            if indeg[to] == 0 {
                ready.push(to as u32);
            }
        }
    }
    // An event that never fired waits on a cycle: its task is not scheduled (none, mostly).
    let unscheduled: Vec<u32> =
        if fired < ev { (0..n).filter(|&t| indeg[2 * t] > 0 || indeg[2 * t + 1] > 0).map(|t| t as u32).collect() } else { Vec::new() };
    // The adjacency is done with before the schedule's lists are made.
    drop((indeg, first, order, ready));
    Schedule::from_events(time, binding, unscheduled)
}

/// [`simulate`] for a graph whose edges all point forward in event order and
/// are sorted by target event: O(N + E), no queue, no adjacency lists.
fn sweep(g: &Graph) -> Schedule {
    let n = g.len();
    let mut time = vec![i64::MIN; 2 * n];
    let mut binding = vec![NO_EVENT; 2 * n];
    let mut e = 0;
    for t in 0..n {
        for (i, at) in [(2 * t, At::Start), (2 * t + 1, At::End)] {
            if at == At::Start {
                time[i] = g.release_ns[t];
            } else {
                time[i] = time[i - 1].saturating_add(g.dur_ns[t]);
                binding[i] = (i - 1) as u32;
            }
            while let Some(edge) = g.edges.get(e).filter(|x| x.to as usize == i) {
                let from = edge.from as usize;
                let arrive = time[from].saturating_add(edge.lag_ns);
                if arrive > time[i] {
                    time[i] = arrive;
                    binding[i] = from as u32;
                }
                e += 1;
            }
        }
    }
    Schedule::from_events(time, binding, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_stream_order_and_collective_join() {
        let mut g = Graph::default();
        let host = g.task(10, 0); // a launch call at t = 0
        let k1 = g.task(100, 0);
        let k2 = g.task(50, 0);
        g.edge(host, At::Start, k1, At::Start, 5); // launch latency
        g.edge(host, At::End, k2, At::Start, 0);
        g.edge(k1, At::End, k2, At::Start, 0); // stream order
        // Two ranks' collective: ends at the latest arrival + 30.
        let a = g.task(0, 200);
        let b = g.task(0, 260);
        for (x, y) in [(a, b), (b, a), (a, a), (b, b)] {
            g.edge(x, At::Start, y, At::End, 30);
        }
        let s = simulate(&g);
        assert_eq!((s.start_ns[k1 as usize], s.end_ns[k1 as usize]), (5, 105));
        assert_eq!((s.start_ns[k2 as usize], s.end_ns[k2 as usize]), (105, 155));
        assert_eq!(s.end_ns[a as usize], 290);
        assert_eq!(s.end_ns[b as usize], 290);
        assert!(s.unscheduled.is_empty());
        // k2 ends last: its end <- its start <- k1's end <- k1's start <- the launch.
        let path = s.critical_path(2 * k2 + 1);
        assert_eq!(path, [2 * k2 + 1, 2 * k2, 2 * k1 + 1, 2 * k1, 2 * host]);
        assert_eq!(s.event_ns(2 * k1), 5);
    }

    #[test]
    fn the_sweep_and_the_queue_agree_on_forward_graphs() {
        // A random forward graph, built in program order (edges sorted by target).
        let mut g = Graph::default();
        let mut x: u64 = 7;
        let mut rand = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for t in 0..500u32 {
            g.task((rand() % 1000) as i64, if t % 50 == 0 { (rand() % 100) as i64 } else { i64::MIN });
            // Edges into the start first, then into the end: sorted by target event.
            for ta in [At::Start, At::End] {
                for _ in 0..(rand() % 3) {
                    if t == 0 {
                        break;
                    }
                    let from = (rand() % u64::from(t)) as u32;
                    let fa = if rand() % 2 == 0 { At::End } else { At::Start };
                    g.edge(from, fa, t, ta, (rand() % 50) as i64);
                }
            }
        }
        let swept = simulate(&g);
        assert_eq!(swept.start_ns, sweep(&g).start_ns, "sorted forward edges take the sweep");
        // The same constraints in another order take the queue.
        let mut shuffled = g.clone();
        shuffled.edges.reverse();
        let queued = simulate(&shuffled);
        assert_eq!(swept.start_ns, queued.start_ns);
        assert_eq!(swept.end_ns, queued.end_ns);
        assert!(swept.unscheduled.is_empty());
    }

    #[test]
    fn cycles_are_reported_not_looped() {
        let mut g = Graph::default();
        let a = g.task(1, 0);
        let b = g.task(1, 0);
        g.edge(a, At::End, b, At::Start, 0);
        g.edge(b, At::End, a, At::Start, 0);
        let c = g.task(1, 0);
        g.edge(c, At::End, a, At::Start, 0);
        assert_eq!(simulate(&g).unscheduled, vec![a, b]);
    }
}
