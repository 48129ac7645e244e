//! Process CPU time from `getrusage(RUSAGE_SELF)`: user and system time of
//! every thread of the process.

use std::time::Duration;

/// User and system CPU time consumed so far by the whole process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// Time in user mode.
    pub user: Duration,
    /// Time in the kernel on behalf of the process.
    pub system: Duration,
}

impl CpuTime {
    /// User plus system time.
    pub fn total(&self) -> Duration {
        self.user + self.system
    }

    /// The time consumed since `earlier` (saturating at zero).
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime { user: self.user.saturating_sub(earlier.user), system: self.system.saturating_sub(earlier.system) }
    }
}

/// `getrusage` failed (it cannot for `RUSAGE_SELF` on Linux, but the call
/// reports errors).
#[derive(Debug, thiserror::Error)]
#[error("getrusage(RUSAGE_SELF): {0}")]
pub struct RusageError(#[from] std::io::Error);

fn timeval(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec.max(0) as u64) + Duration::from_micros(tv.tv_usec.max(0) as u64)
}

/// CPU time of the process so far.
pub fn process_cpu_time() -> Result<CpuTime, RusageError> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` points to writable memory of the right size and type;
    // `getrusage` only writes into it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return Err(RusageError(std::io::Error::last_os_error()));
    }
    // SAFETY: `getrusage` returned 0, so it filled the struct (which was
    // zeroed, a valid bit pattern for it, in any case).
    let usage = unsafe { usage.assume_init() };
    Ok(CpuTime { user: timeval(usage.ru_utime), system: timeval(usage.ru_stime) })
}

/// Online CPUs (`sysconf(_SC_NPROCESSORS_ONLN)`), at least 1.
pub fn online_cpus() -> usize {
    // SAFETY: `sysconf` has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        n as usize
    }
}
