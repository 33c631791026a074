//! tracecast's allocator policy, in one place: when memory a job freed goes
//! back to the system. A job's ranks are read and reduced on rayon's threads,
//! each allocating in its own glibc arena; what they free there stays in the
//! process unless it is handed back, and the replay's graph, allocated next,
//! cannot reuse it. The pipeline releases after each job's read, a report
//! after its calibration, the replay as its graph consumes the ranks' pieces
//! and before its simulation. A no-op where the allocator is not glibc's.

/// Hands the memory freed so far back to the system, every arena's, and from
/// now on as it is freed. glibc raises its trim threshold (up to 64 MiB) each
/// time a large block is freed, and `malloc_trim` does not shrink a thread
/// arena's top, so after a job of a thousand ranks tens of MiB of freed memory
/// would stay resident under the replay: the threshold is fixed at glibc's own
/// default (128 KiB) here, where a job's rank pass is over, and not before,
/// where it would cost the rank pass a tenth of its time in page faults
/// (BENCHMARKS.md, issue 25).
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and changes only the allocator's
    // tuning; malloc_trim takes no pointers and only returns free pages of the
    // allocator's own arenas.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 10);
        libc::malloc_trim(0);
    }
}
