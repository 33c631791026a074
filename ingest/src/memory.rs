//! tracecast's allocator policy, in one place: when memory a job freed goes
//! back to the system. A job's ranks are read and reduced on rayon's threads,
//! each allocating in its own glibc arena; what they free there stays in the
//! process unless it is handed back, and the replay's graph, allocated next,
//! cannot reuse it. The pipeline sets the policy before it reads a job and
//! releases after each job's read; the replay releases inside its own work
//! (as a job's graph consumes the ranks' pieces, and before the simulation).
//! Both are no-ops where the allocator is not glibc's.

/// Has the allocator hand freed memory back as it goes instead of keeping it
/// for reuse. glibc raises its trim threshold (up to 64 MiB) each time a large
/// block is freed, and `malloc_trim` does not shrink a thread arena's top, so
/// after a job of a thousand ranks tens of MiB of freed memory would stay
/// resident under the replay (measured in BENCHMARKS.md, issue 25). Fixing
/// the threshold at glibc's own default (128 KiB) keeps it there.
pub fn return_freed_memory_promptly() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and changes only the allocator's tuning.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 10);
    }
}

/// Hands the memory freed so far back to the system, every arena's.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only returns free pages of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}
