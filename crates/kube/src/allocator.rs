//! How the C allocator keeps freed memory while `run` starts, and gives it back after.
//!
//! Listing 450,000 pods allocates and frees a few gigabytes in passing (read buffers, decoded
//! objects, vectors that grow). glibc's malloc by default hands freed memory at the top of its
//! heaps back to the kernel and maps large buffers afresh each time, so the next allocation
//! takes it back through a page fault whose page the kernel must zero first: a quarter of the
//! start's CPU at 15,000 nodes. While the caches sync and the first loop runs, freed memory is
//! kept for reuse instead; after the first loop the thresholds go back to the upper end of
//! glibc's own adaptive ones and the memory left free by the start is returned once.
//!
//! It decides nothing about the cluster. It must never fail the process: on other C libraries
//! and platforms both calls do nothing, and a setting glibc refuses is left at its default.

/// While starting: freed memory stays in the heap up to this much above what is in use.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const START_TRIM_THRESHOLD: i32 = 1 << 30;
/// Buffers this large and larger get their own mapping (glibc's highest adaptive threshold).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: i32 = 32 << 20;
/// The heap grows by at least this much at a time (untouched pages cost no memory).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TOP_PAD: i32 = 64 << 20;
/// After the start: glibc's highest adaptive trim threshold (twice the mapping threshold).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const STEADY_TRIM_THRESHOLD: i32 = 64 << 20;

/// Keeps freed memory for reuse while the caches sync and the first loop runs. Call once,
/// before the watches start. Returns whether the allocator took every setting (`false` on
/// other C libraries, where nothing changes).
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let mapped = set(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        let padded = set(libc::M_TOP_PAD, TOP_PAD);
        let trimmed = set(libc::M_TRIM_THRESHOLD, START_TRIM_THRESHOLD);
        mapped && padded && trimmed
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// Gives back what the start left free and trims as glibc does at most from then on. Call
/// after the first loop; later calls change nothing more than a trim. Returns whether the
/// allocator took the setting.
pub fn return_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let taken = set(libc::M_TRIM_THRESHOLD, STEADY_TRIM_THRESHOLD);
        // SAFETY: malloc_trim has no caller-side invariants: it only releases free pages of
        // the allocator's own heaps, under the allocator's locks.
        #[allow(unsafe_code)]
        unsafe {
            libc::malloc_trim(0)
        };
        taken
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set(parameter: i32, value: i32) -> bool {
    // SAFETY: mallopt has no caller-side invariants: it only changes allocator tunables, under
    // the allocator's lock, and returns 0 for a value it refuses (which keeps its default).
    #[allow(unsafe_code)]
    let taken = unsafe { libc::mallopt(parameter, value) } != 0;
    if !taken {
        tracing::debug!(
            parameter,
            value,
            "the C allocator refused a setting; kept its default"
        );
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    /// glibc takes every setting (a value out of its range would be refused and silently
    /// left at the default), and allocation works under both.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn glibc_takes_the_settings_and_allocation_works_under_both() {
        assert!(keep_freed_memory(), "every start setting taken");
        let big: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 1 << 20]).collect();
        assert!(
            big.iter()
                .enumerate()
                .all(|(i, v)| v[v.len() - 1] == i as u8)
        );
        drop(big);
        assert!(return_freed_memory(), "the steady trim threshold taken");
        let again = vec![7u8; 8 << 20];
        assert_eq!(again[(8 << 20) - 1], 7);
    }
}
