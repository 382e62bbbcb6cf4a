//! The CPU clock of the calling thread, for `bench`'s CPU column and the fuzz suite's time
//! bound: on a host busy with other work, the wall clock counts the time other processes ran
//! too; this clock does not. It decides nothing.

use std::time::Duration;

/// The CPU time this thread has used.
pub(crate) fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}
