//! The structured allocator's depth-first search, as kube-scheduler runs it for a pod's
//! unallocated ResourceClaims on one node: claim after claim, request after request (for a
//! `firstAvailable` request, alternative after alternative), device after device, each device
//! the first candidate that is free, matches the request's class and selectors, and keeps every
//! `matchAttribute` constraint of its claim; when a later request cannot be satisfied, the last
//! pick is undone and the next candidate tried. The first complete allocation wins.
//!
//! It decides which devices a pod's claims get on a node (the caller says which devices the
//! node reaches and which are taken); it must never do I/O, never recurse (the search keeps its
//! own stack) and never run unbounded: the real search is exponential in the worst case, so it
//! stops after [`MAX_SEARCH_STEPS`] steps with [`SearchError::StepLimit`], our stand-in for the
//! scheduler's `filterTimeout` (the core has no clock).
//!
//! Same answers, less work: the real allocator tries every ordering of the devices of a request
//! with a count above one; a constraint, a free device and the claim's result size do not depend
//! on the order, so the first allocation it finds is the one where each request's devices come
//! in candidate order. This search only tries those (each set of devices once) and finds the
//! same first allocation.
//!
//! Known simplifications: those of `autoscaler_model`'s DRA objects (no device taints, no
//! partitionable devices, no consumable capacity).

use std::sync::Arc;

use smallvec::SmallVec;

use autoscaler_model::{
    AllocationMode, AttrValue, ClaimSpec, DeviceId, Dra, ResourceSlice, SliceMatches, Subrequest,
    Sym,
};

/// Most steps (a request begun or given up, a device tried) one search takes before it stops
/// with [`SearchError::StepLimit`]. A claim without constraints whose requests do not compete
/// needs a few steps per device; ten thousand is far above any realistic claim (8 GPUs on 2
/// NVLink domains, 4 requested on one: under a hundred) and keeps a hopeless pod on a node to
/// about a millisecond.
pub const MAX_SEARCH_STEPS: usize = 10_000;

/// Most devices allocated to one claim (the API's `AllocationResultsMaxSize`).
pub(crate) const MAX_RESULTS: usize = 32;

/// A slice whose devices the node reaches, with the node whose own copy of a template's devices
/// it is (`None` for devices published in the cluster), in the order the allocator walks them.
#[derive(Clone, Copy, Debug)]
pub struct DeviceSource<'a> {
    /// The slice.
    pub slice: &'a Arc<ResourceSlice>,
    /// The node that owns this copy of a template's devices.
    pub node: Option<Sym>,
}

impl DeviceSource<'_> {
    /// The identity of the slice's device number `device`.
    pub fn id(&self, device: usize) -> DeviceId {
        DeviceId {
            driver: self.slice.driver,
            pool: self.slice.pool.clone(),
            device: self.slice.devices[device].name.clone(),
            node: self.node,
        }
    }
}

/// One device the search allocated to a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevicePick {
    /// The request (or `request/subrequest`) it satisfies.
    pub request: Arc<str>,
    /// Allocated with admin access (not exclusive).
    pub admin_access: bool,
    /// Index of its slice in the sources.
    pub source: usize,
    /// Index of the device in its slice.
    pub device: usize,
}

/// Why the search found no allocation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// Every combination of the node's devices was tried: none satisfies all claims.
    #[error("cannot allocate all claims")]
    NoFit,
    /// A CEL selector failed to compile or evaluate.
    #[error("{0}")]
    Selector(Arc<str>),
    /// The search took [`MAX_SEARCH_STEPS`] steps without an answer (kube-scheduler's reason
    /// when its filter times out).
    #[error("timed out trying to allocate devices")]
    StepLimit,
    /// An `All` request's devices cannot all keep a constraint of their claim: the allocator
    /// treats the claim as malformed.
    #[error(
        "request {request}: cannot add device {device} because a claim constraint would not be satisfied"
    )]
    ConstraintConflict {
        /// Index of the claim in the search's input.
        claim: usize,
        /// The request.
        request: Arc<str>,
        /// The device, as `driver/pool/device`.
        device: Arc<str>,
    },
}

/// Whether the greedy pick (each request's first free devices, never revisited) can differ from
/// the search for these claims, so that a failed greedy pick must be searched again: several
/// requests compete for devices.
pub(crate) fn could_backtrack<'a>(mut claims: impl Iterator<Item = &'a ClaimSpec>) -> bool {
    let mut requests = 0;
    claims.any(|c| {
        requests += c.requests.len();
        requests > 1
    })
}

/// Whether the claims need the search from the start: a greedy success may be wrong for them
/// (a constraint it ignores, or an `All` request after other requests, which must find none of
/// its devices taken by them).
pub(crate) fn needs_search<'a>(claims: impl Iterator<Item = &'a ClaimSpec> + Clone) -> bool {
    let constrained = claims.clone().any(|c| !c.constraints.is_empty());
    constrained
        || could_backtrack(claims.clone())
            && claims
                .flat_map(|c| &c.requests)
                .flat_map(|r| &r.alternatives)
                .any(|a| a.mode == AllocationMode::All)
}

/// Allocates `claims` (in order) from the devices of `sources`, devices for which `in_use` holds
/// being taken already, as the structured allocator does; each claim's picks, in order.
pub fn allocate_devices(
    dra: &Dra,
    claims: &[&ClaimSpec],
    sources: &[DeviceSource<'_>],
    in_use: &dyn Fn(&DeviceId) -> bool,
    max_steps: usize,
) -> Result<Vec<Vec<DevicePick>>, SearchError> {
    let mut offsets = Vec::with_capacity(sources.len());
    let mut total = 0usize;
    for s in sources {
        offsets.push(total);
        total += s.slice.devices.len();
    }
    let mut search = Search {
        dra,
        claims,
        sources,
        in_use,
        offsets,
        candidates: claims
            .iter()
            .map(|c| {
                c.requests
                    .iter()
                    .map(|r| vec![None; r.alternatives.len()])
                    .collect()
            })
            .collect(),
        taking: vec![0; total],
        picks: vec![Vec::new(); claims.len()],
        kept: claims
            .iter()
            .map(|c| vec![(None, 0); c.constraints.len()])
            .collect(),
        stack: Vec::new(),
    };
    search.run(max_steps)?;
    Ok(search
        .picks
        .into_iter()
        .map(|p| p.into_iter().map(|(_, pick)| pick).collect())
        .collect())
}

/// A device that matches one alternative of a request.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    source: usize,
    device: usize,
    /// Index over all devices of the sources.
    global: usize,
    /// Not taken outside this search (always, for admin access).
    free: bool,
}

/// The devices matching one alternative, in source order.
#[derive(Clone, Debug)]
struct Candidates {
    list: Vec<Candidate>,
}

/// A choice on the search's stack, undone when it backtracks.
#[derive(Clone, Copy, Debug)]
enum Choice {
    /// Alternative `a` of request `r` of claim `c` is being tried.
    Alternative { c: usize, r: usize, a: usize },
    /// Device `k` of that alternative is its candidate `at`.
    Device {
        c: usize,
        r: usize,
        a: usize,
        k: usize,
        at: usize,
    },
    /// Every candidate of that (`All`) alternative was taken.
    Every { c: usize, r: usize, a: usize },
}

/// What the search does next.
#[derive(Clone, Copy, Debug)]
enum Next {
    /// Begin request `r` of claim `c`.
    Request { c: usize, r: usize },
    /// Try alternative `a` of request `r` of claim `c`.
    Alternative { c: usize, r: usize, a: usize },
    /// Pick device `k` of that alternative among its candidates from `from` on.
    Device {
        c: usize,
        r: usize,
        a: usize,
        k: usize,
        from: usize,
    },
    /// Undo the last choice.
    Backtrack,
}

/// The state of one search.
struct Search<'s, 'a> {
    dra: &'s Dra,
    claims: &'s [&'s ClaimSpec],
    sources: &'s [DeviceSource<'a>],
    in_use: &'s dyn Fn(&DeviceId) -> bool,
    /// Where each source's devices start in the global device index.
    offsets: Vec<usize>,
    /// Per claim, request and alternative: its candidates, once looked at.
    candidates: Vec<Vec<Vec<Option<Candidates>>>>,
    /// Per device (global index): how many picks of this search hold it.
    taking: Vec<u16>,
    /// Per claim: its picks so far, with their devices' global index.
    picks: Vec<Vec<(usize, DevicePick)>>,
    /// Per claim and constraint: the value its devices share so far, and how many hold it.
    kept: Vec<Vec<(Option<&'a AttrValue>, u32)>>,
    stack: Vec<Choice>,
}

impl<'s, 'a> Search<'s, 'a> {
    fn run(&mut self, max_steps: usize) -> Result<(), SearchError> {
        let mut next = Next::Request { c: 0, r: 0 };
        for _ in 0..max_steps {
            next = match next {
                Next::Request { c, r } => {
                    let Some(claim) = self.claims.get(c) else {
                        return Ok(());
                    };
                    if r == claim.requests.len() {
                        Next::Request { c: c + 1, r: 0 }
                    } else {
                        Next::Alternative { c, r, a: 0 }
                    }
                }
                Next::Alternative { c, r, a } => self.alternative(c, r, a)?,
                Next::Device { c, r, a, k, from } => self.device(c, r, a, k, from),
                Next::Backtrack => match self.stack.pop() {
                    None => return Err(SearchError::NoFit),
                    Some(Choice::Alternative { c, r, a }) => Next::Alternative { c, r, a: a + 1 },
                    Some(Choice::Device { c, r, a, k, at }) => {
                        self.release(c, r, a, at);
                        Next::Device {
                            c,
                            r,
                            a,
                            k,
                            from: at + 1,
                        }
                    }
                    Some(Choice::Every { c, r, a }) => {
                        let n = self.list(c, r, a).len();
                        for at in (0..n).rev() {
                            self.release(c, r, a, at);
                        }
                        Next::Backtrack
                    }
                },
            };
        }
        Err(SearchError::StepLimit)
    }

    fn alt(&self, c: usize, r: usize, a: usize) -> &'s Subrequest {
        &self.claims[c].requests[r].alternatives[a]
    }

    fn list(&self, c: usize, r: usize, a: usize) -> &[Candidate] {
        self.candidates[c][r][a].as_ref().map_or(&[], |l| &l.list)
    }

    /// Starts alternative `a` of request `r` of claim `c`: an `ExactCount` one picks its
    /// devices one by one, an `All` one takes every matching device at once.
    fn alternative(&mut self, c: usize, r: usize, a: usize) -> Result<Next, SearchError> {
        let claims = self.claims;
        let request = &claims[c].requests[r];
        if a == request.alternatives.len() {
            return Ok(Next::Backtrack);
        }
        self.look_at(c, r, a)?;
        self.stack.push(Choice::Alternative { c, r, a });
        let alt = self.alt(c, r, a);
        match alt.mode {
            AllocationMode::ExactCount(_) => Ok(Next::Device {
                c,
                r,
                a,
                k: 0,
                from: 0,
            }),
            AllocationMode::All => {
                let list = self.list(c, r, a);
                let n = list.len();
                let fits = n > 0
                    && self.picks[c].len() + n <= MAX_RESULTS
                    && list.iter().all(|d| d.free && self.available(c, alt, d));
                if !fits {
                    return Ok(Next::Backtrack);
                }
                for at in 0..n {
                    if !self.take(c, r, a, at) {
                        for done in (0..at).rev() {
                            self.release(c, r, a, done);
                        }
                        let d = self.list(c, r, a)[at];
                        let id = self.sources[d.source].id(d.device);
                        return Err(SearchError::ConstraintConflict {
                            claim: c,
                            request: alt.name.clone(),
                            device: Arc::from(format!("{}/{}/{}", id.driver, id.pool, id.device)),
                        });
                    }
                }
                self.stack.push(Choice::Every { c, r, a });
                Ok(Next::Request { c, r: r + 1 })
            }
        }
    }

    /// Picks device `k` of an `ExactCount` alternative: tries its candidate `from` (one step),
    /// and the next one after it if that one cannot be taken.
    fn device(&mut self, c: usize, r: usize, a: usize, k: usize, from: usize) -> Next {
        let alt = self.alt(c, r, a);
        let AllocationMode::ExactCount(n) = alt.mode else {
            return Next::Backtrack;
        };
        let n = n as usize;
        if k == n {
            return Next::Request { c, r: r + 1 };
        }
        let missing = n - k;
        // Past the claim's result size, or fewer candidates left than devices missing: no pick
        // from here on completes the alternative.
        if self.picks[c].len() + missing > MAX_RESULTS || self.list(c, r, a).len() < from + missing
        {
            return Next::Backtrack;
        }
        let d = self.list(c, r, a)[from];
        if d.free && self.available(c, alt, &d) && self.take(c, r, a, from) {
            self.stack.push(Choice::Device {
                c,
                r,
                a,
                k,
                at: from,
            });
            return Next::Device {
                c,
                r,
                a,
                k: k + 1,
                from: from + 1,
            };
        }
        Next::Device {
            c,
            r,
            a,
            k,
            from: from + 1,
        }
    }

    /// Whether no pick of this search holds the device: none at all, or, for admin access,
    /// none of the same claim (admin access shares a device with other claims).
    fn available(&self, c: usize, alt: &Subrequest, d: &Candidate) -> bool {
        if alt.admin_access {
            !self.picks[c].iter().any(|(g, _)| *g == d.global)
        } else {
            self.taking[d.global] == 0
        }
    }

    /// Takes candidate `at` of the alternative if every constraint of the claim keeps;
    /// whether it did.
    fn take(&mut self, c: usize, r: usize, a: usize, at: usize) -> bool {
        let d = self.list(c, r, a)[at];
        let claims = self.claims;
        let request = &claims[c].requests[r];
        let alt = &request.alternatives[a];
        let slice: &'a Arc<ResourceSlice> = self.sources[d.source].slice;
        let device = &slice.devices[d.device];
        let constraints = &claims[c].constraints;
        for (i, constraint) in constraints.iter().enumerate() {
            if !constraint.applies_to(&request.name, &alt.name) {
                continue;
            }
            let value = device.attribute(slice.driver.as_str(), &constraint.attribute);
            let kept = &mut self.kept[c][i];
            let ok = match (value, kept) {
                (None, _) => false,
                (Some(v), (shared, 0)) => {
                    *shared = Some(v);
                    true
                }
                (Some(v), (shared, _)) => *shared == Some(v),
            };
            if !ok {
                self.unkeep(c, r, a, i);
                return false;
            }
            self.kept[c][i].1 += 1;
        }
        self.taking[d.global] += 1;
        self.picks[c].push((
            d.global,
            DevicePick {
                request: alt.name.clone(),
                admin_access: alt.admin_access,
                source: d.source,
                device: d.device,
            },
        ));
        true
    }

    /// Undoes [`Search::take`] of candidate `at` (the claim's last pick).
    fn release(&mut self, c: usize, r: usize, a: usize, at: usize) {
        let d = self.list(c, r, a)[at];
        self.unkeep(c, r, a, self.claims[c].constraints.len());
        self.taking[d.global] -= 1;
        self.picks[c].pop();
    }

    /// Takes one device of the alternative out of the claim's constraints before the `upto`-th.
    fn unkeep(&mut self, c: usize, r: usize, a: usize, upto: usize) {
        let claims = self.claims;
        let request = &claims[c].requests[r];
        let alt = &request.alternatives[a];
        for (i, constraint) in claims[c].constraints[..upto].iter().enumerate() {
            if constraint.applies_to(&request.name, &alt.name) {
                let kept = &mut self.kept[c][i];
                kept.1 -= 1;
                if kept.1 == 0 {
                    kept.0 = None;
                }
            }
        }
    }

    /// Finds the candidates of an alternative the first time it is tried: the devices matching
    /// its class's and its own selectors, in source order.
    fn look_at(&mut self, c: usize, r: usize, a: usize) -> Result<(), SearchError> {
        if self.candidates[c][r][a].is_some() {
            return Ok(());
        }
        let alt = self.alt(c, r, a);
        let mut list = Vec::new();
        // The caller checked that every class exists; a class gone matches nothing.
        if let Some(class) = self.dra.class(&alt.class) {
            for (source, s) in self.sources.iter().enumerate() {
                let results: SmallVec<[SliceMatches; 2]> = (class.selectors.iter())
                    .chain(&alt.selectors)
                    .map(|sel| self.dra.slice_matches(sel, s.slice))
                    .collect();
                for device in 0..s.slice.devices.len() {
                    let mut ok = true;
                    for r in &results {
                        match &r[device] {
                            Ok(true) => {}
                            Ok(false) => {
                                ok = false;
                                break;
                            }
                            Err(e) => return Err(SearchError::Selector(e.clone())),
                        }
                    }
                    if !ok {
                        continue;
                    }
                    let free = alt.admin_access || !(self.in_use)(&s.id(device));
                    // An ExactCount request never takes a device in use: leave it out. An
                    // All request needs to know it is there.
                    if free || alt.mode == AllocationMode::All {
                        list.push(Candidate {
                            source,
                            device,
                            global: self.offsets[source] + device,
                            free,
                        });
                    }
                }
            }
        }
        self.candidates[c][r][a] = Some(Candidates { list });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::ObjectStore;

    /// Dra objects from YAML (a GPU class is always there).
    fn dra(yaml: &str) -> Dra {
        let mut store = ObjectStore::new();
        store
            .load_yaml(&format!(
                "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: gpu}}\n\
                 spec: {{selectors: [{{cel: {{expression: \"device.driver == 'gpu.example.com'\"}}}}]}}\n\
                 ---\n{yaml}"
            ))
            .expect("yaml");
        let (dra, errors) = Dra::from_store(&store);
        assert!(errors.is_empty(), "{errors:?}");
        dra
    }

    /// One slice of node `n1` with devices named `gpu-<i>` and the attributes given (YAML maps).
    fn slice(attributes: &[&str]) -> String {
        let devices: Vec<String> = attributes
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{{name: gpu-{i}, attributes: {a}}}"))
            .collect();
        format!(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: n1}}\n\
             spec:\n  driver: gpu.example.com\n  nodeName: n1\n  \
             pool: {{name: n1, generation: 1, resourceSliceCount: 1}}\n  devices: [{}]\n",
            devices.join(", ")
        )
    }

    /// A claim named `c` with the given `spec.devices` (YAML).
    fn claim(devices: &str) -> String {
        format!(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n\
             metadata: {{name: c, namespace: default}}\nspec:\n  devices: {devices}\n"
        )
    }

    /// Searches claim `c` on node `n1`: the picked device names, or the error's text.
    fn search(objects: &Dra, taken: &[&str]) -> Result<Vec<String>, String> {
        let spec = &objects
            .claim(Sym::new("default"), &Arc::from("c"))
            .expect("claim")
            .spec;
        let slices = objects.node_slices(Sym::new("n1"));
        let sources: Vec<DeviceSource<'_>> = slices
            .iter()
            .map(|s| DeviceSource {
                slice: s,
                node: None,
            })
            .collect();
        let in_use = |id: &DeviceId| taken.contains(&&*id.device);
        let picks = allocate_devices(objects, &[spec], &sources, &in_use, MAX_SEARCH_STEPS)
            .map_err(|e| e.to_string())?;
        Ok(picks[0]
            .iter()
            .map(|p| format!("{}={}", p.request, sources[p.source].id(p.device).device))
            .collect())
    }

    /// Two GPUs on NUMA node 0, two on NUMA node 1, in alternating order; `gpu-4` has none.
    const NUMA: [&str; 5] = [
        "{numa: {int: 0}}",
        "{numa: {int: 1}}",
        "{numa: {int: 0}}",
        "{numa: {int: 1}}",
        "{}",
    ];

    #[test]
    fn match_attribute_takes_devices_sharing_the_value() {
        let d = dra(&format!(
            "{}---\n{}",
            slice(&NUMA),
            claim(
                "{requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 2}}], \
                 constraints: [{matchAttribute: gpu.example.com/numa}]}"
            )
        ));
        // Greedy would take gpu-0 and gpu-1 (different NUMA nodes); the allocator backtracks.
        assert_eq!(
            search(&d, &[]),
            Ok(vec!["gpu=gpu-0".into(), "gpu=gpu-2".into()])
        );
        assert_eq!(
            search(&d, &["gpu-0"]),
            Ok(vec!["gpu=gpu-1".into(), "gpu=gpu-3".into()])
        );
        // One free device per NUMA node: no two share a value.
        assert_eq!(
            search(&d, &["gpu-0", "gpu-3"]),
            Err("cannot allocate all claims".into())
        );
    }

    #[test]
    fn a_device_without_the_attribute_never_keeps_the_constraint() {
        let d = dra(&format!(
            "{}---\n{}",
            slice(&NUMA),
            claim(
                "{requests: [{name: gpu, exactly: {deviceClassName: gpu}}], \
                 constraints: [{matchAttribute: gpu.example.com/numa}]}"
            )
        ));
        assert_eq!(
            search(&d, &["gpu-0", "gpu-1", "gpu-2", "gpu-3"]),
            Err("cannot allocate all claims".into())
        );
        // Another domain's attribute of the same id is another attribute.
        let d = dra(&format!(
            "{}---\n{}",
            slice(&NUMA),
            claim(
                "{requests: [{name: gpu, exactly: {deviceClassName: gpu}}], \
                 constraints: [{matchAttribute: other.example.com/numa}]}"
            )
        ));
        assert_eq!(search(&d, &[]), Err("cannot allocate all claims".into()));
    }

    #[test]
    fn values_of_another_type_do_not_match() {
        let d = dra(&format!(
            "{}---\n{}",
            slice(&["{numa: {int: 0}}", "{numa: {string: '0'}}"]),
            claim(
                "{requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 2}}], \
                 constraints: [{matchAttribute: gpu.example.com/numa}]}"
            )
        ));
        assert_eq!(search(&d, &[]), Err("cannot allocate all claims".into()));
    }

    #[test]
    fn a_constraint_binds_only_the_requests_it_names() {
        // Request `a` (one GPU) and `b` (one GPU) on one NUMA node; `c` anywhere.
        let d = dra(&format!(
            "{}---\n{}",
            slice(&NUMA),
            claim(
                "{requests: [{name: a, exactly: {deviceClassName: gpu}}, \
                 {name: c, exactly: {deviceClassName: gpu}}, \
                 {name: b, exactly: {deviceClassName: gpu}}], \
                 constraints: [{requests: [a, b], matchAttribute: gpu.example.com/numa}]}"
            )
        ));
        assert_eq!(
            search(&d, &[]),
            Ok(vec!["a=gpu-0".into(), "c=gpu-1".into(), "b=gpu-2".into()])
        );
    }

    #[test]
    fn backtracking_finds_the_fit_the_greedy_pick_misses() {
        // `any` takes the first GPU, the h100 that `h100` needs; the search moves it.
        let d = dra(&format!(
            "{}---\n{}",
            slice(&["{model: {string: h100}}", "{model: {string: a100}}"]),
            claim(
                "{requests: [{name: any, exactly: {deviceClassName: gpu}}, \
                 {name: h100, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: \
                 \"device.attributes['gpu.example.com'].model == 'h100'\"}}]}}]}"
            )
        ));
        assert_eq!(
            search(&d, &[]),
            Ok(vec!["any=gpu-1".into(), "h100=gpu-0".into()])
        );
    }

    #[test]
    fn first_available_falls_back_when_a_later_request_needs_the_devices() {
        // `gpu` prefers two devices, then one; `other` needs one: of three devices, `gpu` gets
        // two only if `other` still finds one.
        let d = dra(&format!(
            "{}---\n{}",
            slice(&["{}", "{}"]),
            claim(
                "{requests: [{name: gpu, firstAvailable: [{name: two, deviceClassName: gpu, count: 2}, \
                 {name: one, deviceClassName: gpu}]}, \
                 {name: other, exactly: {deviceClassName: gpu}}]}"
            )
        ));
        assert_eq!(
            search(&d, &[]),
            Ok(vec!["gpu/one=gpu-0".into(), "other=gpu-1".into()])
        );
    }

    #[test]
    fn an_all_request_finds_none_of_its_devices_taken_by_another_request() {
        let d = dra(&format!(
            "{}---\n{}",
            slice(&["{}", "{}"]),
            claim(
                "{requests: [{name: one, exactly: {deviceClassName: gpu}}, \
                 {name: all, exactly: {deviceClassName: gpu, allocationMode: All}}]}"
            )
        ));
        assert_eq!(search(&d, &[]), Err("cannot allocate all claims".into()));
    }

    #[test]
    fn an_all_request_whose_devices_break_a_constraint_is_an_error() {
        let d = dra(&format!(
            "{}---\n{}",
            slice(&NUMA[..2]),
            claim(
                "{requests: [{name: all, exactly: {deviceClassName: gpu, allocationMode: All}}], \
                 constraints: [{matchAttribute: gpu.example.com/numa}]}"
            )
        ));
        assert_eq!(
            search(&d, &[]),
            Err(
                "request all: cannot add device gpu.example.com/n1/gpu-1 because a claim \
                 constraint would not be satisfied"
                    .into()
            )
        );
    }

    /// Random small claims against a brute-force allocator: the search finds an allocation
    /// exactly when one exists, and the same first one (requests in order, each request's
    /// devices the first combination in slice order that lets the rest succeed).
    mod property {
        use super::*;
        use proptest::prelude::*;

        /// A device: its NUMA node (if any), whether it is an `a` model, whether it is taken.
        type Dev = (Option<u8>, bool, bool);
        /// A request: its count, whether it wants `a` models only.
        type Req = (usize, bool);

        fn objects(devices: &[Dev], requests: &[Req], constrained: &[bool]) -> Dra {
            let attrs: Vec<String> = devices
                .iter()
                .map(|(numa, a, _)| {
                    let model = if *a { "a" } else { "b" };
                    match numa {
                        Some(n) => format!("{{numa: {{int: {n}}}, model: {{string: {model}}}}}"),
                        None => format!("{{model: {{string: {model}}}}}"),
                    }
                })
                .collect();
            let attrs: Vec<&str> = attrs.iter().map(String::as_str).collect();
            let reqs: Vec<String> = requests
                .iter()
                .enumerate()
                .map(|(i, (count, only_a))| {
                    let sel = if *only_a {
                        ", selectors: [{cel: {expression: \"device.attributes['gpu.example.com'].model == 'a'\"}}]"
                    } else {
                        ""
                    };
                    format!("{{name: r{i}, exactly: {{deviceClassName: gpu, count: {count}{sel}}}}}")
                })
                .collect();
            let names: Vec<String> = (0..requests.len())
                .filter(|&i| constrained[i])
                .map(|i| format!("r{i}"))
                .collect();
            let constraint = if names.is_empty() {
                String::new()
            } else {
                format!(
                    ", constraints: [{{requests: [{}], matchAttribute: gpu.example.com/numa}}]",
                    names.join(", ")
                )
            };
            dra(&format!(
                "{}---\n{}",
                slice(&attrs),
                claim(&format!("{{requests: [{}]{constraint}}}", reqs.join(", ")))
            ))
        }

        /// Whether an allocation exists, by brute force; `used` gets the first in the
        /// allocator's order: per request, every combination of unused matching free devices
        /// in order, the constraint checked on the whole.
        fn brute(
            devices: &[Dev],
            requests: &[Req],
            constrained: &[bool],
            r: usize,
            used: &mut Vec<Vec<usize>>,
        ) -> bool {
            if r == requests.len() {
                let numas: Vec<Option<u8>> = (0..requests.len())
                    .filter(|&i| constrained[i])
                    .flat_map(|i| used[i].iter().map(|&d| devices[d].0))
                    .collect();
                return numas.iter().all(|n| n.is_some() && *n == numas[0]);
            }
            let (count, only_a) = requests[r];
            let taken: Vec<usize> = used.iter().flatten().copied().collect();
            let candidates: Vec<usize> = (0..devices.len())
                .filter(|&d| !devices[d].2 && (!only_a || devices[d].1) && !taken.contains(&d))
                .collect();
            combinations(&candidates, count).into_iter().any(|combo| {
                used.push(combo);
                if brute(devices, requests, constrained, r + 1, used) {
                    return true;
                }
                used.pop();
                false
            })
        }

        /// The `k`-combinations of `items`, in lexicographic order.
        fn combinations(items: &[usize], k: usize) -> Vec<Vec<usize>> {
            if k == 0 {
                return vec![Vec::new()];
            }
            let mut out = Vec::new();
            for (i, &first) in items.iter().enumerate() {
                for mut rest in combinations(&items[i + 1..], k - 1) {
                    rest.insert(0, first);
                    out.push(rest);
                }
            }
            out
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

            #[test]
            fn the_search_finds_the_first_allocation_there_is(
                devices in prop::collection::vec(
                    (prop::option::of(0u8..2), any::<bool>(), prop::bool::weighted(0.2)),
                    1..=6,
                ),
                requests in prop::collection::vec((1usize..=2, prop::bool::weighted(0.3)), 1..=3),
                constrained in prop::collection::vec(any::<bool>(), 3),
            ) {
                let objects = objects(&devices, &requests, &constrained);
                let taken: Vec<String> = (0..devices.len())
                    .filter(|&d| devices[d].2)
                    .map(|d| format!("gpu-{d}"))
                    .collect();
                let taken: Vec<&str> = taken.iter().map(String::as_str).collect();
                let got = search(&objects, &taken);
                let mut used = Vec::new();
                let want = if brute(&devices, &requests, &constrained, 0, &mut used) {
                    let picks = used.iter().enumerate().flat_map(|(r, ds)| {
                        ds.iter().map(move |d| format!("r{r}=gpu-{d}"))
                    });
                    Ok(picks.collect::<Vec<_>>())
                } else {
                    Err("cannot allocate all claims".to_string())
                };
                prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn a_hopeless_search_stops_at_the_bound() {
        // Sixteen one-device requests over thirty-two devices, each on its own NUMA value but
        // the last two: all pairs of the constraint fail, late; the bound stops it.
        let attrs: Vec<String> = (0..32).map(|i| format!("{{numa: {{int: {i}}}}}")).collect();
        let attrs: Vec<&str> = attrs.iter().map(String::as_str).collect();
        let requests: Vec<String> = (0..16)
            .map(|i| format!("{{name: r{i}, exactly: {{deviceClassName: gpu}}}}"))
            .collect();
        let d = dra(&format!(
            "{}---\n{}",
            slice(&attrs),
            claim(&format!(
                "{{requests: [{}], constraints: [{{requests: [r14, r15], \
                 matchAttribute: gpu.example.com/numa}}]}}",
                requests.join(", ")
            ))
        ));
        assert_eq!(
            search(&d, &[]),
            Err("timed out trying to allocate devices".into())
        );
    }
}
