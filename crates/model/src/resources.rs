//! Resource vectors: what a pod requests and what a node offers, as exact integers.
//!
//! CPU is in millicores, memory and ephemeral storage in bytes, pods and extended resources
//! (`nvidia.com/gpu`, hugepages, any `vendor/name`) in whole units: the units kube-scheduler
//! compares. The fit check is the innermost loop of every simulation, so the common resources are
//! plain fields and only extended resources live in a small sorted vector.

use std::fmt;

use smallvec::SmallVec;

use crate::intern::Sym;

/// A resource name as the scheduler distinguishes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceName {
    /// `cpu`, in millicores.
    Cpu,
    /// `memory`, in bytes.
    Memory,
    /// `ephemeral-storage`, in bytes.
    EphemeralStorage,
    /// `pods`: the number of pods a node may run.
    Pods,
    /// Any other resource (`nvidia.com/gpu`, `hugepages-2Mi`, `example.com/foo`), in units.
    Extended(Sym),
}

impl ResourceName {
    /// Maps a Kubernetes resource name to its variant.
    pub fn parse(name: &str) -> ResourceName {
        match name {
            "cpu" => ResourceName::Cpu,
            "memory" => ResourceName::Memory,
            "ephemeral-storage" => ResourceName::EphemeralStorage,
            "pods" => ResourceName::Pods,
            other => ResourceName::Extended(Sym::new(other)),
        }
    }

    /// Whether quantities of this resource are kept in milli-units (only CPU).
    pub fn is_milli(self) -> bool {
        matches!(self, ResourceName::Cpu)
    }

    /// Whether this is a GPU resource (`nvidia.com/gpu`, `amd.com/gpu`, or any `*/gpu`).
    pub fn is_gpu(self) -> bool {
        match self {
            ResourceName::Extended(s) => s.as_str().ends_with("/gpu"),
            _ => false,
        }
    }

    /// The Kubernetes name.
    pub fn as_str(&self) -> &'static str {
        match self {
            ResourceName::Cpu => "cpu",
            ResourceName::Memory => "memory",
            ResourceName::EphemeralStorage => "ephemeral-storage",
            ResourceName::Pods => "pods",
            ResourceName::Extended(s) => s.as_str(),
        }
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An amount of every resource. Missing extended resources are zero.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// Millicores.
    pub cpu: i64,
    /// Bytes.
    pub memory: i64,
    /// Bytes.
    pub ephemeral_storage: i64,
    /// Pod slots (1 for a pod's request; the node's `pods` allocatable).
    pub pods: i64,
    /// Extended resources sorted by name, no zero entries, no duplicates.
    pub extended: SmallVec<[(Sym, i64); 2]>,
}

impl Resources {
    /// Nothing.
    pub const ZERO: Resources = Resources {
        cpu: 0,
        memory: 0,
        ephemeral_storage: 0,
        pods: 0,
        extended: SmallVec::new_const(),
    };

    /// The amount of `name`.
    #[inline]
    pub fn get(&self, name: ResourceName) -> i64 {
        match name {
            ResourceName::Cpu => self.cpu,
            ResourceName::Memory => self.memory,
            ResourceName::EphemeralStorage => self.ephemeral_storage,
            ResourceName::Pods => self.pods,
            ResourceName::Extended(s) => self
                .extended
                .binary_search_by_key(&s, |(k, _)| *k)
                .map_or(0, |i| self.extended[i].1),
        }
    }

    /// Sets the amount of `name`.
    pub fn set(&mut self, name: ResourceName, value: i64) {
        match name {
            ResourceName::Cpu => self.cpu = value,
            ResourceName::Memory => self.memory = value,
            ResourceName::EphemeralStorage => self.ephemeral_storage = value,
            ResourceName::Pods => self.pods = value,
            ResourceName::Extended(s) => {
                match self.extended.binary_search_by_key(&s, |(k, _)| *k) {
                    Ok(i) if value == 0 => {
                        self.extended.remove(i);
                    }
                    Ok(i) => self.extended[i].1 = value,
                    Err(_) if value == 0 => {}
                    Err(i) => self.extended.insert(i, (s, value)),
                }
            }
        }
    }

    /// Every non-zero entry, common resources first.
    pub fn iter(&self) -> impl Iterator<Item = (ResourceName, i64)> + '_ {
        [
            (ResourceName::Cpu, self.cpu),
            (ResourceName::Memory, self.memory),
            (ResourceName::EphemeralStorage, self.ephemeral_storage),
            (ResourceName::Pods, self.pods),
        ]
        .into_iter()
        .chain(
            self.extended
                .iter()
                .map(|(k, v)| (ResourceName::Extended(*k), *v)),
        )
        .filter(|(_, v)| *v != 0)
    }

    /// Adds `other` (saturating: quantities near `i64::MAX` never wrap).
    // Inlined, as `sub`: the snapshot in another crate adds and takes back a pod's requests on
    // every place and revert.
    #[inline]
    pub fn add(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_add(other.cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        self.pods = self.pods.saturating_add(other.pods);
        for (k, v) in &other.extended {
            let name = ResourceName::Extended(*k);
            self.set(name, self.get(name).saturating_add(*v));
        }
    }

    /// Subtracts `other` (saturating).
    #[inline]
    pub fn sub(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_sub(other.cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_sub(other.ephemeral_storage);
        self.pods = self.pods.saturating_sub(other.pods);
        for (k, v) in &other.extended {
            let name = ResourceName::Extended(*k);
            self.set(name, self.get(name).saturating_sub(*v));
        }
    }

    /// Component-wise maximum of `self` and `other`, into `self`.
    pub fn max_with(&mut self, other: &Resources) {
        self.cpu = self.cpu.max(other.cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.pods = self.pods.max(other.pods);
        for (k, v) in &other.extended {
            let name = ResourceName::Extended(*k);
            self.set(name, self.get(name).max(*v));
        }
    }

    /// Whether `self` (a request) fits into `free` in every resource it asks for.
    ///
    /// Hot path: the common case (no extended resources) is four comparisons.
    #[inline]
    pub fn fits(&self, used: &Resources, allocatable: &Resources) -> bool {
        self.cpu <= allocatable.cpu - used.cpu
            && self.memory <= allocatable.memory - used.memory
            && self.ephemeral_storage <= allocatable.ephemeral_storage - used.ephemeral_storage
            && self.pods <= allocatable.pods - used.pods
            && (self.extended.is_empty()
                || self.extended.iter().all(|(k, v)| {
                    let n = ResourceName::Extended(*k);
                    *v <= allocatable.get(n) - used.get(n)
                }))
    }

    /// The resources for which `self` (a request) does not fit into `allocatable - used`, in
    /// kube-scheduler's order (pods first, then cpu, memory, ephemeral-storage, extended by name).
    /// A resource the pod does not request never appears, even if the node is over-committed.
    // Inlined: the fit filter in another crate asks it of every node a pod does not fit.
    #[inline]
    pub fn insufficient(
        &self,
        used: &Resources,
        allocatable: &Resources,
    ) -> SmallVec<[ResourceName; 2]> {
        let mut out = SmallVec::new();
        if self.pods > 0 && self.pods > allocatable.pods - used.pods {
            out.push(ResourceName::Pods);
        }
        for (name, want) in [
            (ResourceName::Cpu, self.cpu),
            (ResourceName::Memory, self.memory),
            (ResourceName::EphemeralStorage, self.ephemeral_storage),
        ] {
            if want > 0 && want > allocatable.get(name) - used.get(name) {
                out.push(name);
            }
        }
        for (k, want) in &self.extended {
            let n = ResourceName::Extended(*k);
            if *want > 0 && *want > allocatable.get(n) - used.get(n) {
                out.push(n);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu() -> ResourceName {
        ResourceName::parse("nvidia.com/gpu")
    }

    #[test]
    fn extended_resources_stay_sorted_and_sparse() {
        let mut r = Resources::default();
        r.set(ResourceName::parse("zzz.io/b"), 2);
        r.set(gpu(), 1);
        r.set(ResourceName::parse("aaa.io/a"), 3);
        let keys: Vec<_> = r.extended.iter().map(|(k, _)| *k).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        r.set(gpu(), 0);
        assert_eq!(r.extended.len(), 2);
        assert_eq!(r.get(gpu()), 0);
        assert!(gpu().is_gpu() && ResourceName::parse("amd.com/gpu").is_gpu());
        assert!(!ResourceName::Cpu.is_gpu());
    }

    #[test]
    fn fit_and_insufficient_agree() {
        let mut alloc = Resources {
            cpu: 1000,
            memory: 1 << 30,
            ephemeral_storage: 0,
            pods: 2,
            ..Default::default()
        };
        alloc.set(gpu(), 1);
        let used = Resources {
            cpu: 600,
            memory: 0,
            ephemeral_storage: 0,
            pods: 1,
            ..Default::default()
        };
        let mut req = Resources {
            cpu: 500,
            memory: 10,
            ephemeral_storage: 0,
            pods: 1,
            ..Default::default()
        };
        assert!(!req.fits(&used, &alloc));
        assert_eq!(
            req.insufficient(&used, &alloc).as_slice(),
            &[ResourceName::Cpu]
        );
        req.cpu = 400;
        assert!(req.fits(&used, &alloc));
        assert!(req.insufficient(&used, &alloc).is_empty());
        req.set(gpu(), 2);
        assert!(!req.fits(&used, &alloc));
        assert_eq!(req.insufficient(&used, &alloc).as_slice(), &[gpu()]);
    }

    #[test]
    fn arithmetic_saturates() {
        let mut a = Resources {
            cpu: i64::MAX - 1,
            ..Default::default()
        };
        a.add(&Resources {
            cpu: 10,
            ..Default::default()
        });
        assert_eq!(a.cpu, i64::MAX);
        let mut b = Resources::default();
        b.max_with(&Resources {
            memory: 5,
            ..Default::default()
        });
        assert_eq!(b.memory, 5);
    }
}
