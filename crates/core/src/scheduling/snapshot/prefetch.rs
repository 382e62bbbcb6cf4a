//! Asks the CPU for pods' memory a few pods ahead of their turn, for loops that visit every pod
//! of a view once (the snapshot build).
//!
//! Each pod is an allocation of its own: a loop that reads them in turn waits for memory at every
//! pod. Requesting them ahead lets those fetches overlap (the name's text is not requested: the
//! build reads the hash the name carries, never its text). A prefetch
//! is only a hint: it never changes what the loop computes, only when memory arrives, and it
//! never reads anything itself.

use std::sync::Arc;

use mem_prefetch::prefetch_read_data;

use autoscaler_model::Pod;

/// How many pods ahead a pod's own lines are requested.
const AHEAD: usize = 8;

/// `pods` with their positions, in order, each pod's memory requested [`AHEAD`] pods early.
pub fn prefetching(pods: &[Arc<Pod>]) -> impl Iterator<Item = (usize, &Arc<Pod>)> + '_ {
    pods.iter().enumerate().inspect(move |&(i, _)| {
        if let Some(pod) = pods.get(i + AHEAD) {
            request_pod(pod);
        }
    })
}

/// The pod's lines the build reads: those holding its first fields (after the reference
/// counts), its host ports and lists, and its name's hash (see the layout of [`Pod`]).
#[inline]
fn request_pod(pod: &Pod) {
    prefetch_read_data::<_, 3>(&pod.namespace);
    prefetch_read_data::<_, 3>(&pod.host_ports);
    prefetch_read_data::<_, 3>(&pod.name);
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::PodBuilder;

    /// Every pod comes once, in order, with its position, whatever the length (shorter and
    /// longer than the distance ahead, and empty).
    #[test]
    fn yields_every_pod_in_order() {
        for n in [0, 1, AHEAD / 2, AHEAD, AHEAD + 1, 3 * AHEAD + 5] {
            let pods: Vec<Arc<Pod>> = (0..n)
                .map(|i| PodBuilder::new(&format!("p{i}"), 10, 1 << 20).arc())
                .collect();
            let seen: Vec<(usize, String)> = prefetching(&pods)
                .map(|(i, p)| (i, p.name.to_string()))
                .collect();
            let want: Vec<(usize, String)> = (0..n).map(|i| (i, format!("p{i}"))).collect();
            assert_eq!(seen, want);
        }
    }
}
