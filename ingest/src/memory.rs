//! tracecast's allocator policy, in one place: when memory a job freed goes
//! back to the system. A job's ranks are read and reduced on rayon's threads,
//! each allocating in its own glibc arena; what they free there stays in the
//! process unless it is handed back, and the replay's graph, allocated next,
//! cannot reuse it. The pipeline releases after each job's read and says when
//! the process's last rank pass begins; a report releases after its
//! calibration and the replay as its graph consumes the ranks' pieces and
//! before its simulation, the process's peak. No-ops where the allocator is
//! not glibc's. Call them where no other thread is allocating.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether no rank pass follows the one under way (see [`last_rank_pass`]).
static LAST_PASS: AtomicBool = AtomicBool::new(false);

/// Says that the rank pass about to run is the process's last.
pub fn last_rank_pass() {
    LAST_PASS.store(true, Ordering::Relaxed);
}

/// Hands the memory freed so far back to the system, every arena's.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only returns free pages of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// [`release_freed_memory`] on the way to a replay's simulation; once the
/// last rank pass has begun, freed memory also goes back from now on as it is
/// freed. glibc raises its trim threshold (up to 64 MiB) each time a large
/// block is freed, and `malloc_trim` does not shrink a thread arena's top, so
/// after a job of a thousand ranks MiBs of freed memory would stay resident
/// under the replay; fixing the threshold at glibc's own default (128 KiB)
/// returns them. Not before the last rank pass: glibc then never adjusts its
/// thresholds again, and a rank pass under fixed ones maps and faults its
/// buffers in afresh (a second job of 4096 ranks took 20 % longer;
/// BENCHMARKS.md, issue 25).
pub fn release_for_replay() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if LAST_PASS.load(Ordering::Relaxed) {
        // SAFETY: mallopt takes two integers and changes only the allocator's tuning.
        unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 10);
        }
    }
    release_freed_memory();
}
